"""Raw octets from a hostile server never reach the store as lone surrogates.

Header values are decoded as UTF-8 with ``surrogateescape`` (shell/http1), and
so are robots.txt lines (core/robots_txt), so that no byte is lost. A value
that is not UTF-8 then holds lone surrogates, which SQLite (and any log line
or WARC header) cannot take: before, one such Location ended the whole crawl
at its next commit. Now a Location or a Sitemap line keeps its octets as %XX,
as browsers send them, and whatever else a decision records is stored so.
A real Crawler with the fakes of tests/test_overflow.py.
"""

from __future__ import annotations

import asyncio

from test_overflow import T0, _config, _crawler, fake_result

from courtly.core.urls import escape_raw_octets

ROBOTS = b"User-agent: *\nAllow: /\nSitemap: https://a.example/site\xffmap.xml\n"
PAGE = b"<html><head><title>p</title></head><body><p>a page</p></body></html>"


def test_escape_raw_octets_writes_only_the_escaped_octets_as_percent_escapes():
    raw = b"/p\xffq\xe9/caf\xc3\xa9".decode("utf-8", "surrogateescape")
    assert escape_raw_octets(raw) == "/p%FFq%E9/caf\u00e9"     # valid UTF-8 stays text
    assert escape_raw_octets("/plain?a=1") == "/plain?a=1"


def test_a_robots_sitemap_line_that_is_not_utf8_is_kept_with_its_octets_escaped():
    # the parsed rules are persisted as JSON (PostgreSQL jsonb refuses a lone surrogate)
    from courtly.core.robots_txt import parse_robots

    assert parse_robots(ROBOTS).sitemaps == ("https://a.example/site%FFmap.xml",)


def test_a_location_and_a_sitemap_line_that_are_not_utf8_are_followed_and_stored(tmp_path):
    web = {"https://a.example/": []}
    c, fetcher = _crawler(tmp_path, web, _config(memory_max=100, key_memory_max=50).replace("crawl", fetch_tasks=1))
    asked: list[str] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        asked.append(url)
        path = "/" + url.split("/", 3)[3]
        status, body, hdrs = 404, b"", {"content-type": "text/html"}
        if path == "/robots.txt":
            status, body, hdrs = 200, ROBOTS, {"content-type": "text/plain"}
        elif path == "/":
            status, hdrs = 302, {"location": b"/p\xffq".decode("utf-8", "surrogateescape")}
        elif path == "/p%FFq":
            status, body = 200, PAGE
        return fake_result(url, ip, status, body, hdrs)

    fetcher.fetch = fetch
    c.add_seeds(["https://a.example/"])
    asyncio.run(c.run())
    states = dict(c.store._db.execute("SELECT url, state FROM urls"))
    c.store.close()
    assert "https://a.example/p%FFq" in asked and "https://a.example/site%FFmap.xml" in asked
    assert states["https://a.example/p%FFq"] == "fetched"
    assert states["https://a.example/site%FFmap.xml"] == "fetched"


def test_a_decision_on_raw_text_is_stored_with_its_octets_escaped(tmp_path):
    c, _ = _crawler(tmp_path, {}, _config(memory_max=10, key_memory_max=5))
    raw = b"https://a.example/\xff".decode("utf-8", "surrogateescape")
    c.admission.admit(raw.replace("a.example", b"\xfe.example".decode("utf-8", "surrogateescape")),
                      via=None, band=1, depth=0, now=T0)
    c.commit()
    rows = list(c.store._db.execute("SELECT url, state, reason FROM urls"))
    c.store.close()
    assert rows == [("https://%FE.example/%FF", "skipped", "malformed")], rows


