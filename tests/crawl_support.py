"""End-to-end helpers: the simulated web as a child process, the CLI as users run it.

Imported by tests (`from crawl_support import ...`); tests/ is on pytest's path."""

from __future__ import annotations

import http.client
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from courtly.runtime.demo import simweb_process

TEST_CONFIG = """
[crawl]
contact = "tests@example.org"
fetch_tasks = 64
[politeness]
delay_s = {delay_s}
crawl_delay_s_max = {crawl_delay_s_max}
response_factor = 2.0
[fetch]
total_s = 3.0
connect_s = 2.0
body_bytes_max = 2000000
[store]
commit_interval_s = 0.2
"""

DELAY_S = 0.2
CRAWL_DELAY_S_MAX = 0.3


def write_config(path: Path, *, delay_s: float = DELAY_S, crawl_delay_s_max: float = CRAWL_DELAY_S_MAX) -> Path:
    path.write_text(TEST_CONFIG.format(delay_s=delay_s, crawl_delay_s_max=crawl_delay_s_max))
    return path


def courtly_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "courtly", *args]


def run_courtly(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(courtly_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def crawl_args(web, out: Path, config: Path) -> list[str]:
    allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
    args = ["crawl", "--config", str(config), "--seeds-file", str(web.out / "seeds.txt"),
            "--hosts-file", str(web.hosts_file), "--out", str(out), "--quiet"]
    for net in allowed:
        args += ["--allow-network", net]
    return args


def log_lines(web) -> int:
    try:
        with open(web.log_file, "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def db_rows(out: Path, sql: str, params: tuple = ()) -> list[tuple]:
    # read-only: a plain connect would make an empty crawl.db before a starting
    # crawl does, and the crawl rightly refuses an empty file as not its own
    db = sqlite3.connect(f"{(out / 'crawl.db').absolute().as_uri()}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


from courtly.sim.reqlog import FLUSH_MARKER_HOST  # noqa: E402  (a name no crawler resolves; log readers skip it)
FLUSH_MARKER_AGENT = "courtly-tests (log flush marker)"


def settle_log(web, timeout_s: float = 120.0) -> None:
    """Return once the server's log file holds every request it answered so far.

    The server writes its buffered log about every second, later on a loaded
    machine, so a fixed sleep is a guess that can leave the last requests out
    of a check. Instead one marker request goes to an unknown host (404, tag
    unknown_host, which every checker leaves out) and the file is polled,
    bounded, until it holds the marker: records are written in the order the
    answers ended, so every request answered before it is in the file."""
    token = uuid.uuid4().hex
    ip = min(ip for ip in json.loads(web.hosts_file.read_text()).values() if ip != "127.0.0.1")  # not the bait
    conn = http.client.HTTPConnection(ip, web.port, timeout=timeout_s)
    try:
        conn.request("GET", f"/{token}", headers={"Host": f"{FLUSH_MARKER_HOST}:{web.port}",
                                                   "User-Agent": FLUSH_MARKER_AGENT})
        conn.getresponse().read()
    finally:
        conn.close()
    deadline = time.monotonic() + timeout_s
    needle = token.encode()
    while not _tail_holds(web.log_file, needle):
        assert time.monotonic() < deadline, "the simulated web never wrote its log (bounded wait)"
        time.sleep(0.1)


def _tail_holds(path: Path, needle: bytes, tail_bytes: int = 1 << 20) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - tail_bytes))
            return needle in fh.read()
    except FileNotFoundError:
        return False


def check(web, **overrides):
    from courtly.sim.check import check_log

    settle_log(web)
    params = dict(delay_s_min=DELAY_S, crawl_delay_s_max=CRAWL_DELAY_S_MAX)
    params.update(overrides)
    return check_log(web.log_file, web.manifest_file, **params)


@pytest.fixture
def simweb_factory(tmp_path):
    """simweb_factory(*args) -> handle; every web started is stopped after the test."""
    stack = []

    def start(*args: str):
        cm = simweb_process(tmp_path / f"sim{len(stack)}", list(args))
        web = cm.__enter__()
        stack.append(cm)
        return web

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def kill_when(proc: subprocess.Popen, web, lines: int, timeout: float = 120) -> bool:
    """SIGKILL `proc` once the server log holds `lines` lines; False if it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if log_lines(web) >= lines:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    raise AssertionError(f"crawl did not reach {lines} logged requests in {timeout} s")


def crawl_with_command_midway(web, out: Path, config: Path, err_path: Path, ready, command: list[str],
                              what: str) -> subprocess.CompletedProcess:
    """Run `courtly crawl` (JSON logs to `err_path`) on the simulated web; once
    `ready()` holds, run `courtly *command` from another process while the
    crawl still runs, then let the crawl finish. Returns the command's result."""
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(courtly_cmd(*crawl_args(web, out, config), "--log-format", "json"),
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not ready():
                assert proc.poll() is None, f"the crawl ended before the {what}"
                assert time.monotonic() < deadline, "the crawl made too few requests"
                time.sleep(0.05)
            p = run_courtly(*command)
            assert p.returncode == 0, p.stderr
            assert proc.poll() is None, f"the {what} must land while the crawl runs"
            proc.wait(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err_path.read_text()[-3000:]
    settle_log(web)
    return p
