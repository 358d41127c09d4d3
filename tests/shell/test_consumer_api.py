"""The status server's consumer API: a submission needs that consumer's own
token, a bad body is a 400 with a JSON message, reads are open; what it
records is what `courtly submit --consumer` records."""

from __future__ import annotations

import asyncio
import json

import pytest

from courtly.config import config_from_dict
from courtly.runtime.consumer_report import submit
from courtly.shell.consumer_api import URLS_MAX, ConsumerApi, RouteSet
from courtly.shell.store.consumers_sqlite import SqliteConsumerStore
from shell.test_status import FakeSource, serving

CFG = config_from_dict({"consumers": [
    {"name": "search", "token": "search-token", "priority_min": 2, "priority": 3},
    {"name": "archive", "token": "archive-token"},
    {"name": "quiet"},
]})


async def call(http, method, path, *, token=None, body=None):  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.request(method, "/" + path, json=body, headers=headers) as r:
        return r.status, json.loads(await r.read())


def serve(tmp_path, scenario):  # type: ignore[no-untyped-def]
    def record(name, urls, priority, intent):  # type: ignore[no-untyped-def]
        return submit(tmp_path, CFG, name, urls, priority=priority, intent=intent, now=1_800_000_000.0)

    api = ConsumerApi({c.name: c.token for c in CFG.consumers}, record, lambda: {"fetches": {"search": 4}})

    async def main():  # type: ignore[no-untyped-def]
        async with serving(FakeSource(hosts_n=3), watch_api=RouteSet(None, api)) as http:
            return await scenario(http)
    return asyncio.run(main())


def _submissions(tmp_path):  # type: ignore[no-untyped-def]
    store = SqliteConsumerStore(tmp_path / "crawl.db")
    try:
        return [(s.consumer, s.url, s.priority, s.intent) for s in store.submissions(0)]
    finally:
        store.close()


def test_a_consumer_submits_with_its_own_token_and_never_with_anothers(tmp_path):
    async def scenario(base):  # type: ignore[no-untyped-def]
        urls = {"urls": ["http://a.test/"], "intent": "search"}
        assert (await call(base, "POST", "api/consumers/search/submit", body=urls))[0] == 401
        assert (await call(base, "POST", "api/consumers/search/submit", token="archive-token", body=urls))[0] == 401
        assert (await call(base, "POST", "api/consumers/quiet/submit", token="", body=urls))[0] == 403
        assert (await call(base, "POST", "api/consumers/nobody/submit", token="x", body=urls))[0] == 404
        status, done = await call(base, "POST", "api/consumers/search/submit", token="search-token", body=urls)
        assert (status, done["submitted"], done["priority"]) == (202, 1, 3)
        status, counters = await call(base, "GET", "api/consumers")
        assert status == 200 and counters == {"fetches": {"search": 4}}
    serve(tmp_path, scenario)
    assert _submissions(tmp_path) == [("search", "http://a.test/", 3, "search")]


@pytest.mark.parametrize("body, words", [
    ({"urls": []}, "non-empty list"),
    ({"urls": "http://a.test/"}, "non-empty list"),
    ({"urls": ["http://a.test/"], "priority": 1}, "priority 2..7, not 1"),
    ({"urls": ["http://a.test/"], "priority": True}, "integer band"),
    ({"urls": ["http://a.test/"], "intent": "gossip"}, "intent must be one of"),
    ({"urls": ["http://a.test/"], "colour": 1}, "unknown field 'colour'"),
    ({"urls": ["http://a.test/"] * (URLS_MAX + 1)}, f"at most {URLS_MAX}"),
    ([1, 2], "JSON object"),
])
def test_a_bad_submission_is_a_400_with_one_line_and_records_nothing(tmp_path, body, words):
    async def scenario(base):  # type: ignore[no-untyped-def]
        return await call(base, "POST", "api/consumers/search/submit", token="search-token", body=body)
    status, answer = serve(tmp_path, scenario)
    assert status == 400 and words in answer["error"] and "\n" not in answer["error"]
    assert _submissions(tmp_path) == []
