"""Tests for courtly.core.links: link extraction from HTML bytes."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.links import (
    DEPTH_MAX,
    LINK_KINDS,
    TITLE_CHARS_MAX,
    ExtractFailed,
    Link,
    TAGS_FAST_MAX,
    PageLinks,
    extract_links,
    is_html,
)

PAGE = "http://example.com/dir/page.html"


def links(html: str | bytes, url: str = PAGE, **kw) -> PageLinks:
    body = html.encode() if isinstance(html, str) else html
    kw.setdefault("content_type", "text/html")
    return extract_links(body, url, **kw)


def urls(html: str | bytes, url: str = PAGE, **kw) -> list[str]:
    return [link.url for link in links(html, url, **kw).links]


# -- kinds, base, canonical ---------------------------------------------------


def test_links_of_every_kind_come_in_document_order():
    page = links(
        '<html><head><link rel="canonical" href="/c"><link rel="alternate" hreflang="de" href="/de">'
        '<link rel="next" href="p2"><link rel="prev" href="p0"><link rel="stylesheet" href="/s.css">'
        '<meta http-equiv="refresh" content="3; url=/r"></head>'
        '<body><a href="/a">a</a><map><area href="/area"></map></body></html>'
    )
    assert [(l.url, l.kind) for l in page.links] == [
        ("http://example.com/c", "canonical"),
        ("http://example.com/de", "alternate"),
        ("http://example.com/dir/p2", "next"),
        ("http://example.com/dir/p0", "prev"),
        ("http://example.com/r", "refresh"),
        ("http://example.com/a", "a"),
        ("http://example.com/area", "area"),
    ]
    assert page.canonical == "http://example.com/c"
    assert {l.kind for l in page.links} <= set(LINK_KINDS)


def test_first_base_href_resolves_every_relative_link_even_earlier_ones():
    page = links('<a href="x">x</a><base href="/other/"><base href="/ignored/"><a href="y">')
    assert page.base == "http://example.com/other/"
    assert [l.url for l in page.links] == [
        "http://example.com/other/x",
        "http://example.com/other/y",
    ]


def test_base_href_is_itself_resolved_against_the_page_url():
    assert links('<base href="../b/"><a href="x">').base == "http://example.com/b/"


def test_base_href_that_is_not_http_is_ignored():
    page = links('<base href="javascript:alert(1)"><a href="x">')
    assert page.base is None
    assert urls('<base href="data:text/html,x"><a href="x">') == ["http://example.com/dir/x"]


def test_protocol_relative_links_take_the_base_scheme():
    assert urls('<a href="//cdn.example/x">', url="https://example.com/") == ["https://cdn.example/x"]
    assert urls('<base href="https://secure.example/"><a href="//cdn.example/x">') == [
        "https://cdn.example/x"
    ]


def test_first_canonical_wins_and_is_also_a_link():
    page = links('<link rel="canonical" href="/one"><link rel="canonical" href="/two">')
    assert page.canonical == "http://example.com/one"
    assert [l.kind for l in page.links] == ["canonical", "canonical"]


def test_link_with_several_rels_gets_the_most_specific_kind():
    page = links('<link rel="alternate canonical" href="/c">')
    assert page.links == (Link("http://example.com/c", "canonical", False),)


def test_links_are_not_normalised():
    assert urls('<a href="HTTP://Example.COM:80/a/%7e?b=1&amp;a=2#frag">') == [
        "HTTP://Example.COM:80/a/%7e?b=1&a=2#frag"
    ]


def test_title_is_whitespace_collapsed_and_capped():
    assert links("<title>\n  Hello \t world  </title>").title == "Hello world"
    assert len(links("<title>" + "x" * 10_000 + "</title>").title) == TITLE_CHARS_MAX
    assert links("<p>no title</p>").title is None


# -- which hrefs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "href",
    ["", "   ", "#", "#top", "javascript:void(0)", " JavaScript:x", "java\nscript:x",
     "mailto:a@example.com", "tel:+123", "data:text/html,hi", "DATA:x"],
)
def test_non_crawlable_hrefs_are_skipped(href):
    assert urls(f'<a href="{href}">x</a>') == []


def test_anchor_without_href_is_not_a_link():
    assert urls("<a name=x>x</a><a>y</a>") == []


def test_other_schemes_are_returned_for_the_callers_scheme_filter():
    assert urls('<a href="ftp://ftp.example/f">') == ["ftp://ftp.example/f"]


def test_whitespace_around_and_tabs_newlines_inside_hrefs_are_removed():
    assert urls('<a href="  \n/a\tb\n  ">') == ["http://example.com/ab"]


def test_non_breaking_space_is_not_url_whitespace():
    assert urls('<a href="/a\u00a0">') == ["http://example.com/a\u00a0"]


def test_backslashes_before_the_query_act_as_slashes():
    assert urls(r'<a href="\\evil.example\x?a\b">') == ["http://evil.example/x?a\\b"]


def test_duplicates_keep_the_first_occurrence():
    page = links('<a href="/x">1</a><link rel="next" href="/x"><a href="http://example.com/x">')
    assert page.links == (Link("http://example.com/x", "a", False),)


def test_duplicate_is_nofollow_only_if_every_occurrence_is():
    page = links('<a rel="nofollow" href="/x">c</a><a href="/x">n</a><a rel=ugc href="/y">')
    assert page.links == (
        Link("http://example.com/x", "a", False),
        Link("http://example.com/y", "a", True),
    )


@pytest.mark.parametrize("rel", ["nofollow", "NoFollow", "ugc", "sponsored", "external nofollow"])
def test_rel_nofollow_ugc_sponsored_mark_the_link(rel):
    assert links(f'<a rel="{rel}" href="/x">').links[0].nofollow


def test_links_are_capped_at_links_max():
    html = "".join(f'<a href="/{i}">' for i in range(100)) + '<meta name="robots" content="noindex">'
    page = links(html, links_max=10)
    assert [l.url for l in page.links] == [f"http://example.com/{i}" for i in range(10)]
    assert page.noindex  # elements after the cap are still read
    assert links(html, links_max=0).links == ()


# -- reference resolution (RFC 3986 section 5.4) -----------------------------------

RFC_BASE = "http://a/b/c/d;p?q"
RFC_EXAMPLES = {
    "g:h": "g:h", "g": "http://a/b/c/g", "./g": "http://a/b/c/g", "g/": "http://a/b/c/g/",
    "/g": "http://a/g", "//g": "http://g", "?y": "http://a/b/c/d;p?y", "g?y": "http://a/b/c/g?y",
    "g#s": "http://a/b/c/g#s", "g?y#s": "http://a/b/c/g?y#s", ";x": "http://a/b/c/;x",
    "g;x": "http://a/b/c/g;x", "g;x?y#s": "http://a/b/c/g;x?y#s", ".": "http://a/b/c/",
    "./": "http://a/b/c/", "..": "http://a/b/", "../": "http://a/b/", "../g": "http://a/b/g",
    "../..": "http://a/", "../../": "http://a/", "../../g": "http://a/g",
    # abnormal examples (5.4.2)
    "../../../g": "http://a/g", "../../../../g": "http://a/g", "/./g": "http://a/g",
    "/../g": "http://a/g", "g.": "http://a/b/c/g.", ".g": "http://a/b/c/.g",
    "g..": "http://a/b/c/g..", "..g": "http://a/b/c/..g", "./../g": "http://a/b/g",
    "./g/.": "http://a/b/c/g/", "g/./h": "http://a/b/c/g/h", "g/../h": "http://a/b/c/h",
    "g;x=1/./y": "http://a/b/c/g;x=1/y", "g;x=1/../y": "http://a/b/c/y",
    "g?y/./x": "http://a/b/c/g?y/./x", "g?y/../x": "http://a/b/c/g?y/../x",
    "g#s/./x": "http://a/b/c/g#s/./x", "g#s/../x": "http://a/b/c/g#s/../x",
    "http:g": "http://a/b/c/g",  # the backward-compatible reading, as browsers do
    "http://x/a/../b": "http://x/b", "//x/./y": "http://x/y",
}


@pytest.mark.parametrize("ref, expected", sorted(RFC_EXAMPLES.items()))
def test_references_resolve_as_rfc3986_says(ref, expected):
    assert urls(f'<a href="{ref}">', url=RFC_BASE) == [expected]


def test_empty_path_segments_are_kept():
    assert urls('<a href="a//b">', url="http://h/x/") == ["http://h/x/a//b"]


def test_base_without_path_resolves_relative_paths_under_root():
    assert urls('<a href="p">', url="http://h") == ["http://h/p"]


def test_malformed_absolute_url_is_passed_to_the_caller_to_reject():
    assert urls('<a href="http://[::1/x">') == ["http://[::1/x"]


# -- meta refresh -------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, expected",
    [
        ("0; url=/a", "http://example.com/a"),
        ("5;URL='/b'", "http://example.com/b"),
        ('5, url="/c" ', "http://example.com/c"),
        ("1.5 url=d", "http://example.com/dir/d"),
        ("0;/e", "http://example.com/e"),
        ("10", None),
        ("soon; url=/f", None),
        ("", None),
    ],
)
def test_meta_refresh_target(content, expected):
    got = urls(f"<meta http-equiv=\"Refresh\" content=\"{content.replace(chr(34), '&quot;')}\">")
    assert got == ([expected] if expected else [])


# -- robots directives -----------------------------------------------------------------


@pytest.mark.parametrize(
    "meta, noindex, nofollow",
    [
        ('<meta name="robots" content="noindex">', True, False),
        ('<meta name="ROBOTS" content="NOFOLLOW">', False, True),
        ('<meta name="robots" content="noindex,nofollow">', True, True),
        ('<meta name="robots" content="none">', True, True),
        ('<meta name="robots" content="index, follow">', False, False),
        ('<meta name="Courtly" content="noindex">', True, False),
        ('<meta name="googlebot" content="noindex, nofollow">', False, False),
        ('<meta name="robots"><meta content="noindex">', False, False),
    ],
)
def test_meta_robots_for_all_robots_or_our_token(meta, noindex, nofollow):
    page = links(f"<head>{meta}</head><a href=/x>")
    assert (page.noindex, page.nofollow) == (noindex, nofollow)


def test_meta_robots_uses_the_configured_token():
    html = '<meta name="mybot" content="nofollow">'
    assert links(html, user_agent_token="MyBot").nofollow
    assert not links(html).nofollow


@pytest.mark.parametrize(
    "header, noindex, nofollow",
    [
        ("noindex", True, False),
        ("NoIndex, NoFollow", True, True),
        ("none", True, True),
        ("courtly: noindex", True, False),
        ("Courtly: nofollow, noindex", True, True),
        ("googlebot: noindex, nofollow", False, False),
        ("googlebot: noindex\ncourtly: nofollow", False, True),
        ("googlebot: noindex, courtly: nofollow", False, True),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow", False, True),
        ("max-snippet: 20, noindex", True, False),
        ("all", False, False),
        ("", False, False),
    ],
)
def test_x_robots_tag(header, noindex, nofollow):
    page = links("<a href=/x>", x_robots_tag=header)
    assert (page.noindex, page.nofollow) == (noindex, nofollow)


def test_x_robots_tag_applies_to_non_html_too():
    page = extract_links(b"%PDF-1.4", PAGE, content_type="application/pdf", x_robots_tag="noindex")
    assert page == PageLinks(noindex=True)


def test_page_nofollow_does_not_rewrite_link_nofollow():
    page = links('<meta name="robots" content="nofollow"><a href="/x">')
    assert page.nofollow and page.links == (Link("http://example.com/x", "a", False),)


# -- content types and charsets ------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type, body, expected",
    [
        ("text/html", b"<a href=/x>", True),
        ("TEXT/HTML; charset=utf-8", b"", True),
        ("application/xhtml+xml", b"", True),
        ("text/plain", b"<html><a href=/x>", False),
        ("application/pdf", b"<!doctype html>", False),
        ("", b"  <!DOCTYPE HTML><a href=/x>", True),
        ("", b"\xef\xbb\xbf<html lang=en>", True),
        ("", b"<a href=/x>", False),
        ("", b"x" * 1100 + b"<html>", False),
    ],
)
def test_html_by_type_or_by_sniffing_when_untyped(content_type, body, expected):
    assert is_html(body, content_type) is expected
    page = extract_links(body, PAGE, content_type=content_type)
    if not expected:
        assert page == PageLinks()


def test_charset_from_content_type():
    body = "<title>Привет</title>".encode("windows-1251")
    assert links(body, content_type="text/html; charset=windows-1251").title == "Привет"


@pytest.mark.parametrize(
    "declaration",
    ['<meta charset="windows-1251">', "<meta charset=windows-1251>",
     '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'],
)
def test_charset_from_meta_in_the_first_2k(declaration):
    body = f"<html><head>{declaration}<title>Привет</title>".encode("windows-1251")
    assert links(body).title == "Привет"


def test_content_type_charset_beats_meta():
    body = '<meta charset="koi8-r"><title>Привет</title>'.encode("windows-1251")
    assert links(body, content_type="text/html;charset=cp1251").title == "Привет"


def test_meta_charset_after_2k_is_not_seen():
    body = ("<!--" + "x" * 2100 + '--><meta charset="windows-1251"><title>é</title>').encode()
    assert links(body).title == "é"


def test_latin1_label_decodes_as_windows_1252():
    body = "<title>“quoted”</title>".encode("cp1252")
    assert links(body, content_type="text/html; charset=ISO-8859-1").title == "“quoted”"


@pytest.mark.parametrize("label", ["no-such-codec", "rot13", "base64", "zlib", "utf-7",
                                   "undefined", "unicode-escape", '"', "x" * 200])
def test_unknown_or_binary_charset_falls_back_to_utf8(label):
    body = "<title>é</title><a href='/ü'>".encode()
    page = links(body, content_type=f"text/html; charset={label}")
    assert page.title == "é" and page.error is None
    assert [l.url for l in page.links] == ["http://example.com/ü"]


def test_meta_utf16_label_means_utf8():
    assert links('<meta charset="utf-16"><title>é</title>'.encode()).title == "é"


def test_bom_beats_every_declaration():
    body = "\ufeff<meta charset=windows-1251><title>é</title>".encode("utf-16-le")
    assert links(body, content_type="text/html; charset=koi8-r").title == "é"
    body = "\ufeff<title>é</title>".encode("utf-8")
    assert links(body, content_type="text/html; charset=koi8-r").title == "é"


def test_invalid_utf8_is_replaced_not_raised():
    page = links(b"<title>\xff\xfe\xc3</title><a href='/\xe9'>")
    assert page.title == "\ufffd\ufffd\ufffd" and page.error is None
    assert page.links[0].url == "http://example.com/\ufffd"


# -- hostile input --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=4096), content_type=st.sampled_from(["", "text/html", "text/html; charset=utf-16", "text/html; charset=rot13"]))
def test_random_bytes_never_raise(body, content_type):
    page = extract_links(body, PAGE, content_type=content_type)
    assert isinstance(page, PageLinks)


HTML_BITS = st.sampled_from([
    "<a href=", "<a href='", '<a href="', "<area href=x>", "<link rel=canonical href=",
    "<link rel='next prev alternate' href=", "<base href=", "<meta name=robots content=",
    "<meta http-equiv=refresh content='0;url=", "<title>", "</title>", "<div>", "</div>",
    "<table>", "<svg>", "<math>", "<script>", "</script>", "<!--", "-->", "<template>",
    "<![CDATA[", "<noscript>", "<select>", "<option>", "\x00", "&amp;", "&#0;", "&#xD800;",
    "#", "//", "/", "\\", "..", "?", ":", "http://", "https://[", "javascript:", "é", "\ud7ff",
    " ", "\n", ">", "'", '"', "=", "rel=nofollow", "x", "%", "@", "[::1]",
])


@settings(max_examples=300, deadline=None)
@given(bits=st.lists(HTML_BITS, max_size=60), url=st.sampled_from(
    [PAGE, "https://h/", "http://h", "", "not a url", "http://[::1/", "file:///x", "h:"]))
def test_random_html_never_raises_and_links_are_unique(bits, url):
    page = extract_links("".join(bits).encode("utf-8", "surrogatepass"), url, content_type="text/html",
                         links_max=20)
    assert page.error is None
    seen = [l.url for l in page.links]
    assert len(seen) == len(set(seen)) <= 20
    assert all(l.kind in LINK_KINDS for l in page.links)
    if url.startswith("http"):
        assert all(":" in u for u in seen)


@pytest.mark.parametrize(
    "unit",
    ["<div>", "<span></div>", "<dl><dt>", "<ul>", "<em>", "<b>", "<table>", "<svg><g>",
     "<select><option>", "<a href=/n>", "<div><p>"],
)
def test_100k_deep_nesting_is_survived_quickly(unit):
    html = unit * 100_000 + '<a href="/deep">x</a><meta name=robots content=nofollow>'
    started = time.perf_counter()
    page = links(html)
    assert time.perf_counter() - started < 10
    assert "http://example.com/deep" in [l.url for l in page.links]
    assert page.nofollow


def test_deep_nesting_falls_back_to_a_flat_parse_and_says_so():
    depth = max(DEPTH_MAX, TAGS_FAST_MAX) + 1
    page = links("<div>" * depth + "<title>T</title><a href=/x><base href=/b/>")
    assert page.error and "nesting" in page.error
    assert page.title == "T"
    assert page.base == "http://example.com/b/"
    assert [l.url for l in page.links] == ["http://example.com/x"]


def test_big_normal_page_is_not_flattened():
    html = "<html><body>" + "<div><p>text <a href='/x'>x</a></p></div>\n" * TAGS_FAST_MAX
    page = links(html)
    assert page.error is None and len(page.links) == 1


@pytest.mark.parametrize(
    "body",
    [
        b"x" * 10_000_000,
        b"<" * 10_000_000,
        b"<a " * 3_400_000,
        b"<title " * 1_500_000,
        b"<a href='/x'>" * 800_000,
        b"<!--" + b"<a href=/x>" * 900_000,
        b"<a href='" + b"x" * 10_000_000,
        b"<meta charset=" + b"\xff" * 10_000_000,
    ],
    ids=["text", "lt", "open-a", "open-title", "anchors", "comment", "long-href", "bad-bytes"],
)
def test_10mb_inputs_are_survived(body):
    page = extract_links(body, PAGE, content_type="text/html")
    assert isinstance(page, PageLinks)
    assert len(page.links) <= 5000


def test_extract_failed_is_a_frozen_value():
    failed = ExtractFailed("http://x/", "timeout", 2)
    with pytest.raises(AttributeError):
        failed.attempts = 3  # type: ignore[misc]
