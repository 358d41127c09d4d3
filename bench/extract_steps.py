"""Micro-benchmark: the extraction worker's CPU per page, step by step.

Renders bench-profile pages of the simulated web in-process (no sockets), then
times each step of the worker's per-page path with `time.process_time`, best
of `--repeat` passes over all pages, in microseconds per page:

    python bench/extract_steps.py [--pages 400] [--repeat 3] [--non-ascii]

Steps: `extract_links`, `main_text`, `simhash64` of the main text (the native
path when `courtly.core._speedups` is built, and the pure-Python path),
`error_fingerprint`, and the whole task as the worker runs it
(`extract_worker.process_task`: links, prints, reply marshal), last again
with the malloc settings a worker process makes (`_keep_freed_heap`); first,
the CPU a real pool's worker process spends per page (`--pool-rounds`,
`--pipeline-depth`) and what the pool's side spends meanwhile. Pure CPU,
bounded by the arguments; prints figures, writes nothing, asserts nothing.
`--non-ascii` makes every "e " of the pages an "\u00e9 " (UTF-8): the bench
profile's pages are ASCII, most of the web is not (the str kinds, lowering
and decoding take other paths).
"""

from __future__ import annotations

import argparse
import asyncio
import marshal
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from courtly.core import fingerprint  # noqa: E402
from courtly.core.links import extract_links  # noqa: E402
from courtly.core.maintext import main_text  # noqa: E402
from courtly.core.soft404 import error_fingerprint  # noqa: E402
from courtly.shell import extract_worker  # noqa: E402
from courtly.shell.extract import ExtractPool  # noqa: E402
from courtly.sim.model import SimWeb  # noqa: E402
from courtly.sim.page import render_page  # noqa: E402
from courtly.sim.webconfig import profile_config  # noqa: E402

PORT = 8080
CT = "text/html; charset=utf-8"


def bench_pages(count: int, seed: int = 1) -> list[tuple[str, bytes]]:
    """(url, body) of `count` ordinary pages of the bench profile."""
    web = SimWeb(profile_config("bench", hosts=max(1, count // 20 + 1), pages_per_host=50, ips=1, seed=seed))
    out: list[tuple[str, bytes]] = []
    for name in web.manifest(PORT, 1_700_000_000.0)["hosts"]:
        lay = web.layout(name)
        for path in lay.page_paths():
            res = lay.resolve(path)
            if res.kind == "page":
                out.append((f"http://{name}:{PORT}{path}", render_page(lay, res.page, res.variant, 0, PORT)))
            if len(out) >= count:
                return out
    return out


def _task_before(body, url, content_type, x_robots_tag, error_print, options):  # type: ignore[no-untyped-def]
    """The worker's task as it was before `process_task` (to compare)."""
    ua, links_max, fingerprints = options
    page = extract_links(body, url, content_type=content_type, x_robots_tag=x_robots_tag,
                         user_agent_token=ua, links_max=links_max)
    if fingerprints:
        page = extract_worker.with_prints(page, body, url, content_type, error_print)
    return extract_worker.encode_page(page)


def best_us(fn, items, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for item in items:
            fn(item)
        best = min(best, time.process_time() - t0)
    return best / len(items) * 1e6


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def pool_us(pages: list[tuple[str, bytes]], rounds: int, depth: int) -> tuple[float, float]:
    """CPU of one worker of a real `ExtractPool` (fingerprints on, no soft-404
    print) per page, from /proc, after its start-up; and the CPU this process
    (the pool's side) spent per page meanwhile. Pages are submitted all at
    once, `depth` in flight."""
    async with ExtractPool(1, fingerprints=True, tasks_per_child=1 << 30, pipeline_depth=depth) as pool:
        await pool.submit(pages[0][1], pages[0][0], CT)
        pid = pool._workers[0].pid
        before, parent_before = _cpu_s(pid), time.process_time()
        for _ in range(rounds):
            await asyncio.gather(*(pool.submit(body, url, CT, "", error_print=False) for url, body in pages))
        count = rounds * len(pages)
        return (_cpu_s(pid) - before) / count * 1e6, (time.process_time() - parent_before) / count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pool-rounds", type=int, default=5, help="passes over the pages through a real pool (0: skip)")
    ap.add_argument("--pipeline-depth", type=int, default=8, help="pages in flight to the pool's worker (the crawl's: 8)")
    ap.add_argument("--non-ascii", action="store_true", help='pages with "\u00e9 " for every "e " (UTF-8)')
    args = ap.parse_args()
    pages = bench_pages(args.pages)
    if args.non_ascii:
        pages = [(url, body.replace(b"e ", "\u00e9 ".encode())) for url, body in pages]
    if args.pool_rounds > 0 and os.path.exists("/proc/self/stat"):
        worker_us, parent_us = asyncio.run(pool_us(pages, args.pool_rounds, args.pipeline_depth))
        print(f"{'worker process of a pool, CPU from /proc':<44} {worker_us:>8.0f} us/page")
        print(f"{'the pool side (submit, IPC, decode)':<44} {parent_us:>8.0f} us/page")
    texts = [(url, main_text(body, CT)) for url, body in pages]
    size = sum(len(b) for _, b in pages) / len(pages)
    print(f"{len(pages)} pages, {size / 1000:.1f} KB average, main text {sum(len(t) for _, t in texts) / len(texts):.0f}"
          f" chars; native SimHash: {'yes' if getattr(fingerprint, 'NATIVE', False) else 'no'}")
    simhash_py = getattr(fingerprint, "simhash64_py", fingerprint.simhash64)
    rows = [
        ("extract_links", lambda p: extract_links(p[1], p[0], content_type=CT), pages),
        ("main_text", lambda p: main_text(p[1], CT), pages),
        ("simhash64 (as configured)", lambda t: fingerprint.simhash64(t[1]), texts),
        ("simhash64, pure Python", lambda t: simhash_py(t[1]), texts),
        ("error_fingerprint", lambda t: error_fingerprint(t[1], t[0]), texts),
    ]
    task = getattr(extract_worker, "process_task", None) or _task_before
    rows.append(("worker task, prints, no error print",
                 lambda p: marshal.dumps(task(p[1], p[0], CT, "", False, ("courtly", 5000, True))), pages))
    rows.append(("worker task, prints + error print",
                 lambda p: marshal.dumps(task(p[1], p[0], CT, "", True, ("courtly", 5000, True))), pages))
    for label, fn, items in rows:
        print(f"{label:<44} {best_us(fn, items, args.repeat):>8.0f} us/page")
    keep = getattr(extract_worker, "_keep_freed_heap", None)
    if keep is not None:  # what worker_main sets up; it cannot be undone, so it comes last
        keep()
        for label, fn, items in rows[-2:]:
            label = label.replace("worker task", "same, worker's malloc settings")
            print(f"{label:<44} {best_us(fn, items, args.repeat):>8.0f} us/page")


if __name__ == "__main__":
    main()
