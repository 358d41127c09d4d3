"""Tests of the recrawl scheduler: the change-rate estimator, conditional GET,
budget and floor arithmetic, tier floors, minimum intervals, hints, reports.

All pure: instants are arguments, randomness is a seeded `random.Random`;
every statistical check states its tolerance from the sample size and its seed.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.changerate import PriorModel, budget_multiplier
from courtly.core.recrawl import (
    DAY_S, ChangeHistory, RecrawlPolicy, RecrawlScheduler, Tier, conditional_headers, estimate_rate,
    freshness_index, observe, optimal_x, path_template, policy_for_intent, revisit_interval,
    solve_score, staleness_priority,
)
from courtly.core.recrawl import _DueQueue
from courtly.core.types import Reason

PROPERTY = settings(max_examples=100, deadline=None, derandomize=True, database=None)
HOUR = 3600.0


def poisson_sample(rng: random.Random, rate: float, intervals: list[float]) -> list[bool]:
    """Changed flags for revisits after `intervals` of a page changing at `rate`."""
    return [rng.random() < -math.expm1(-rate * i) for i in intervals]


# ---- estimator --------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rate_per_h,interval_h", [(0.1, 4.0), (1.0, 1.0), (0.02, 24.0), (2.0, 0.25)])
def test_estimator_recovers_rate_at_fixed_intervals(seed, rate_per_h, interval_h):
    rng = random.Random(seed)
    n, rate, iv = 2000, rate_per_h / HOUR, interval_h * HOUR
    changed = poisson_sample(rng, rate, [iv] * n)
    est = estimate_rate([iv] * n, changed)
    p = -math.expm1(-rate * iv)
    se = math.sqrt(p / ((1 - p) * n)) / iv  # delta method on p_hat = X / n
    assert abs(est - rate) <= 4 * se + 0.01 * rate, f"seed={seed}: {est * HOUR:.4f}/h vs {rate_per_h}/h"


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rate_per_h", [0.05, 0.5, 3.0])
def test_estimator_recovers_rate_at_irregular_intervals(seed, rate_per_h):
    rng = random.Random(seed)
    rate = rate_per_h / HOUR
    ivs = [math.exp(rng.uniform(math.log(0.1), math.log(5.0))) / rate for _ in range(2000)]
    changed = poisson_sample(rng, rate, ivs)
    est = estimate_rate(ivs, changed)
    fisher = sum(i * i * math.exp(-rate * i) / -math.expm1(-rate * i) for i in ivs)
    assert abs(est - rate) <= 4 / math.sqrt(fisher) + 0.01 * rate, f"seed={seed}: {est * HOUR}/h"


def test_irregular_intervals_beat_the_mean_interval_formula():
    """With intervals spread widely, the MLE is closer than -log(1 - X/n) / mean(I)."""
    rng = random.Random(7)
    rate = 1 / HOUR
    ivs = [rng.choice([0.1, 10.0]) * HOUR for _ in range(4000)]
    changed = poisson_sample(rng, rate, ivs)
    n, x = len(ivs), sum(changed)
    naive = -math.log1p(-x / (n + 0.5)) / (sum(ivs) / n)
    est = estimate_rate(ivs, changed)
    assert abs(est - rate) < abs(naive - rate) / 3


def test_no_change_seen_gives_zero_without_prior_and_the_prior_with_one():
    ivs, changed = [HOUR] * 10, [False] * 10
    assert estimate_rate(ivs, changed) == 0.0
    with_prior = estimate_rate(ivs, changed, prior_rate=1 / HOUR, prior_weight=2.0)
    assert 0.0 < with_prior < 1 / HOUR


def test_always_changed_is_finite_and_cho_corrected():
    n, iv = 10, HOUR
    est = estimate_rate([iv] * n, [True] * n)
    assert est == pytest.approx(-math.log(0.5 / (n + 0.5)) / iv)


def test_always_changed_follows_a_fast_prior_instead_of_saturating():
    """X = n says only "at least ~log(2n)/I": a template known to be fast decides."""
    n, iv = 8, 24 * HOUR
    fast_prior = 1 / HOUR
    est = estimate_rate([iv] * n, [True] * n, prior_rate=fast_prior, prior_weight=2.0)
    assert est > 0.5 * fast_prior
    assert est > 3 * estimate_rate([iv] * n, [True] * n)


def test_empty_history_returns_the_prior():
    assert estimate_rate([], [], prior_rate=0.25) == 0.25
    assert estimate_rate([], []) == 0.0


def test_prior_fades_as_evidence_accumulates():
    rng = random.Random(3)
    rate, iv = 0.2 / HOUR, 2 * HOUR
    ivs = [iv] * 3000
    changed = poisson_sample(rng, rate, ivs)
    wrong_prior = 50 * rate
    assert estimate_rate(ivs, changed, prior_rate=wrong_prior, prior_weight=2.0) == pytest.approx(rate, rel=0.15)
    few = estimate_rate(ivs[:2], changed[:2], prior_rate=wrong_prior, prior_weight=2.0)
    assert few > 2 * rate  # two revisits weigh as much as the prior


@PROPERTY
@given(st.lists(st.tuples(st.floats(60.0, 1e7), st.booleans()), min_size=1, max_size=16),
       st.floats(1e-8, 1e-2), st.floats(0.5, 5.0))
def test_estimate_is_finite_and_positive_with_a_prior(samples, prior, weight):
    ivs = [s[0] for s in samples]
    changed = [s[1] for s in samples]
    est = estimate_rate(ivs, changed, prior_rate=prior, prior_weight=weight)
    assert math.isfinite(est) and est > 0.0


@PROPERTY
@given(st.integers(1, 16), st.integers(0, 16), st.floats(60.0, 1e6))
def test_more_changes_never_lower_the_estimate(n, x, iv):
    x = min(x, n)
    lower = estimate_rate([iv] * n, [True] * x + [False] * (n - x))
    if x < n:
        higher = estimate_rate([iv] * n, [True] * (x + 1) + [False] * (n - x - 1))
        assert higher >= lower


def test_samples_leaving_the_window_still_count():
    """16 unchanged revisits in a row do not erase 200 earlier ones that saw changes."""
    rng = random.Random(5)
    rate, iv = 0.3 / HOUR, 0.33 * HOUR
    h = ChangeHistory(history_max=16)
    t, version = 0.0, 0
    observe(h, t, 200, "0")
    for _ in range(200):
        t += iv
        version += rng.random() < -math.expm1(-rate * iv)
        observe(h, t, 200, str(version))
    for _ in range(16):
        t += iv
        observe(h, t, 304)
    window_only = estimate_rate(h.intervals, h.changed)
    assert window_only == 0.0
    assert estimate_rate(h.intervals, h.changed, older=h.older) == pytest.approx(rate, rel=0.35)


def test_older_samples_fade_with_their_half_life():
    h = ChangeHistory(history_max=2, memory_s=DAY_S)
    observe(h, 0.0, 200, "a")
    for k, body in enumerate(["b", "c", "d", "e"], start=1):
        observe(h, k * 60.0, 200, body)
    assert h.older[0] == pytest.approx(2.0, rel=1e-3)
    observe(h, 10 * DAY_S, 304)  # ten half-lives later
    assert h.older[0] < 1.01 and h.older[1] < 1.01


def test_solve_score_zeroes_the_likelihood_equation():
    changed = [(100.0, 1.0), (3000.0, 2.0), (50.0, 1.0)]
    r = solve_score(changed, 9000.0, 1.5, 20.0, 1e-3)
    score = sum(w * i / math.expm1(r * i) for i, w in changed) - 9000.0 + 1.5 / r - 20.0
    assert abs(score) < 1e-3 * 9000.0


# ---- optimal intervals and indexes ------------------------------------------------

@pytest.mark.parametrize("c", [1e-12, 1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 1 - 1e-9])
def test_optimal_x_solves_its_equation(c):
    x = optimal_x(c)
    h = -math.expm1(-x) - x * math.exp(-x)
    assert h == pytest.approx(c, rel=1e-3, abs=1e-15)


def test_optimal_x_edges():
    assert optimal_x(0.0) == 0.0
    assert optimal_x(1.0) == math.inf
    assert optimal_x(2.0) == math.inf


@pytest.mark.parametrize("rate,importance,mult", [(1 / HOUR, 1.0, 100.0), (1 / DAY_S, 0.01, 50.0),
                                                  (3 / HOUR, 0.5, 10.0)])
def test_freshness_index_reaches_the_multiplier_at_the_revisit_interval(rate, importance, mult):
    iv = revisit_interval("freshness", mult, rate, importance)
    assert freshness_index(importance, rate, iv) == pytest.approx(mult, rel=1e-3)


def test_pages_changing_too_fast_for_their_importance_are_not_chased():
    assert revisit_interval("freshness", 10.0, 1 / 60.0, 0.01) == math.inf


def test_staleness_interval_makes_importance_times_p_changed_equal_the_threshold():
    iv = revisit_interval("staleness", 0.3, 1 / HOUR, 0.6)
    assert staleness_priority(0.6, 1 / HOUR, iv) == pytest.approx(0.3)
    assert revisit_interval("staleness", 0.7, 1 / HOUR, 0.6) == math.inf


@pytest.mark.parametrize("index", ["freshness", "staleness"])
def test_budget_multiplier_spends_the_rate(index):
    rng = random.Random(4)
    rows = [(10 ** rng.uniform(-7, -3.5), 10 ** rng.uniform(-3, 0), 900.0, 90 * DAY_S) for _ in range(300)]
    target = 0.5 * sum(1 / lo for *_, lo, _ in rows) / 40
    mu = budget_multiplier(rows, target, index, start=1.0)

    def total(m):
        return sum(1 / min(max(revisit_interval(index, m, r, w), lo), hi) for r, w, lo, hi in rows)

    assert total(mu) == pytest.approx(target, rel=2e-3)
    assert total(mu * 1.1) < total(mu) < total(mu / 1.1)   # the rate falls as the price rises
    assert budget_multiplier(rows, 0.0, index) == math.exp(200.0)


def test_prior_group_bins_are_plain_sums_in_first_seen_order():
    """The pooled bins add up exactly what they were given, past the preallocated bins too."""
    prior = PriorModel(1 / DAY_S)
    groups = prior.groups("a.example", "a.example/news")
    rng = random.Random(8)
    sums: dict[int, list[float]] = {}
    for _ in range(500):
        interval = 10 ** rng.uniform(0, 9)           # 1 s .. 30 years: bins past the first 48 too
        changed = rng.random() < 0.4
        prior.observe(groups, interval, changed)
        k = int(2.0 * math.log2(interval)) if interval > 1.0 else 0
        row = sums.setdefault(k, [0.0, 0.0, 0.0])
        row[0] += 1.0
        row[1] += changed
        row[2] += interval
    for g in groups[1:]:
        assert g.order == list(sums)
        assert {k: list(g.sums[3 * k:3 * k + 3]) for k in g.order} == sums
        assert g.n == 500.0


def test_path_template_masks_digit_segments():
    assert path_template("https://a.example/news/2024/05/story-17?x=1") == "a.example/news/{n}/{n}"
    assert path_template("https://a.example/") == "a.example/"
    assert path_template("https://A.example/about/team") == "a.example/about/team"


# ---- conditional GET ------------------------------------------------------------------

def test_conditional_headers_carry_both_validators():
    h = ChangeHistory(etag='"abc"', last_modified="Wed, 01 May 2024 12:00:00 GMT")
    assert conditional_headers(h) == {"If-None-Match": '"abc"',
                                      "If-Modified-Since": "Wed, 01 May 2024 12:00:00 GMT"}
    assert conditional_headers(ChangeHistory()) == {}


def test_first_fetch_is_new_content_and_adds_no_sample():
    h = ChangeHistory()
    assert observe(h, 100.0, 200, "h1", '"e1"', None) is True
    assert h.fetches == 1 and not h.intervals and h.changes == 0


def test_304_is_unchanged_and_keeps_validators():
    h = ChangeHistory()
    observe(h, 100.0, 200, "h1", '"e1"', "Wed, 01 May 2024 12:00:00 GMT")
    assert observe(h, 400.0, 304) is False
    assert list(h.intervals) == [300.0] and list(h.changed) == [False]
    assert h.etag == '"e1"' and h.content_hash == "h1"
    assert h.last_modified == "Wed, 01 May 2024 12:00:00 GMT"


def test_same_hash_is_unchanged_new_hash_is_changed():
    h = ChangeHistory()
    observe(h, 0.0, 200, "h1")
    assert observe(h, 10.0, 200, "h1") is False
    assert observe(h, 20.0, 200, "h2") is True
    assert list(h.changed) == [False, True] and h.changes == 1 and h.last_changed_at == 20.0


def test_errors_carry_no_change_information():
    h = ChangeHistory()
    observe(h, 0.0, 200, "h1")
    for status in (500, 503, 429, 0, 403):
        assert observe(h, 10.0, status) is False
    assert h.failures == 5 and not h.intervals and h.last_fetched_at == 0.0


def test_gone_after_content_is_a_change():
    h = ChangeHistory()
    observe(h, 0.0, 200, "h1")
    assert observe(h, 10.0, 404) is True
    assert observe(h, 20.0, 410) is True
    assert observe(h, 30.0, 410) is False


def test_history_is_bounded():
    h = ChangeHistory(history_max=8)
    for k in range(100):
        observe(h, k * 10.0, 200, str(k % 3))
    assert len(h.intervals) == 8 and len(h.changed) == 8 and h.fetches == 100


def test_history_window_keeps_the_newest_samples_of_any_sequence():
    h = ChangeHistory(history_max=3, intervals=[1.0, 2.0, 3.0, 4.0], changed=(True, False, True, True))
    assert list(h.intervals) == [2.0, 3.0, 4.0] and list(h.changed) == [False, True, True]
    h.add_sample(10.0, 5.0, False)
    assert list(h.intervals) == [3.0, 4.0, 5.0] and list(h.changed) == [True, True, False]
    assert h.older[0] == 1.0 and h.older[1] == 0.0 and h.older[2] == 2.0


# ---- the due queue ---------------------------------------------------------------------

class _Item:
    token, state = 0, 0   # always live (state 0 = queued)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.sampled_from(["push", "pop", "top"]),
                          st.floats(0.0, 5000.0), st.integers(1, 5)), max_size=200))
def test_due_queue_pops_in_heap_order(ops):
    """The calendar queue hands items out exactly as a heap of (due, seq) would."""
    import heapq
    queue, heap, seq, live = _DueQueue(300.0), [], 0, _Item()
    for op, x, n in ops:
        if op == "push":
            due = x if n != 5 else math.inf
            seq += 1
            queue.push((due, seq, 0, live))
            heapq.heappush(heap, (due, seq, 0, live))
        elif op == "pop":
            got = queue.pop_due(x, n)
            want = []
            while heap and len(want) < n and heap[0][0] <= x:
                want.append(heapq.heappop(heap))
            assert got == want
        else:
            assert queue.top() == (heap[0][0] if heap else None)
        assert queue.size == len(heap)


# ---- the scheduler: helpers ---------------------------------------------------------------

def fetched_history(at: float = 0.0) -> ChangeHistory:
    return ChangeHistory(last_fetched_at=at, content_hash="0", etag='"0"', fetches=1)


def make(policy: RecrawlPolicy, n: int, *, tier: int = 0, importance: float = 1.0, seed: int = 1,
         hosts: int = 10) -> tuple[RecrawlScheduler, list[str]]:
    s = RecrawlScheduler(policy, random.Random(seed))
    urls = [f"https://h{i % hosts}.example/p/{i}" for i in range(n)]
    for u in urls:
        s.add(u, 0.0, host=u.split("/")[2], tier=tier, importance=importance, history=fetched_history())
    return s, urls


def run(s: RecrawlScheduler, days: float, rates: dict[str, float], seed: int = 1, discovery_pending: int = 0):
    """Plan every period and answer each grant at once from Poisson pages. Returns plans and fetch log."""
    rng = random.Random(seed)
    p = s.policy
    version = {u: 0 for u in rates}
    last = {u: 0.0 for u in rates}
    plans, log = [], []
    t = 0.0
    while t < days * DAY_S:
        plan = s.plan(t, discovery_pending=discovery_pending)
        plans.append(plan)
        for u in plan.urls:
            at = t + 1.0
            if rng.random() < -math.expm1(-rates[u] * (at - last[u])):
                version[u] += 1
            last[u] = at
            s.record_fetch(u, at, status=200, content_hash=str(version[u]))
            log.append((u, at))
        t += p.period_s
    return plans, log


# ---- budget and floors ----------------------------------------------------------------------

def test_search_reserves_the_discovery_floor_when_discovery_has_work():
    pol = policy_for_intent("search", int(DAY_S))  # 1 fetch/s: 300 per 5-minute period
    s, _ = make(pol, 2000)
    plan = s.plan(0.0, discovery_pending=10_000)
    assert plan.budget == 300
    assert plan.recrawl_budget == 240
    assert len(plan.urls) <= 240 and plan.discovery_budget >= 60


def test_unused_discovery_floor_goes_to_recrawl():
    s, _ = make(policy_for_intent("search", int(DAY_S)), 2000)
    assert s.plan(0.0, discovery_pending=10).recrawl_budget == 290
    assert s.plan(300.0, discovery_pending=0).recrawl_budget == 300


def test_archive_recrawls_nothing_and_monitor_reserves_nothing():
    s, _ = make(policy_for_intent("archive", int(DAY_S)), 100)
    plan = s.plan(0.0, discovery_pending=5)
    assert plan.urls == () and plan.discovery_budget == plan.budget == 300
    s, _ = make(policy_for_intent("monitor", int(DAY_S)), 100)
    assert s.plan(0.0, discovery_pending=10_000).recrawl_budget == 300


def test_fractional_budgets_add_up_over_a_day():
    pol = policy_for_intent("search", 1000)
    s, _ = make(pol, 50)
    total = sum(s.plan(k * pol.period_s).budget for k in range(int(DAY_S / pol.period_s)))
    assert 999 <= total <= 1000


def test_grants_never_exceed_the_recrawl_budget_and_spend_it_when_there_is_work():
    pol = policy_for_intent("search", 1000)  # 500 pages could take 2000/day at the 6 h minimum
    s, urls = make(pol, 500, tier=2, importance=0.5)
    rates = {u: random.Random(i).choice([1 / HOUR, 1 / DAY_S, 1 / (30 * DAY_S)]) for i, u in enumerate(urls)}
    plans, _ = run(s, 3, rates)
    assert all(len(p.urls) <= p.recrawl_budget for p in plans)
    later = [p for p in plans if p.at >= pol.tiers[2].interval_s_min]  # all were fetched at t = 0
    assert sum(len(p.urls) for p in later) >= 0.97 * sum(p.recrawl_budget for p in later)


def test_tier_max_age_forces_a_refetch_even_when_never_worth_it():
    """A static top-tier page is refetched within 24 h although the index would never pick it."""
    pol = policy_for_intent("search", 200)
    s, urls = make(pol, 1, tier=0, importance=1e-6)
    others = [f"https://busy.example/q/{i}" for i in range(400)]
    for u in others:
        s.add(u, 0.0, host="busy.example", tier=2, importance=1.0, history=fetched_history())
    rates = {urls[0]: 1e-9, **{u: 1 / HOUR for u in others}}
    plans, log = run(s, 5, rates)
    times = [0.0] + [at for u, at in log if u == urls[0]]
    assert len(times) >= 5
    assert max(b - a for a, b in zip(times, times[1:])) <= DAY_S
    assert sum(p.forced for p in plans) >= 4


def test_minimum_interval_is_never_broken():
    pol = policy_for_intent("search", 50_000)  # far more budget than pages can use
    s, urls = make(pol, 20, tier=0)
    special = urls[0]
    s.add(special, 0.0, host="h0.example", tier=0, min_interval_s=2 * HOUR)  # per-URL override
    rates = {u: 10 / HOUR for u in urls}
    _, log = run(s, 2, rates)
    last: dict[str, float] = {}
    for u, at in log:
        floor = 2 * HOUR if u == special else pol.tiers[0].interval_s_min
        if u in last:
            assert at - last[u] >= floor - 1e-6, u
        last[u] = at


def test_budget_shortfall_is_reported_per_day_and_tier():
    pol = policy_for_intent("search", 300)  # top tier: 2000 pages need 2000/day to stay under 24 h
    s, urls = make(pol, 2000, tier=0, importance=0.5)
    rates = {u: 1 / HOUR for u in urls}
    plans, _ = run(s, 3, rates)
    rows = s.report()
    assert sum(r.denied_budget for r in rows) > 0 and plans[-1].backlog_s > 0
    assert {r.tier for r in rows} == {0}
    day2 = [r for r in rows if r.day == 2][0]
    assert day2.allocated > 0 and day2.age_p50_s is not None and day2.age_p90_s >= day2.age_p50_s
    plan = s.plan(3 * DAY_S, list_denied=True)
    assert plan.denied and all(d.reason is Reason.BUDGET for d in plan.denied)


def test_fast_pages_get_shorter_intervals_until_they_are_not_worth_it():
    pol = policy_for_intent("search", 300)
    s = RecrawlScheduler(pol, random.Random(1))
    urls = [f"https://a.example/{['docs', 'news', 'live'][i % 3]}/{i}" for i in range(300)]
    for u in urls:
        s.add(u, 0.0, host="a.example", tier=2, importance=0.5, history=fetched_history())
    rates = {u: [1 / (30 * DAY_S), 1 / DAY_S, 1 / (4 * HOUR)][i % 3] for i, u in enumerate(urls)}
    run(s, 6, rates)
    mean_iv = {}
    for k in range(3):
        group = urls[k::3]
        mean_iv[k] = sum(s.interval(u) for u in group) / len(group)
    assert mean_iv[1] < mean_iv[0]          # daily pages before monthly ones
    assert s.rate(urls[2]) > s.rate(urls[1]) > s.rate(urls[0])


# ---- hints ------------------------------------------------------------------------------------

def answer(s: RecrawlScheduler, plan, at: float, status: int = 304) -> None:
    for u in plan.urls:
        s.record_fetch(u, at, status=status)


def test_a_newer_hint_makes_the_url_due_at_once():
    pol = policy_for_intent("search", 1000)
    s, urls = make(pol, 100, tier=2, importance=0.01)
    answer(s, s.plan(0.0), 1.0)
    u = urls[5]
    now = 7 * HOUR  # past the tier's 6 h minimum interval
    assert s.hint(u, lastmod_at=now - HOUR, now=now) is True
    plan = s.plan(now)
    assert u in plan.urls and plan.hinted >= 1


def test_a_hint_inside_the_minimum_interval_waits_for_it():
    pol = policy_for_intent("search", 1000)
    s, urls = make(pol, 100, tier=2, importance=0.01)
    answer(s, s.plan(0.0), 1.0)
    assert s.hint(urls[5], lastmod_at=HOUR, now=2 * HOUR) is True
    assert urls[5] not in s.plan(2 * HOUR).urls
    assert s.due_at(urls[5]) == pytest.approx(6 * HOUR)
    assert sum(r.denied_min_interval for r in s.report()) == 1


def test_an_old_hint_is_ignored():
    s, urls = make(policy_for_intent("search", 1000), 10)
    assert s.hint(urls[0], lastmod_at=-5.0, now=2 * HOUR) is False


def test_hints_of_a_host_that_cries_wolf_are_ignored():
    pol = policy_for_intent("search", 100)
    s, urls = make(pol, 30, tier=2, importance=0.01, hosts=1)
    accepted, hinted, t = 0, 0, 0.0
    while t < 6 * DAY_S:
        if t % (10 * HOUR) == 0 and t > 0:
            accepted += s.hint(urls[hinted], lastmod_at=t - 1, now=t)
            hinted += 1
        answer(s, s.plan(t), t + 1)  # 304: the hint lied, nothing changed
        t += pol.period_s
    assert hinted > pol.hint_trust_after + 2
    assert accepted == pol.hint_trust_after


# ---- prior, determinism -----------------------------------------------------------------------

def test_a_new_url_inherits_its_templates_rate():
    pol = policy_for_intent("search", 20_000)
    s = RecrawlScheduler(pol, random.Random(1))
    fast = [f"https://a.example/live/{i}" for i in range(40)]
    slow = [f"https://a.example/docs/page{i}" for i in range(40)]
    for u in fast + slow:
        s.add(u, 0.0, host="a.example", tier=1, importance=0.5, history=fetched_history())
    rates = {**{u: 1 / HOUR for u in fast}, **{u: 1 / (20 * DAY_S) for u in slow}}
    run(s, 4, rates)
    s.add("https://a.example/live/999", 4 * DAY_S, host="a.example", tier=1, importance=0.5,
          history=fetched_history(4 * DAY_S))
    s.add("https://a.example/docs/page999", 4 * DAY_S, host="a.example", tier=1, importance=0.5,
          history=fetched_history(4 * DAY_S))
    new_fast, new_slow = s.rate("https://a.example/live/999"), s.rate("https://a.example/docs/page999")
    assert new_fast > 10 * new_slow
    assert 0.25 / HOUR < new_fast < 4 / HOUR


def test_same_seed_replays_the_same_plans():
    def once():
        pol = policy_for_intent("search", 500)
        s, urls = make(pol, 200, tier=2, importance=0.3, seed=9)
        rates = {u: 1 / ((1 + i % 7) * HOUR) for i, u in enumerate(urls)}
        plans, log = run(s, 2, rates, seed=4)
        return [p.urls for p in plans], log, s.multiplier
    assert once() == once()


def test_policy_validation():
    with pytest.raises(ValueError):
        Tier("bad", 10.0, 5.0)
    with pytest.raises(ValueError):
        RecrawlPolicy(intent="crawl-everything")
    with pytest.raises(ValueError):
        RecrawlPolicy(discovery_floor=1.5)
    with pytest.raises(ValueError):
        policy_for_intent("nope", 10)
    s, urls = make(policy_for_intent("search", 10), 1)
    with pytest.raises(ValueError):
        s.add("https://x.example/", 0.0, host="x.example", tier=7)
    with pytest.raises(ValueError):
        s.add("https://x.example/", 0.0, host="x.example", importance=0.0)
