"""What the benchmarks share: a pinned simulated web, a measured crawler, the server's verdict.

`simulated_web(...)` starts `courtly simweb --profile bench` in its own process
(pinned to CPU 0 when `taskset` exists and there are two or more CPUs) and
yields the `SimwebHandle` plus the allowed networks of its manifest.
`run_measured(cmd, ...)` runs one crawler command pinned to CPU 1 as its own
process group and returns a `Measured`: wall time, user+sys CPU seconds of the
crawler and every descendant it waited for (from `os.wait4`), the largest
single-process ru_maxrss, and the peak of the summed RSS of the whole process
tree (sampled every 0.1 s with psutil, when psutil is installed).
`server_verdict(web, ...)` reads the server's request log: pages (200 answers
whose path the model resolves to an HTML page; robots.txt, sitemaps, feeds and
errors are not pages) and the politeness violations found by
`courtly.sim.check.check_log`, the same checkers the tests use (their
politeness key is the registered domain: www.acme1.test and shop.acme1.test
share one), plus the per-key rules (overlap, gap) counted per host name instead, for
crawlers whose limits are per host name (Scrapy's download slots, Crawlee's
throttled domains).

Rules: every run is bounded (`timeout_s`; past it the crawler's process group
gets SIGTERM, then SIGKILL) and only processes started here are signalled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from courtly.runtime.demo import SimwebHandle, simweb_process  # noqa: E402

__all__ = ["ROOT", "pin", "simulated_web", "courtly_command", "Measured", "run_measured", "Verdict", "server_verdict"]

SAMPLE_EVERY_S = 0.1
LOG_FLUSH_WAIT_S = 1.2  # the request log is flushed at least every second


def pin(cpu: int) -> list[str]:
    """The `taskset` prefix that pins a command to `cpu`, or nothing on a single CPU."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu)]
    return []


@contextmanager
def simulated_web(folder: Path, *, hosts: int, pages_per_host: int, ips: int,
                  seed: int = 1, ready_s: float = 180.0) -> Iterator[tuple[SimwebHandle, list[str]]]:
    """The bench-profile simulated web, pinned to CPU 0; yields (handle, allowed networks)."""
    sim_args = ["--profile", "bench", "--hosts", str(hosts), "--pages-per-host", str(pages_per_host),
                "--ips", str(ips), "--seed", str(seed)]
    with simweb_process(folder, sim_args, ready_s=ready_s) as web:
        if pin(0):
            subprocess.run(["taskset", "-pc", "0", str(web.proc.pid)], capture_output=True)
        allowed = list(json.loads(web.manifest_file.read_text())["allowed_networks"])
        yield web, allowed


def courtly_command(tmp: Path, web: SimwebHandle, allowed: list[str], *, max_pages: int, fetch_tasks: int,
                    delay_s: float, ip_rate: float, ip_concurrency: int, politeness_key: str = "domain") -> list[str]:
    """`python -m courtly crawl` with a config for the simulated web (written into `tmp`)."""
    cfg = tmp / "bench.toml"
    cfg.write_text(
        f"[crawl]\ncontact = \"bench@example.invalid\"\nmax_pages = {max_pages}\n"
        f"fetch_tasks = {fetch_tasks}\npoliteness_key = \"{politeness_key}\"\n"
        f"[politeness]\ndelay_s = {delay_s}\nip_rate = {ip_rate}\n"
        f"ip_concurrency = {ip_concurrency}\n"
        f"[fetch]\ntotal_s = 20.0\n[network]\nallow = {json.dumps(allowed)}\n"
        f"hosts_file = \"{web.hosts_file}\"\n"
    )
    return [sys.executable, "-m", "courtly", "crawl", "--config", str(cfg),
            "--seeds-file", str(web.out / "seeds.txt"), "--out", str(tmp / "crawl"), "--quiet"]


@dataclass(slots=True)
class Measured:
    returncode: int
    wall_s: float
    cpu_s: float
    sys_s: float      # the kernel's share of cpu_s (syscalls: sockets, epoll, writes, fsync)
    maxrss_mb: float  # largest single process of the tree (ru_maxrss)
    tree_rss_peak_mb: float | None  # peak of the summed RSS of the tree (psutil), None without psutil
    timed_out: bool
    stdout: Path
    stderr: Path

    def tail(self, chars: int = 2000) -> str:
        text = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return text[-chars:]

    @property
    def rss_mb(self) -> float:
        return self.tree_rss_peak_mb if self.tree_rss_peak_mb is not None else self.maxrss_mb


