"""The tests' throwaway PostgreSQL does not outlive a killed test process.

A test run killed with SIGKILL (a CI timeout, an impatient developer) runs no
finally block: without its watchdog the server would keep its port, memory
and folder until the machine stops. Skips where PostgreSQL cannot run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pg_support import missing_reason

TESTS = Path(__file__).resolve().parent

CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pg_support import pg_server
with pg_server() as server:
    print(server.root, server.port, flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
def test_the_server_stops_and_its_folder_goes_when_the_test_process_is_killed():
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS)], stdout=subprocess.PIPE, text=True)
    try:
        root, port = child.stdout.readline().split()
        pid_file = Path(root) / "data" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (Path(root).exists() or _alive(postmaster)):
            time.sleep(0.2)
        assert not _alive(postmaster), "the server outlived its killed test process"
        assert not Path(root).exists()
    finally:
        if child.poll() is None:
            child.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
