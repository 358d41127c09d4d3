"""courtly.core.urls: RFC 3986 resolution, normalisation rules, keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from courtly.core.types import Origin, Reason
from courtly.core.urls import (
    DEFAULT_RULES,
    NORMALIZATION_VERSION,
    NormalizeRules,
    UrlError,
    normalize_url,
    partition_of,
    politeness_key,
    registered_domain,
    remove_dot_segments,
    resolve_url,
    split_origin,
)

DATA = json.loads((Path(__file__).parent.parent / "data" / "rfc3986_resolution.json").read_text("utf-8"))


# --- RFC 3986 section 5.4 -------------------------------------------------------------


@pytest.mark.parametrize(("ref", "expected"), DATA["normal_5_4_1"])
def test_resolve_rfc3986_normal_examples(ref: str, expected: str) -> None:
    assert resolve_url(DATA["base"], ref) == expected


@pytest.mark.parametrize(("ref", "expected"), DATA["abnormal_5_4_2"])
def test_resolve_rfc3986_abnormal_examples(ref: str, expected: str) -> None:
    assert resolve_url(DATA["base"], ref) == expected


@pytest.mark.parametrize(("path", "expected"), DATA["remove_dot_segments_5_2_4"])
def test_remove_dot_segments_rfc3986_examples(path: str, expected: str) -> None:
    assert remove_dot_segments(path) == expected


@pytest.mark.parametrize(
    ("base", "ref", "expected"),
    [
        # documented browser leniency: whitespace and, for http(s), backslashes
        ("http://a/b/c", "  g\n", "http://a/b/g"),
        ("http://a/b/c", "\\\\evil.test\\x", "http://evil.test/x"),
        ("http://a/b/c", "g\\h?x\\y", "http://a/b/g/h?x\\y"),
        ("http://a/b/c", "HTTPS://other.test", "HTTPS://other.test"),
        ("http://a", "g", "http://a/g"),  # empty base path with authority: merge adds "/"
    ],
)
def test_resolve_leniency_and_edges(base: str, ref: str, expected: str) -> None:
    assert resolve_url(base, ref) == expected


def test_resolve_refuses_a_relative_base() -> None:
    with pytest.raises(UrlError) as err:
        resolve_url("/just/a/path", "g")
    assert err.value.reason is Reason.MALFORMED


# --- normalisation table: one row per rule --------------------------------------------

NORMALISE = [
    # scheme and host case
    ("HTTP://Example.COM/", "http://example.com/"),
    ("HtTpS://EXAMPLE.com/A/B", "https://example.com/A/B"),  # path case kept
    # userinfo dropped
    ("http://user:secret@example.com/", "http://example.com/"),
    ("http://a@b@example.com/", "http://example.com/"),
    # default port dropped, others kept
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:8443/", "https://example.com:8443/"),
    ("http://example.com:/", "http://example.com/"),
    ("http://example.com:0080/", "http://example.com/"),
    # empty path, dot segments
    ("http://example.com", "http://example.com/"),
    ("http://example.com?", "http://example.com/"),
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/../../a", "http://example.com/a"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
    ("http://example.com/a/b/..", "http://example.com/a/"),
    # percent-encoding
    ("http://example.com/%7euser/%41%62", "http://example.com/~user/Ab"),
    ("http://example.com/a%2fb%3a", "http://example.com/a%2Fb%3A"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/caf\u00e9", "http://example.com/caf%C3%A9"),
    ("http://example.com/%zz", "http://example.com/%25zz"),
    ("http://example.com/100%", "http://example.com/100%25"),
    ("http://example.com/{x}|<y>", "http://example.com/%7Bx%7D%7C%3Cy%3E"),
    ("http://example.com/?q=caf\u00e9 x", "http://example.com/?q=caf%C3%A9%20x"),
    ("http://example.com/?q=a+b", "http://example.com/?q=a+b"),
    ("http://example.com/?q=<b>&a=1", "http://example.com/?a=1&q=%3Cb%3E"),  # < > are not query characters
    # fragment
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/a?b=1#frag?c", "http://example.com/a?b=1"),
    # path session parameters
    ("http://example.com/a;jsessionid=0AB1/b", "http://example.com/a/b"),
    ("http://example.com/a;x=1;JSESSIONID=0AB1", "http://example.com/a;x=1"),
    ("http://example.com/a;phpsessid=9", "http://example.com/a"),
    ("http://example.com/a;v=2", "http://example.com/a;v=2"),
    # query: stripped parameters (case-insensitive), utm_* prefix
    ("http://example.com/?utm_source=x&utm_Medium=y&id=3", "http://example.com/?id=3"),
    ("http://example.com/?gclid=1&fbclid=2&PHPSESSID=3&sid=4", "http://example.com/"),
    ("http://example.com/?mc_cid=1&mc_eid=2&page=2", "http://example.com/?page=2"),
    ("http://example.com/?%75tm_source=x&a=1", "http://example.com/?a=1"),
    # query: sorted by key, stable for equal keys, empty pairs dropped
    ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
    ("http://example.com/?b=1&a=9&b=0&a=1", "http://example.com/?a=9&a=1&b=1&b=0"),
    ("http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"),
    ("http://example.com/?&&", "http://example.com/"),
    ("http://example.com/?a", "http://example.com/?a"),
    # host: trailing dot, percent-encoded host, underscore
    ("http://example.com./", "http://example.com/"),
    ("http://ex%41mple.com/", "http://example.com/"),
    ("http://a_b.example.com/", "http://a_b.example.com/"),
    # leniency: whitespace, tab/newline, backslashes
    ("  http://example.com/a\t\n  ", "http://example.com/a"),
    ("http:\\\\example.com\\a\\b?x\\y", "http://example.com/a/b?x%5Cy"),
]


@pytest.mark.parametrize(("url", "expected"), NORMALISE)
def test_normalize_table(url: str, expected: str) -> None:
    assert normalize_url(url) == expected
    assert normalize_url(expected) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0x7f000001/", "http://127.0.0.1/"),
        ("http://0X7F.1/", "http://127.0.0.1/"),
        ("http://0177.0.0.1/", "http://127.0.0.1/"),
        ("http://127.1/", "http://127.0.0.1/"),
        ("http://127.0.1/", "http://127.0.0.1/"),
        ("http://192.168.257/", "http://192.168.1.1/"),
        ("http://0x.0x.0/", "http://0.0.0.0/"),
        ("http://127.0.0.1./", "http://127.0.0.1/"),
        ("http://%31%32%37.0.0.1/", "http://127.0.0.1/"),
        ("http://[::FFFF:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
        ("http://[2001:DB8:0:0:0:0:0:1]:8080/", "http://[2001:db8::1]:8080/"),
        ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
    ],
)
def test_normalize_ip_hosts(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://B\u00fccher.example/", "http://xn--bcher-kva.example/"),
        ("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
        ("http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"),
        ("http://m\u00fcnchen.de/\u00e4", "http://xn--mnchen-3ya.de/%C3%A4"),
        # UTS-46 mapping: full-width letters and the ideographic full stop
        ("http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\u3002com/", "http://example.com/"),
        ("http://\u0440\u0444.\u0440\u0444/", "http://xn--p1ai.xn--p1ai/"),
        ("http://%D1%80%D1%84.%D1%80%D1%84/", "http://xn--p1ai.xn--p1ai/"),
        # UTS-46 validity as browsers check it, not IDNA 2008's table: symbols
        # and emoji, hyphens at the ends (CheckHyphens off), CONTEXTO points
        ("http://\u2603.net/", "http://xn--n3h.net/"),
        ("http://xn--n3h.net/", "http://xn--n3h.net/"),
        ("http://i\u2764.ws/", "http://xn--i-7iq.ws/"),
        ("http://%F0%9F%92%A9.la/", "http://xn--ls8h.la/"),
        ("http://-\u00e9.test/", "http://xn----bga.test/"),
        ("http://a\u00b7b.test/", "http://xn--ab-0ea.test/"),
        ("http://\u0628\u200c\u0628.test/", "http://xn--ngba799q.test/"),  # ZWNJ where RFC 5892 allows it
    ],
)
def test_normalize_idna(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


def test_normalize_idna_is_nontransitional() -> None:
    # UTS-46 non-transitional (browsers since ~2017): sharp s is kept, not "ss"
    assert normalize_url("http://fa\u00df.de/") == "http://xn--fa-hia.de/"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/", Reason.SCHEME),
        ("mailto:a@example.com", Reason.SCHEME),
        ("javascript:alert(1)", Reason.SCHEME),
        ("/relative/path", Reason.MALFORMED),
        ("//example.com/", Reason.MALFORMED),
        ("http://", Reason.MALFORMED),
        ("http:///x", Reason.MALFORMED),
        ("http:example.com", Reason.MALFORMED),
        ("http://example.com:65536/", Reason.MALFORMED),
        ("http://example.com:8o/", Reason.MALFORMED),
        ("http://1.2.3.256/", Reason.MALFORMED),
        ("http://1.2.3.4.5/", Reason.MALFORMED),
        ("http://foo.09/", Reason.MALFORMED),  # ends in a number that is not IPv4
        ("http://%C3%9F.0/", Reason.MALFORMED),  # the same check runs after IDNA
        ("http://[::1/", Reason.MALFORMED),
        ("http://[fe80::1%25eth0]/", Reason.MALFORMED),
        ("http://[v1.x]/", Reason.MALFORMED),
        ("http://exa mple.com/", Reason.MALFORMED),
        ("http://a..b/", Reason.MALFORMED),
        ("http://xn--zz.com/", Reason.MALFORMED),
        ("http://xn--a.com/", Reason.MALFORMED),  # decodes to U+0080, not a valid code point
        ("http://xn--ab-.com/", Reason.MALFORMED),  # decodes to ASCII
        ("http://xn--xn--bcher-kva-8sb.com/", Reason.MALFORMED),  # decodes to an xn-- label
        ("http://xn---9ca.test/", Reason.MALFORMED),  # not the punycode of its label "é" (xn--9ca)
        ("http://a\u200cb.test/", Reason.MALFORMED),  # ZWNJ without the context RFC 5892 asks
        ("http://\u0301a.test/", Reason.MALFORMED),  # leading combining mark
        ("http://\u0663a.test/", Reason.MALFORMED),  # RFC 5893 bidi rules
        ("http://%ff.com/", Reason.MALFORMED),
        ("http://" + "a" * 64 + ".com/", Reason.MALFORMED),
        ("http://example.com/" + "a" * 2100, Reason.LENGTH),
        ("http://example.com/" + "a" * 9000, Reason.LENGTH),
    ],
)
def test_normalize_rejects(url: str, reason: Reason) -> None:
    with pytest.raises(UrlError) as err:
        normalize_url(url)
    assert err.value.reason is reason
    assert isinstance(err.value, ValueError)


def test_normalize_length_limit_is_configurable() -> None:
    url = "http://example.com/" + "a" * 100
    rules = NormalizeRules(length_max=64)
    with pytest.raises(UrlError) as err:
        normalize_url(url, rules)
    assert err.value.reason is Reason.LENGTH
    assert normalize_url(url) == url


def test_normalize_order_sensitive_hosts_keep_query_order() -> None:
    rules = NormalizeRules(order_sensitive_hosts=frozenset({"Example.com"}))
    assert normalize_url("http://www.example.com/?b=2&a=1", rules) == "http://www.example.com/?b=2&a=1"
    assert normalize_url("http://other.test/?b=2&a=1", rules) == "http://other.test/?a=1&b=2"
    assert normalize_url("http://notexample.com/?b=2&a=1", rules) == "http://notexample.com/?a=1&b=2"


def test_normalize_keep_params_hosts_strip_nothing() -> None:
    rules = NormalizeRules(keep_params_hosts=frozenset({"shop.test"}))
    assert normalize_url("http://shop.test/?sid=7", rules) == "http://shop.test/?sid=7"
    assert normalize_url("http://other.test/?sid=7", rules) == "http://other.test/"


def test_normalize_rules_carry_a_version() -> None:
    assert DEFAULT_RULES.version == NORMALIZATION_VERSION >= 1
    assert "jsessionid" in DEFAULT_RULES.strip_params and "utm_" in DEFAULT_RULES.strip_param_prefixes


# --- properties ----------------------------------------------------------------------

_HOSTS = st.sampled_from([
    "example.com", "EXAMPLE.com.", "a.b.c.test", "127.1", "0x7f.0.0.1", "2130706433",
    "[::1]", "[2001:DB8::1]", "b\u00fccher.example", "xn--bcher-kva.example", "fa\u00df.de",
    "user:pw@example.com", "ex%41mple.com", "a_b.test",
])
_PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":", ":0081"])
_CHARS = st.characters(blacklist_categories=("Cs",))
_ATOMS = list("/.;=&?%#+*$@:!~-_aAzZ09 \\[]{}|") + ["%2e", "%41", "%7E", "%2F", "%zz", "%4", "..", "utm_x=1"]
_PART = st.lists(st.one_of(st.sampled_from(_ATOMS), _CHARS), max_size=40).map("".join)


@st.composite
def _urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTTps"]))
    return f"{scheme}://{draw(_HOSTS)}{draw(_PORTS)}/{draw(_PART)}"


@settings(max_examples=600, deadline=None)
@given(_urls())
def test_normalize_is_idempotent(url: str) -> None:
    try:
        once = normalize_url(url)
    except UrlError:
        assume(False)
        return
    assert normalize_url(once) == once


@settings(max_examples=600, deadline=None)
@given(_urls())
def test_host_and_origin_of_a_normalized_url_are_its_split_origin(url: str) -> None:
    from courtly.core.urls import host_of_normalized, origin_of_normalized, origin_text_of_normalized

    try:
        once = normalize_url(url)
    except UrlError:
        assume(False)
        return
    assert host_of_normalized(once) == split_origin(once).host
    assert origin_of_normalized(once) == split_origin(once)
    assert origin_text_of_normalized(once) == str(split_origin(once))


def test_origin_of_normalized_urls_with_ports_and_ipv6() -> None:
    from courtly.core.urls import origin_of_normalized, origin_text_of_normalized

    for raw in ("HTTP://Example.COM:80/a", "https://example.com:8443/x?y", "http://[::1]:8080/",
                "https://[2001:DB8::1]/p", "http://127.0.0.1:3/", "https://a.test", "http://a.test?q=/x"):
        url = normalize_url(raw)
        assert origin_of_normalized(url) == split_origin(url), raw
        assert origin_text_of_normalized(url) == str(split_origin(url)), raw


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_normalize_is_idempotent_on_arbitrary_text(tail: str) -> None:
    for url in (tail, "http://example.com/" + tail, "https://" + tail):
        try:
            once = normalize_url(url)
        except UrlError:
            continue
        assert normalize_url(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), _urls())
def test_normalize_returns_only_http_urls(text: str, url: str) -> None:
    for candidate in (text, url, text + url):
        try:
            out = normalize_url(candidate)
        except UrlError as err:
            assert err.reason in (Reason.MALFORMED, Reason.SCHEME, Reason.LENGTH)
            continue
        assert out.startswith(("http://", "https://"))
        assert "#" not in out and len(out) <= DEFAULT_RULES.length_max


@settings(max_examples=300, deadline=None)
@given(_urls(), st.sampled_from(["http://a/b/c/d;p?q", "https://x.test/", "http://h.test/a/b/"]))
def test_resolve_of_an_absolute_url_returns_it(url: str, base: str) -> None:
    try:
        absolute = normalize_url(url)
    except UrlError:
        assume(False)
        return
    assert resolve_url(base, absolute) == absolute


@settings(max_examples=300, deadline=None)
@given(_PART)
def test_resolve_then_normalize_never_crashes(ref: str) -> None:
    try:
        resolved = resolve_url("http://example.com/a/b", ref)
        normalize_url(resolved)
    except UrlError:
        pass


# --- origins and keys ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "origin", "text"),
    [
        ("http://Example.com/a", Origin("http", "example.com", 80), "http://example.com"),
        ("https://example.com:8443/", Origin("https", "example.com", 8443), "https://example.com:8443"),
        ("https://example.com:443/x", Origin("https", "example.com", 443), "https://example.com"),
        ("http://a.test:8080?q", Origin("http", "a.test", 8080), "http://a.test:8080"),
        ("http://[::1]:81/", Origin("http", "::1", 81), "http://[::1]:81"),
        ("http://u:p@0x7f.1/", Origin("http", "127.0.0.1", 80), "http://127.0.0.1"),
    ],
)
def test_split_origin(url: str, origin: Origin, text: str) -> None:
    assert split_origin(url) == origin
    assert str(split_origin(url)) == text


def test_split_origin_rejects_other_schemes() -> None:
    with pytest.raises(UrlError) as err:
        split_origin("ftp://example.com/")
    assert err.value.reason is Reason.SCHEME


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.com", "example.com"),
        ("example.com", "example.com"),
        ("a.b.example.co.uk", "example.co.uk"),
        ("co.uk", "co.uk"),                       # a public suffix is its own key
        ("WWW.Example.COM.", "example.com"),
        ("a.shop7.test", "shop7.test"),           # unknown suffix: default rule "*"
        ("shop7.test", "shop7.test"),
        ("test", "test"),
        ("x.y.internal", "y.internal"),
        ("printer.local", "printer.local"),
        ("a.b.unknowntld", "b.unknowntld"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("2001:db8::1", "2001:db8::1"),
        ("alice.github.io", "alice.github.io"),   # private PSL section included
        ("github.io", "github.io"),
        ("www.example.xn--p1ai", "example.xn--p1ai"),
        ("a.b.c.kawasaki.jp", "b.c.kawasaki.jp"),  # wildcard rule *.kawasaki.jp
        ("www.city.kawasaki.jp", "city.kawasaki.jp"),  # exception !city.kawasaki.jp
    ],
)
def test_registered_domain(host: str, domain: str) -> None:
    assert registered_domain(host) == domain


def test_politeness_key_modes() -> None:
    assert politeness_key("www.example.co.uk") == "example.co.uk"
    assert politeness_key("www.example.co.uk", "host") == "www.example.co.uk"
    assert politeness_key("[::1]", "host") == "::1"
    with pytest.raises(ValueError):
        politeness_key("example.com", "ip")


def test_partition_of_is_stable_blake2b() -> None:
    # fixed values: a partition must never move between releases or processes
    assert partition_of("example.com", 1024) == 614
    assert partition_of("example.com", 1) == 0
    with pytest.raises(ValueError):
        partition_of("example.com", 0)


@given(st.text(max_size=30), st.integers(min_value=1, max_value=10_000))
def test_partition_of_is_in_range(key: str, partitions: int) -> None:
    p = partition_of(key, partitions)
    assert 0 <= p < partitions and p == partition_of(key, partitions)
