"""Benchmark: the monitor's time-to-detect and false-change rate, beside a byte-hash baseline.

    python bench/monitor.py                       # 10 pages of each kind, 6 virtual hours, checks every 60 s
    python bench/monitor.py --per-kind 20 --hours 24 --every-s 120 --hosts 4 --delay-s 2
    python bench/monitor.py --target-s 300        # adaptive: every 60 s after a change, up to 300 s when quiet
    python bench/monitor.py --hosts 1 --delay-s 5 # 30 watches on one host: politeness sets the time-to-detect

Runs in virtual time: the simulated web's watch pages (`courtly.sim.watchpage`:
real changes at known instants, noise only, both) are checked by the
monitor's core (`core/watch.checked` over `core/change.content_of`), each
check when its watch is due and its host's politeness allows (one request
at a time per host, `--delay-s` apart). The byte-hash baseline judges the
very same responses by the SHA-256 of their bodies, as `monitor` did before.

Printed: checks; real changes made, found and missed; time-to-detect p50 and
p95 (seconds, and p95 as a multiple of the check interval); false changes per
check on noise-only pages and on pages with both, for the monitor and the
baseline; what noise was learned; the hosts' politeness verdicts.
A benchmark, not a test: it prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from courtly.core.change import content_of
from courtly.core.watch import Watch, WatchState, checked, host_verdicts, next_check_at
from courtly.sim.watchpage import watch_pages

sys.path.insert(0, str(Path(__file__).resolve().parent))

from monitor_score import common_args, quantile, score  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap, per_kind=10, every_s=60.0, hosts=6, delay_s=1.0, gap_s_mean=1200.0)
    ap.add_argument("--hours", type=float, default=6.0, help="virtual hours (default: %(default)s)")
    ap.add_argument("--target-s", type=float, default=0.0,
                    help="watches' target time-to-detect: quiet pages are checked less often up to it "
                         "(default: 0 = fixed)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    duration = a.hours * 3600
    gap_min = 3 * max(a.every_s, a.target_s)   # one change per longest interval at most: each is findable
    pages = watch_pages(a.per_kind, seed=a.seed, duration_s=duration, gap_s_min=gap_min,
                        gap_s_mean=max(a.gap_s_mean, gap_min * 1.5), start_at=60.0)
    watches = [Watch(url=f"http://watch{i % a.hosts}.example{p.path}", every_s=a.every_s,
                     target_s=a.target_s, id=i + 1)
               for i, p in enumerate(pages)]
    states = [WatchState() for _ in pages]
    rules = [w.rules() for w in watches]
    host_free = [0.0] * a.hosts
    heap = [(0.0, i) for i in range(len(pages))]
    events: list[list[float]] = [[] for _ in pages]
    byte_changes = [0] * len(pages)
    checks = [0] * len(pages)       # after learning: the checks that could report
    last_hash = [""] * len(pages)
    last_version = [0] * len(pages)
    learned_at: list[float | None] = [None] * len(pages)
    served = [0] * len(pages)
    last_at = [0.0] * len(pages)
    cpu = time.process_time()
    while heap:
        due, i = heapq.heappop(heap)
        if due >= duration:
            continue
        h = i % a.hosts
        at = max(due, host_free[h])          # politeness: one at a time, delay apart
        host_free[h] = at + a.delay_s
        served[i] += 1                        # the page's own request counter: its noise moves on every fetch
        last_at[i] = at
        body = pages[i].html(at, served[i])
        digest = hashlib.sha256(body).hexdigest()
        st = states[i]
        reporting = st.learning_left == 0
        ev = checked(watches[i], rules[i], st, content_of(body, "text/html", rules[i]), at, at)
        version = pages[i].version(at)
        if reporting:
            checks[i] += 1
            # the baseline's false changes: bytes differ, content did not change since the last check
            byte_changes[i] += digest != last_hash[i] and version == last_version[i]
        elif st.learning_left == 0:
            learned_at[i] = at
        last_version[i] = version
        last_hash[i] = digest
        if ev is not None:
            events[i].append(at)
        nxt = next_check_at(watches[i], st)
        if nxt is not None:
            heapq.heappush(heap, (nxt, i))
    cpu = time.process_time() - cpu

    ttd: list[float] = []
    made = found = missed = 0
    false_by_kind: Counter[str] = Counter()
    checks_by_kind: Counter[str] = Counter()
    bytes_by_kind: Counter[str] = Counter()
    for i, p in enumerate(pages):
        checks_by_kind[p.kind] += checks[i]
        bytes_by_kind[p.kind] += byte_changes[i]
        start = learned_at[i] or 0.0
        changes = [c for c in p.change_at if start < c <= last_at[i]]   # made while watched
        s = score(changes, events[i])
        made, found, missed = made + s.made, found + s.found, missed + s.made - s.found
        ttd += s.ttd
        false_by_kind[p.kind] += s.false
    n_checks = sum(checks)
    print(f"monitor benchmark: {len(pages)} watch pages ({a.per_kind} per kind) on {a.hosts} hosts, "
          f"{a.hours:g} virtual hours, every {a.every_s:g} s, politeness delay {a.delay_s:g} s, seed {a.seed}")
    print(f"  checks after learning: {n_checks:,} = {n_checks / len(pages) / (duration / 3600):.1f} per watch-hour"
          f" ({cpu:.1f} CPU-s, {1e3 * cpu / max(1, sum(s.checks for s in states)):.2f} ms a check)")
    print(f"  real changes: {made} made, {found} found, {missed} missed")
    p50, p95 = quantile(ttd, 0.5), quantile(ttd, 0.95)
    print(f"  time-to-detect: p50 {p50:.1f} s, p95 {p95:.1f} s = {p95 / a.every_s:.2f} x the check interval "
          f"(max {max(ttd) if ttd else float('nan'):.1f} s" + (f"; target {a.target_s:g} s)" if a.target_s else ")"))
    print("  false changes per check     monitor      byte-hash")
    for kind in ("noise", "both", "real"):
        n = max(1, checks_by_kind[kind])
        fb = bytes_by_kind[kind]
        ours = false_by_kind[kind]
        print(f"    {kind:<6} ({checks_by_kind[kind]:>6,} checks)  {ours:>5} = {100 * ours / n:5.2f} %"
              f"   {fb:>5} = {100 * fb / n:6.2f} %")
    learned = Counter(s for st in states for s in st.noise.learned)
    print("  noise learned: " + (", ".join(f"{s!r} on {n} watches" for s, n in learned.most_common()) or "nothing"))
    verdicts = host_verdicts([(w, w.url.split("/")[2]) for w in watches], {}, a.delay_s)
    bad = sum(len(v.impossible) for v in verdicts)
    print(f"  politeness: best time-to-detect per host {min(v.best_detect_s for v in verdicts):g}-"
          f"{max(v.best_detect_s for v in verdicts):g} s; watches with an impossible target: {bad}")
    print(f"  median check interval now: {statistics.median(st.interval_s or a.every_s for st in states):g} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
