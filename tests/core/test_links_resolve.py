"""Tests for the fast paths of courtly.core.links: the relative-path join of
`_Resolver` gives what RFC 3986 resolution (`courtly.core.urls.resolve_url`)
gives, the <base href> found in the page's one CSS query is the first one,
and `link_fields` is `extract_links` as plain values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core import links as links_module
from courtly.core.links import Link, PageLinks, _Resolver, extract_links, link_fields
from courtly.core.urls import resolve_url

BASES = [
    "http://a/b/c/d;p?q", "http://h", "http://h/", "https://h:8443/x/y/", "http://h/x//y/z.html",
    "http://h//a", "http://h/a/./b/c", "http://h/a b/c.html", "HTTP://H/A/B", "http://h/p#frag",
]
REF_BITS = st.sampled_from(["g", "h.html", "../", "./", "..", ".", "/", "//", "?", "#", "?y", "#s",
                            ";x", ":", "%2e", "a b", "é", "http:", "https:", "///", ".g", "g.", "x=1"])


def rfc(base: str, ref: str) -> str:
    """What the slow path answers (resolve_url behind the browser readings)."""
    return _Resolver(base)._resolve(ref)


@settings(max_examples=2000, deadline=None)
@given(base=st.sampled_from(BASES), bits=st.lists(REF_BITS, min_size=1, max_size=8))
def test_the_fast_paths_resolve_as_the_rfc_path_does(base, bits):
    ref = "".join(bits)
    assert _Resolver(base)(ref) == rfc(base, ref)


@pytest.mark.parametrize("base, ref, expected", [
    ("http://a/b/c/d;p?q", "g", "http://a/b/c/g"),
    ("http://a/b/c/d;p?q", "../g", "http://a/b/g"),
    ("http://a/b/c/d;p?q", "../../../../g?y#s", "http://a/g?y#s"),
    ("http://h", "p", "http://h/p"),
    ("http://h/x//y/", "../z", "http://h/x//z"),
])
def test_relative_paths_take_the_fast_path_and_resolve_as_rfc3986_says(monkeypatch, base, ref, expected):
    def refused(self, ref):
        raise AssertionError(f"slow path taken for {ref!r}")

    monkeypatch.setattr(links_module._Resolver, "_resolve", refused)
    assert _Resolver(base)(ref) == expected == resolve_url(base, ref)


@pytest.mark.parametrize("base, ref, expected", [
    # WHATWG: a run of slashes before the host is one "//"; http(s): of the
    # other scheme leads to the host; of the base's own scheme with fewer
    # than two slashes it is relative (what browsers follow)
    ("http://h/d/p", "///x.test/a", "http://x.test/a"),
    ("https://h/d/p", "////x.test", "https://x.test"),
    ("http://h/d/p", "\\\\\\x.test\\a", "http://x.test/a"),
    ("http://h/d/p", "http:///x.test/a", "http://x.test/a"),
    ("http://h/d/p", "https:///x.test/a", "https://x.test/a"),
    ("http://h/d/p", "https:x.test/a", "https://x.test/a"),
    ("http://h/d/p", "HTTPS:/x.test", "HTTPS://x.test"),
    ("https://h/d/p", "http:x.test", "http://x.test"),
    ("https://h/d/p", "http:\\x.test", "http://x.test"),
    ("http://h/d/p", "http:x.test/a", "http://h/d/x.test/a"),
    ("http://h/d/p", "http:/x.test/a", "http://h/x.test/a"),
    ("http://h/d/p", "http:?q", "http://h/d/p?q"),
    ("http://h/d/p", "//x.test/a", "http://x.test/a"),
    ("http://h/d/p", "https://x.test/a", "https://x.test/a"),
    # no host after the slashes: nothing a normaliser accepts (WHATWG: failure)
    ("http://h/d/p", "///", "http://"),
    ("http://h/d/p", "https:", "https://"),
    ("https://h/d/p", "http:", "http://"),
])
def test_slashes_and_special_schemes_read_as_browsers_read_them(base, ref, expected):
    from courtly.core.urls import UrlError, normalize_url

    got = _Resolver(base)(ref)
    assert got == expected
    page = extract_links(f'<a href="{ref}">x</a>'.encode(), base, content_type="text/html")
    assert [l.url for l in page.links] == [got]
    if expected.endswith("://"):
        with pytest.raises(UrlError):
            normalize_url(got)


def test_a_base_with_dot_segments_or_spaces_takes_the_rfc_path():
    for base in ("http://h/a/../b/", "http://h/a b/"):
        assert _Resolver(base).directory is None
        assert _Resolver(base)("g") == resolve_url(base, "g")


def test_the_first_base_href_counts_even_after_links_and_a_second_base():
    html = (b"<a href=x>x</a><link rel=canonical href=c><base href='http://o.example/d/'>"
            b"<base href='http://p.example/'><a href=y>y</a>")
    page = extract_links(html, "http://h.example/p/q", content_type="text/html")
    assert page.base == "http://o.example/d/"
    assert [l.url for l in page.links] == ["http://o.example/d/x", "http://o.example/d/c", "http://o.example/d/y"]
    assert page.canonical == "http://o.example/d/c"


def test_a_base_without_href_is_not_the_base():
    page = extract_links(b"<base target=_top><base href=/b/><a href=x>", "http://h/", content_type="text/html")
    assert page.base == "http://h/b/" and [l.url for l in page.links] == ["http://h/b/x"]


@pytest.mark.parametrize("body, content_type, x_robots_tag", [
    (b"<title> T </title><a href=a rel=nofollow>a</a><a href=a>a</a><a href=//x/y rel=ugc>", "text/html", ""),
    (b"%PDF", "application/pdf", "noindex"),
    (b"<meta name=robots content=none><area href=/m>", "", ""),
])
def test_link_fields_are_extract_links_as_plain_values(body, content_type, x_robots_tag):
    page = extract_links(body, "http://h/p", content_type=content_type, x_robots_tag=x_robots_tag)
    links, *fields = link_fields(body, "http://h/p", content_type=content_type, x_robots_tag=x_robots_tag)
    assert PageLinks(tuple(Link(*link) for link in links), *fields) == page
    assert all(type(link) is tuple for link in links)
