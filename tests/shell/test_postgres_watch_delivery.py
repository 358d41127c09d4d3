"""The cluster monitor's writes and webhook queue in a throwaway PostgreSQL
(shell/store/watch_postgres): a worker's states and events go in one
transaction fenced by its partition's epoch, an event is recorded once, and a
delivery is claimed by one worker at a time, in order per watch, with its
outcome written only by its claimant."""

from __future__ import annotations

import asyncio

import pytest

from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.ports import StaleEpochError
from courtly.shell.store.watch_postgres import PostgresWatchStore
from courtly.shell.webhook import Retries
from courtly.shell.webhook_cluster import ClusterWebhookSender
from pg_store_support import _open, run


def event(watch_id: int, at: float) -> ChangeEvent:
    return ChangeEvent(watch_id, f"http://w{watch_id}.test/p", at, at - 10, at,
                       {"added": [f"x{at:g}"], "removed": [], "changed": []}, ("a",), ("a", f"x{at:g}"))


def with_stores(dsn, test, watches=2):
    """Run `test(crawl, store)` on a crawl of P partitions and `watches` watches with webhooks."""
    async def body():
        crawl = await _open(dsn)
        store = await PostgresWatchStore.open(dsn)
        try:
            for i in range(watches):
                await store.add(Watch(f"http://w{i + 1}.test/p", webhook=f"http://hook.test/{i + 1}"))
            await test(crawl, store)
        finally:
            await store.close()
            await crawl.close()

    run(body())


def test_a_stale_epoch_writer_is_refused_and_nothing_is_recorded_twice(postgres):
    dsn = postgres.create_database()

    async def body(crawl, store):
        old = await crawl.acquire(0, "stalled", 0.01)
        await asyncio.sleep(0.05)                    # the stalled worker's lease runs out
        new = await crawl.acquire(0, "successor", 60.0)
        assert new is not None and new > old
        tenure_old, tenure_new = {1: (0, old)}, {1: (0, new)}
        assert await store.write_checks({1: WatchState(checks=3)}, [(event(1, 100.0), "h")], tenure_new) == [1]
        with pytest.raises(StaleEpochError) as refused:
            await store.write_checks({1: WatchState(checks=9)}, [(event(1, 100.0), "h"), (event(1, 110.0), "h")],
                                     tenure_old)
        assert refused.value.partitions == {0}
        # the successor's write retried after a lost COMMIT answer: the same event, once
        assert await store.write_checks({}, [(event(1, 100.0), "h")], tenure_new) == [1]
        rows = await store.changes()
        assert [(r.seq, r.detected_at) for r in rows] == [(1, 100.0)]
        assert (await store.states())[1].checks == 3

    with_stores(dsn, body)


def test_one_event_per_watch_is_claimed_at_a_time_by_one_worker_and_only_its_claimant_finishes_it(postgres):
    dsn = postgres.create_database()

    async def body(crawl, store):
        epoch = await crawl.acquire(0, "w1", 60.0)
        tenure = {1: (0, epoch), 2: (0, epoch)}
        await store.write_checks({}, [(event(1, 100.0), "http://hook.test/1"), (event(1, 110.0), "http://hook.test/1"),
                                      (event(2, 105.0), "http://hook.test/2")], tenure)
        a, b = await asyncio.gather(store.claim_deliveries("w1", tenure, hold_s=60.0),
                                    store.claim_deliveries("w2", tenure, hold_s=60.0))
        assert sorted(r.seq for r in a + b) == [1, 3]        # the head of each watch, once
        assert await store.claim_deliveries("w1", {1: (0, epoch + 1)}, hold_s=60.0) == []   # not held: none
        first = next(r for r in a + b if r.seq == 1)
        claimant = "w1" if first in a else "w2"
        assert not await store.finish_delivery(1, "w3", "delivered", 1)
        assert await store.finish_delivery(1, claimant, "pending", 1, "status 500", retry_in_s=3600.0)
        assert await store.claim_deliveries("w1", tenure, hold_s=60.0) == []     # 1 waits; 2 waits behind it
        assert await store.finish_delivery(1, claimant, "pending", 1, "status 500", retry_in_s=0.0) is False

    with_stores(dsn, body)


def test_a_claim_left_by_a_dead_worker_expires_and_the_event_is_sent_again(postgres):
    dsn = postgres.create_database()

    async def body(crawl, store):
        epoch = await crawl.acquire(0, "w1", 60.0)
        tenure = {1: (0, epoch)}
        await store.write_checks({}, [(event(1, 100.0), "http://hook.test/1")], tenure)
        assert [r.seq for r in await store.claim_deliveries("dead", tenure, hold_s=0.01)] == [1]
        for _ in range(500):           # bounded: the claim lasts 10 ms on the database clock
            again = await store.claim_deliveries("w1", tenure, hold_s=60.0)
            if again:
                break
            await asyncio.sleep(0.01)
        assert [r.seq for r in again] == [1]
        assert not await store.finish_delivery(1, "dead", "delivered", 1)     # too late: not its claim
        assert await store.finish_delivery(1, "w1", "delivered", 1)

    with_stores(dsn, body, watches=1)


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    async def sleep_until(self, at):
        self.t = max(self.t, at)
        await asyncio.sleep(0)


def test_the_cluster_sender_delivers_each_watchs_events_in_order_retries_failures_and_ends_dead_letters(postgres):
    dsn = postgres.create_database()
    answers = {"http://hook.test/1": [500, 200, 200], "http://hook.test/2": [503, 503]}
    posted: list[tuple[str, int]] = []

    async def post(url, body, timeout_s, headers):
        import json

        posted.append((url, json.loads(body)["seq"]))
        assert headers["X-Courtly-Signature"].startswith("sha256=")
        return answers[url].pop(0), ""

    async def body(crawl, store):
        epoch = await crawl.acquire(0, "w1", 60.0)
        tenure = {1: (0, epoch), 2: (0, epoch)}
        await store.write_checks({}, [(event(1, 100.0), "http://hook.test/1"), (event(2, 101.0), "http://hook.test/2"),
                                      (event(1, 110.0), "http://hook.test/1")], tenure)
        sender = ClusterWebhookSender(FakeClock(), store, "w1", lambda: tenure, post=post, secret="s",
                                      retries=Retries(attempts_max=2, backoff_s=0.001))
        for _ in range(2000):          # bounded: the retry waits 1 ms on the database clock
            await sender.round()
            if sender.delivered + sender.dead == 3:
                break
            await asyncio.sleep(0.001)
        rows = {r.seq: r for r in await store.changes()}
        assert [rows[s].delivery for s in (1, 2, 3)] == ["delivered", "dead", "delivered"]
        assert [rows[s].attempts for s in (1, 2, 3)] == [2, 2, 1] and rows[2].last_error == "status 503"
        assert [s for u, s in posted if u.endswith("/1")] == [1, 1, 3]      # in order, the failed one first
        assert sender.counts() == {"delivered": 2, "dead": 1}
        assert [r.seq for r in await store.dead_letters()] == [2]

    with_stores(dsn, body)
