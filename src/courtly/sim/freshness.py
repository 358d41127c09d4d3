"""Freshness and age in virtual time: measured for courtly's real runtime, computed for the references.

Theory of operation
-------------------
Freshness of a page at t is 1 when our copy equals the live page, else 0; its
age is 0 when fresh, else the time since the first change we missed (Cho &
Garcia-Molina, "Synchronizing a database to improve freshness", SIGMOD 2000).
Both are averaged over time (the window `[warmup, days]`) and over pages,
plainly and weighted by importance (the objective the scheduler maximises).

`FreshnessMeter` measures them exactly for a simulated crawl without ticking:
per page it keeps the last sync and the first change after it (drawn from
Exp(lambda) at the sync, memorylessness makes that exact), and integrates
freshness and age in closed form over each interval between syncs.

The references are computed, not simulated (so they carry no sampling noise):
a page revisited every I from a random phase has expected fresh time
G(x) = (1 - e^(-lambda x)) / lambda over the x seconds after a sync, and
expected age integral K(x) = x^2/2 - (x - G(x)) / lambda; summing whole and
partial cycles over the window gives each page's expectation from the same
start as the simulation (everything fresh at t = 0).

- uniform: every page every N / R seconds (R = the recrawl budget per second);
- optimal: the frequencies f_i maximising sum w_i F(lambda_i, f_i), with
  F = f/lambda (1 - e^(-lambda/f)), under sum f_i = R and each tier's interval
  bounds, from the TRUE rates: the Lagrangian gives f_i = lambda_i / x*(mu
  lambda_i / w_i), clipped to the bounds (KKT for a concave separable problem),
  where x* solves 1 - (1 + x) e^(-x) = c; mu comes from bisection in log mu.
  x* is tabulated here by bisection, independently of the core's table.

`compare` crawls the model web with the real runtime in virtual time
(sim/rtfresh.py: its answers sync the meter) and puts it beside the two
references.
"""

from __future__ import annotations

import math
import random
import time as _wall
from array import array
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["FreshnessMeter", "TierFigures", "PolicyFigures", "Comparison", "optimal_x_array",
           "optimal_frequencies", "expected_window", "figures", "compare"]

DAY_S = 86400.0


class FreshnessMeter:
    """Exact time-integrated freshness and age of simulated pages."""

    def __init__(self, rates: Sequence[float], rng: random.Random, *, window_from_s: float,
                 window_to_s: float) -> None:
        # per page, in flat arrays (no float object per value: the sync of a random page stays cheap)
        self.rate = array("d", rates)
        self._expo = rng.expovariate
        n = len(self.rate)
        self.w0, self.w1 = window_from_s, window_to_s
        self.synced_at = array("d", [0.0]) * n
        self.change_at = array("d", [self._expo(r) for r in self.rate])
        self.version = array("q", [0]) * n
        self.fresh_s = array("d", [0.0]) * n
        self.age_s2 = array("d", [0.0]) * n
        self.syncs = 0

    def changed_by(self, i: int, t: float) -> bool:
        """Has page i changed since its last sync, as of t?"""
        return self.change_at[i] <= t

    def sync(self, i: int, t: float) -> None:
        """Our copy of page i is now the live page (a successful fetch at t).

        Integrates the interval since the last sync, clipped to the window:
        fresh until the first change c, then the age grows from 0 at c."""
        c = self.change_at[i]
        a = self.synced_at[i]
        lo = a if a > self.w0 else self.w0
        hi = t if t < self.w1 else self.w1
        if hi > lo:
            f = (c if c < hi else hi) - lo
            if f > 0.0:
                self.fresh_s[i] += f
            if c < hi:
                s = c if c > lo else lo
                self.age_s2[i] += 0.5 * ((hi - c) ** 2 - (s - c) ** 2)
        if c <= t:
            self.version[i] += 1
        self.synced_at[i] = t
        self.change_at[i] = t + self._expo(self.rate[i])
        self.syncs += 1

    def close(self) -> tuple[np.ndarray, np.ndarray]:
        """Per page: seconds fresh and the age integral over the window (open intervals closed)."""
        fresh = np.array(self.fresh_s, dtype=float)
        age = np.array(self.age_s2, dtype=float)
        a = np.maximum(np.array(self.synced_at, dtype=float), self.w0)
        c = np.array(self.change_at, dtype=float)
        hi = self.w1
        live = a < hi
        fresh += np.where(live, np.clip(np.minimum(c, hi) - a, 0.0, None), 0.0)
        s = np.maximum(c, a)
        age += np.where(live & (c < hi), 0.5 * ((hi - c) ** 2 - (s - c) ** 2), 0.0)
        return fresh, age