def test_a_retry_after_that_is_not_utf8_is_shown_with_its_octets_escaped(tmp_path):
    # the back-off reason quotes the header: `courtly report` printed the lone
    # surrogate and ended with UnicodeEncodeError (the store's JSON escaped it)
    import io

    from courtly.runtime.report import daily_report

    c, fetcher = _crawler(tmp_path, {}, _config(memory_max=10, key_memory_max=5).replace("crawl", retries_max=0))

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        if url.endswith("/robots.txt"):
            return fake_result(url, ip, 404)
        return fake_result(url, ip, 429, b"", {"retry-after": b"\xff1".decode("utf-8", "surrogateescape")})

    fetcher.fetch = fetch
    c.add_seeds(["https://a.example/"])
    asyncio.run(c.run())
    c.store.close()
    text = daily_report(tmp_path)
    print(text, file=io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))   # strict, as stdout
    line = next(x for x in text.splitlines() if x.startswith("  a.example  "))
    assert "429 Retry-After %FF1" in line, text


def test_a_sitemap_that_declares_an_unknown_encoding_is_read_as_no_sitemap(tmp_path):
    # expat asks Python's codecs for an encoding it does not know: LookupError, not a
    # ParseError, went through parse_sitemap and ended the whole crawl
    web = {"https://a.example/": []}
    c, fetcher = _crawler(tmp_path, web, _config(memory_max=100, key_memory_max=50))
    robots = b"User-agent: *\nAllow: /\nSitemap: https://a.example/s1.xml\nSitemap: https://a.example/s2.xml\n"
    sitemap = b"<?xml version='1.0' encoding='%s'?><urlset><url><loc>https://a.example/p</loc></url></urlset>"

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        path = "/" + url.split("/", 3)[3]
        if path == "/robots.txt":
            return fake_result(url, ip, 200, robots, {"content-type": "text/plain"})
        if path in ("/s1.xml", "/s2.xml"):
            body = sitemap % (b"x-bogus" if path == "/s1.xml" else b"hex")   # unknown; not a text encoding
            return fake_result(url, ip, 200, body, {"content-type": "application/xml"})
        return fake_result(url, ip, 200, PAGE)

    fetcher.fetch = fetch
    c.add_seeds(["https://a.example/"])
    asyncio.run(c.run())
    states = dict(c.store._db.execute("SELECT url, state FROM urls"))
    c.store.close()
    assert c.fatal is None, repr(c.fatal)   # what the command raises at the end of run()
    assert states["https://a.example/s1.xml"] == states["https://a.example/s2.xml"] == "fetched"
    assert "https://a.example/p" not in states


def test_a_robots_redirect_that_is_not_utf8_is_followed_and_a_long_retry_after_is_cut(tmp_path):
    # robots.txt's Location gets the %XX of a page's; the back-off reason, written
    # per key at every commit, quotes at most RETRY_AFTER_QUOTED_MAX characters
    from courtly.core.politeness import RETRY_AFTER_QUOTED_MAX

    web = {"https://a.example/": []}
    c, fetcher = _crawler(tmp_path, web, _config(memory_max=10, key_memory_max=5).replace("crawl", retries_max=0))
    asked: list[str] = []
    huge = "9" * 70_000

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        asked.append(url)
        path = "/" + url.split("/", 3)[3]
        if path == "/robots.txt":
            return fake_result(url, ip, 301, b"", {"location": b"/r\xffobots.txt".decode("utf-8", "surrogateescape")})
        if path == "/r%FFobots.txt":
            return fake_result(url, ip, 200, b"User-agent: *\nDisallow: /\n", {"content-type": "text/plain"})
        return fake_result(url, ip, 429, b"", {"retry-after": huge})

    fetcher.fetch = fetch
    c.add_seeds(["https://a.example/"])
    asyncio.run(c.run())
    c.store.close()
    assert asked == ["https://a.example/robots.txt", "https://a.example/r%FFobots.txt"]   # followed; the file disallows /
    c.politeness.finished("a.example", T0, response_s=0.01, status=429, retry_after=huge)
    assert len(c.politeness.key("a.example").backoff_reason) == len("429 Retry-After ") + RETRY_AFTER_QUOTED_MAX
