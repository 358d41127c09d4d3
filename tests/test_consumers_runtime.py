"""runtime/consumers in a real Crawler and store (tests/inproc_support.py):
submissions taken at a commit, charging before a request, the streams, purge
lines, late deliveries and the per-consumer metrics."""

from __future__ import annotations

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from inproc_support import T0, crawler
from prometheus_client.parser import text_string_to_metric_families

from courtly.config import config_from_dict
from courtly.core.purge import Purge, Scope
from courtly.core.types import Reason, UrlItem
from courtly.ports import Batch
from courtly.runtime.consumer_report import chargeback, submit
from courtly.runtime.consumers import stream_path
from courtly.shell import metrics
from courtly.shell.store.consumers_sqlite import SqliteConsumerStore

CFG = config_from_dict({"consumers": [
    {"name": "a", "fetches_per_day": 2, "price_per_million": 100.0},
    {"name": "b", "weight": 2.0, "priority_min": 3, "priority": 3},
]})
URLS = [f"http://x.test/{i}" for i in range(3)]


@pytest.fixture
def c(tmp_path):
    c = crawler(tmp_path, CFG)
    store = SqliteConsumerStore(tmp_path / "crawl.db")
    c.consumers.attach(store, tmp_path, T0)
    yield c
    store.close()


def _item(url: str, via: str = "") -> UrlItem:
    return UrlItem(url=url, key="x.test", band=1, via=via)


