"""`courtly sim`: the freshness simulation in virtual time, three policies side by side.

    courtly sim --seed 1 --days 10 --pages 10000 --hosts 100 --budget 5000

builds the model web of the seed, crawls it with courtly's real runtime
(intent search: its recrawl scheduler, tiers, frontier, politeness and store)
on a virtual clock (sim/rtfresh.py), computes uniform recrawl and the optimum
(true rates, same budget and tier bounds), and prints freshness (plain and
importance-weighted), mean age per tier, the ratio to the optimum and the
run time. Same arguments -> same numbers. `--check R` exits 1 when courtly
reaches less than R of the optimum (the message names the seed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time

from courtly.sim.freshness import Comparison, PolicyFigures, compare
from courtly.sim.virtual import SimParams

__all__ = ["main", "parser", "render"]


COLUMNS = """columns of the table (one row per policy: courtly, uniform, optimal):
  policy      courtly = the real runtime (its recrawl scheduler and tiers, discovery included);
              uniform = every page at the same interval;
              optimal = the best allocation for the true change rates (same budget and tier bounds)
  F_w         freshness weighted by page importance: the time-averaged share of pages whose
              copy equals the live page, each page counted by its importance (higher is better)
  F           the same, every page counted once
  age_h       mean age in hours: how long a stale copy has been out of date, averaged over
              time and pages (a fresh copy has age 0; lower is better)
  /opt        F_w divided by optimal's F_w (1.000 = as good as the optimum)
  fetch/day   page fetches per virtual day within the figures' window
  F_w tN, age_h   the same two figures within importance tier N (t0 = the most important pages)
the figures leave out the first --warmup-days (courtly's discovery of every page comes out of its
daily budget there: make the warm-up at least pages / budget days, 1 at most, plus a day to learn).

