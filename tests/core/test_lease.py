"""Partition ownership: rendezvous placement, the lease record's rules, the
table of a worker's view, and a simulated hand-over with network delays.

Pure: time is an argument, randomness is hypothesis' or a seeded Random.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.lease import (
    TRANSITIONS,
    Effect,
    Input,
    LeaseRecord,
    LeaseTerms,
    PartitionView,
    ViewState,
    assignment,
    extend,
    give_up,
    grant,
    owner_of,
    plan_rebalance,
    rendezvous_weight,
    transition,
    write_allowed,
)

PURE = settings(max_examples=200, deadline=None, derandomize=True, database=None)
PLACEMENT = settings(PURE, max_examples=60)   # each example hashes P x N pairs
P = 1024
worker_ids = st.lists(st.text(alphabet="abcdefghij0123456789-", min_size=1, max_size=12),
                      min_size=1, max_size=24, unique=True)


# ---- placement -------------------------------------------------------------------------

def test_rendezvous_weight_is_stable_blake2b():
    # fixed values: a change here moves every partition of every running crawl
    assert rendezvous_weight(0, "w1") == rendezvous_weight(0, "w1")
    assert rendezvous_weight(0, "w1") != rendezvous_weight(1, "w1")
    assert rendezvous_weight(7, "worker-a") == int.from_bytes(
        __import__("hashlib").blake2b(b"\x00\x00\x00\x07worker-a", digest_size=8).digest(), "big")


@PURE
@given(worker_ids, st.randoms(use_true_random=False))
def test_owner_does_not_depend_on_the_order_workers_are_listed(workers, rnd):
    shuffled = list(workers)
    rnd.shuffle(shuffled)
    for p in (0, 1, 511, 1023):
        assert owner_of(p, workers) == owner_of(p, shuffled)


@PLACEMENT
@given(worker_ids)
def test_assignment_covers_every_partition_exactly_once(workers):
    a = assignment(P, workers)
    assert set(a) == set(workers)
    owned = sorted(p for ps in a.values() for p in ps)
    assert owned == list(range(P))


def _moved(before: dict, after: dict) -> set[int]:
    inv_b = {p: w for w, ps in before.items() for p in ps}
    inv_a = {p: w for w, ps in after.items() for p in ps}
    return {p for p in range(P) if inv_b[p] != inv_a[p]}


def _tolerance(n_moved_expected: float) -> float:
    # binomial(P, 1/(N+1)): allow six standard deviations
    q = n_moved_expected / P
    return 6 * math.sqrt(P * q * (1 - q)) + 1


@PLACEMENT
@given(worker_ids, st.text(alphabet="XYZ", min_size=1, max_size=6))
def test_a_join_moves_about_one_nth_and_only_to_the_newcomer(workers, newcomer):
    if newcomer in workers:
        return
    before = assignment(P, workers)
    after = assignment(P, workers + [newcomer])
    moved = _moved(before, after)
    assert moved == set(after[newcomer])            # everything that moved went to the newcomer
    expected = P / (len(workers) + 1)
    assert abs(len(moved) - expected) <= _tolerance(expected)


@PLACEMENT
@given(worker_ids.filter(lambda ws: len(ws) >= 2), st.data())
def test_a_leave_moves_only_the_leavers_partitions(workers, data):
    leaver = data.draw(st.sampled_from(workers))
    before = assignment(P, workers)
    after = assignment(P, [w for w in workers if w != leaver])
    assert _moved(before, after) == set(before[leaver])
    expected = P / len(workers)
    assert abs(len(before[leaver]) - expected) <= _tolerance(expected)


def test_plan_rebalance_releases_what_the_newcomer_wins_and_acquires_the_rest():
    old = plan_rebalance("a", 64, ["a"], held=[])
    assert old.acquire == tuple(range(64)) and old.release == ()
    after_join = plan_rebalance("a", 64, ["a", "b"], held=old.acquire)
    b_wants = plan_rebalance("b", 64, ["a", "b"], held=[]).acquire
    assert set(after_join.release) == set(b_wants)
    assert after_join.acquire == ()
    # a worker that cannot see its own heartbeat yet still counts itself
    assert plan_rebalance("c", 8, [], held=[]).acquire == tuple(range(8))


# ---- the authoritative record --------------------------------------------------------------

def test_grant_only_when_free_or_expired_and_the_epoch_moves_forward():
    r0 = LeaseRecord(3)
    r1 = grant(r0, "a", now=100.0, ttl_s=30.0)
    assert r1 == LeaseRecord(3, "a", 1, 130.0)
    assert grant(r1, "b", now=129.9, ttl_s=30.0) is None           # still held
    assert grant(r1, "a", now=110.0, ttl_s=30.0) is None           # the owner renews, never re-grants
    r2 = grant(r1, "b", now=130.0, ttl_s=30.0)                     # expired: a new owner, new epoch
    assert r2 is not None and (r2.owner, r2.epoch) == ("b", 2)
    assert not write_allowed(r2, 1) and write_allowed(r2, 2)


def test_extend_never_revives_an_expired_lease_nor_serves_another_epoch():
    r = LeaseRecord(0, "a", 5, 130.0)
    assert extend(r, "a", 5, now=120.0, ttl_s=30.0) == LeaseRecord(0, "a", 5, 150.0)
    assert extend(r, "a", 5, now=130.0, ttl_s=30.0) is None       # expired: lost
    assert extend(r, "a", 4, now=120.0, ttl_s=30.0) is None       # stale epoch
    assert extend(r, "b", 5, now=120.0, ttl_s=30.0) is None       # not the owner
    assert extend(r, "a", 5, now=101.0, ttl_s=10.0) == r          # never shortens


def test_release_frees_now_and_keeps_the_epoch():
    r = LeaseRecord(0, "a", 5, 130.0)
    assert give_up(r, "b", 5) is None and give_up(r, "a", 4) is None
    freed = give_up(r, "a", 5)
    assert freed == LeaseRecord(0, None, 5, 0.0)
    assert grant(freed, "b", now=101.0, ttl_s=30.0).epoch == 6


def test_terms_are_checked():
    with pytest.raises(ValueError):
        LeaseTerms(ttl_s=30, renew_before_s=5, stop_margin_s=10)
    with pytest.raises(ValueError):
        LeaseTerms(ttl_s=30, renew_before_s=30, stop_margin_s=5)
    with pytest.raises(ValueError):
        LeaseTerms(ttl_s=30, renew_before_s=10, stop_margin_s=5, retry_s=6)


# ---- the table --------------------------------------------------------------------------

ALL_PAIRS = list(itertools.product(ViewState, Input))
FETCHING = {ViewState.OWNED, ViewState.RENEWING}


def test_the_table_is_total():
    assert set(TRANSITIONS) == set(ALL_PAIRS)


@pytest.mark.parametrize("state,event", ALL_PAIRS, ids=lambda v: v.value)
def test_every_state_input_pair_keeps_the_lease_rules(state, event):
    effects, nxt = transition(state, event)
    # lost and released are absorbing: a lost lease is never extended
    if state in (ViewState.LOST, ViewState.RELEASED):
        assert nxt is state
        assert Effect.EXTEND not in effects and Effect.SEND_RENEW not in effects
    # only an answer to a renewal in flight extends
    assert (Effect.EXTEND in effects) == (state is ViewState.RENEWING and event is Input.RENEW_OK)
    # renewals are sent only from OWNED (at most one in flight)
    if Effect.SEND_RENEW in effects:
        assert state is ViewState.OWNED and nxt is ViewState.RENEWING
    # leaving the fetching states always stops the fetching
    if state in FETCHING and nxt not in FETCHING:
        assert Effect.STOP_FETCHING in effects
    if Effect.STOP_FETCHING in effects:
        assert state in FETCHING and nxt not in FETCHING
    # the stop deadline, a refusal or a stale write always end the lease
    if event in (Input.STOP_DUE, Input.RENEW_REFUSED, Input.WRITE_REFUSED):
        assert nxt not in FETCHING
    if event is Input.RELEASE and state in FETCHING:
        assert nxt is ViewState.RELEASED and Effect.SEND_RELEASE in effects


# ---- the time layer -----------------------------------------------------------------------

TERMS = LeaseTerms(ttl_s=30.0, renew_before_s=20.0, stop_margin_s=5.0, retry_s=2.0)


def test_view_renews_early_and_extends_from_when_the_renewal_was_sent():
    v = PartitionView.granted(1, 7, asked_at=100.0, terms=TERMS)
    assert (v.expires_at, v.renew_at, v.stop_at) == (130.0, 110.0, 125.0)
    assert v.tick(109.0) == (v, ())
    v, eff = v.tick(110.0)
    assert eff == (Effect.SEND_RENEW,) and v.state is ViewState.RENEWING
    v, eff = v.on(Input.RENEW_OK, 111.5)
    assert eff == (Effect.EXTEND,) and v.state is ViewState.OWNED
    assert v.expires_at == 140.0 and v.renew_at == 120.0           # 110 + 30, not 111.5 + 30


def test_view_stops_stop_margin_before_the_end_when_renewals_fail():
    v = PartitionView.granted(1, 7, asked_at=100.0, terms=TERMS)
    now = 110.0
    while True:
        v, eff = v.tick(now)
        if eff == (Effect.SEND_RENEW,):
            v, _ = v.on(Input.RENEW_FAILED, now + 0.5)
        if v.state is ViewState.LOST:
            assert eff == (Effect.STOP_FETCHING,)
            break
        assert v.may_fetch(now)
        now += 0.25
    assert now == 125.0 and not v.may_fetch(124.99 + 10)


def test_a_renewal_answered_after_the_stop_instant_is_released_not_used():
    v = PartitionView.granted(1, 7, asked_at=100.0, terms=TERMS)
    v, _ = v.tick(110.0)                                       # renewal sent, then a long pause
    v, eff = v.on(Input.RENEW_OK, 126.0)                       # answer after stop_at = 125
    assert eff == (Effect.STOP_FETCHING, Effect.SEND_RELEASE)
    assert v.state is ViewState.LOST and not v.may_fetch(126.0) and v.expires_at == 130.0


def test_may_fetch_closes_at_the_stop_instant_even_without_a_tick():
    v = PartitionView.granted(1, 7, asked_at=100.0, terms=TERMS)
    assert v.may_fetch(124.999) and not v.may_fetch(125.0)
    assert v.next_wakeup() == 110.0


# ---- a simulated hand-over: one partition, three workers, random delays ------------------------

def _simulate(seed: int, terms: LeaseTerms) -> tuple[int, int]:
    """Workers acquire and renew through a store with random network delays and
    renewals that sometimes get lost. At every instant a worker starts (or goes
    on) fetching, no other worker may fetch. Returns (grants, checks)."""
    rnd = random.Random(seed)
    rec = LeaseRecord(0)
    views: dict[str, PartitionView | None] = {w: None for w in "abc"}
    pending: dict[str, bool] = {w: False for w in "abc"}
    events: list = []  # (at, seq, kind, worker, payload)
    seq = itertools.count()
    grants = checks = 0

    def later(at, kind, w, payload=None):
        heapq.heappush(events, (at, next(seq), kind, w, payload))

    for w in views:
        later(rnd.uniform(0, 5), "wake", w)
    while events:
        now, _, kind, w, payload = heapq.heappop(events)
        if now > 600:
            break
        v = views[w]
        if kind == "wake":
            if v is not None:
                v, eff = v.tick(now)
                views[w] = v
                if Effect.SEND_RENEW in eff:
                    # the store sees it after a delay (or never)
                    if rnd.random() < 0.8:
                        later(now + rnd.uniform(0, 8), "store_renew", w, (v.epoch, now))
                    later(now + 9, "timeout", w, v.epoch)
                if v.state not in FETCHING:
                    views[w] = None
            if views[w] is None and not pending[w]:
                pending[w] = True
                later(now + rnd.uniform(0, 1), "store_acquire", w, now)
            later(now + rnd.uniform(0.05, 1), "wake", w)
        elif kind == "store_acquire":
            new = grant(rec, w, now, terms.ttl_s)
            if new is not None:
                rec = new
                grants += 1
            later(now + rnd.uniform(0, 1), "acquired", w, (new, payload))
        elif kind == "acquired":
            new, asked_at = payload
            pending[w] = False
            if new is not None:
                views[w] = PartitionView.granted(0, new.epoch, asked_at, terms)
                # a worker starts fetching now: nobody else may be fetching
                checks += 1
                others = [o for o, ov in views.items() if o != w and ov is not None and ov.may_fetch(now)]
                assert not others, f"seed {seed}: {w} starts while {others} fetch at {now}"
        elif kind == "store_renew":
            epoch, _asked = payload
            new = extend(rec, w, epoch, now, terms.ttl_s)
            if new is not None:
                rec = new
            later(now + rnd.uniform(0, 3), "renewed", w, (epoch, new is not None))
        elif kind == "renewed":
            epoch, ok = payload
            if v is not None and v.epoch == epoch:
                v, _ = v.on(Input.RENEW_OK if ok else Input.RENEW_REFUSED, now)
                views[w] = v if v.state in FETCHING else None
                if views[w] is not None:
                    checks += 1
                    others = [o for o, ov in views.items() if o != w and ov is not None and ov.may_fetch(now)]
                    assert not others, f"seed {seed}: {w} extends while {others} fetch at {now}"
        elif kind == "timeout":
            if v is not None and v.epoch == payload and v.state is ViewState.RENEWING:
                views[w], _ = v.on(Input.RENEW_FAILED, now)
    return grants, checks


@pytest.mark.parametrize("seed", range(40))
def test_at_most_one_worker_fetches_a_partition_at_any_instant(seed):
    grants, checks = _simulate(seed, TERMS)
    assert grants >= 1 and checks >= grants
