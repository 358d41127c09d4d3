"""What bench/monitor.py (virtual time) and bench/monitor_live.py (the real
crawl) share: their common arguments, and the scoring of a watch's change
events against its page's real change instants."""

from __future__ import annotations

import argparse
from typing import NamedTuple


class Score(NamedTuple):
    ttd: list[float]   # time-to-detect of each change found
    made: int          # real changes made while watched
    found: int
    false: int         # events that follow no real change


def common_args(ap: argparse.ArgumentParser, *, per_kind: int, every_s: float, hosts: int, delay_s: float,
                gap_s_mean: float) -> None:
    ap.add_argument("--per-kind", type=int, default=per_kind, help="watch pages of each kind (default: %(default)s)")
    ap.add_argument("--every-s", type=float, default=every_s, help="check interval (default: %(default)s)")
    ap.add_argument("--hosts", type=int, default=hosts, help="hosts the pages are spread over (default: %(default)s)")
    ap.add_argument("--delay-s", type=float, default=delay_s, help="politeness delay per key (default: %(default)s)")
    ap.add_argument("--gap-s-mean", type=float, default=gap_s_mean,
                    help="mean gap between a page's real changes (default: %(default)s)")


def score(changes: list[float], events: list[float]) -> Score:
    """A change is found by the first event at or after it and before the
    next change; every other event is a false change."""
    ttd, matched = [], set()
    for k, c in enumerate(changes):
        nxt = changes[k + 1] if k + 1 < len(changes) else float("inf")
        hit = [e for e in events if c <= e < nxt]
        if hit:
            ttd.append(hit[0] - c)
            matched.add(hit[0])
    return Score(ttd, len(changes), len(ttd), sum(1 for e in events if e not in matched))


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
