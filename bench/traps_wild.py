"""Benchmark: traps courtly was not written against, before and after the yield rule.

    python bench/traps_wild.py                    # 3,000 requests per site
    python bench/traps_wild.py --requests 1500

Crawls each site of `courtly.sim.wildtrap` (query calendar, shuffled facet
subsets, endless pagination, path session ids, a link farm minting host
names, and the real deep site) through the trap guard with
`courtly.sim.wildcrawl.crawl_wild`: once with the yield rule off (the
guard's rules before it: length, segments, session ids, calendar window,
query combinations, template, near-duplicates, rate) and once with the
default configuration. Everything is counted from the site's own request
log: requests to trap pages, requests made when the host first entered the
review queue, real pages fetched. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from courtly.core.trap_state import TrapConfig  # noqa: E402
from courtly.core.urlyield import YieldRule  # noqa: E402
from courtly.sim.wildcrawl import crawl_wild  # noqa: E402
from courtly.sim.wildtrap import WILD_KINDS, WildSite  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=3000, help="request limit per site (default 3000)")
    ap.add_argument("--seed", type=int, default=1, help="the sites' seed (default 1)")
    args = ap.parse_args()
    configs = {"before": TrapConfig(yield_rule=YieldRule(enabled=False)), "after": TrapConfig()}
    print(f"{'site':16} {'guard':6} {'requests':>8} {'trap':>6} {'real':>6} {'review at':>9}  rules in review")
    totals = {name: 0 for name in configs}
    t0 = time.perf_counter()
    for kind in WILD_KINDS:
        site = WildSite(kind, "site.test", seed=args.seed)
        for name, config in configs.items():
            r = crawl_wild(site, config, args.requests, seed=args.seed)
            totals[name] += r.count("trap")
            rules = ", ".join(sorted({s.rule for s in r.suspects})) or "-"
            review = "-" if r.review_at is None else str(r.review_at)
            print(f"{kind:16} {name:6} {len(r.log):8d} {r.count('trap'):6d} {r.count('page'):6d} {review:>9}  {rules}")
    print(f"trap requests over the five trap sites: before {totals['before']:,}, after {totals['after']:,} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