def _lines(tmp_path, name: str) -> list[dict]:
    path = stream_path(f"consumers/{name}", tmp_path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _answered(c, url: str, at: float, offset: int) -> None:
    c.consumers.answered(url, SimpleNamespace(status=200, body=b"hello"))
    c.batch.fetches.append((url, "page", at, 200, 5, 0.1, "10.0.0.1", f"f.warc.gz:{offset}", ""))


def test_submissions_are_taken_at_the_next_commit_in_the_consumers_band(c, tmp_path):
    submit(tmp_path, CFG, "b", URLS[:1], priority=None, intent="search", now=T0)
    assert URLS[0] not in c.seen
    c.commit()
    assert URLS[0] in c.seen
    assert c.frontier.lease(T0 + 10, lambda key: 10).items[0].band == 3


def test_a_priority_outside_the_consumers_range_is_refused(tmp_path):
    with pytest.raises(ValueError, match="3..7"):
        submit(tmp_path, CFG, "b", URLS, priority=1, intent="archive", now=T0)


def test_a_shared_request_is_billed_half_to_each_and_the_excess_of_a_quota_is_decided_quota(c, tmp_path):
    submit(tmp_path, CFG, "a", URLS, priority=None, intent="archive", now=T0)
    submit(tmp_path, CFG, "b", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    for i, url in enumerate(URLS[:2]):
        assert c.consumers.before_fetch(_item(url), T0 + i) == ""
        _answered(c, url, T0 + i, 100 * i)
    assert "fetches_per_day 2" in c.consumers.before_fetch(_item(URLS[2]), T0 + 3)
    c.commit()
    a, b = _lines(tmp_path, "a"), _lines(tmp_path, "b")
    assert [(l["url"], l["shared"], l["warc_offset"]) for l in a if "status" in l] == [
        (URLS[0], True, 0), (URLS[1], False, 100)]
    assert [l["url"] for l in a if l.get("decision") == "quota"] == [URLS[2]]
    assert [(l["url"], l["shared"]) for l in b] == [(URLS[0], True)]
    assert all(l["payload_digest"].startswith("sha1:") for l in a if "status" in l)
    bill = {r["consumer"]: r for r in chargeback(tmp_path, CFG)["consumers"]}
    assert (bill["a"]["charged"], bill["b"]["charged"], bill["a"]["denied"]) == (1.5, 0.5, 1)
    assert bill["a"]["cost"] == pytest.approx(1.5 * 100.0 / 1e6)


def test_a_link_found_on_a_consumers_page_is_that_consumers(c, tmp_path):
    submit(tmp_path, CFG, "b", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    assert c.consumers.owners(_item("http://x.test/linked", via=URLS[0])) == ("b",)
    assert c.consumers.owners(_item("http://x.test/other", via="http://x.test/nobody")) == ()


def test_a_url_submitted_after_its_fetch_is_delivered_from_its_record_without_a_request(c, tmp_path):
    submit(tmp_path, CFG, "b", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    c.consumers.before_fetch(_item(URLS[0]), T0 + 1)
    _answered(c, URLS[0], T0 + 1, 7)
    c.batch.fetched.append((T0 + 1, 200, URLS[0]))
    c.commit()
    submit(tmp_path, CFG, "a", URLS[:1], priority=None, intent="archive", now=T0 + 2)
    c.commit()
    (line,) = _lines(tmp_path, "a")
    assert (line["url"], line["warc_offset"], line["shared"]) == (URLS[0], 7, True)
    assert c.consumers.ledger.used.get("a", 0) == 0   # no request made, nothing of its quota used


def test_a_purge_reaches_every_consumers_stream(c, tmp_path):
    c.store.add_purge(Purge(Scope.HOST, "x.test", "takedown"), T0 + 5)
    c.commit()
    for name in ("a", "b"):
        (line,) = _lines(tmp_path, name)
        assert line["purge"]["value"] == "x.test" and line["purge"]["reason"] == "takedown"


def test_a_decision_on_a_consumers_url_reaches_its_stream(c, tmp_path):
    submit(tmp_path, CFG, "b", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    c.decide(URLS[0], "x.test", "", Reason.ROBOTS, "http://x.test/robots.txt", T0 + 1)
    c.commit()
    (line,) = _lines(tmp_path, "b")
    assert line["decision"] == "robots"
    bill = {r["consumer"]: r for r in chargeback(tmp_path, CFG)["consumers"]}
    assert (bill["b"]["decided"], bill["b"]["denied"]) == (1, 0)   # not fetched, but not for its quota


def test_the_metrics_carry_each_consumers_fetches_denials_quota_and_cost(c, tmp_path):
    submit(tmp_path, CFG, "a", URLS, priority=None, intent="archive", now=T0)
    c.commit()
    for i, url in enumerate(URLS):
        if not c.consumers.before_fetch(_item(url), T0 + i):
            _answered(c, url, T0 + i, i)
    c.commit()
    text = metrics.exposition(metrics.new_registry(lambda: {"consumers": c.consumers.metrics()})).decode()
    value: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            value.setdefault(s.name, {})[s.labels["consumer"]] = s.value
    assert value["courtly_consumer_fetches_total"]["a"] == 2
    assert value["courtly_consumer_quota_denied_total"]["a"] == 1
    assert value["courtly_consumer_quota_used_ratio"] == {"a": 1.0}   # b has no quota: absent
    assert value["courtly_consumer_cost_total"]["a"] == pytest.approx(2 * 100.0 / 1e6)
    if shutil.which("promtool"):   # Prometheus' own checker
        done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_no_consumer_metrics_without_consumers():
    text = metrics.exposition(metrics.new_registry(lambda: {"consumers": None})).decode()
    assert "courtly_consumer" not in text


def test_consumers_off_leave_the_crawl_as_it_was(tmp_path):
    c = crawler(tmp_path)
    assert not c.consumers.enabled
    assert c.consumers.before_fetch(_item(URLS[0]), T0) == ""
    c.batch.fetches.append((URLS[0], "page", T0, 200, 5, 0.1, "", "f:0", ""))
    c.commit()
    assert not (tmp_path / "consumers").exists()
    assert isinstance(Batch(), Batch)


def test_a_keys_lease_gives_the_consumers_turns_by_weight_even_when_its_delay_allows_one_url(c, tmp_path):
    mine = [f"http://x.test/a{i}" for i in range(4)] + [f"http://x.test/b{i}" for i in range(4)]
    submit(tmp_path, CFG, "a", mine[:4], priority=4, intent="archive", now=T0)
    submit(tmp_path, CFG, "b", mine[4:], priority=4, intent="archive", now=T0)
    c.commit()
    lease = c.frontier.lease(T0 + 10, c.serving.batch_for)
    assert c.politeness.key("x.test").delay_s > 0.05 and len(lease.items) == 8   # the delay alone leases one
    order = [c.consumers.owners(it)[0] for it in c.consumers.order("x.test", list(lease.items))]
    last_b = len(order) - 1 - order[::-1].index("b")
    for n in range(1, last_b + 1):   # while both have URLs, b (weight 2) has twice a's turns, give or take one
        assert abs(order[:n].count("b") - 2 * order[:n].count("a")) <= 2, order
    assert order.count("a") == order.count("b") == 4


def test_a_url_a_quota_turned_away_is_queued_again_when_submitted_again(c, tmp_path):
    submit(tmp_path, CFG, "a", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    c.frontier.lease(T0 + 10, lambda key: 10)   # taken out, as by a fetch task
    c.decide(URLS[0], "x.test", "", Reason.QUOTA, "a: fetches_per_day 2 used", T0 + 1)
    c.commit()
    assert c.store.url_record(URLS[0])["reason"] == "quota"
    submit(tmp_path, CFG, "a", URLS[:1], priority=None, intent="archive", now=T0 + 86_400)
    c.commit()
    assert c.store.url_record(URLS[0])["state"] == "queued"
    assert URLS[0] in c.frontier.urls_of("x.test")


def test_a_resumed_crawl_knows_whose_pages_it_fetched_so_their_queued_links_stay_theirs(c, tmp_path):
    submit(tmp_path, CFG, "b", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    page = "http://x.test/found"
    c.consumers.before_fetch(_item(page, via=URLS[0]), T0 + 1)
    _answered(c, page, T0 + 1, 3)
    c.commit()
    resumed = crawler(tmp_path, CFG)
    store = SqliteConsumerStore(tmp_path / "crawl.db")
    try:
        resumed.consumers.attach(store, tmp_path, T0 + 2)
        assert resumed.consumers.owners(_item("http://x.test/deeper", via=page)) == ("b",)
    finally:
        store.close()


def test_the_status_servers_consumer_api_records_for_the_running_crawl(c, tmp_path):
    from courtly.runtime.wiring import _with_consumer_api

    (api,) = _with_consumer_api(None, c, tmp_path).apis
    assert api.submit("b", URLS[:1], None, "monitor")["priority"] == 3
    c.commit()
    assert URLS[0] in c.seen and c.consumers.owners(_item(URLS[0])) == ("b",)
    assert api.counters() == c.consumers.metrics()


def test_a_url_a_quota_turned_away_waits_for_the_next_utc_day_and_is_queued_again(c, tmp_path):
    submit(tmp_path, CFG, "a", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    lease = c.frontier.lease(T0 + 10, lambda key: 10)   # taken out, as by a fetch task ...
    c.decide(URLS[0], "x.test", "", Reason.QUOTA, "a: fetches_per_day 2 used", T0 + 1)
    c.frontier.complete(lease.lease_id, T0 + 2, [])     # ... which decided it and gave the key back
    c.commit()
    assert URLS[0] not in c.frontier.urls_of("x.test")
    c.clock.t = T0 + 3_600                        # later the same day: it waits
    c.commit()
    assert c.store.url_record(URLS[0])["reason"] == "quota" and c.consumers.requeued == 0
    day = 86_400
    c.clock.t = (int(T0) // day + 1) * day + 1   # the next UTC day: the quota starts again
    c.commit()
    assert c.store.url_record(URLS[0])["state"] == "queued" and c.consumers.requeued == 1
    c.commit()                                   # read back into the frontier (runtime/overflow)
    assert URLS[0] in c.frontier.urls_of("x.test")


def test_a_crawl_resumed_on_a_later_day_queues_its_quota_refusals_again_at_load(c, tmp_path):
    submit(tmp_path, CFG, "a", URLS[:1], priority=None, intent="archive", now=T0)
    c.commit()
    c.frontier.lease(T0 + 10, lambda key: 10)
    item = UrlItem(url=URLS[0], key="x.test", band=1)
    c.consumers.ledger.charge(("a",), "x.test", T0)
    c.consumers.ledger.charge(("a",), "x.test", T0)
    detail = c.consumers.before_fetch(item, T0 + 1)        # over its 2 a day: denied (a stream line)
    assert detail
    c.decide(URLS[0], "x.test", "", Reason.QUOTA, detail, T0 + 1)
    c.commit()
    later = crawler(tmp_path, CFG)                         # the same crawl folder, a later day
    later.clock.t = T0 + 2 * 86_400
    store = SqliteConsumerStore(tmp_path / "crawl.db")
    try:
        later.consumers.attach(store, tmp_path, later.clock.t)
        later.consumers.poll(later.clock.t)
        assert later.consumers.requeued == 1 and later.store.url_record(URLS[0])["state"] == "queued"
    finally:
        store.close()
