"""shell/webhook_cluster with a fake store: a worker claims only with the
watches it holds, posts claimed events oldest first with one machine's body,
writes each outcome through its claim, and outlives the store going away."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from courtly.shell.store.watch_sqlite import ChangeRow
from courtly.shell.webhook import Retries, event_body
from courtly.shell.webhook_cluster import CLAIM_MARGIN_S, ClusterWebhookSender


def row(seq: int, watch: int, attempts: int = 0) -> ChangeRow:
    return ChangeRow(seq, watch, f"http://w{watch}.test/", 1.0, {"url": f"http://w{watch}.test/", "watch": watch},
                     [], [], f"http://hook.test/{watch}", "pending", attempts, "")


class FakeDeliveries:
    def __init__(self, rows, *, claims_lost=()):
        self.rows = list(rows)
        self.claims: list = []
        self.finished: list = []
        self.claims_lost = set(claims_lost)
        self.away = False

    async def claim_deliveries(self, worker_id, tenure, *, hold_s, limit):
        if self.away:
            raise ConnectionRefusedError("PostgreSQL is away")
        self.claims.append((worker_id, dict(tenure), hold_s, limit))
        got, self.rows = self.rows[:limit], self.rows[limit:]
        return got

    async def finish_delivery(self, seq, worker_id, delivery, attempts, error="", retry_in_s=0.0):
        if seq in self.claims_lost:
            return False
        self.finished.append((seq, str(delivery), attempts, error, retry_in_s))
        return True


def sender(store, answers, posted, tenure=None):
    async def post(url, body, timeout_s, headers):
        posted.append((url, body))
        return answers.pop(0), ""

    return ClusterWebhookSender(None, store, "w1", lambda: {1: (0, 3)} if tenure is None else tenure, post=post,
                                retries=Retries(attempts_max=3, backoff_s=2.0), timeout_s=5.0)


def test_claimed_events_are_posted_oldest_first_with_one_machines_body_and_their_outcomes_written():
    store, posted = FakeDeliveries([row(1, 1), row(2, 2, attempts=1), row(3, 1, attempts=2)]), []
    s = sender(store, [204, 500, 503], posted)
    assert asyncio.run(s.round()) == 3
    assert store.claims == [("w1", {1: (0, 3)}, 5.0 + CLAIM_MARGIN_S, 100)]
    assert posted == [(f"http://hook.test/{r.watch_id}", event_body(r.seq, r.event)) for r in (row(1, 1), row(2, 2),
                                                                                              row(3, 1))]
    assert json.loads(posted[0][1]) == {"seq": 1, "url": "http://w1.test/", "watch": 1}
    assert store.finished == [(1, "delivered", 1, "", 0.0), (2, "pending", 2, "status 500", 4.0),
                              (3, "dead", 3, "status 503", 0.0)]
    assert s.counts() == {"delivered": 1, "dead": 1}


def test_a_worker_holding_no_watch_claims_nothing():
    store, posted = FakeDeliveries([row(1, 1)]), []
    assert asyncio.run(sender(store, [204], posted, tenure={}).round()) == 0
    assert store.claims == [] and posted == []


def test_an_outcome_whose_claim_moved_on_is_not_counted():
    store, posted = FakeDeliveries([row(1, 1)], claims_lost={1}), []
    s = sender(store, [204], posted)
    asyncio.run(s.round())
    assert s.lost_claims == 1 and s.counts() == {"delivered": 0, "dead": 0} and store.finished == []


def test_the_store_going_away_is_counted_and_the_next_round_claims_again():
    store, posted = FakeDeliveries([row(1, 1)]), []
    s = sender(store, [204], posted)
    store.away = True
    assert asyncio.run(s.round()) == 0 and s.store_errors == 1
    store.away = False
    assert asyncio.run(s.round()) == 1 and s.delivered == 1


def test_a_bug_in_the_store_is_not_taken_for_it_being_away():
    store = FakeDeliveries([row(1, 1)])

    async def broken(*a, **k):
        raise KeyError("bug")
    store.claim_deliveries = broken
    with pytest.raises(KeyError):
        asyncio.run(sender(store, [204], []).round())


def test_a_retrys_wait_is_the_doubled_backoff_times_a_seeded_jitter_and_a_delivery_waits_nothing():
    def waits(seed):
        r = Retries(attempts_max=9, backoff_s=1.0, backoff_s_max=10.0, jitter=0.1, rng=random.Random(seed))
        return [r.judge(500, "", a).retry_in_s for a in range(1, 7)]

    first = waits("w1")
    for base, wait in zip((1, 2, 4, 8, 10, 10), first):
        assert base <= wait < base * 1.1
    assert first == waits("w1") and first != waits("w2")     # reproducible, and two workers not in step
    assert Retries(jitter=0.1).judge(204, "", 1).retry_in_s == 0.0
