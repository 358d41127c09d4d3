"""Tests of the virtual-time freshness simulation: model web, meter, optimum,
determinism, politeness during the real runtime's crawl, and courtly against the references.

Every run is seeded; a failing comparison names its seed. No timing thresholds:
speed is measured by `courtly sim` (it prints its run time), not asserted here.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from courtly.sim.freshness import (
    FreshnessMeter, compare, expected_window, optimal_frequencies, optimal_x_array,
)
from courtly.sim.rtfresh import runtime_figures
from courtly.sim.virtual import DAY_S, SimParams, build_web
from courtly.sim.vsim_command import main

SMALL = SimParams(seed=11, days=7, pages=2000, hosts=40, budget=2000)


# ---- clock and model web -----------------------------------------------------------------

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


def test_the_meter_agrees_with_the_closed_form_for_fixed_interval_syncs():
    """The meter (which measures courtly's crawl) against `expected_window` (which
    computes the references): the same pages synced every I from a random phase."""
    n, days = 3000, 10.0
    rate = np.full(n, 1 / 7200.0)
    iv = np.full(n, 3 * 3600.0)
    rng = np.random.default_rng(4)
    phase = rng.random(n) * iv
    m = FreshnessMeter(rate.tolist(), random.Random(5), window_from_s=DAY_S, window_to_s=days * DAY_S)
    syncs = sorted((float(t), i) for i in range(n) for t in np.arange(phase[i], days * DAY_S, iv[i]))
    for t, i in syncs:
        m.sync(i, t)
    fresh, _ = m.close()
    expect, _ = expected_window(rate, iv, phase, DAY_S, days * DAY_S)
    assert fresh.sum() / expect.sum() == pytest.approx(1.0, abs=0.02)


# ---- courtly's real runtime in virtual time ------------------------------------------------------

@pytest.mark.parametrize("seed", [11, 12])
def test_the_real_runtime_beats_uniform_and_nears_the_optimum(seed):
    p = SimParams(seed=seed, days=4, pages=2000, hosts=40, budget=1000, warmup_days=2)
    c = compare(p)
    assert c.courtly.freshness_w > c.uniform.freshness_w + 0.05, f"seed={seed}"
    assert c.ratio >= 0.9, f"seed={seed}: courtly/optimal {c.ratio:.3f}"
    # the daily budget pays for discovery too: at most a day's overspend is carried
    assert c.fetches <= p.budget * p.days + p.pages, f"seed={seed}"
    assert c.courtly.fetches_per_day <= p.budget * 1.05, f"seed={seed}"


def test_a_replayed_seed_reproduces_exactly():
    p = SimParams(seed=21, days=2, pages=600, hosts=20, budget=600, warmup_days=1)
    a, b = compare(p), compare(p)
    assert (a.courtly, a.uniform, a.optimal, a.fetches, a.failures, a.not_modified, a.report) == \
           (b.courtly, b.uniform, b.optimal, b.fetches, b.failures, b.not_modified, b.report)


def test_politeness_holds_in_the_simulated_crawl():
    p = SimParams(seed=5, days=1, pages=1500, hosts=8, budget=6000, warmup_days=0.5)
    log: list = []
    runtime_figures(p, log=log)
    by_host = defaultdict(list)
    for host, sent, answered, _ in log:
        by_host[host].append((sent, answered))
    assert len(log) > 1500
    for host, spans in by_host.items():
        spans.sort()
        for (_s0, e0), (s1, _) in zip(spans, spans[1:]):
            assert s1 >= e0 + p.delay_s - 1e-6, f"seed={p.seed}: {host} refetched {s1 - e0:.3f}s after"


# ---- the command -------------------------------------------------------------------------------

def test_sim_command_prints_three_policies(capsys):
    assert main(["--seed", "3", "--days", "2", "--pages", "500", "--hosts", "10", "--budget", "500",
                 "--report"]) == 0
    out = capsys.readouterr().out
    for word in ("courtly", "uniform", "optimal", "courtly / optimal", "run time", "age_p90_h",
                 "the runtime's own tiers"):
        assert word in out


def test_sim_command_json_is_one_object_with_the_three_rows_and_the_report(capsys):
    assert main(["--seed", "3", "--days", "1", "--pages", "150", "--hosts", "6", "--budget", "300", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [d[k]["name"] for k in ("courtly", "uniform", "optimal")] == ["courtly", "uniform", "optimal"]
    assert d["params"]["pages"] == 150 and d["ratio"] == d["courtly"]["freshness_w"] / d["optimal"]["freshness_w"]
    # the scheduler's days are UTC days, counted from the one the crawl starts in: a day's crawl spans two
    assert d["report"] and {r["day"] for r in d["report"]} <= {0, 1}


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
    p = SimParams(seed=2, days=3, pages=300, hosts=5, budget=300, warmup_days=1)
    assert compare(p, on_day=days.append).ratio == compare(p).ratio   # progress changes nothing
    assert days == [0, 1, 2]