# ---- the optimum ---------------------------------------------------------------------

_GRID_U = np.linspace(-30.0, 30.0, 12001)


def _x_grid() -> np.ndarray:
    c = 1.0 / (1.0 + np.exp(-_GRID_U))
    lo, hi = np.full_like(c, -40.0), np.full_like(c, math.log(80.0))
    for _ in range(90):  # bisection on log x: h is increasing
        mid = 0.5 * (lo + hi)
        x = np.exp(mid)
        h = -np.expm1(-x) - x * np.exp(-x)
        below = h < c
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


_LOG_X = _x_grid()


def optimal_x_array(c: np.ndarray) -> np.ndarray:
    """x*(c) for an array: root of 1 - (1 + x) e^(-x) = c; inf where c >= 1."""
    c = np.asarray(c, dtype=float)
    out = np.full(c.shape, np.inf)
    ok = (c > 0.0) & (c < 1.0)
    cc = c[ok]
    u = np.log(cc) - np.log1p(-cc)
    x = np.exp(np.interp(u, _GRID_U, _LOG_X))
    x = np.where(u < _GRID_U[0], np.sqrt(2.0 * cc), x)
    big = -np.log1p(-np.minimum(cc, 1.0 - 1e-16))
    x = np.where(u > _GRID_U[-1], big + np.log1p(big), x)
    out[ok] = x
    out[c <= 0.0] = 0.0
    return out


def optimal_frequencies(rate: np.ndarray, weight: np.ndarray, lo_s: np.ndarray, hi_s: np.ndarray,
                        total_per_s: float) -> tuple[np.ndarray, float]:
    """(f_i, mu): max sum w F(lambda, f) s.t. sum f = total, 1/hi <= f <= 1/lo."""
    f_min, f_max = 1.0 / hi_s, 1.0 / lo_s

    def freq(log_mu: float) -> np.ndarray:
        x = optimal_x_array(math.exp(log_mu) * rate / weight)
        with np.errstate(divide="ignore"):
            f = np.where(np.isinf(x), 0.0, rate / np.where(x > 0, x, 1.0))
        return np.clip(f, f_min, f_max)

    if total_per_s <= 0.0:  # no recrawl budget at all (archive)
        return np.zeros_like(rate), math.inf
    if total_per_s <= f_min.sum():
        return f_min.copy(), math.inf
    if total_per_s >= f_max.sum():
        return f_max.copy(), 0.0
    a, b = -60.0, 60.0
    for _ in range(80):
        m = 0.5 * (a + b)
        if freq(m).sum() > total_per_s:
            a = m
        else:
            b = m
    mid = 0.5 * (a + b)
    return freq(mid), math.exp(mid)


def expected_window(rate: np.ndarray, interval_s: np.ndarray, phase_s: np.ndarray,
                    w0: float, w1: float) -> tuple[np.ndarray, np.ndarray]:
    """Expected fresh seconds and age integral over [w0, w1] for syncs at 0, phase, phase + k I."""

    def g(x):
        return -np.expm1(-rate * x) / rate

    def k(x):
        return 0.5 * x * x - (x - g(x)) / rate

    def cum(x: float):
        first = np.minimum(x, phase_s)
        rem = np.maximum(x - phase_s, 0.0)
        finite = np.isfinite(interval_s)
        iv = np.where(finite, interval_s, 1.0)
        cycles = np.where(finite, np.floor(rem / iv), 0.0)
        tail = np.where(finite, rem - cycles * iv, 0.0)
        fresh = g(first) + cycles * g(iv) + g(tail)
        age = k(first) + cycles * k(iv) + k(tail)
        return fresh, age

    f1, a1 = cum(w1)
    f0, a0 = cum(w0)
    return f1 - f0, a1 - a0


# ---- figures -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TierFigures:
    tier: int
    pages: int
    freshness: float
    freshness_w: float        # importance-weighted
    age_s: float              # time-averaged mean age


