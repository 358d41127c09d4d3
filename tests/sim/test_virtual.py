"""Tests of the virtual-time freshness simulation: clock, model web, meter, optimum,
determinism, politeness during the simulated crawl, and courtly against the references.

Every run is seeded; a failing comparison names its seed. No timing thresholds:
speed is measured by `courtly sim` (it prints its run time), not asserted here.
"""

from __future__ import annotations

import asyncio
import gc
import random
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from courtly.sim.freshness import (
    FreshnessMeter, compare, expected_window, optimal_frequencies, optimal_x_array,
)
from courtly.sim.virtual import (
    DAY_S, CourtlyPlanner, FixedIntervalPlanner, SimParams, VirtualClock, build_web, courtly_policy, drive,
)
from courtly.sim.vsim_command import main

SMALL = SimParams(seed=11, days=7, pages=2000, hosts=40, budget=2000)


# ---- clock and model web -----------------------------------------------------------------

def test_virtual_clock_moves_only_forward_and_sleep_jumps():
    clock = VirtualClock(5.0)
    assert clock.now() == 5.0
    asyncio.run(clock.sleep_until(60.0))
    assert clock.now() == 60.0
    asyncio.run(clock.sleep_until(10.0))  # in the past: no-op
    assert clock.now() == 60.0
    with pytest.raises(ValueError):
        clock.advance_to(59.0)


def test_model_web_is_a_function_of_its_seed():
    a, b = build_web(SMALL), build_web(SMALL)
    assert a.urls == b.urls and np.array_equal(a.rate, b.rate) and np.array_equal(a.importance, b.importance)
    c = build_web(SimParams(seed=12, pages=2000, hosts=40))
    assert not np.array_equal(a.rate, c.rate)


def test_model_web_shape():
    p = SimParams(seed=3, pages=20_000, hosts=200)
    web = build_web(p)
    assert web.rate.min() >= p.rate_per_s_min * (1 - 1e-9) and web.rate.max() <= p.rate_per_s_max * (1 + 1e-9)
    assert np.log(web.rate).std() > 1.5  # heterogeneous: spread over ~7.7 e-folds
    assert web.importance.max() == 1.0 and web.importance.min() > 0
    shares = np.bincount(web.tier, minlength=3) / len(web)
    assert shares == pytest.approx([0.01, 0.09, 0.90], abs=0.002)
    assert len(set(web.host_of)) <= p.hosts


# ---- meter and references ---------------------------------------------------------------

def test_meter_integrates_one_page_exactly():
    m = FreshnessMeter([1e-9], random.Random(1), window_from_s=0.0, window_to_s=100.0)
    m.change_at[0] = 30.0      # force a change at t = 30
    m.sync(0, 50.0)            # fresh 0..30, stale 30..50 (age integral 20^2/2)
    m.change_at[0] = 1e12      # and never again
    fresh, age = m.close()
    assert fresh[0] == pytest.approx(30.0 + 50.0)
    assert age[0] == pytest.approx(200.0)
    assert m.version[0] == 1


def test_expected_window_matches_closed_forms():
    rate = np.array([1 / 3600.0, 1 / 86400.0])
    iv = np.array([7200.0, 86400.0])
    # phase = interval and a window of whole cycles: time-average = F(lambda, f) of Cho & Garcia-Molina
    fresh, age = expected_window(rate, iv, iv.copy(), 0.0, 10 * 86400.0)
    x = rate * iv
    assert fresh / (10 * 86400.0) == pytest.approx((1 - np.exp(-x)) / x, rel=1e-9)
    mean_age = iv / 2 - 1 / rate + (1 - np.exp(-x)) / (rate * rate * iv)
    assert age / (10 * 86400.0) == pytest.approx(mean_age, rel=1e-9)


def test_optimal_x_array_solves_its_equation():
    c = np.array([1e-10, 1e-4, 0.2, 0.5, 0.9, 0.9999])
    x = optimal_x_array(c)
    assert -np.expm1(-x) - x * np.exp(-x) == pytest.approx(c, rel=1e-6)
    assert np.isinf(optimal_x_array(np.array([1.0, 3.0]))).all()


def test_optimum_spends_the_budget_and_satisfies_kkt():
    web = build_web(SMALL)
    n = len(web)
    lo, hi = np.full(n, 900.0), np.full(n, 90 * DAY_S)
    total = 2000 / DAY_S
    f, mu = optimal_frequencies(web.rate, web.importance, lo, hi, total)
    assert f.sum() == pytest.approx(total, rel=1e-6)
    interior = (f > 1 / hi * 1.001) & (f < 1 / lo * 0.999)
    assert interior.sum() > n / 4
    lam, w, fi = web.rate[interior], web.importance[interior], f[interior]
    # d/df [w F(lambda, f)] = w/lambda (1 - (1 + lambda/f) e^(-lambda/f)) = mu on the interior
    x = lam / fi
    marginal = w / lam * (-np.expm1(-x) - x * np.exp(-x))
    assert marginal == pytest.approx(np.full(interior.sum(), mu), rel=1e-3)


