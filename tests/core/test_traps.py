"""Tests for courtly.core.traps: URL rules, host rules, budgets, the review
queue, bounds and snapshots. Whole crawls of one host through the guard (a
legitimate deep host, the simulated web's traps): test_traps_crawls.py."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core import traps
from courtly.core.traps import AllowEntry, Suspect, TrapConfig, TrapGuard, Verdict, url_template
from courtly.core.types import Decision, Reason

NOW = 1_700_000_000.0  # 2023-11-14: dates after 2024 are "future"
DAY = 86_400.0
PROPERTY = settings(max_examples=100, deadline=None, derandomize=True, database=None)
KEY = "example.test"


def guard(**config) -> TrapGuard:
    return TrapGuard(TrapConfig(**config), random.Random(1))


def check(g: TrapGuard, path: str, depth: int = 1, now: float = NOW, key: str = KEY) -> Verdict:
    return g.check_new_url(key, f"http://{key}{path}", depth, now)


def rules_of(g: TrapGuard) -> set[tuple[str, str, str]]:
    return {(s.key, s.rule, s.scope) for s in g.suspects()}


# ---------------------------------------------------------------- templates and helpers


@pytest.mark.parametrize("path, query, template", [
    ("/article/123", "", "/article/{n}"),
    ("/news/2024/05/07/story-12.html", "", "/news/{n}/{n}/{n}/story-{n}.html"),
    ("/a/550e8400-e29b-41d4-a716-446655440000/", "", "/a/{uuid}/"),
    ("/blob/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "", "/blob/{hex}"),
    ("/day/2024-05-07", "", "/day/{date}"),
    ("/day/20240507", "", "/day/{n}"),
    ("/catalog", "size=m&color=red&color=blue", "/catalog?color=*&size=*"),
    ("/", "", "/"),
    ("/deadbeef/", "", "/deadbeef/"),  # a word made of hex letters is not an id
])
def test_url_template(path, query, template):
    assert url_template(path, query) == template


@pytest.mark.parametrize("url, path, query", [
    ("http://h.test/a/b?x=1#frag", "/a/b", "x=1"),
    ("http://h.test", "/", ""),
    ("http://h.test?q=1", "/", "q=1"),
    ("https://h.test:8443/p", "/p", ""),
])
def test_path_query(url, path, query):
    assert traps._path_query(url) == (path, query)


@pytest.mark.parametrize("segments, found", [
    ("a/a/a", ("a", 0)),
    ("x/a/b/a/b/a/b", ("a/b", 1)),
    ("a/a/b/a/a", None),
    ("a/b/a/b", None),
    ("2011/11/11/story", None),  # a date with 11 twice is fine
    ("p/1/1/1", ("1", 1)),
])
def test_repeated_run(segments, found):
    assert traps._repeated_run(segments.split("/"), 3) == found


@pytest.mark.parametrize("path, query, years", [
    ("/calendar/2024/01/", "", [2024]),
    ("/events/2031-02-28/", "", [2031]),
    ("/log/19991231.txt", "", [1999]),
    ("/cal", "year=2099&month=3", [2099]),
    ("/cal", "date=1712-01-01", [1712, 1712]),  # ISO form and the year= form
    ("/article/2024", "", []),        # a number alone is not a date
    ("/p/2024/13/", "", []),          # month 13
])
def test_years_in_urls(path, query, years):
    assert sorted(traps._years(path, query)) == sorted(years)


@pytest.mark.parametrize("path, query, stripped", [
    ("/p", "sid=abc&x=1", "/p?x=1"),
    ("/p;jsessionid=ABC123", "", "/p"),
    ("/p", "PHPSESSID=1f2e", "/p"),
    ("/p", "s=0123456789abcdef0123456789abcdef", "/p"),
    ("/(S(abcdefghijkl))/page.aspx", "", "/page.aspx"),
    ("/p", "my_session_token=1", "/p"),
    ("/p", "s=shoes", None),       # a search, not a session
    ("/p", "x=1", None),
])
def test_session_ids_are_recognised(path, query, stripped):
    assert traps._without_session(path, query) == stripped


# ---------------------------------------------------------------- URL rules


def test_plain_new_url_is_allowed_with_no_band_change():
    assert check(guard(), "/article/1") == Verdict(True)


def test_overlong_url_is_denied_with_reason_length():
    v = check(guard(), "/" + "x" * 2100)
    assert not v.allowed and v.reason is Reason.LENGTH and v.rule == "length"


def test_depth_beyond_16_is_denied_but_is_not_trap_evidence():
    g = guard()
    assert check(g, "/a", depth=16).allowed
    v = check(g, "/b", depth=17)
    assert (v.allowed, v.reason, v.rule) == (False, Reason.DEPTH, "depth")
    assert g.suspects() == []


def test_ever_deeper_paths_are_denied_and_the_prefix_fenced():
    g = guard()
    deep = "/deep/" + "".join(f"{i}/" for i in range(1, 17))
    assert check(g, deep[: deep.rindex("16/")]).allowed  # 16 segments
    v = check(g, deep)  # 17 segments
    assert (v.allowed, v.reason, v.rule) == (False, Reason.TRAP, "segments")
    assert rules_of(g) == {(KEY, "segments", "prefix:/deep/")}
    assert check(g, "/deep/1/").rule == "suspect"  # the prefix is under review
    assert check(g, "/article/9").allowed and check(g, "/article/9").band == 7


def test_repeated_segments_are_denied_and_their_prefix_fenced():
    g = guard()
    assert check(g, "/repeat/a/b/a/b/").allowed
    v = check(g, "/repeat/a/b/a/b/a/b/")
    assert (v.reason, v.rule) == (Reason.TRAP, "repeated_segments")
    assert rules_of(g) == {(KEY, "repeated_segments", "prefix:/repeat/")}
    assert check(g, "/repeat/b/").rule == "suspect"
    assert check(g, "/other/").allowed


def test_first_copy_of_a_page_with_a_session_id_is_kept_and_later_copies_denied():
    g = guard()
    assert check(g, "/shop/item-1.html?sid=0a1b2c").allowed
    v = check(g, "/shop/item-1.html?sid=ffee99")
    assert (v.reason, v.rule) == (Reason.TRAP, "session_id")
    assert "/shop/item-1.html" in v.detail
    assert check(g, "/shop/item-2.html?sid=ffee99").allowed  # another page
    assert rules_of(g) == {(KEY, "session_id", "rule:session_id")}
    assert check(g, "/shop/item-3.html").allowed  # a session-id rule fences nothing else


def test_denied_verdict_becomes_a_decision_naming_the_rule():
    v = check(guard(), "/" + "y" * 3000)
    d = v.decision("http://x.test/yyy", NOW)
    length = len(f"http://{KEY}/") + 3000
    assert d == Decision("http://x.test/yyy", Reason.LENGTH, f"length: {length} > 2048 characters", NOW)
    assert Verdict(True).decision("http://x.test/", NOW) is None


# ---------------------------------------------------------------- budgets


def test_daily_budget_caps_new_urls_and_resets_the_next_day():
    g = guard(daily_new_urls_max=3)
    assert all(check(g, f"/a/{i}").allowed for i in range(3))
    v = check(g, "/a/3")
    assert (v.allowed, v.reason, v.rule) == (False, Reason.BUDGET, "budget")
    assert check(g, "/a/3", now=NOW + DAY).allowed  # floor(now / 86400) moved on
    assert check(g, "/a/1", key="other.test").allowed  # per host


def test_allowlist_entry_raises_the_budget_until_it_expires():
    entry = AllowEntry(KEY, 5, "ops@example.org", expires_at=NOW + 100)
    g = guard(daily_new_urls_max=2, allowlist=(entry,))
    assert g.budget_of(KEY, NOW) == 5 and g.budget_of("other.test", NOW) == 2
    assert all(check(g, f"/a/{i}").allowed for i in range(5))
    assert not check(g, "/a/5").allowed
    assert g.budget_of(KEY, NOW + 100) == 2  # reverted on expiry
    later = NOW + DAY
    assert all(check(g, f"/b/{i}", now=later).allowed for i in range(2))
    assert check(g, "/b/2", now=later).reason is Reason.BUDGET


def test_allow_at_run_time_survives_a_snapshot():
    g = guard(daily_new_urls_max=1)
    g.allow(AllowEntry(KEY, 10, "ticket-42", NOW + DAY))
    restored = TrapGuard.restore(json.loads(json.dumps(g.snapshot())), g.config, random.Random(1))
    assert restored.budget_of(KEY, NOW) == 10


# ---------------------------------------------------------------- host rules


def test_calendar_dates_in_the_future_fence_the_template():
    g = guard()
    for month in range(1, 13):  # 2024 is within this year + 1
        assert check(g, f"/calendar/2024/{month:02d}/").allowed
    assert check(g, "/calendar/2025/01/").allowed
    assert check(g, "/calendar/2025/02/").allowed
    v = check(g, "/calendar/2025/03/")  # the third out-of-range date
    assert (v.allowed, v.rule) == (False, "suspect")
    (s,) = g.suspects()
    assert (s.rule, s.scope, s.since) == ("calendar", "template:/calendar/{n}/{n}/", NOW)
    assert "2025" in s.evidence and "1900..2024" in s.evidence
    assert check(g, "/calendar/2010/05/").rule == "suspect"  # the whole template waits
    assert check(g, "/news/2019/03/story.html").band == 7


def test_past_dates_of_a_real_archive_are_fine():
    g = guard()
    for year in range(1995, 2024):
        for month in range(1, 13):
            assert check(g, f"/archive/{year}/{month:02d}/").allowed
    assert g.suspects() == []


def test_endless_filter_combinations_fence_the_path():
    g = guard()
    facets = ["color", "size", "brand", "sort", "page", "view", "lang"]
    verdicts = []
    for mask in range(1, 1 << len(facets)):
        names = [f for i, f in enumerate(facets) if mask >> i & 1]
        verdicts.append(check(g, "/catalog?" + "&".join(f"{n}=x" for n in names)))
    fired = [i for i, v in enumerate(verdicts) if not v.allowed]
    assert fired and fired[0] == 64  # the 65th distinct shape
    assert rules_of(g) == {(KEY, "query_combinations", "path:/catalog")}
    assert check(g, "/catalog?zzz=1").rule == "suspect"
    assert check(g, "/search?q=shoes").allowed


def test_big_template_of_distinct_pages_is_not_a_trap():
    g = guard()
    for n in range(5000):
        assert check(g, f"/article/{n}").allowed
        g.note_fetch(KEY, f"http://{KEY}/article/{n}", n % 10 == 0, NOW)
    assert g.suspects() == []


def test_big_template_of_near_duplicates_is_a_trap():
    g = guard()
    for n in range(1200):
        check(g, f"/list?page={n}")
        g.note_fetch(KEY, f"http://{KEY}/list?page={n}", n % 3 != 0, NOW)  # 2/3 near-duplicates
    assert ("template", "template:/list?page=*") in {(s.rule, s.scope) for s in g.suspects()}
    assert check(g, "/list?page=99999").rule == "suspect"


def test_host_with_mostly_near_duplicate_pages_is_suspected_and_deprioritised():
    g = guard()
    for n in range(99):
        check(g, f"/p/{n}")
        g.note_fetch(KEY, f"http://{KEY}/p/{n}", n >= 10, NOW)
    assert g.suspects() == []  # fewer than near_dup_window fetches
    g.note_fetch(KEY, f"http://{KEY}/p/99", True, NOW)
    assert rules_of(g) == {(KEY, "near_dup", "")}  # 90 of the last 100 > 80 %
    v = check(g, "/p/new")
    assert v.allowed and v.band == 7  # deprioritised, not blocked
    assert g.band_of(KEY) == 7 and g.band_of("other.test") is None


def test_new_url_rate_far_above_the_hosts_baseline_is_suspected():
    g = guard()
    n = 0

    def fetch(new_urls: int) -> None:
        nonlocal n
        for _ in range(new_urls):
            n += 1
            check(g, f"/x/{n}")
        g.note_fetch(KEY, f"http://{KEY}/x/{n}", False, NOW)

    for _ in range(200):
        fetch(3)
    assert g.suspects() == []
    for _ in range(20):
        fetch(60)
    assert g.suspects() == []  # 20 x 60 + 30 x 3 over the last 50: 25.8 < 10 x baseline
    for _ in range(5):
        fetch(60)
    rate = [s for s in g.suspects() if s.rule == "rate"]
    assert [(s.scope, "baseline 3.0" in s.evidence) for s in rate] == [("", True)]
    # with the rate high, the big /x/{n} template is corroborated too
    assert {s.rule for s in g.suspects()} == {"rate", "template"}


def test_steady_high_rate_is_the_hosts_own_baseline():
    g = guard()
    for i in range(400):
        for j in range(40):
            check(g, f"/y/{i}/{j}")
        g.note_fetch(KEY, f"http://{KEY}/y/{i}", False, NOW)
    assert g.suspects() == []


# ---------------------------------------------------------------- review queue


def open_calendar(g: TrapGuard, key: str = KEY, now: float = NOW) -> None:
    for year in (2030, 2031, 2032):
        check(g, f"/calendar/{year}/01/", key=key, now=now)


def test_suspects_are_listed_oldest_first_and_resolved_as_legit():
    g = guard()
    open_calendar(g, "b.test", NOW + 5)
    open_calendar(g, "a.test", NOW + 9)
    assert [s.key for s in g.suspects()] == ["b.test", "a.test"]
    assert all(isinstance(s, Suspect) for s in g.suspects())
    assert g.resolve_suspect("b.test", "legit", NOW + 10) == 1
    assert [s.key for s in g.suspects()] == ["a.test"]
    assert check(g, "/calendar/2040/01/", key="b.test").allowed  # muted for that scope
    assert check(g, "/calendar/2040/01/", key="b.test").band is None
    open_calendar(g, "b.test")
    assert [s.key for s in g.suspects()] == ["a.test"]  # does not re-fire


def test_confirmed_template_trap_is_denied_for_good_and_the_host_is_back_to_normal():
    g = guard()
    open_calendar(g)
    assert g.resolve_suspect(KEY, "trap", NOW + 1) == 1
    assert g.suspects() == []
    v = check(g, "/calendar/1999/01/")
    assert (v.reason, v.rule) == (Reason.TRAP, "confirmed")
    assert check(g, "/article/1") == Verdict(True)


def test_confirmed_host_wide_suspicion_denies_the_host():
    g = guard()
    for n in range(100):
        check(g, f"/p/{n}")
        g.note_fetch(KEY, f"http://{KEY}/p/{n}", True, NOW)
    g.resolve_suspect(KEY, "trap", NOW, rule="near_dup")
    assert check(g, "/anything").rule == "confirmed"
    assert check(g, "/anything", key="other.test").allowed


def test_resolve_checks_its_verdict_and_unknown_hosts():
    g = guard()
    assert g.resolve_suspect("nobody.test", "legit", NOW) == 0
    with pytest.raises(ValueError):
        g.resolve_suspect(KEY, "maybe", NOW)  # type: ignore[arg-type]


def test_queued_urls_are_rechecked_when_a_suspicion_opens_later():
    g = guard()
    queued = [f"http://{KEY}/calendar/2024/{m:02d}/" for m in range(1, 4)]
    for url in queued:
        assert g.check_new_url(KEY, url, 1, NOW).allowed
    assert g.check_queued(KEY, queued[0], NOW) == Verdict(True)
    open_calendar(g)
    assert all(g.check_queued(KEY, url, NOW).rule == "suspect" for url in queued)
    assert g.check_queued(KEY, f"http://{KEY}/article/1", NOW) == Verdict(True, 7)
    assert g.check_queued("unknown.test", "http://unknown.test/", NOW) == Verdict(True)


def test_a_sample_of_fenced_urls_is_let_through_from_the_injected_generator():
    def run(seed: int) -> list[bool]:
        g = TrapGuard(TrapConfig(suspect_sample_share=0.1), random.Random(seed))
        open_calendar(g)
        return [check(g, f"/calendar/2050/{m}/").allowed for m in range(1, 13)] + \
               [check(g, f"/calendar/{y}/01/").allowed for y in range(2051, 2400)]

    sample = run(7)
    assert 10 <= sum(sample) <= 60  # about 10 % of 361
    assert run(7) == sample  # same seed, same sample


# ---------------------------------------------------------------- bounds and snapshots


def test_templates_per_host_are_bounded():
    g = guard(templates_max=10)
    for i in range(50):
        check(g, f"/t{chr(97 + i % 26)}{i // 26}/page")
    assert len(g._hosts[KEY].templates) == 11  # ten plus the overflow template


def test_hosts_are_bounded_and_suspects_kept():
    g = guard(hosts_max=3)
    open_calendar(g, "suspect.test")
    for i in range(10):
        check(g, "/a", key=f"h{i}.test")
    assert len(g._hosts) == 3 and "suspect.test" in g._hosts


def test_config_refuses_nonsense():
    with pytest.raises(ValueError):
        TrapConfig(daily_new_urls_max=0)
    with pytest.raises(ValueError):
        TrapConfig(segment_repeats_max=1)
    with pytest.raises(ValueError):
        TrapConfig(near_dup_ratio_max=1.5)


def test_snapshot_round_trips_and_restored_guard_decides_the_same():
    g = guard()
    open_calendar(g)
    check(g, "/shop/item-1.html?sid=1")
    for n in range(30):
        check(g, f"/p/{n}", key="b.test")
        g.note_fetch("b.test", f"http://b.test/p/{n}", n % 2 == 0, NOW)
    g.resolve_suspect(KEY, "legit", NOW)
    data = json.loads(json.dumps(g.snapshot()))
    restored = TrapGuard.restore(data, g.config, random.Random(1))
    assert restored.snapshot() == g.snapshot()
    probes = ["/calendar/2090/01/", "/shop/item-1.html?sid=2", "/p/5", "/deep" + "/x" * 20]
    for key in (KEY, "b.test"):
        for path in probes:
            assert check(restored, path, key=key) == check(g, path, key=key)
    with pytest.raises(ValueError):
        TrapGuard.restore({"version": 2})


def test_snapshot_json_is_the_snapshot_as_json_after_every_change():
    g = guard(hosts_max=4)
    g.allow(AllowEntry("b.test", 10, "ops@b.test", NOW + 86_400))
    assert g.snapshot_json() == json.dumps(g.snapshot())
    open_calendar(g)
    assert g.snapshot_json() == json.dumps(g.snapshot())
    for n in range(12):   # touches some hosts, evicts others (hosts_max=4)
        key = f"h{n % 6}.test"
        check(g, f"/p/{n}", key=key)
        if n % 3 == 0:
            g.note_fetch(key, f"http://{key}/p/{n}", n % 2 == 0, NOW + n)
        assert g.snapshot_json() == json.dumps(g.snapshot())
    g.resolve_suspect(KEY, "trap", NOW)
    assert g.snapshot_json() == json.dumps(g.snapshot())
    restored = TrapGuard.restore(json.loads(g.snapshot_json()), g.config, random.Random(1))
    assert restored.snapshot_json() == g.snapshot_json()
    check(restored, "/calendar/2090/02/")
    assert restored.snapshot_json() == json.dumps(restored.snapshot())


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["a.test", "b.test"]),
                          st.sampled_from(["/cal/2090/01/", "/p/1", "/p/2?sid=9", "/q?x=1&y=2", "/r/r/r/",
                                           "/d" * 18, "/list?page=3"]),
                          st.integers(0, 20), st.booleans()), max_size=60))
def test_snapshot_at_any_point_continues_identically(steps):
    g = guard(daily_new_urls_max=20)
    for i, (key, path, depth, dup) in enumerate(steps):
        if i == len(steps) // 2:
            g = TrapGuard.restore(json.loads(json.dumps(g.snapshot())), g.config, random.Random(1))
        check(g, path + str(i), depth, key=key)
        g.note_fetch(key, f"http://{key}{path}", dup, NOW)
    twin = TrapGuard.restore(json.loads(json.dumps(g.snapshot())), g.config, random.Random(1))
    assert twin.snapshot() == g.snapshot()


def _templates_held(g: TrapGuard) -> int:
    return sum(len(h.templates) for h in g._hosts.values())


def test_templates_over_all_hosts_are_bounded_and_the_bound_survives_a_snapshot():
    # slug URLs: one template per page, the memory cost of a large queued frontier
    g = guard(templates_total_max=10)
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "sloe"]
    for h in range(3):
        for i, w in enumerate(words):
            g.note_discovered(f"h{h}.test", f"https://h{h}.test/news/{w}-{i}.html", NOW)
    assert _templates_held(g) <= 10 + 3          # plus one overflow template per host
    assert g._templates == _templates_held(g)
    restored = TrapGuard.restore(json.loads(g.snapshot_json()), g.config, random.Random(1))
    assert restored._templates == _templates_held(restored) == _templates_held(g)
    restored.note_discovered("h9.test", "https://h9.test/news/quince-1.html", NOW)
    assert _templates_held(restored) <= 10 + 4


def test_evicting_a_host_gives_its_templates_back():
    g = guard(templates_total_max=6, hosts_max=2)
    for h in range(4):
        for i, w in enumerate(["apple", "pear", "plum"]):
            g.note_discovered(f"h{h}.test", f"https://h{h}.test/news/{w}-{i}.html", NOW)
    assert len(g._hosts) == 2
    assert g._templates == _templates_held(g) == 6   # the newest hosts got their templates
