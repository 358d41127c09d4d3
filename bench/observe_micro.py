"""Micro-benchmark: what attaching the status server's observer (`--status`)
costs link admission, and the coverage sample alone.

    python bench/observe_micro.py [--hosts 200] [--pages-per-host 10] [--repeat 5]

* `admit_links` of bench-profile pages into a fresh in-process `Crawler`
  (as bench/admission_micro.py), with no observer and with a `CrawlObserver`
  attached (its `on_admitted` and `on_queued` hooks run for every new URL:
  the per-key new-URL rate and the coverage sample): us per link offered;
* `CoverageSample.note_known` of every queued URL (bottom-k by blake2b) and
  `figures()` of a 1,000-URL sample: us per URL, ms per call.

CPU time (`time.process_time`), best of `--repeat`; prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from admission_micro import T0, UrlItem, _crawler, bench_links, urls

from courtly.core.coverage import CoverageSample
from courtly.runtime.observe import CrawlObserver


def admit_s(pages, observed: bool) -> tuple[float, list[str]]:
    with tempfile.TemporaryDirectory(prefix="observe-micro-") as tmp:
        c = _crawler(Path(tmp))
        if observed:
            CrawlObserver(c, out=Path(tmp))
        items = [(UrlItem(url=u, key=urls.politeness_key(urls.host_of_normalized(u))), p) for u, p in pages]
        t0 = time.process_time()
        for item, page in items:
            c.admission.admit_links(page, item, T0)
        spent = time.process_time() - t0
        queued = [row[0] for row in c.batch.new_urls]
        c.store.close()
    return spent, queued


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    pages = bench_links(args.hosts, args.pages_per_host)
    n_links = sum(len(p.links) for _, p in pages)
    plain = min(admit_s(pages, False)[0] for _ in range(args.repeat))
    observed, queued = float("inf"), []
    for _ in range(args.repeat):
        spent, queued = admit_s(pages, True)
        observed = min(observed, spent)
    print(f"{len(pages)} pages, {n_links} links, {len(queued)} URLs queued")
    print(f"{'admit_links, no observer':<40} {plain / n_links * 1e6:>8.2f} us/link")
    print(f"{'admit_links, CrawlObserver attached':<40} {observed / n_links * 1e6:>8.2f} us/link"
          f"   (+{(observed - plain) / max(1, len(queued)) * 1e6:.2f} us per URL queued)")
    best = float("inf")
    sample = CoverageSample(1000)
    for _ in range(args.repeat):
        sample = CoverageSample(1000)
        t0 = time.process_time()
        for i, u in enumerate(queued):
            sample.note_known(u, T0 + i)
        best = min(best, time.process_time() - t0)
    print(f"{'CoverageSample.note_known':<40} {best / max(1, len(queued)) * 1e6:>8.2f} us/URL")
    t0 = time.process_time()
    for _ in range(100):
        sample.figures(T0 + len(queued))
    print(f"{'CoverageSample.figures, 1,000 URLs':<40} {(time.process_time() - t0) / 100 * 1e3:>8.3f} ms")


if __name__ == "__main__":
    main()
