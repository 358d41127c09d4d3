"""courtly.core.robots: RFC 9309 conformance data and parser edges (the fetch-state table: test_robots_book.py)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.robots import (
    ALLOW_ALL,
    DISALLOW_ALL,
    PARSE_BYTES_MAX,
    RobotsRules,
    parse_robots,
    product_token,
    robots_allowed,
)

DATA = json.loads((Path(__file__).parent.parent / "data" / "robots_rfc9309.json").read_text("utf-8"))
CASES = [(c["name"], c["robots"], *check) for c in DATA["cases"] for check in c["checks"]]


# --- conformance data -------------------------------------------------------------------


@pytest.mark.parametrize(("name", "robots", "token", "path", "allowed"), CASES)
def test_robots_conformance_cases(name: str, robots: str, token: str, path: str, allowed: bool) -> None:
    assert parse_robots(robots.encode("utf-8")).allowed(token, path) is allowed, name
    assert robots_allowed(robots.encode("utf-8"), token, "http://example.com" + path) is allowed, name


def _pattern(line: str) -> str:
    return parse_robots(f"User-agent: *\nDisallow: {line}\n".encode("utf-8")).groups[0].rules[0].pattern


@pytest.mark.parametrize(("written", "encoded", "match", "equivalent"), DATA["percent_encoding_2_2_2"]["rows"])
def test_robots_percent_encoding_table(written: str, encoded: str, match: str, equivalent: bool) -> None:
    assert _pattern(encoded) == match
    assert _pattern(match) == match
    assert (_pattern(written) == match) is equivalent
    for rule, path in ((match, encoded), (encoded, match), (encoded, encoded)):
        assert not parse_robots(f"User-agent: *\nDisallow: {rule}\n".encode()).allowed("x", path)
    if equivalent:
        assert not parse_robots(f"User-agent: *\nDisallow: {written}\n".encode()).allowed("x", encoded)
        assert not parse_robots(f"User-agent: *\nDisallow: {encoded}\n".encode()).allowed("x", written)


@pytest.mark.parametrize(("pattern", "path", "matches"), DATA["special_characters_2_2_3"]["rows"])
def test_robots_special_characters(pattern: str, path: str, matches: bool) -> None:
    rules = parse_robots(f"User-agent: *\nDisallow: {pattern}\n".encode())
    assert rules.allowed("x", path) is not matches


def test_robots_percent_escapes_compare_case_insensitively() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: /a%2fb\n")
    assert not rules.allowed("x", "/a%2Fb")
    assert rules.allowed("x", "/a/b")  # a reserved escape is not its character


def test_robots_invalid_utf8_pattern_matches_raw_octets() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: /caf\xe9\n")
    assert not rules.allowed("x", "/caf%E9")
    assert rules.allowed("x", "/caf%C3%A9")


# --- user agents ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "token"),
    [("courtly", "courtly"), ("Courtly/1.0", "courtly"), ("COURTLY (+http://x)", "courtly"),
     ("*", "*"), ("* ", "*"), ("foo_bar-baz2", "foo_bar-baz"), ("", ""), ("/1.0", "")],
)
def test_product_token(value: str, token: str) -> None:
    assert product_token(value) == token


@pytest.mark.parametrize("line", ["courtly", "Courtly", "COURTLY", "courtly/1.0", "Courtly/0.1 (+http://x)", "courtly bot"])
def test_robots_user_agent_matches_product_token_case_insensitively(line: str) -> None:
    rules = parse_robots(f"User-agent: *\nAllow: /\n\nUser-agent: {line}\nDisallow: /private\n".encode())
    assert not rules.allowed("courtly", "/private")
    assert rules.allowed("otherbot", "/private")


@pytest.mark.parametrize("line", ["courtlybot", "xcourtly", "court"])
def test_robots_user_agent_is_not_a_prefix_or_substring_match(line: str) -> None:
    rules = parse_robots(f"User-agent: {line}\nDisallow: /\n".encode())
    assert rules.allowed("courtly", "/page")


@pytest.mark.parametrize(
    ("user_agent", "allowed"),
    [
        ("Mozilla/5.0 (compatible; courtly/0.1; +http://x)", False),  # contains courtly
        ("courtly", False),
        # not a product token, so it names no group (Google: "Foo Bar" is not
        # "Foo"); taking "Mozilla" would obey a group meant for browsers
        ("Mozilla/5.0 (compatible; otherbot/1.0)", False),
        ("Mozilla", True),
        ("mozilla", True),
        ("mozilla/5.0", False),
    ],
)
def test_robots_allowed_derives_the_token(user_agent: str, allowed: bool) -> None:
    body = b"User-agent: courtly\nDisallow: /\n\nUser-agent: Mozilla\nAllow: /\n\nUser-agent: *\nDisallow: /\n"
    assert robots_allowed(body, user_agent, "https://example.com/page?q=1#frag") is allowed


def test_robots_allowed_uses_path_and_query() -> None:
    body = b"User-agent: *\nDisallow: /*?print=\nDisallow: /$\n"
    assert not robots_allowed(body, "courtly", "http://example.com/a?print=1")
    assert robots_allowed(body, "courtly", "http://example.com/a#?print=1")
    assert not robots_allowed(body, "courtly", "http://example.com")
    assert not robots_allowed(body, "courtly", "/")
    assert not robots_allowed(body, "courtly", "example.com")   # a host, not the path /example.com
    assert not robots_allowed(body, "courtly", "//example.com/a?print=1")


# --- parser edges ----------------------------------------------------------------------------


def test_robots_txt_is_always_allowed() -> None:
    assert DISALLOW_ALL.allowed("courtly", "/robots.txt")
    assert not DISALLOW_ALL.allowed("courtly", "/robots.txt.bak")
    assert not DISALLOW_ALL.allowed("courtly", "/")
    assert ALLOW_ALL.allowed("courtly", "/anything")


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_robots_line_endings(eol: bytes) -> None:
    body = eol.join([b"User-agent: *", b"Disallow: /x", b"", b"User-agent: courtly", b"Disallow: /y"])
    rules = parse_robots(body)
    assert not rules.allowed("other", "/x") and not rules.allowed("courtly", "/y")
    assert rules.allowed("courtly", "/x")


def test_robots_rules_before_any_user_agent_are_ignored() -> None:
    rules = parse_robots(b"Disallow: /\nUser-agent: *\nDisallow: /x\n")
    assert rules.allowed("courtly", "/page") and not rules.allowed("courtly", "/x")


def test_robots_consecutive_user_agents_share_a_group_across_blank_lines_and_sitemaps() -> None:
    body = b"User-agent: a\n\n# note\nSitemap: http://e.test/s.xml\nUser-agent: b\nDisallow: /x\nUser-agent: c\nDisallow: /y\n"
    rules = parse_robots(body)
    assert not rules.allowed("a", "/x") and not rules.allowed("b", "/x")
    assert rules.allowed("a", "/y") and not rules.allowed("c", "/y") and rules.allowed("c", "/x")
    assert rules.sitemaps == ("http://e.test/s.xml",)


def test_robots_garbage_allows_all() -> None:
    for body in (b"\x00\xff\xfe garbage \x80\x81", b"<html><body>Not Found</body></html>", b"", b"::::\n:\n#"):
        rules = parse_robots(body)
        assert rules.allowed("courtly", "/any/path")


def test_robots_garbage_lines_are_skipped_between_rules() -> None:
    body = b"User-agent: *\nthis is not a rule\nAllow /a b\n\x00\x01:\x02\nDisallow: /x\nFoo: bar\n"
    rules = parse_robots(body)
    assert not rules.allowed("courtly", "/x") and rules.allowed("courtly", "/a")
    assert [r.pattern for r in rules.groups[0].rules] == ["/x"]


def test_robots_two_word_line_without_colon_is_a_key_and_value() -> None:
    # Google's reading of a forgotten colon; three words or more stay garbage
    rules = parse_robots(b"User-agent courtly\nDisallow /nocolon\nDisallow /a /b\n")
    assert not rules.allowed("courtly", "/nocolon") and rules.allowed("courtly", "/a")
    assert rules.allowed("other", "/nocolon")


@pytest.mark.parametrize("bom", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"])
def test_robots_bom_or_the_start_of_one_is_skipped(bom: bytes) -> None:
    assert not parse_robots(bom + b"User-agent: *\nDisallow: /x\n").allowed("courtly", "/x")
    assert parse_robots(b"\xef\x11\xbfUser-agent: *\nDisallow: /x\n").groups == ()


def test_robots_key_spelling_and_spacing_are_tolerated() -> None:
    rules = parse_robots(b"USER-AGENT :*\n  disalow\t:  /x  # comment\nUser agent: b\nDISALLOW:/y\n")
    assert not rules.allowed("courtly", "/x") and not rules.allowed("b", "/y")


def test_robots_pattern_without_leading_slash_is_anchored_at_root() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: private/\n")
    assert not rules.allowed("courtly", "/private/x") and rules.allowed("courtly", "/a/private/x")


def test_robots_allow_pattern_without_leading_slash_allows_nothing() -> None:
    rules = parse_robots(b"User-agent: *\nDisallow: /\nAllow: public/\nAllow: *.css\n")
    assert not rules.allowed("courtly", "/public/x") and rules.allowed("courtly", "/a.css")


def test_robots_parse_limit_ignores_rules_after_500_kib() -> None:
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * (PARSE_BYTES_MAX - len(head) - 100) + b"\n"
    body = head + filler + b"Disallow: /inside\n" + b"#" * 200 + b"\nDisallow: /late\n"
    assert PARSE_BYTES_MAX == 512_000 and len(body) > PARSE_BYTES_MAX
    rules = parse_robots(body)
    assert not rules.allowed("courtly", "/early") and not rules.allowed("courtly", "/inside")
    assert rules.allowed("courtly", "/late")


def test_robots_parse_limit_drops_a_line_cut_in_half() -> None:
    head = b"User-agent: *\n"
    pad = b"#" * (PARSE_BYTES_MAX - len(head) - len(b"\nAllow: /ab")) + b"\n"
    body = head + b"Disallow: /\n" + pad[len(b"Disallow: /\n"):] + b"Allow: /abc\n"
    assert len(body) > PARSE_BYTES_MAX
    rules = parse_robots(body)
    assert not rules.allowed("courtly", "/abx")  # "Allow: /ab" must not survive the cut


def test_robots_crawl_delay_per_group() -> None:
    body = b"User-agent: *\nCrawl-delay: 2\n\nUser-agent: courtly\nCrawl-delay: 0.5\nDisallow: /x\n\nUser-agent: courtly\nCrawl-delay: 3\n\nUser-agent: bad\nCrawl-delay: soon\nCrawl-delay: -1\nCrawl-delay: nan\n"
    rules = parse_robots(body)
    assert rules.crawl_delay("courtly") == 3.0
    assert rules.crawl_delay("other") == 2.0
    assert rules.crawl_delay("bad") is None
    assert ALLOW_ALL.crawl_delay("courtly") is None


def test_robots_crawl_delay_ends_a_user_agent_run() -> None:
    rules = parse_robots(b"User-agent: a\nCrawl-delay: 5\nUser-agent: b\nDisallow: /\n")
    assert rules.allowed("a", "/x") and not rules.allowed("b", "/x")


def test_robots_sitemaps_are_global_and_deduplicated() -> None:
    body = b"Sitemap: http://e.test/1.xml\nUser-agent: a\nSitemap: http://e.test/2.xml\nDisallow: /\nsitemap: http://e.test/1.xml\n"
    assert parse_robots(body).sitemaps == ("http://e.test/1.xml", "http://e.test/2.xml")


def test_robots_hostile_wildcards_match_in_linear_time() -> None:
    rules = parse_robots(("User-agent: *\nDisallow: /" + "a*" * 5000 + "b\n").encode())
    started = time.perf_counter()
    assert rules.allowed("courtly", "/" + "a" * 20000)
    assert time.perf_counter() - started < 1.0


def test_robots_rules_round_trip_through_a_dict() -> None:
    rules = parse_robots(DATA["cases"][0]["robots"].encode() + b"Sitemap: http://e.test/s.xml\nUser-agent: z\nCrawl-delay: 4\n")
    again = RobotsRules.from_dict(json.loads(json.dumps(rules.to_dict())))
    assert again == rules
    assert again.allowed("otherbot", "/image.gif") is False and again.crawl_delay("z") == 4.0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.text(max_size=30))
def test_robots_parse_never_raises(body: bytes, path: str) -> None:
    rules = parse_robots(body)
    assert isinstance(rules.allowed("courtly", "/" + path), bool)
    assert rules.allowed("courtly", "/robots.txt")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.text(alphabet="/ab*$%2A", max_size=6)), max_size=6),
       st.text(alphabet="/ab*$%2A?", max_size=8))
def test_robots_longest_match_wins_and_allow_wins_ties(lines: list[tuple[bool, str]], path: str) -> None:
    body = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: /{p}\n" for a, p in lines)
    rules = parse_robots(body.encode())
    group = rules.groups[0] if rules.groups else None
    path = "/" + path
    if path.split("?", 1)[0] == "/robots.txt" or group is None:
        return
    from courtly.core.robots_txt import _normalize  # the one form both sides are compared in

    norm = _normalize(path, pattern=False)
    hits = [(len(r.pattern), r.allow) for r in group.rules if _oracle(r.pattern).match(norm)]
    expected = max(hits)[1] if hits else True
    assert rules.allowed("courtly", path) is expected


def _oracle(pattern: str) -> "re.Pattern[str]":
    """An independent matcher: the pattern as a regular expression."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    return re.compile(".*".join(re.escape(p) for p in body.split("*")) + ("$" if anchored else ""), re.S)


