"""A page marked noindex is flagged in the fetch log with the directive that
said so (the page's meta robots tag or the X-Robots-Tag header, for all
agents or for our token); other pages are not. tests/e2e/test_noindex.py
follows the flag through a real crawl to the exports."""

from __future__ import annotations

from inproc_support import extract_pages

PAGE = b"<html><head>%s</head><body><a href=/x>x</a></body></html>"


def test_noindex_pages_are_flagged_with_the_directive_that_said_so(tmp_path):
    html = {"content-type": "text/html"}
    c = extract_pages(tmp_path, [
        ("http://a.example/meta", html, PAGE % b"<meta name=robots content=noindex>"),
        ("http://a.example/header", {**html, "x-robots-tag": "courtly: noindex"}, PAGE % b""),
        ("http://a.example/other-agent", {**html, "x-robots-tag": "otherbot: noindex"}, PAGE % b""),
        ("http://a.example/plain", html, PAGE % b"<meta name=robots content=nofollow>"),
    ])
    flags = {u: c.store.url_flags(u) for u in (f"http://a.example/{p}" for p in ("meta", "header", "other-agent",
                                                                                  "plain"))}
    assert [(f[1], f[2]) for f in flags["http://a.example/meta"]] == [("noindex", "meta robots")]
    assert [(f[1], f[2]) for f in flags["http://a.example/header"]] == [("noindex", "X-Robots-Tag")]
    assert flags["http://a.example/other-agent"] == [] and flags["http://a.example/plain"] == []
