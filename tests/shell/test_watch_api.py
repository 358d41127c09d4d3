"""The status server's watch API: reads open, writes only with the token, bad
input a 400 with a JSON message; changes, one change, feeds."""

from __future__ import annotations

import asyncio

import aiohttp
import feedparser
import pytest

from courtly.shell.status import StatusServer
from courtly.shell.store.watch_sqlite import SqliteWatchStore
from courtly.shell.watch_api import WatchApi
from monitor_events import fill
from shell.test_status import FakeSource

TOKEN = "s3cret-token"


async def call(base, method, path, *, token=None, json=None, data=None, headers=None):  # type: ignore[no-untyped-def]
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession() as s:
        async with s.request(method, base + path, json=json, data=data, headers=h) as r:
            body = await r.read()
            return r.status, body, r.headers.get("Content-Type", "")


def serve(store, token, scenario):  # type: ignore[no-untyped-def]
    async def main():
        server = StatusServer(FakeSource(hosts_n=5), watch_api=WatchApi(store, token, lambda: 1_800_000_000.0))
        port = await server.start()
        try:
            return await scenario(f"http://127.0.0.1:{port}/")
        finally:
            await server.stop()
    return asyncio.run(main())


@pytest.fixture
def store(tmp_path):
    s = SqliteWatchStore(tmp_path / "crawl.db")
    yield s
    s.close()


def test_writes_need_the_token_and_reads_do_not(store):
    import json

    async def scenario(base):
        assert (await call(base, "POST", "api/watches", json={"url": "http://a.test/"}))[0] == 401
        assert (await call(base, "POST", "api/watches", token="wrong", json={"url": "http://a.test/"}))[0] == 401
        status, body, _ = await call(base, "POST", "api/watches", token=TOKEN,
                                     json={"url": "HTTP://A.test:80/p", "every_s": 30, "select": ["main"]})
        assert status == 201 and json.loads(body)["url"] == "http://a.test/p"
        assert (await call(base, "POST", "api/watches", token=TOKEN, json={"url": "http://a.test/p"}))[0] == 409
        assert (await call(base, "POST", "api/watches/1/pause", token=TOKEN))[0] == 200
        status, body, _ = await call(base, "GET", "api/watches")
        assert status == 200 and json.loads(body)["rows"][0]["paused"] is True
        assert (await call(base, "DELETE", "api/watches/1", token=TOKEN))[0] == 200
        assert (await call(base, "DELETE", "api/watches/1", token=TOKEN))[0] == 404
    serve(store, TOKEN, scenario)
    assert store.watches() == []


@pytest.mark.parametrize("body, why", [
    ({"url": "ftp://a.test/"}, "scheme"), ({"url": "http://a.test/", "every_s": 0.1}, "every_s"),
    ({"url": "http://a.test/", "select": ["p["]}, "selector"), ({"url": "http://a.test/", "colour": 1}, "unknown"),
    ({"every_s": 5}, "url is required"), ({"url": "http://a.test/", "paused": 1}, "wrong type"),
])
def test_bad_watch_is_a_400_naming_the_problem(store, body, why):
    import json

    async def scenario(base):
        return await call(base, "POST", "api/watches", token=TOKEN, json=body)
    status, raw, ctype = serve(store, TOKEN, scenario)
    assert status == 400 and ctype.startswith("application/json") and why in json.loads(raw)["error"]


def test_writes_are_off_without_a_configured_token(store):
    async def scenario(base):
        return await call(base, "POST", "api/watches", token="", json={"url": "http://a.test/"})
    assert serve(store, "", scenario)[0] == 403


def test_non_json_body_is_refused(store):
    async def scenario(base):
        return await call(base, "POST", "api/watches", token=TOKEN, data=b"url=http://a.test/",
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert serve(store, TOKEN, scenario)[0] == 415


def test_changes_one_change_and_feeds(store):
    import json

    seqs = fill(store)
    assert seqs

    async def scenario(base):
        listed = json.loads((await call(base, "GET", "api/changes?limit=5"))[1])["rows"]
        one = json.loads((await call(base, "GET", f"api/changes/{seqs[0]}"))[1])
        missing = (await call(base, "GET", "api/changes/99999"))[0]
        bad = (await call(base, "GET", "api/changes?limit=x"))[0]
        feed = (await call(base, "GET", "changes.atom"))
        both = next(w.id for w in store.watches() if "/both/" in w.url)
        per_watch = (await call(base, "GET", f"watches/{both}/changes.atom"))
        page = await call(base, "GET", "changes")
        return listed, one, missing, bad, feed, per_watch, page
    listed, one, missing, bad, feed, per_watch, page = serve(store, TOKEN, scenario)
    assert [r["seq"] for r in listed] == sorted(seqs, reverse=True)[:5]
    assert one["before"] and one["after"] and one["diff"] and one["seq"] == seqs[0]
    assert (missing, bad) == (404, 400)
    assert feed[2].startswith("application/atom+xml")
    parsed = feedparser.parse(feed[1])
    assert not parsed.bozo and len(parsed.entries) == len(seqs)
    assert len(feedparser.parse(per_watch[1]).entries) == len(seqs)   # all on the page with real changes
    assert page[0] == 200 and b"change-table" in page[1]