courtly sim runtime --seeds 50   runs the real crawler runtime on seeded webs with faults
                                 in virtual time and checks each run (courtly sim runtime --help)."""


def parser() -> argparse.ArgumentParser:
    d = SimParams()
    ap = argparse.ArgumentParser(prog="courtly sim", description=__doc__.split("\n\n")[0], epilog=COLUMNS,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=d.seed, help="the model web's seed (default: %(default)s)")
    ap.add_argument("--days", type=float, default=d.days, help="virtual days to crawl (default: %(default)g)")
    ap.add_argument("--pages", type=int, default=d.pages, help="pages of the model web (default: %(default)s)")
    ap.add_argument("--hosts", type=int, default=d.hosts, help="hosts of the model web (default: %(default)s)")
    ap.add_argument("--budget", type=int, default=None,
                    help="fetches per day, discovery included (the runtime's recrawl.daily_budget; "
                         "default: pages / 2)")
    ap.add_argument("--alpha", type=float, default=d.importance_alpha,
                    help="importance power law exponent (default: %(default)g)")
    ap.add_argument("--failure-rate", type=float, default=d.failure_rate,
                    help="share of fetches answered 500/503 (default: %(default)g)")
    ap.add_argument("--warmup-days", type=float, default=None,
                    help=f"days left out of the figures at the start (default: {d.warmup_days:g}, "
                         "or half of --days when that is shorter)")
    ap.add_argument("--period", type=float, default=d.period_s,
                    help="plan period in seconds (default: %(default)g)")
    ap.add_argument("--runtime", action="store_true",
                    help="accepted for old scripts: the real runtime is what courtly sim runs (default: on)")
    ap.add_argument("--report", action="store_true", help="print the scheduler's per-day, per-tier report")
    ap.add_argument("--json", action="store_true",
                    help="print the parameters and the comparison as one JSON object instead of the table")
    ap.add_argument("--check", type=float, default=None, metavar="RATIO",
                    help="exit 1 if courtly/optimal (weighted freshness) is below RATIO (default: no check)")
    return ap


def _hours(s: float) -> str:
    return f"{s / 3600:8.2f}"


def _row(f: PolicyFigures, optimal: PolicyFigures) -> str:
    ratio = f.freshness_w / optimal.freshness_w if optimal.freshness_w else float("nan")
    tiers = " ".join(f"{t.freshness_w:6.3f} {_hours(t.age_s)}" for t in f.tiers)
    return (f"{f.name:22s} {f.freshness_w:8.4f} {f.freshness:8.4f} {_hours(f.age_s)} {ratio:7.3f} "
            f"{f.fetches_per_day:10.0f}   {tiers}")


def render(c: Comparison, p: SimParams) -> str:
    tiers = " ".join(f"{'F_w t' + str(t.tier):>6s} {'age_h':>8s}" for t in c.courtly.tiers)
    lines = [
        f"courtly sim  seed={p.seed} days={p.days:g} pages={p.pages} hosts={p.hosts} "
        f"budget={p.budget}/day warmup={p.warmup_days:g} days",
        f"{'policy':22s} {'F_w':>8s} {'F':>8s} {'age_h':>8s} {'/opt':>7s} {'fetch/day':>10s}   {tiers}",
    ]
    for f in (c.courtly, c.uniform, c.optimal, *c.extra):
        lines.append(_row(f, c.optimal))
    lines.append("tier pages: " + ", ".join(f"t{t.tier}={t.pages}" for t in c.courtly.tiers)
                 + "; the runtime's own tiers: " + ", ".join(f"t{i}={n}" for i, n in enumerate(c.tiers)))
    lines.append(f"courtly / optimal: {c.ratio:.3f} (importance-weighted freshness), {c.ratio_plain:.3f} (plain)")
    lines.append(f"fetches {c.fetches}, discovery included (failed {c.failures}, 304 {c.not_modified}); "
                 f"multiplier {c.multiplier:.4g}" if c.multiplier is not None else f"fetches {c.fetches}")
    lines.append(f"run time {c.wall_s:.1f} s (real runtime's crawl {c.drive_s:.1f} s; CPU {c.cpu_s:.1f} s)")
    return "\n".join(lines)


def _jsonable(x):
    """A report row (a frozen dataclass) in the JSON output."""
    if dataclasses.is_dataclass(x):
        return dataclasses.asdict(x)
    raise TypeError(f"not JSON: {type(x).__name__}")


def _report(c: Comparison) -> str:
    out = ["day tier allocated forced hinted late min_iv  age_p50_h age_p90_h"]
    for r in c.report:
        p50 = "-" if r.age_p50_s is None else f"{r.age_p50_s / 3600:.2f}"
        p90 = "-" if r.age_p90_s is None else f"{r.age_p90_s / 3600:.2f}"
        out.append(f"{r.day:3d} {r.tier:4d} {r.allocated:9d} {r.forced:6d} {r.hinted:6d} {r.denied_budget:4d} "
                   f"{r.denied_min_interval:6d} {p50:>10s} {p90:>9s}")
    return "\n".join(out)


class _Progress:
    """The simulated day on stderr while courtly's crawl runs (minutes at the
    default size): a line rewritten in place on a terminal, else one line
    every 10 s."""

    def __init__(self, days: float) -> None:
        self.days = math.ceil(days)
        self.tty = sys.stderr.isatty()
        self.started = self.last = time.monotonic()
        self.shown = False

    def day(self, day: int) -> None:
        now = time.monotonic()
        if not self.tty and now - self.last < 10.0:
            return
        self.last = now
        line = f"courtly sim: simulating day {day + 1}/{self.days} ({now - self.started:.0f} s)"
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)
        self.shown = True

    def close(self) -> None:
        if self.tty and self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "runtime":   # the real runtime on seeded webs with faults (sim/rtsim.py)
        from courtly.sim.rtsim import main as runtime_main

        return runtime_main(argv[1:])
    a = parser().parse_args(argv)
    try:
        p = SimParams(seed=a.seed, days=a.days, pages=a.pages, hosts=a.hosts,
                      budget=a.budget if a.budget is not None else max(1, a.pages // 2),
                      importance_alpha=a.alpha,
                      failure_rate=a.failure_rate, period_s=a.period,
                      warmup_days=a.warmup_days if a.warmup_days is not None
                      else min(SimParams().warmup_days, a.days / 2))
    except ValueError as exc:
        print(f"courtly sim: error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    progress = _Progress(p.days)
    try:
        c = compare(p, on_day=progress.day)
    finally:
        progress.close()
    if a.json:
        print(json.dumps({"params": dataclasses.asdict(p), **dataclasses.asdict(c)}, default=_jsonable))
    else:
        print(render(c, p))
        if a.report:
            print(_report(c))
    if a.check is not None and not c.ratio >= a.check:
        print(f"courtly sim: FAILED seed={p.seed}: courtly/optimal {c.ratio:.3f} < {a.check}"
              f" ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
