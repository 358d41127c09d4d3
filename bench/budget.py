"""Benchmark: the budget defence before and after, on the simulated hostile web.

    python bench/budget.py                                  # hostile profile, seed 1, 10,000 pages
    python bench/budget.py --hosts 16 --pages-per-host 10 --ips 4 --seed 524 --max-pages 4000

Crawls the same simulated web twice through `python -m courtly crawl`, with
the same `--max-pages`: once with `[budget] enabled = false` (no trap guard,
no duplicate or soft-404 handling; only the plain depth cap) and once with the
default `true`. Each run gets a fresh simweb process from the same seed, so
throttling counters and page change epochs start equal.

Everything is counted from the server's request log and the model, never from
the crawler: a fetch is one logged request. Real content pages are the HTML
pages of `SimWeb.reachable_pages` minus the labelled duplicate copies
(/dup/, /near/); a fetch of one counts when it answered 200. Waste is read
from the log's behaviour tags (trap_*, redirect_loop, duplicate_exact,
duplicate_near, soft404) plus the `?print=1` copies (byte-identical to their
article, see the manifest's rules). "Fetches to N %" is how many requests a
run had made when it had fetched N % of the real pages that the run with
the defence fetched in total: the cost of the same real content.

The crawl targets only loopback, so delays are short and the per-IP limits
raised (`--delay-s`, `--ip-rate`, `--ip-concurrency`); politeness per key is
unchanged. A benchmark, not a test: it measures and prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from courtly.runtime.demo import simweb_process  # noqa: E402
from courtly.sim.webconfig import TRAPS  # noqa: E402

WASTE = ("traps", "redirect loops", "exact duplicates", "near-duplicates", "soft-404s")
MILESTONES = (0.5, 0.9, 0.99, 1.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="hostile")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hosts", type=int)
    ap.add_argument("--pages-per-host", type=int)
    ap.add_argument("--ips", type=int)
    ap.add_argument("--max-pages", type=int, default=10_000)
    ap.add_argument("--depth-max", type=int, default=16)
    ap.add_argument("--delay-s", type=float, default=0.02)
    ap.add_argument("--ip-rate", type=float, default=50.0)
    ap.add_argument("--ip-concurrency", type=int, default=8)
    ap.add_argument("--keep", action="store_true", help="keep the crawl folders")
    args = ap.parse_args()

    sim_args = ["--profile", args.profile, "--seed", str(args.seed), "--robots-hang-s", "4"]
    for flag, value in (("--hosts", args.hosts), ("--pages-per-host", args.pages_per_host), ("--ips", args.ips)):
        if value is not None:
            sim_args += [flag, str(value)]
    tmp = Path(tempfile.mkdtemp(prefix="courtly-budget-"))
    results = {}
    try:
        for enabled in (False, True):
            name = "with defence" if enabled else "without"
            print(f"crawling ({name}): simweb {' '.join(sim_args)}, --max-pages {args.max_pages}", flush=True)
            results[name] = _run(tmp / ("on" if enabled else "off"), sim_args, enabled, args)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    _print(results)
    return 0


def _run(folder: Path, sim_args: list[str], enabled: bool, args: argparse.Namespace) -> dict:
    with simweb_process(folder / "sim", sim_args, ready_s=120) as web:
        manifest = json.loads(web.manifest_file.read_text())
        config = folder / "crawl.toml"
        config.write_text(
            f"[crawl]\ncontact = \"bench@example.invalid\"\nfetch_tasks = 64\ndepth_max = {args.depth_max}\n"
            f"[politeness]\ndelay_s = {args.delay_s}\ncrawl_delay_s_max = {args.delay_s}\n"
            f"response_factor = 2.0\nip_rate = {args.ip_rate}\nip_concurrency = {args.ip_concurrency}\n"
            f"[fetch]\ntotal_s = 3.0\nconnect_s = 2.0\nbody_bytes_max = 2000000\n"
            f"[network]\nallow = {json.dumps(manifest['allowed_networks'])}\nhosts_file = \"{web.hosts_file}\"\n"
            f"[budget]\nenabled = {'true' if enabled else 'false'}\n")
        out = folder / "crawl"
        cmd = [sys.executable, "-m", "courtly", "crawl", "--config", str(config), "--seeds-file",
               str(web.out / "seeds.txt"), "--out", str(out), "--max-pages", str(args.max_pages), "--quiet"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        time.sleep(1.2)  # the server flushes its log every second
    return {**_count(web.log_file, manifest, args), "wall_s": wall, "suspects": _suspects(out) if enabled else []}


def _count(log_file: Path, manifest: dict, args: argparse.Namespace) -> dict:
    from courtly.sim.check import check_log
    from courtly.sim.manifest import web_from_manifest
    from courtly.sim.reqlog import load_log

    web = web_from_manifest(manifest)
    port = int(manifest["port"])
    reachable = web.reachable_pages(web.seeds(port))
    real = set()
    for url in reachable:
        host, target = url[len("http://"):].split("/", 1)
        if web.layout(host.rsplit(":", 1)[0]).resolve("/" + target).variant == "":
            real.add(url)
    records = sorted(load_log(log_file), key=lambda r: r.arrived_at)
    kinds: Counter[str] = Counter()
    timeline = []          # after each fetch: distinct real pages fetched so far
    got: set[str] = set()
    for r in records:
        url = f"http://{r.host.rsplit(':', 1)[0]}:{port}{r.path}"
        kind = _kind(r, url, real)
        kinds[kind] += 1
        if kind == "traps":
            kinds[r.tag or ""] += 1
        if r.status == 200 and url in real:
            got.add(url)
        timeline.append(len(got))
    report = check_log(records, web, port=port, delay_s_min=args.delay_s, crawl_delay_s_max=args.delay_s,
                       ip_rate=args.ip_rate, ip_concurrency=args.ip_concurrency, coverage=False,
                       duplicate_fetches_max=10**9)
    return {"fetches": len(records), "kinds": kinds, "real": len(real), "got": len(got),
            "timeline": timeline, "politeness": sorted(report.rules_failed()),
            "violations": report.render() if report.violations else ""}


def _kind(r, url: str, real: set[str]) -> str:
    tag = r.tag or ""
    if r.path == "/robots.txt" or tag.startswith("robots"):
        return "robots.txt"
    if tag.startswith("trap_"):
        return "traps"
    if tag == "redirect_loop":
        return "redirect loops"
    if tag == "duplicate_exact" or (r.status == 200 and r.path.endswith("?print=1")):
        return "exact duplicates"
    if tag == "duplicate_near":
        return "near-duplicates"
    if tag == "soft404":
        return "soft-404s"
    if r.status == 200 and url in real:
        return "real pages"
    return "other"


def _suspects(out: Path) -> list[str]:
    import sqlite3

    from courtly.core.traps import TrapConfig, TrapGuard

    db = sqlite3.connect(str(out / "crawl.db"))
    try:
        row = db.execute("SELECT v FROM meta WHERE k = 'traps'").fetchone()
    finally:
        db.close()
    if not row:
        return []
    guard = TrapGuard.restore(json.loads(row[0]), TrapConfig(), random.Random(0))
    return [f"{s.key}: {s.rule} ({s.scope or 'host'})" for s in guard.suspects()]


def _print(results: dict) -> None:
    names = list(results)
    width = max(len(n) for n in names) + 2
    print()
    print(f"{'':34s}" + "".join(f"{n:>{width}s}" for n in names))
    rows = [("total fetches", lambda x: x["fetches"]), ("  robots.txt", lambda x: x["kinds"]["robots.txt"]),
            ("  real content pages (200)", lambda x: x["kinds"]["real pages"])]
    rows += [(f"  wasted: {w}", (lambda w: lambda x: x["kinds"][w])(w)) for w in WASTE]  # noqa: B023 (bound by the outer lambda)
    rows[4:4] = [(f"    {t}", (lambda t: lambda x: x["kinds"][t])(t)) for t in TRAPS]  # noqa: B023 (bound by the outer lambda)
    rows += [("  other (404, redirects, feeds...)", lambda x: x["kinds"]["other"]),
             ("distinct real pages fetched", lambda x: x["got"]),
             ("real pages reachable", lambda x: x["real"])]
    for label, get in rows:
        print(f"{label:34s}" + "".join(f"{get(results[n]):>{width}d}" for n in names))
    print(f"{'coverage of real pages':34s}" + "".join(f"{results[n]['got'] / results[n]['real']:>{width}.1%}"
                                                     for n in names))
    print(f"{'wall time s':34s}" + "".join(f"{results[n]['wall_s']:>{width}.1f}" for n in names))
    target = results[names[-1]]["got"]
    for share in MILESTONES:
        need = max(1, round(share * target))
        label = f"fetches to {share:.0%} of {target} real pages"
        print(f"{label:34s}" + "".join(f"{_fetches_to(results[n]['timeline'], need):>{width}s}" for n in names))
    for n in names:
        if results[n]["politeness"]:
            print(f"politeness rules failed ({n}): {', '.join(results[n]['politeness'])}")
            print(results[n]["violations"][:4000])
    print("\nreview queue of the run with the defence:")
    for line in results[names[-1]]["suspects"] or ["(empty)"]:
        print(f"  {line}")


def _fetches_to(timeline: list[int], need: int) -> str:
    for i, n in enumerate(timeline, 1):
        if n >= need:
            return str(i)
    return "never"


if __name__ == "__main__":
    sys.exit(main())
