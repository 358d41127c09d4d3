"""Micro-benchmark: the crawler's CPU per discovered link, link admission only.

Renders bench-profile pages of the simulated web in-process (no sockets),
extracts their links, then times with `time.process_time`, best of
`--repeat` passes:

    python bench/admission_micro.py [--hosts 200] [--pages-per-host 10] [--repeat 5]

* `admit_links` of every page into a fresh in-process `Crawler` (real
  SqliteStore in a temporary folder, default config, trap guard on; nothing
  committed while timed): us per link offered and per page; then, after a
  commit, the same pages again (every link a duplicate);
* `normalize_url` of each distinct raw link (the `_lenient` cache emptied
  before each pass, as for links not seen before): us per normalisation;
* `TrapGuard.check_new_url` of each distinct normalised URL into a fresh
  guard: us per new URL.

Runs against whichever `courtly` is importable (set PYTHONPATH to compare two
trees; the tree of this file only when none is). Pure CPU, bounded by the
arguments; prints figures, writes only a temporary folder, asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("courtly") is None:
    sys.path.insert(0, str(ROOT / "src"))

import courtly  # noqa: E402
from courtly.config import Config  # noqa: E402
from courtly.core import urls  # noqa: E402
from courtly.core.links import extract_links  # noqa: E402
from courtly.core.traps import TrapGuard  # noqa: E402
from courtly.core.types import UrlItem  # noqa: E402
from courtly.runtime.crawler import Crawler  # noqa: E402
from courtly.shell.store.sqlite import SqliteStore  # noqa: E402
from courtly.sim.model import SimWeb  # noqa: E402
from courtly.sim.page import render_page  # noqa: E402
from courtly.sim.webconfig import profile_config  # noqa: E402

PORT = 8080
CT = "text/html; charset=utf-8"
T0 = 1_700_000_000.0


def bench_links(hosts: int, per_host: int, seed: int = 1) -> list[tuple[str, object]]:
    """(page URL, PageLinks) of the first `per_host` ordinary pages of each host."""
    web = SimWeb(profile_config("bench", hosts=hosts, pages_per_host=50, ips=max(1, hosts // 8), seed=seed))
    out = []
    for name in web.manifest(PORT, T0)["hosts"]:
        lay = web.layout(name)
        taken = 0
        for path in lay.page_paths():
            res = lay.resolve(path)
            if res.kind != "page":
                continue
            url = f"http://{name}:{PORT}{path}"
            out.append((url, extract_links(render_page(lay, res.page, res.variant, 0, PORT), url, content_type=CT)))
            taken += 1
            if taken >= per_host:
                break
    return out


class _Clock:
    def now(self) -> float:
        return T0

    async def sleep_until(self, at: float) -> None:
        pass


def _crawler(folder: Path) -> Crawler:
    warc = SimpleNamespace(flush=lambda: None)
    c = Crawler(Config(), clock=_Clock(), resolver=None, fetcher=None, warc=warc,
                store=SqliteStore(folder / "crawl.db"), extractor=None)
    c.load()
    return c


def admit_pass(pages, folder: Path) -> tuple[float, int, float]:
    """CPU seconds of `admit_links` over all pages into a fresh crawler, URLs
    queued, and CPU seconds of a second pass after a commit (every link a
    duplicate by then, as most links of a crawl are)."""
    c = _crawler(folder)
    items = [(UrlItem(url=url, key=urls.politeness_key(urls.host_of_normalized(url))), page) for url, page in pages]
    t0 = time.process_time()
    for item, page in items:
        c.admission.admit_links(page, item, T0)
    spent = time.process_time() - t0
    queued = len(c.batch.new_urls)
    c.commit()
    t0 = time.process_time()
    for item, page in items:
        c.admission.admit_links(page, item, T0)
    again = time.process_time() - t0
    c.store.close()
    return spent, queued, again


def best_s(fn, items, repeat: int, before=None) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        t0 = time.process_time()
        for item in items:
            fn(item)
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    pages = bench_links(args.hosts, args.pages_per_host)
    n_links = sum(len(p.links) for _, p in pages)
    raw = list(dict.fromkeys(link.url for _, p in pages for link in p.links))
    normalized = []
    for u in raw:
        try:
            normalized.append(urls.normalize_url(u))
        except urls.UrlError:
            pass
    normalized = list(dict.fromkeys(normalized))
    print(f"courtly from {Path(courtly.__file__).parent}")
    print(f"{len(pages)} pages, {n_links} links ({n_links / len(pages):.1f} per page), "
          f"{len(raw)} distinct raw, {len(normalized)} distinct normalised")

    best, queued, best_again = float("inf"), 0, float("inf")
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="admission-micro-") as tmp:
            spent, queued, again = admit_pass(pages, Path(tmp))
        best, best_again = min(best, spent), min(best_again, again)
    print(f"{'admit_links, per link offered':<40} {best / n_links * 1e6:>8.2f} us"
          f"   ({best / len(pages) * 1e6:.0f} us/page, {queued} URLs queued)")
    print(f"{'admit_links again, all duplicates':<40} {best_again / n_links * 1e6:>8.2f} us"
          f"   ({best_again / len(pages) * 1e6:.0f} us/page)")

    lenient = getattr(urls, "_lenient", None)
    clear = getattr(lenient, "cache_clear", None)
    s = best_s(urls.normalize_url, normalized, args.repeat, clear)
    print(f"{'normalize_url, already normalised':<40} {s / len(normalized) * 1e6:>8.2f} us")
    s = best_s(lambda u: _normalize_or_none(u), raw, args.repeat, clear)
    print(f"{'normalize_url, distinct raw links':<40} {s / len(raw) * 1e6:>8.2f} us")

    best = float("inf")
    for _ in range(args.repeat):
        guard = TrapGuard()
        keyed = [(urls.politeness_key(urls.host_of_normalized(u)), u) for u in normalized]
        t0 = time.process_time()
        for key, u in keyed:
            guard.check_new_url(key, u, 2, T0)
        best = min(best, time.process_time() - t0)
    print(f"{'TrapGuard.check_new_url, per new URL':<40} {best / len(normalized) * 1e6:>8.2f} us")


def _normalize_or_none(u: str) -> str | None:
    try:
        return urls.normalize_url(u)
    except urls.UrlError:
        return None


if __name__ == "__main__":
    main()
