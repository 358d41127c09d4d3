"""Tests of change hints: sitemaps, sitemap indexes, gzip, RSS, Atom, hostile bodies."""

from __future__ import annotations

import datetime
import gzip
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.hints import (
    Hint, hints_from, inflate, is_newer, parse_feed, parse_sitemap, parse_w3c_datetime, raise_priority,
    sitemap_locations,
)
from courtly.core.recrawl import ChangeHistory, RecrawlScheduler, policy_for_intent

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True, database=None)
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def ts(*args, tz=datetime.timezone.utc) -> float:
    return datetime.datetime(*args, tzinfo=tz).timestamp()


URLSET = f"""<?xml version="1.0" encoding="UTF-8"?>
<urlset {NS}>
  <url><loc>https://a.example/one</loc><lastmod>2024-05-01</lastmod><changefreq>daily</changefreq></url>
  <url><loc> https://a.example/two </loc><lastmod>2024-05-01T12:30:00+02:00</lastmod></url>
  <url><loc>https://a.example/three</loc></url>
  <url><loc>ftp://a.example/nope</loc><lastmod>2024-05-01</lastmod></url>
  <url><loc>https://a.example/four</loc><lastmod>not a date</lastmod></url>
</urlset>""".encode()


# ---- dates ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("2024", ts(2024, 1, 1)),
    ("2024-05", ts(2024, 5, 1)),
    ("2024-05-01", ts(2024, 5, 1)),
    ("2024-05-01T12:30Z", ts(2024, 5, 1, 12, 30)),
    ("2024-05-01T12:30:15Z", ts(2024, 5, 1, 12, 30, 15)),
    ("2024-05-01T12:30:15.5+02:00", ts(2024, 5, 1, 10, 30, 15, 500000)),
    ("2024-05-01T12:30:15-0130", ts(2024, 5, 1, 14, 0, 15)),
    ("2024-05-01 12:30:15", ts(2024, 5, 1, 12, 30, 15)),
])
def test_w3c_datetimes(text, expected):
    assert parse_w3c_datetime(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", None, "2024-13-01", "2024-02-30", "yesterday", "2024-05-01T25:00Z", "１２３４"])
def test_bad_w3c_datetimes_are_none(text):
    assert parse_w3c_datetime(text) is None


# ---- sitemaps ---------------------------------------------------------------------------------

def test_urlset_with_lastmods():
    sm = parse_sitemap(URLSET)
    assert sm.kind == "urlset" and not sm.error and not sm.truncated
    got = {e.loc: e.lastmod_at for e in sm.urls}
    assert got == {
        "https://a.example/one": ts(2024, 5, 1),
        "https://a.example/two": ts(2024, 5, 1, 10, 30),
        "https://a.example/three": None,
        "https://a.example/four": None,
    }


def test_sitemap_index():
    body = f"""<sitemapindex {NS}>
      <sitemap><loc>https://a.example/sm-0.xml</loc><lastmod>2024-05-02T00:00:00Z</lastmod></sitemap>
      <sitemap><loc>https://a.example/sm-1.xml.gz</loc></sitemap>
    </sitemapindex>""".encode()
    sm = parse_sitemap(body)
    assert sm.kind == "sitemapindex" and sm.urls == ()
    assert [(e.loc, e.lastmod_at) for e in sm.sitemaps] == [
        ("https://a.example/sm-0.xml", ts(2024, 5, 2)), ("https://a.example/sm-1.xml.gz", None)]
    assert hints_from(body) == []


def test_gzip_is_detected_by_magic_bytes():
    sm = parse_sitemap(gzip.compress(URLSET))
    assert sm.kind == "urlset" and len(sm.urls) == 4


def test_gzip_bomb_is_capped():
    bomb = gzip.compress(b"<urlset>" + b" " * 5_000_000 + b"</urlset>")
    assert len(bomb) < 50_000
    sm = parse_sitemap(bomb, bytes_max=1_000_000)
    assert sm.kind == "invalid" and "inflates past" in sm.error
    with pytest.raises(ValueError):
        inflate(bomb, 1_000_000)


def test_entries_are_capped():
    items = "".join(f"<url><loc>https://a.example/{k}</loc></url>" for k in range(100))
    sm = parse_sitemap(f"<urlset {NS}>{items}</urlset>".encode(), entries_max=10)
    assert sm.truncated and len(sm.urls) == 10


def test_entity_declarations_are_refused():
    laughs = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<urlset><url><loc>https://a.example/&lol2;</loc></url></urlset>"""
    sm = parse_sitemap(laughs)
    assert sm.kind == "invalid" and "DOCTYPE" in sm.error
    external = b'<?xml version="1.0"?><!DOCTYPE x SYSTEM "file:///etc/passwd"><urlset/>'
    assert parse_sitemap(external).kind == "invalid"
    assert parse_sitemap(b"<urlset><url><loc>https://a.example/&undefined;</loc></url></urlset>").kind == "invalid"


def test_a_doctype_inside_cdata_is_just_text():
    body = (b'<rss version="2.0"><channel><item><link>https://a.example/p</link>'
            b'<description><![CDATA[<!DOCTYPE html><p>hi</p>]]></description>'
            b'<pubDate>Wed, 01 May 2024 12:00:00 GMT</pubDate></item></channel></rss>')
    assert [e.url for e in parse_feed(body).entries] == ["https://a.example/p"]


def test_utf16_documents_are_refused():
    assert parse_sitemap(f"<urlset {NS}></urlset>".encode("utf-16")).kind == "invalid"


def test_not_a_sitemap():
    assert parse_sitemap(b"<html><body>hi</body></html>").kind == "invalid"
    assert parse_sitemap(b"").kind == "invalid"
    assert parse_sitemap(b"<urlset><url><loc>https://a.example/</loc>").kind == "invalid"  # truncated


@PROPERTY
@given(st.binary(max_size=2000))
def test_garbage_never_raises(body):
    assert parse_sitemap(body).kind in ("urlset", "sitemapindex", "invalid")
    assert parse_feed(body).kind in ("rss", "atom", "invalid")
    hints_from(body)


@PROPERTY
@given(st.text(alphabet="<>/=\"' &;!?[]-abcdefghijklmnopqrstuvwxyz0123456789:.", max_size=300))
def test_xmlish_garbage_never_raises(text):
    for wrap in (text, f"<urlset>{text}</urlset>", f"<rss><channel><item>{text}</item></channel></rss>"):
        parse_sitemap(wrap.encode())
        parse_feed(wrap.encode())


# ---- feeds --------------------------------------------------------------------------------------

RSS = b"""<?xml version="1.0"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><title>t</title>
<item><title>a</title><link>https://a.example/a</link><pubDate>Wed, 01 May 2024 12:00:00 GMT</pubDate></item>
<item><title>b</title><link>https://a.example/b</link><dc:date>2024-05-02T08:00:00Z</dc:date></item>
<item><title>c</title><guid>https://a.example/c</guid></item>
<item><title>d</title><link>javascript:alert(1)</link><pubDate>Wed, 01 May 2024 12:00:00 GMT</pubDate></item>
</channel></rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<entry><title>a</title><link rel="self" href="https://a.example/feed/a"/>
  <link href="https://a.example/a"/><updated>2024-05-01T12:00:00Z</updated></entry>
<entry><title>b</title><link rel="alternate" href="https://a.example/b"/>
  <published>2024-05-02T12:00:00+01:00</published></entry>
</feed>"""


def test_rss_items():
    feed = parse_feed(RSS)
    assert feed.kind == "rss"
    assert [(e.url, e.updated_at) for e in feed.entries] == [
        ("https://a.example/a", ts(2024, 5, 1, 12)),
        ("https://a.example/b", ts(2024, 5, 2, 8)),
        ("https://a.example/c", None),
    ]


def test_atom_entries_use_the_alternate_link():
    feed = parse_feed(ATOM)
    assert feed.kind == "atom"
    assert [(e.url, e.updated_at) for e in feed.entries] == [
        ("https://a.example/a", ts(2024, 5, 1, 12)), ("https://a.example/b", ts(2024, 5, 2, 11))]


def test_hints_from_any_kind():
    assert [h.url for h in hints_from(URLSET)] == ["https://a.example/one", "https://a.example/two"]
    assert {h.source for h in hints_from(RSS)} == {"rss"}
    assert {h.source for h in hints_from(gzip.compress(ATOM))} == {"atom"}


def test_sitemap_locations_are_cleaned():
    lines = ["https://a.example/sitemap.xml", " https://a.example/sitemap.xml ", "/relative.xml",
             "http://b.example/s.xml.gz", "x" * 5000]
    assert sitemap_locations(lines) == ["https://a.example/sitemap.xml", "http://b.example/s.xml.gz"]
    assert len(sitemap_locations((f"https://a.example/{k}" for k in range(1000)), limit=5)) == 5


# ---- hints and the scheduler -----------------------------------------------------------------------

def scheduler_with(url: str, fetched_at: float) -> RecrawlScheduler:
    s = RecrawlScheduler(policy_for_intent("search", 1), random.Random(1))  # tiny budget: waits 24 h
    s.add(url, fetched_at, host="a.example", tier=0, importance=0.01,
          history=ChangeHistory(last_fetched_at=fetched_at, content_hash="h", fetches=1))
    s.plan(fetched_at)
    return s


def test_is_newer_compares_with_the_last_fetch():
    h = ChangeHistory(last_fetched_at=100.0)
    assert is_newer(h, 101.0) and not is_newer(h, 100.0) and not is_newer(h, None)
    assert is_newer(ChangeHistory(), 5.0)


def test_a_newer_lastmod_raises_priority():
    u = "https://a.example/page"
    s = scheduler_with(u, 0.0)
    now = 2 * 3600.0
    before = s.due_at(u)
    assert raise_priority(s, Hint(u, now - 60), now) is True
    assert s.due_at(u) <= now < before
    assert s.next_due_at() <= now


def test_stale_future_and_unknown_hints_do_nothing():
    u = "https://a.example/page"
    s = scheduler_with(u, 1000.0)
    assert raise_priority(s, Hint(u, 999.0), 5000.0) is False          # older than our copy
    assert raise_priority(s, Hint(u, 10 ** 9, ""), 5000.0) is False    # from the future
    assert raise_priority(s, Hint("https://a.example/other", 4000.0), 5000.0) is False


def test_an_xml_declaration_of_an_encoding_python_lacks_is_invalid_not_raised():
    # expat asks Python's codecs for an encoding it does not know itself: LookupError,
    # which went through parse_sitemap and parse_feed ("never raises") and ended the crawl
    for enc in (b"x-bogus", b"hex", b"rot13", b"mbcs"):
        body = b"<?xml version='1.0' encoding='" + enc + b"'?><urlset><url><loc>http://a.test/</loc></url></urlset>"
        assert parse_sitemap(body).kind == "invalid"
        assert parse_feed(body).kind == "invalid"
