"""Distributed-mode harness: a throwaway PostgreSQL, the simulated web, N worker
processes (`python -m courtly worker`), judged from the server's request log.

Each worker sends its own User-Agent (`courtly-test/<worker id>`), which the
simulated web logs, so every request in the log names the process that made
it. Workers log JSON lines (acquired / lost / released partitions with
times) to `<tmp>/<worker id>.log`. Short lease terms make the tests fast; the
defaults (30 s leases) are documented in docs/distributed.md.

Used by tests/e2e/test_distributed.py and bench/distributed.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from crawl_support import CRAWL_DELAY_S_MAX, DELAY_S, TEST_CONFIG

DIST_CONFIG = TEST_CONFIG + """[distributed]
lease_ttl_s = {ttl_s}
renew_before_s = {renew_before_s}
stop_margin_s = {stop_margin_s}
renew_retry_s = 0.5
ip_lease_s = 3.0
heartbeat_s = 0.5
live_s = 2.0
rebalance_s = 1.0
claim_s = 0.2
"""

TTL_S = 4.0
STOP_MARGIN_S = 1.0
PARTITIONS = 64


def write_dist_config(path: Path, *, ttl_s: float = TTL_S, stop_margin_s: float = STOP_MARGIN_S,
                      delay_s: float = DELAY_S, crawl_delay_s_max: float = CRAWL_DELAY_S_MAX) -> Path:
    path.write_text(DIST_CONFIG.format(delay_s=delay_s, crawl_delay_s_max=crawl_delay_s_max, ttl_s=ttl_s,
                                       renew_before_s=ttl_s - 1.5, stop_margin_s=stop_margin_s))
    return path


def db_rows(dsn: str, sql: str, *args) -> list:
    """Rows of one query on the crawl's database (a connection of its own)."""
    import asyncio

    import asyncpg

    async def go():
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()
    return asyncio.run(go())


def agent_of(worker_id: str) -> str:
    return f"courtly-test/{worker_id} (+tests@example.org)"


@dataclass
class Cluster:
    """Workers of one crawl; `start`, `wait`, `signal`, `log_events`."""

    dsn: str
    web: object
    tmp: Path
    config: Path
    out: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)

    def submit(self, partitions: int = PARTITIONS) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "courtly", "submit", "--db", self.dsn, "--partitions",
                               str(partitions), "--seeds-file", str(self.web.out / "seeds.txt")],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        return proc

    def worker_args(self, worker_id: str, *extra: str) -> list[str]:
        allowed = json.loads(self.web.manifest_file.read_text())["allowed_networks"]
        args = [sys.executable, "-m", "courtly", "worker", "--db", self.dsn, "--out", self.out,
                "--config", str(self.config), "--hosts-file", str(self.web.hosts_file), "--worker-id", worker_id,
                "--user-agent", agent_of(worker_id), "--log-format", "json", "--exit-when-done",
                "--spool", str(self.tmp / f"spool-{worker_id}"), *extra]
        for net in allowed:
            args += ["--allow-network", net]
        return args

    def start(self, worker_id: str, *extra: str, exit_when_done: bool = True) -> subprocess.Popen:
        """A worker; `exit_when_done=False`: it runs until --duration-s or a signal."""
        args = [a for a in self.worker_args(worker_id, *extra) if exit_when_done or a != "--exit-when-done"]
        log = open(self.tmp / f"{worker_id}.log", "ab")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.procs[worker_id] = proc
        self.started_at[worker_id] = time.time()
        return proc

    def wait(self, timeout: float = 240) -> dict[str, int]:
        """Wait for every worker to exit (they stop once the crawl is complete)."""
        deadline = time.monotonic() + timeout
        codes = {}
        for wid, proc in self.procs.items():
            left = max(0.1, deadline - time.monotonic())
            try:
                codes[wid] = proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                self.stop_all()
                raise AssertionError(f"worker {wid} did not finish in {timeout} s:\n" + self.tail(wid)) from None
        return codes

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()

    def tail(self, worker_id: str, n: int = 4000) -> str:
        p = self.tmp / f"{worker_id}.log"
        return p.read_text(errors="replace")[-n:] if p.exists() else ""

    def log_events(self, worker_id: str) -> list[dict]:
        out = []
        p = self.tmp / f"{worker_id}.log"
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def acquisitions(self, worker_id: str) -> list[tuple[float, int]]:
        """(asked_at, partition) for every partition the worker acquired."""
        return [(e["asked_at"], p) for e in self.log_events(worker_id) if e.get("event") == "partitions_acquired"
                for p in e["partitions"]]


def wait_for_log_lines(web, lines: int, timeout: float = 120, procs=()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(web.log_file, "rb") as fh:
                if sum(1 for _ in fh) >= lines:
                    return
        except FileNotFoundError:
            pass
        if procs and all(p.poll() is not None for p in procs):
            raise AssertionError("the workers ended before the crawl reached the fault point")
        time.sleep(0.05)
    raise AssertionError(f"the crawl did not reach {lines} logged requests in {timeout} s")