@dataclass(frozen=True, slots=True)
class PolicyFigures:
    name: str
    freshness: float
    freshness_w: float
    age_s: float
    fetches_per_day: float
    tiers: tuple[TierFigures, ...]


def figures(name: str, fresh_s: np.ndarray, age_int: np.ndarray, weight: np.ndarray, tier: np.ndarray,
            window_s: float, fetches_per_day: float) -> PolicyFigures:
    fr = fresh_s / window_s
    ag = age_int / window_s
    rows = []
    for t in range(int(tier.max()) + 1 if len(tier) else 0):
        m = tier == t
        if m.any():
            rows.append(TierFigures(t, int(m.sum()), float(fr[m].mean()),
                                    float((fr[m] * weight[m]).sum() / weight[m].sum()), float(ag[m].mean())))
    return PolicyFigures(name, float(fr.mean()), float((fr * weight).sum() / weight.sum()), float(ag.mean()),
                         fetches_per_day, tuple(rows))


@dataclass(frozen=True, slots=True)
class Comparison:
    seed: int
    courtly: PolicyFigures
    uniform: PolicyFigures
    optimal: PolicyFigures
    extra: tuple[PolicyFigures, ...]
    ratio: float              # courtly / optimal, importance-weighted freshness
    ratio_plain: float        # the same, unweighted
    wall_s: float             # the whole comparison
    drive_s: float            # the real runtime's crawl alone (wall clock)
    cpu_s: float              # CPU time of the whole comparison (the machine may be shared)
    fetches: int
    failures: int
    not_modified: int
    multiplier: float | None
    report: tuple = ()        # RecrawlScheduler.report() rows
    tiers: tuple[int, ...] = ()   # pages per tier of the runtime's own, at the end


def compare(p, *, on_day=None) -> Comparison:
    """Crawl the model web of `p` with the real runtime (sim/rtfresh.py) and
    compare with uniform and optimal; `on_day(day)` is called as each virtual
    day of the crawl begins."""
    from courtly.sim.rtfresh import runtime_figures
    from courtly.sim.virtual import build_web, courtly_policy

    started, cpu_started = _wall.perf_counter(), _wall.process_time()
    policy = courtly_policy(p)
    web = build_web(p, len(policy.tiers))
    w0, w1 = p.warmup_days * DAY_S, p.days * DAY_S
    window = w1 - w0
    courtly, run = runtime_figures(p, on_day=on_day)
    drive_s = _wall.perf_counter() - started

    total = p.budget * policy.recrawl_share_max / DAY_S
    n = len(web)
    tiers = np.minimum(web.tier, len(policy.tiers) - 1)
    lo = np.array([t.interval_s_min for t in policy.tiers])[tiers]
    hi = np.array([t.interval_s_max for t in policy.tiers])[tiers]
    g = np.random.default_rng([p.seed, 0xFA5E])
    u_uni, u_opt = g.random(n), g.random(n)
    uni_iv = np.full(n, n / total if total > 0 else np.inf)
    f_opt, _ = optimal_frequencies(web.rate, web.importance, lo, hi, total)
    with np.errstate(divide="ignore"):
        opt_iv = 1.0 / f_opt
    refs = []
    for name, iv, u in (("uniform", uni_iv, u_uni), ("optimal", opt_iv, u_opt)):
        phase = np.where(np.isfinite(iv), u * np.where(np.isfinite(iv), iv, 0.0), np.inf)
        fr, ag = expected_window(web.rate, iv, phase, w0, w1)
        per_day = float(np.where(np.isfinite(iv), DAY_S / np.where(np.isfinite(iv), iv, 1.0), 0.0).sum())
        refs.append(figures(name, fr, ag, web.importance, web.tier, window, per_day))
    uniform, optimal = refs
    return Comparison(
        seed=p.seed, courtly=courtly, uniform=uniform, optimal=optimal, extra=(),
        ratio=courtly.freshness_w / optimal.freshness_w if optimal.freshness_w else math.nan,
        ratio_plain=courtly.freshness / optimal.freshness if optimal.freshness else math.nan,
        wall_s=_wall.perf_counter() - started, drive_s=drive_s,
        cpu_s=_wall.process_time() - cpu_started, fetches=run.fetches,
        failures=run.failures, not_modified=run.not_modified,
        multiplier=run.multiplier, report=run.report, tiers=run.tiers)