def _sample_tree(pid: int, stop: threading.Event, peak: list[float]) -> None:
    try:
        import psutil
    except ImportError:
        return
    peak.append(0.0)
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    while not stop.wait(SAMPLE_EVERY_S):
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        peak[0] = max(peak[0], total / 2**20)


def run_measured(cmd: list[str], folder: Path, *, cpu: int = 1, timeout_s: float = 900.0,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> Measured:
    """Run `cmd` pinned to `cpu` in its own process group and measure it (see the module doc)."""
    folder.mkdir(parents=True, exist_ok=True)
    out_path, err_path = folder / "stdout.txt", folder / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen([*pin(cpu), *cmd], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
        stop = threading.Event()
        peak: list[float] = []
        sampler = threading.Thread(target=_sample_tree, args=(proc.pid, stop, peak), daemon=True)
        sampler.start()
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            _stop_group(proc.pid)

        killer = threading.Timer(timeout_s, expire)
        killer.daemon = True
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
            stop.set()
        wall = time.monotonic() - t0
        timed_out = fired.is_set()
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.join(timeout=2)
        _stop_group(proc.pid, grace_s=0.0)  # leftovers of the crawler's own group, if any
    return Measured(returncode=proc.returncode, wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
                    sys_s=usage.ru_stime,
                    maxrss_mb=usage.ru_maxrss / 1024, tree_rss_peak_mb=peak[0] if peak else None,
                    timed_out=timed_out, stdout=out_path, stderr=err_path)


def _stop_group(pgid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the process group we started (then SIGKILL after `grace_s`)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass(slots=True)
class Verdict:
    pages: int  # 200 answers for HTML pages (robots.txt, sitemaps, feeds excluded)
    requests: int
    by_kind: dict[str, int] = field(default_factory=dict)  # "robots", "page", "other", "error"
    span_s: float = 0.0  # first request's arrival to the last one's completion, in the server's log
    violations: int = 0
    rules: dict[str, int] = field(default_factory=dict)  # violations per rule
    host_rules: dict[str, int] = field(default_factory=dict)  # key_* violations keyed by host name, not domain
    report: Any = None  # the CheckReport, for render()
    keys: int = 0  # politeness keys (registered domains) of the web's hosts: keys / delay bounds requests/s
    # requests per whole second from the first arrival, by kind (the same kinds as by_kind)
    timeline: list[dict[str, int]] = field(default_factory=list)


def server_verdict(web: SimwebHandle, *, delay_s: float, ip_rate: float, ip_concurrency: int,
                   token: str = "courtly", politeness_key: str = "domain") -> Verdict:
    """Pages and politeness violations from the server's request log (see the module doc).
    `politeness_key` "host" checks one request at a time and the delay per
    host name instead of per registered domain (and counts keys so)."""
    from courtly.core.urls import registered_domain
    from courtly.sim.check import CheckParams, check_key_politeness, check_log
    from courtly.sim.manifest import web_from_manifest
    from courtly.sim.reqlog import load_log

    time.sleep(LOG_FLUSH_WAIT_S)
    records = load_log(web.log_file)
    model = web_from_manifest(json.loads(web.manifest_file.read_text()))
    kinds: Counter[str] = Counter()
    first = min((r.arrived_at for r in records), default=0.0)
    seconds: list[Counter[str]] = []
    for r in records:
        spec = model.host_of(r.host)
        if r.path == "/robots.txt":
            kind = "robots"
        elif spec is None or r.status != 200:
            kind = "error"
        elif model.layout(spec.name).resolve(r.path).kind in ("page", "extra"):
            kind = "page"
        else:
            kind = "other"
        kinds[kind] += 1
        second = int(r.arrived_at - first)
        while len(seconds) <= second:
            seconds.append(Counter())
        seconds[second][kind] += 1
    report = check_log(records, web.manifest_file, delay_s_min=delay_s, ip_rate=ip_rate,
                       ip_concurrency=ip_concurrency, coverage=False, duplicate_fetches_max=10**9,
                       token=token, key_of=_host_key if politeness_key == "host" else None)
    rules = Counter(v.rule for v in report.violations)
    per_host = check_key_politeness(records, model, CheckParams(delay_s_min=delay_s), _host_key)
    host_rules = Counter(v.rule for v in per_host)
    return Verdict(pages=kinds["page"], requests=len(records), by_kind=dict(kinds),
                   span_s=float(report.stats.get("span_s", 0.0)), violations=len(report.violations),
                   rules=dict(rules), host_rules=dict(host_rules), report=report,
                   keys=len({(_host_key if politeness_key == "host" else registered_domain)(s.name)
                             for s in model.hosts}),
                   timeline=[dict(c) for c in seconds])


def _host_key(host: str) -> str:
    return host.rsplit(":", 1)[0].lower()