def test_simulated_uniform_matches_its_expectation():
    """The meter and the simulated crawl agree with the closed forms (a check on the simulator)."""
    c = compare(SMALL, simulate_references=True)
    sim = {f.name: f for f in c.extra}
    assert sim["uniform (simulated)"].freshness == pytest.approx(c.uniform.freshness, abs=0.02), SMALL.seed
    assert sim["optimal (simulated)"].freshness_w == pytest.approx(c.optimal.freshness_w, abs=0.03), SMALL.seed


# ---- courtly in virtual time -----------------------------------------------------------------

@pytest.mark.parametrize("seed", [11, 12])
def test_courtly_beats_uniform_and_nears_the_optimum(seed):
    p = SimParams(seed=seed, days=7, pages=2000, hosts=40, budget=2000)
    c = compare(p)
    assert c.courtly.freshness_w > c.uniform.freshness_w + 0.05, f"seed={seed}"
    assert c.ratio >= 0.9, f"seed={seed}: courtly/optimal {c.ratio:.3f}"
    assert c.fetches <= p.budget * p.days * 1.001, f"seed={seed}"


def test_the_greedy_staleness_rule_does_worse_than_the_index():
    base = SimParams(seed=13, days=7, pages=2000, hosts=40, budget=2000)
    index = compare(base)
    greedy = compare(SimParams(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                                  "index": "staleness"}))
    assert greedy.courtly.freshness_w < index.courtly.freshness_w, f"seed={base.seed}"


def test_a_replayed_seed_reproduces_exactly():
    p = SimParams(seed=21, days=3, pages=800, hosts=20, budget=800)
    a, b = compare(p), compare(p)
    assert (a.courtly, a.uniform, a.optimal, a.fetches, a.failures, a.not_modified, a.report) == \
           (b.courtly, b.uniform, b.optimal, b.fetches, b.failures, b.not_modified, b.report)


def test_politeness_holds_in_the_simulated_crawl():
    p = SimParams(seed=5, days=2, pages=1500, hosts=8, budget=6000)
    web = build_web(p)
    planner = CourtlyPlanner(web, courtly_policy(p), random.Random(1))
    meter = FreshnessMeter(web.rate.tolist(), random.Random(2), window_from_s=0.0, window_to_s=p.days * DAY_S)
    log: list = []
    drive(web, planner, p, meter, random.Random(3), fetch_log=log)
    by_key = defaultdict(list)
    for key, start, end, _ in log:
        by_key[key].append((start, end))
    assert len(log) > 1000
    for key, spans in by_key.items():
        spans.sort()
        for (_s0, e0), (s1, _) in zip(spans, spans[1:]):
            assert s1 >= e0 + p.delay_s - 1e-9, f"seed={p.seed}: {key} refetched {s1 - e0:.3f}s after"


def test_the_collector_is_paused_only_during_a_simulation():
    from courtly.sim.freshness import _collector_paused
    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with _collector_paused():
            pass
        assert not gc.isenabled()   # left as it was found
    finally:
        gc.enable()


def test_fixed_interval_planner_fetches_at_its_intervals():
    web = build_web(SimParams(seed=2, pages=50, hosts=5))
    iv = np.full(50, 3600.0)
    planner = FixedIntervalPlanner(web, iv, random.Random(1), 300.0)
    granted = [u for k in range(12) for u in planner.plan(k * 300.0)]
    assert sorted(granted) == sorted(web.urls)  # every page once in its first interval
    planner.fetched(granted[0], 3600.0)
    assert planner.plan(3600.0 + 3600.0 - 300.0) == [granted[0]]


# ---- the command -------------------------------------------------------------------------------

def test_sim_command_prints_three_policies(capsys):
    assert main(["--seed", "3", "--days", "2", "--pages", "500", "--hosts", "10", "--budget", "500",
                 "--report"]) == 0
    out = capsys.readouterr().out
    for word in ("courtly", "uniform", "optimal", "courtly / optimal", "run time", "age_p90_h"):
        assert word in out


def test_sim_command_check_failure_names_the_seed(capsys):
    assert main(["--seed", "4", "--days", "1", "--pages", "300", "--hosts", "5", "--check", "5"]) == 1
    assert "seed=4" in capsys.readouterr().err


def test_sim_command_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "courtly.sim.vsim_command", "--seed", "1", "--days", "1",
                          "--pages", "300", "--hosts", "5"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "courtly / optimal" in out.stdout


def test_sim_command_rejects_bad_parameters(capsys):
    assert main(["--days", "0"]) == 2


@pytest.mark.parametrize("args, message", [
    (["--days", "inf"], "days must be a finite number"),              # ran for ever
    (["--days", "nan"], "days must be a finite number"),
    (["--alpha", "-1"], "importance_alpha >= 0"),                    # were tracebacks from the scheduler
    (["--alpha", "nan"], "importance_alpha must be a finite number"),
    (["--period", "0"], "period_s must be > 0"),
])
def test_sim_command_bad_parameters_are_one_line(capsys, args, message):
    assert main(["--pages", "50", "--hosts", "2", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("courtly sim: error:") and message in lines[0], lines


def test_compare_reports_each_simulated_day_for_progress():
    days: list[int] = []
    p = SimParams(seed=2, days=3, pages=300, hosts=5, budget=300)
    assert compare(p, on_day=days.append).ratio == compare(p).ratio   # progress changes nothing
    assert days == [0, 1, 2]
