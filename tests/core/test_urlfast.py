"""The fast path of `normalize_url` (courtly.core.urlfast) against the full
one: normalised URLs key the seen store, the frontier and the WARC index, so
for every input the two must return the same string or raise the same
`UrlError` (reason and message). The full path is had by switching the fast
one off (`common_match` and `fast_parts` returning None)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core import urls
from courtly.core.urlfast import common_match, fast_parts
from courtly.core.urls import DEFAULT_RULES, NormalizeRules, UrlError, normalize_url, split_origin

PROPERTY = settings(max_examples=1500, deadline=None, derandomize=True, database=None)

RULES = [
    DEFAULT_RULES,
    NormalizeRules(order_sensitive_hosts=frozenset({"shop.test"}), keep_params_hosts=frozenset({"keep.test"})),
    NormalizeRules(strip_path_params=frozenset(), strip_params=frozenset(), strip_param_prefixes=()),
    NormalizeRules(length_max=40),
    NormalizeRules(length_max=16),
]

CORPUS = [
    # already canonical, the common case
    "http://site0003.test:8080/guides/zunezu-3.html",
    "https://www.example.com/", "http://a.b/c/d.html", "http://a_b.test/x", "http://-a-.test/",
    "http://example.com/a/b/c/", "http://example.com/~user/!$&'()*+,=:@x",
    "http://10.0.0.1/", "http://127.0.0.1:8080/x", "http://0.0.0.0/", "http://255.255.255.255/",
    "http://1.2.3.com/", "http://example.123abc/", "http://example.com:0/", "http://example.com:65535/",
    # fragments
    "http://a.test/x#frag", "http://a.test/x#", "http://a.test/#f\tg\n", "http://a.test/x#a b\\c ",
    "http://a.test#f", "http://a.test/x?#", "http://a.test/x?q=1#f?g", "http://a.test/x?q#%", "http://a.test/x#?%",
    "http://a.test/" + "?" * 50 + "%", "http://a.test/" + "x" * 50 + "%", "http://a.test/x??a=1", "http://a.test??",
    # empty path, empty query, query order and stripping
    "http://a.test", "http://a.test?b=1", "http://a.test:8080", "http://a.test/?", "http://a.test/x?",
    "http://a.test/?b=2&a=1", "http://a.test/?a=1&b=2", "http://a.test/?a=2&a=1", "http://a.test/?&&a=1&",
    "http://a.test/?utm_source=x&a=1", "http://a.test/?UTM_Source=x", "http://a.test/?sid=1&SID=2&x",
    "http://a.test/?gclid=1", "http://a.test/?a=1?b=2", "http://a.test/?=1&=2", "http://a.test/?a",
    "http://shop.test/?b=2&a=1", "http://www.shop.test/?b=2&a=1", "http://keep.test/?sid=7&b&a",
    "http://notshop.test/?b=2&a=1",
    # dot segments and path parameters
    "http://a.test/./x", "http://a.test/../x", "http://a.test/a/../b", "http://a.test/a/./b/.",
    "http://a.test/a/..", "http://a.test/.well-known/x", "http://a.test/x/.hidden", "http://a.test/a..b/",
    "http://a.test/x;jsessionid=abc", "http://a.test/x;JSESSIONID=abc;y=1/z", "http://a.test/x;a=b",
    "http://a.test/;sid=1", "http://a.test/x;", "http://a.test/;",
    # escapes, upper and lower case, unreserved, broken
    "http://a.test/%7e", "http://a.test/%7E", "http://a.test/%2f", "http://a.test/%2F", "http://a.test/%41",
    "http://a.test/%zz", "http://a.test/%4", "http://a.test/%", "http://a.test/?q=%2f", "http://a.test/?q=%e9",
    "http://a.test/caf\u00e9", "http://a.test/a b", "http://a.test/a\"b", "http://a.test/a<b>", "http://a.test/a|b",
    "http://a.test/a^b", "http://a.test/a`b", "http://a.test/{x}", "http://a.test/a[b]",
    "http://a.test/?a<b", "http://a.test/?a>b", "http://a.test/?q=<x>&a=1", "http://a.test/x?;=:@/?09",
    # ports
    "http://a.test:80/", "https://a.test:443/", "http://a.test:443/", "https://a.test:80/", "http://a.test:/",
    "http://a.test:080/", "http://a.test:0080/", "http://a.test:00/", "http://a.test:65536/",
    "http://a.test:99999/", "http://a.test:123456/", "http://a.test:8x/", "http://a.test:-1/",
    # userinfo
    "http://user@a.test/", "http://user:pw@a.test/", "http://@a.test/", "http://a@b@c.test/",
    # hosts: case, trailing dots, IDNA, odd IPv4 forms, IPv6, percent
    "http://A.test/", "http://a.TEST/", "HTTP://a.test/", "Https://a.test/", "http://a.test./",
    "http://a.test../", "http://.a.test/", "http://a..test/", "http://./", "http://xn--bcher-kva.example/",
    "http://xn--zz.example/", "http://abcxn--d.test/", "http://b\u00fccher.example/", "http://fa\u00df.de/",
    "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://0x7f.0.0.1/", "http://0177.0.0.1/",
    "http://01.2.3.4/", "http://1.2.3.4./", "http://1.2.3.256/", "http://1.2.3.4.5/", "http://256.1.1.1/",
    "http://0x/", "http://a.0x/", "http://a.0xg/", "http://a.0x1f/", "http://1.2.3/", "http://1e3.test/",
    "http://a.123/", "http://00.0.0.0/", "http://[::1]/", "http://[2001:DB8::1]:8080/x", "http://[v1.x]/",
    "http://ex%41mple.com/", "http://a%2etest/", "http://" + "a" * 63 + ".test/", "http://" + "a" * 64 + ".test/",
    "http://" + ".".join(["a" * 60] * 4) + "/", "http://" + ".".join(["abc"] * 64) + "/",
    "http://" + ".".join(["ab"] * 84) + "/", "http://" + ".".join(["ab"] * 85) + "/",
    # leniency: whitespace, controls, backslashes
    " http://a.test/", "http://a.test/ ", "\thttp://a.test/x", "http://a.test/x\n", "http://a.te\tst/",
    "http://a.test/a\tb", "http://a.test/a\r\nb", "http:\\\\a.test\\x", "http://a.test\\x\\y?a\\b",
    "http://a.test/x\x00", "\x01http://a.test/", "http://a.test/x\x7f",
    # schemes and malformed
    "ftp://a.test/", "mailto:x@a.test", "http:a.test", "http:/a.test/", "http:///x", "http://", "//a.test/",
    "a.test/x", "", "http://a.test/\ud800", "1http://a.test/",
    # length limits
    "http://a.test/" + "x" * 2034, "http://a.test/" + "x" * 2035, "http://a.test/" + "x" * 8200,
    "http://a.test/" + "x" * 20, "http://a.test/" + "x" * 25 + "#" + "y" * 40,
    "http://a.test/?" + "&".join(f"p{i}=1" for i in range(30)),
]


def _outcome(url: str, rules: NormalizeRules) -> tuple[str, str]:
    try:
        return ("ok", normalize_url(url, rules))
    except UrlError as e:
        return (e.reason.value, str(e))


def _full_path(m: pytest.MonkeyPatch) -> None:
    """Switch the fast path off in courtly.core.urls."""
    m.setattr(urls, "common_match", lambda url: None)
    m.setattr(urls, "fast_parts", lambda url: None)


def _full_outcome(url: str, rules: NormalizeRules, monkeypatch) -> tuple[str, str]:
    with monkeypatch.context() as m:
        _full_path(m)
        return _outcome(url, rules)


def _origin(url: str):
    try:
        return split_origin(url)
    except UrlError as e:
        return (e.reason.value, str(e))


def _assert_same(url: str, monkeypatch) -> None:
    for rules in RULES:
        assert _outcome(url, rules) == _full_outcome(url, rules, monkeypatch), (url, rules)
    fast = _origin(url)
    with monkeypatch.context() as m:
        _full_path(m)
        assert fast == _origin(url), url


@pytest.mark.parametrize("url", CORPUS)
def test_fast_path_matches_full_path_on_the_corpus(url: str, monkeypatch) -> None:
    _assert_same(url, monkeypatch)


def test_the_corpus_exercises_the_fast_path() -> None:
    taken = [u for u in CORPUS if common_match(u) is not None]
    assert len(taken) > 60 and len(CORPUS) - len(taken) > 80
    assert [u for u in CORPUS if fast_parts(u) is not None] == taken


def test_switching_the_fast_path_off_takes_the_full_path(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(urls, "_http_parts_full", lambda url: calls.append(url) or ("http", "x.test", 80, "/", None))
    assert normalize_url("http://a.test/") == "http://a.test/" and calls == []
    _full_path(monkeypatch)
    assert normalize_url("http://a.test/") == "http://x.test/" and calls == ["http://a.test/"]


def test_fast_parts_refuses_what_it_cannot_vouch_for() -> None:
    for url in ("http://xn--bcher-kva.example/", "http://127.1/", "http://a.test:65536/", "http://A.test/",
                "http://a.test:08080/", "http://a.0x1/", "http://a.b.c.1/", "http://1.2.3.4.5/", "http://01.2.3.4/",
                "http://a.test/%41", "http://u@a.test/", "http://a.test./", "http://a.test/a b", "http://[::1]/",
                "http://" + ".".join(["ab"] * 85) + "/"):
        assert fast_parts(url) is None, url


def test_fast_parts_pieces() -> None:
    assert fast_parts("http://a.test:8080/x/y?b=1&a=2#f") == ("http", "a.test", 8080, "/x/y", "b=1&a=2")
    assert fast_parts("https://10.1.2.3") == ("https", "10.1.2.3", 443, "", None)


def test_an_already_canonical_url_is_returned_as_is() -> None:
    url = "http://site0003.test:8080/guides/zunezu-3.html"
    assert normalize_url(url) is url


# --- generated URLs ---------------------------------------------------------------

_LABELS = st.sampled_from(["a", "ab", "site0003", "www", "test", "com", "xn--bcher-kva", "xn--zz", "0x7f", "0x",
                           "127", "1", "0", "00", "255", "256", "0177", "a_b", "-a", "A", "B\u00fc", "%41", "a" * 63,
                           "a" * 64, ""])
_HOSTS = st.lists(_LABELS, min_size=1, max_size=5).map(".".join)
_PORTS = st.sampled_from(["", ":", ":80", ":443", ":8080", ":0", ":00", ":080", ":65535", ":65536", ":99999"])
_ATOMS = ["/", "/", "a", "x.html", "-", "_", "~", ".", "..", "./", "../", "/.", "/..", ";", ";jsessionid=1",
          ";sid=2", "=", "&", "?", "%", "%7e", "%7E", "%2f", "%41", "%zz", "%e9", "!", "$", "'", "(", ")", "*",
          "+", ",", ":", "@", " ", "\t", "\n", "\\", "\"", "<", "|", "\u00e9", "\ud800", "#", "2024", "12"]
_PART = st.lists(st.sampled_from(_ATOMS), max_size=12).map("".join)
_QUERY = st.lists(
    st.sampled_from(["a=1", "b=2", "a=0", "utm_source=x", "UTM_x=1", "sid=9", "gclid=3", "x", "", "=v", "q=%2F",
                     "c=d?e", "z=1"]),
    max_size=6,
).map("&".join)
_TAILS = st.sampled_from(["", "?", "#", "#frag", "#f\tg ", "?#x"])


@st.composite
def _generated(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp", "http", "https"]))
    userinfo = draw(st.sampled_from(["", "", "", "u@", "u:p@"]))
    url = f"{scheme}://{userinfo}{draw(_HOSTS)}{draw(st.sampled_from(['', '', '.']))}{draw(_PORTS)}"
    url += draw(st.sampled_from(["/", "/", ""])) + draw(_PART)
    if draw(st.booleans()):
        url += "?" + draw(_QUERY)
    return url + draw(_TAILS)


@PROPERTY
@given(_generated())
def test_fast_path_matches_full_path_on_generated_urls(url: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _assert_same(url, monkeypatch)


@PROPERTY
@given(st.text(max_size=80))
def test_fast_path_matches_full_path_on_arbitrary_text(tail: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        for url in (tail, "http://a.test/" + tail, "https://" + tail, "http://127.0.0.1:8080" + tail):
            _assert_same(url, monkeypatch)