def test_robots_protego_differs_on_versioned_user_agent_lines() -> None:
    """The evidence for writing our own parser (see the module docstring)."""
    protego = pytest.importorskip("protego")
    body = "User-agent: *\nDisallow: /\n\nUser-agent: courtly/1.0\nAllow: /\n"
    assert robots_allowed(body.encode(), "courtly", "http://example.com/page") is True
    assert protego.Protego.parse(body).can_fetch("http://example.com/page", "courtly") is False


def test_robots_protego_has_no_parse_limit() -> None:
    protego = pytest.importorskip("protego")
    body = "User-agent: *\n#" + "x" * PARSE_BYTES_MAX + "\nDisallow: /\n"
    assert robots_allowed(body.encode(), "courtly", "http://example.com/page") is True
    assert protego.Protego.parse(body).can_fetch("http://example.com/page", "courtly") is False


def test_answers_per_token_stay_right_when_one_rules_object_serves_many_tokens():
    # RobotsRules remembers each token's groups; more tokens than it keeps
    # must still give every token its own groups, not another token's.
    text = b"User-agent: a0\nDisallow: /a\n\nUser-agent: a5\nDisallow: /b\nCrawl-delay: 3\n\nUser-agent: *\nDisallow: /c\n"
    shared = parse_robots(text)
    tokens = [f"a{i}" for i in range(20)] * 2
    for t in tokens:
        fresh = parse_robots(text)
        for path in ("/a", "/b", "/c", "/d"):
            assert shared.allowed(t, path) == fresh.allowed(t, path), (t, path)
        assert shared.crawl_delay(t) == fresh.crawl_delay(t)
    assert not shared.allowed("a0", "/a") and shared.allowed("a0", "/c")
    assert not shared.allowed("a5", "/b") and shared.crawl_delay("a5") == 3.0
    assert not shared.allowed("other", "/c") and shared.allowed("other", "/a")
