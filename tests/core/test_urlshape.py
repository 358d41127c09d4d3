"""courtly.core.urlshape and the trap guard's structural rules against plain
reference definitions: templates key the guard's per-host state (saved in
crawl folders), so the quicker code must give the same strings, and the
guard's shortcuts (a short path cannot repeat, session ids read once) must
not change a verdict."""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core import urlshape
from courtly.core.traps import TrapConfig, TrapGuard
from courtly.core.urlshape import path_template, query_template, repeated_run, url_template

PROPERTY = settings(max_examples=600, deadline=None, derandomize=True, database=None)
NOW = 1_700_000_000.0


def _reference_shape(segment: str) -> str:
    """The segment rule as first written (one test after another, `re.sub`)."""
    if re.search(r"\d", segment) is None:
        return segment if len(segment) <= 64 else "{long}"
    if segment.isdigit():
        return "{n}"
    if urlshape._UUID.fullmatch(segment):
        return "{uuid}"
    if urlshape._HEX_ID.fullmatch(segment):
        return "{hex}"
    if urlshape._ISO_DATE.fullmatch(segment) or urlshape._COMPACT_DATE.fullmatch(segment):
        return "{date}"
    if len(segment) > 64:
        return "{long}"
    return re.sub(r"\d+", "{n}", segment)


def _reference_template(path: str, query: str) -> str:
    return "/".join(_reference_shape(s) for s in path.split("/")) + query_template(query)


# digits of other scripts count for \d and isdigit(): they must take the slow road too
PIECES = ["a", "Z", "x-", "-", ".", "_", "0", "7", "12", "2024", "05", "2024-05-07", "20240507", "99999999",
          "deadbeef", "DEADBEEF1234", "9f86d081884c", "550e8400-e29b-41d4-a716-446655440000",
          "550e8400e29b41d4a716446655440000", "story-12.html", "\u0663\u0664", "\u0661\u0669\u0669\u0669",
          "\u00e9", "%2F", "a" * 70, "1" * 70, "f" * 40]
SEGMENTS = st.lists(st.sampled_from(PIECES), max_size=4).map("".join)
PATHS = st.lists(SEGMENTS, min_size=1, max_size=6).map(lambda segs: "/" + "/".join(segs))


@PROPERTY
@given(PATHS, st.sampled_from(["", "a=1", "b=2&a=1", "x&&y=", "date=2024-01-01"]))
def test_url_template_matches_the_reference(path: str, query: str) -> None:
    assert url_template(path, query) == _reference_template(path, query)
    assert path_template(path.split("/")) == _reference_template(path, "")


@PROPERTY
@given(st.text(max_size=90))
def test_segment_template_matches_the_reference_on_any_text(segment: str) -> None:
    segment = segment.replace("/", "")
    assert url_template("/" + segment) == "/" + _reference_shape(segment)


def test_non_ascii_digits_still_make_placeholders() -> None:
    assert url_template("/\u0663\u0664") == "/{n}"
    assert url_template("/p\u0663x") == "/p{n}x"


@PROPERTY
@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=8), st.integers(2, 4))
def test_repeated_run_is_none_below_the_repeat_count(segments: list[str], times: int) -> None:
    found = repeated_run(segments, times)
    if len(segments) < times:
        assert found is None
    elif segments == segments[:1] * times:
        assert found == (segments[0], 0)
    if found is not None:
        unit, start = found
        width = unit.count("/") + 1
        assert segments[start : start + width * times] == unit.split("/") * times


# ---------------------------------------------------------------- the structural rules


def _expected_rule(path: str, cfg: TrapConfig) -> str | None:
    """Rules 3 and 4 as the module docstring states them, on a fresh host."""
    segments = [s for s in path.split("/") if s]
    if len(segments) > cfg.path_segments_max:
        return "segments"
    if repeated_run(segments, cfg.segment_repeats_max) is not None:
        return "repeated_segments"
    return None


@PROPERTY
@given(st.lists(st.sampled_from(["a", "b", "", "c1"]), max_size=9), st.integers(1, 6), st.integers(2, 4))
def test_structural_verdicts_follow_the_rules(segments: list[str], segments_max: int, repeats: int) -> None:
    cfg = TrapConfig(path_segments_max=segments_max, segment_repeats_max=repeats)
    path = "/" + "/".join(segments)
    verdict = TrapGuard(cfg, random.Random(1)).check_new_url("h.test", "http://h.test" + path, 1, NOW)
    expected = _expected_rule(path, cfg)
    assert (verdict.rule or None) == expected, (path, verdict)


def test_the_second_session_copy_of_a_page_is_refused() -> None:
    g = TrapGuard(TrapConfig(), random.Random(1))
    assert g.check_new_url("h.test", "http://h.test/p?a=1", 1, NOW).allowed
    assert g.check_new_url("h.test", "http://h.test/p?a=1&mysession=x", 1, NOW).allowed   # the first copy
    verdict = g.check_new_url("h.test", "http://h.test/p?a=1&mysession=y", 1, NOW)
    assert not verdict.allowed and verdict.rule == "session_id"
    assert g.check_new_url("h.test", "http://h.test/p;jsessionid=1", 1, NOW).allowed
    assert not g.check_new_url("h.test", "http://h.test/p;jsessionid=2", 1, NOW).allowed
