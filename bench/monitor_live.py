"""Benchmark: the real monitor crawl against the simulated web's watch pages, in real time.

    python bench/monitor_live.py                    # 4 hosts x 2 pages of each kind, every 5 s, 3 minutes
    python bench/monitor_live.py --hosts 2 --per-kind 4 --every-s 10 --duration-s 300 --delay-s 1

`courtly simweb --watch-pages-per-kind N` serves the watch pages (real changes
at known instants, noise only, both) on every host; the watches are added to
a fresh crawl folder and `courtly crawl --intent monitor` runs as users run
it, pinned to CPU 1 (the web to CPU 0). Read back afterwards:

- the monitor's events (`changes.jsonl`) against the pages' change instants:
  real changes made while watched, found, missed; time-to-detect p50/p95
  (change instant to `detected_at`, which includes the wait for the commit
  that writes the event);
- the byte-hash baseline on the very same responses: the crawl's WARC
  records (a response's payload digest, a revisit's digest; a 304 is "same")
  compared with the previous check's, counted where no real change happened;
- politeness from the server's request log (courtly.sim.check).

A benchmark, not a test: it prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import pin, run_measured, server_verdict  # noqa: E402
from monitor_score import common_args, quantile, score  # noqa: E402


def t_of(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap, per_kind=2, every_s=5.0, hosts=4, delay_s=0.5, gap_s_mean=30.0)   # --per-kind: on each host
    ap.add_argument("--duration-s", type=float, default=180.0, help="crawl duration (default: %(default)s)")
    a = ap.parse_args()
    from courtly.core.watch import LEARN_CHECKS, Watch
    from courtly.runtime.demo import simweb_process
    from courtly.shell.store.watch_sqlite import SqliteWatchStore
    from courtly.shell.warc_index import iter_records
    from courtly.sim.watchpage import host_watch_pages

    with tempfile.TemporaryDirectory(prefix="courtly-monitor-") as tmp_s:
        tmp = Path(tmp_s)
        args = ["--profile", "bench", "--hosts", str(a.hosts), "--pages-per-host", "10", "--ips",
                str(min(a.hosts, 4)), "--seed", "1", "--watch-pages-per-kind", str(a.per_kind),
                "--watch-gap-s-mean", str(a.gap_s_mean)]
        with simweb_process(tmp / "web", args) as web:
            if pin(0):
                import subprocess

                subprocess.run(["taskset", "-pc", "0", str(web.proc.pid)], capture_output=True)
            manifest = json.loads(web.manifest_file.read_text())
            out = tmp / "crawl"
            store = SqliteWatchStore(out / "crawl.db")
            pages = {}
            for host, h in manifest["hosts"].items():
                for path, page in host_watch_pages(a.per_kind, a.gap_s_mean, 1, h["index"]).items():
                    url = f"http://{host}:{manifest['port']}{path}"
                    store.add(Watch(url, every_s=a.every_s).check())
                    pages[url] = page
            store.close()
            cfg = tmp / "monitor.toml"
            cfg.write_text(f"[crawl]\ncontact = \"bench@example.invalid\"\n[politeness]\ndelay_s = {a.delay_s}\n"
                           f"[network]\nallow = {json.dumps(manifest['allowed_networks'])}\n"
                           f"hosts_file = \"{web.hosts_file}\"\n")
            cmd = [sys.executable, "-m", "courtly", "crawl", "--intent", "monitor", "--config", str(cfg),
                   "--out", str(out), "--quiet", "--duration-s", str(a.duration_s)]
            run = run_measured(cmd, tmp, timeout_s=a.duration_s + 120)
            verdict = server_verdict(web, delay_s=a.delay_s, ip_rate=5.0, ip_concurrency=4)
            started = manifest["started_at"]
            checks: dict[str, list[tuple[float, str]]] = {u: [] for u in pages}   # (capture t_s, digest)
            for w in sorted((out / "warc").glob("*.warc.gz")):
                for r in iter_records(w, check_digests=False):
                    url = r.warc_headers.get("WARC-Target-URI", "")
                    if url in checks and r.rec_type in ("response", "revisit"):
                        digest = r.warc_headers.get("WARC-Payload-Digest", "")
                        if r.warc_headers.get("WARC-Profile", "").endswith("server-not-modified"):
                            digest = checks[url][-1][1] if checks[url] else ""
                        checks[url].append((t_of(r.warc_headers["WARC-Date"]) - started, digest))
            events = [json.loads(line) for line in (out / "changes.jsonl").read_text().splitlines()] \
                if (out / "changes.jsonl").exists() else []
    report(a, pages, checks, events, started, run, verdict, LEARN_CHECKS)
    return 0


def report(a, pages, checks, events, started, run, verdict, learn_checks: int) -> None:  # type: ignore[no-untyped-def]
    ttd: list[float] = []
    made = found = 0
    false = {"noise": 0, "both": 0, "real": 0}
    byte_false = dict.fromkeys(false, 0)
    judged = dict.fromkeys(false, 0)
    for url, page in pages.items():
        seq = sorted(checks[url])
        if len(seq) <= learn_checks:
            continue
        start, end = seq[learn_checks - 1][0], seq[-1][0]
        mine = sorted(t_of(e["detected_at"]) - started for e in events if e["url"] == url)
        s = score([c for c in page.change_at if start < c <= end], mine)
        made, found, ttd = made + s.made, found + s.found, ttd + s.ttd
        false[page.kind] += s.false
        for (t0, d0), (t1, d1) in zip(seq[learn_checks - 1:], seq[learn_checks:]):
            judged[page.kind] += 1
            byte_false[page.kind] += d0 != d1 and page.version(t0) == page.version(t1)
    n_checks = sum(judged.values())
    print(f"monitor live benchmark: {len(pages)} watches ({a.per_kind} per kind on each of {a.hosts} hosts), "
          f"every {a.every_s:g} s, changes every ~{a.gap_s_mean:g} s, delay {a.delay_s:g} s, {a.duration_s:g} s")
    print(f"  crawler: exit {run.returncode}, {run.cpu_s:.1f} CPU-s, {n_checks:,} checks after learning")
    print(f"  politeness violations (server's log): {verdict.violations} {verdict.rules or ''}")
    print(f"  real changes: {made} made while watched, {found} found, {made - found} missed")
    p50, p95 = quantile(ttd, 0.5), quantile(ttd, 0.95)
    print(f"  time-to-detect: p50 {p50:.2f} s, p95 {p95:.2f} s = {p95 / a.every_s:.2f} x the check interval")
    print("  false changes per check     monitor      byte-hash (same responses)")
    for kind in ("noise", "both", "real"):
        n = max(1, judged[kind])
        print(f"    {kind:<6} ({judged[kind]:>5,} checks)  {false[kind]:>4} = {100 * false[kind] / n:5.2f} %"
              f"   {byte_false[kind]:>5} = {100 * byte_false[kind] / n:6.2f} %")


if __name__ == "__main__":
    raise SystemExit(main())
