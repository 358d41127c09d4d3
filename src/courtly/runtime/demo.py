"""`courtly demo`: start the simulated web on loopback, crawl it, check it.

Offline and self-contained: the simulated web runs as a child process bound
to 127.0.0.0/8 and is stopped (by PID) when the crawl ends. The crawl is a
normal `courtly crawl` with the web's hosts map, loopback allowed and short
delays (allowed without a warning because every target is loopback). At the
end the simulated web's request log is checked for politeness from the
server's side and the result printed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["run_demo", "simweb_process", "SimwebHandle"]


class SimwebHandle:
    def __init__(self, out: Path, proc: subprocess.Popen, ready: dict) -> None:
        self.out = out
        self.proc = proc
        self.port = int(ready["port"])
        self.hosts_file = out / "hosts.json"
        self.manifest_file = out / "manifest.json"
        self.log_file = out / "requests.jsonl"
        self.seeds = [s for s in (out / "seeds.txt").read_text().split() if s]


@contextmanager
def simweb_process(out: Path, args: list[str], *, ready_s: float = 60.0) -> Iterator[SimwebHandle]:
    """Run `courtly simweb --out OUT ARGS...` as a child; yield once it listens."""
    out.mkdir(parents=True, exist_ok=True)
    ready_file = out / "ready.json"
    if ready_file.exists():
        ready_file.unlink()
    cmd = [sys.executable, "-m", "courtly.sim.command", "--out", str(out), *args]
    log = open(out / "simweb.stderr", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + ready_s
        while not ready_file.exists():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"simulated web exited with {proc.returncode}: "
                    + (out / "simweb.stderr").read_text(errors="replace")[-2000:]
                )
            if time.monotonic() > deadline:
                raise RuntimeError("simulated web did not become ready in time")
            time.sleep(0.05)
        ready = json.loads(ready_file.read_text())
        yield SimwebHandle(out, proc, ready)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def run_demo(args) -> int:
    from courtly.config import Config
    from courtly.runtime.progress import Progress
    from courtly.runtime.wiring import crawl_folder
    from courtly.runtime.wiring import UsageError, crawl_with_progress, run_async

    out = Path(args.out)
    sim_dir = out / "simweb"
    if args.hosts < 1:
        raise UsageError("--hosts must be at least 1")
    if args.max_pages < 0:
        raise UsageError(f"--max-pages must be >= 0 (0 = no limit), not {args.max_pages}")
    sim_args = ["--profile", "demo", "--seed", str(args.seed), "--hosts", str(args.hosts),
                "--ips", str(min(args.hosts, 8))]
    # the crawl folder is locked before the simulated web starts: a second demo
    # on the same --out stops here, before it rewrites simweb/ (hosts, port) under the first
    with crawl_folder(out / "crawl"):
        print(f"courtly demo: starting the simulated web ({args.hosts} hosts, seed {args.seed}) on loopback",
              file=sys.stderr)
        with _simweb_on_its_port(sim_dir, sim_args) as web:
            cfg = Config()
            cfg = cfg.replace("crawl", max_pages=args.max_pages, contact="https://example.invalid/courtly-demo",
                              fetch_tasks=64)
            cfg = cfg.replace("politeness", delay_s=0.25)
            cfg = cfg.replace("fetch", total_s=10.0, connect_s=3.0)
            # Only the web's own networks: 127.0.0.1 is SSRF bait and must stay forbidden.
            allowed = tuple(json.loads(web.manifest_file.read_text())["allowed_networks"])
            cfg = cfg.replace("network", allow=allowed, hosts_file=str(web.hosts_file))
            for w in cfg.warnings():
                print(f"courtly: WARNING: {w}", file=sys.stderr)
            print(f"courtly demo: crawling {len(web.seeds)} seeds into {out / 'crawl'}/ (Ctrl-C stops; run again to resume)",
                  file=sys.stderr)
            stats = run_async(crawl_with_progress(cfg, out / "crawl", web.seeds, Progress(enabled=not args.quiet)))
    elapsed = max(1e-9, time.time() - stats.started_at)
    print(f"courtly demo: fetched {stats.fetched} pages and {stats.robots_fetched} robots.txt in "
          f"{elapsed:.1f} s; {stats.decisions} URLs not fetched, each with a reason", file=sys.stderr)
    ok = _check(web, cfg)
    print(f"\nNext:  courtly stats --out {out}/crawl\n       courtly explain URL --out {out}/crawl"
          f"\n       ls {out}/crawl/warc/", file=sys.stderr)
    return 0 if ok else 1


PORT_FILE = "port"   # the simulated web's port, kept so that a second run resumes the same URLs


@contextmanager
def _simweb_on_its_port(sim_dir: Path, sim_args: list[str]) -> Iterator[SimwebHandle]:
    """The demo's simulated web on the port of the previous run in `sim_dir`
    (its URLs carry the port: on another port a resumed crawl would see a new
    web and fetch every page again); a free port the first time, or when the
    old one is taken."""
    port_file = sim_dir / PORT_FILE
    try:
        port = int(port_file.read_text())
    except (OSError, ValueError):
        port = 0
    with ExitStack() as stack:
        try:
            web = stack.enter_context(simweb_process(sim_dir, [*sim_args, "--port", str(port)]))
        except RuntimeError:
            if not port:
                raise
            print(f"courtly demo: port {port} of the previous run is taken: this run crawls the simulated "
                  "web under new URLs (pages already fetched are fetched again)", file=sys.stderr)
            web = stack.enter_context(simweb_process(sim_dir, sim_args))
        port_file.write_text(str(web.port))
        yield web


def _check(web: SimwebHandle, cfg) -> bool:
    """Politeness as the servers saw it."""
    try:
        from courtly.sim.check import check_log
    except ImportError:
        return True
    report = check_log(
        web.log_file, web.manifest_file, delay_s_min=cfg.politeness.delay_s,
        crawl_delay_s_max=cfg.politeness.crawl_delay_s_max,
        ip_concurrency=cfg.politeness.ip_concurrency, ip_rate=cfg.politeness.ip_rate,
    )
    print("\n" + report.render(), file=sys.stderr)
    if report.coverage is not None and report.coverage.missing and cfg.crawl.max_pages:
        print(f"(pages are missing only because the demo stops at --max-pages {cfg.crawl.max_pages}; "
              "run it again with the same --out to resume, or with a larger --max-pages)", file=sys.stderr)
    return report.ok
