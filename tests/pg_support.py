"""A throwaway PostgreSQL server for tests, on loopback.

``pg_server()`` runs ``initdb`` into a fresh temporary folder, starts the
server with ``pg_ctl`` on 127.0.0.1 and a free port (trust authentication for
127.0.0.1 only, the Unix socket inside the private folder, fsync off: test data
need not survive a power cut), yields a `PgServer` and stops it with
``pg_ctl stop -m fast`` before removing the folder. PostgreSQL refuses to run
as root, so when the tests run as root every server command runs as the
``postgres`` user (``runuser -u postgres --``) and the folder is handed to it.

``PgServer.dsn`` is the connection string of the ``postgres`` database;
``create_database()`` makes a fresh, empty database per test and returns its
DSN; ``restart()`` stops and starts the server on the same port and folder
(``mode="immediate"`` simulates a crash: recovery replays the WAL), for the
"PostgreSQL restarted mid-crawl" fault test.

Use it from a conftest (``tests/`` is on sys.path)::

    from pg_support import pg_fixture
    postgres = pg_fixture()                    # session-scoped PgServer

    def test_x(postgres):
        dsn = postgres.create_database()

The fixture skips (with the reason) only when the server binaries are missing
or, as root, when there is no ``postgres`` user to run them; any other failure
to start is an error with the server log attached.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PgServer", "pg_server", "pg_fixture", "missing_reason"]

_BINARIES = ("initdb", "pg_ctl", "postgres")
_RUN_AS = "postgres"
_START_TIMEOUT_S = 60
_STOP_TIMEOUT_S = 60
_names = itertools.count(1)


def missing_reason() -> str | None:
    """Why no throwaway server can run here (None when it can)."""
    missing = [b for b in _BINARIES if shutil.which(b) is None]
    if missing:
        return f"PostgreSQL server binaries not on PATH: {', '.join(missing)}"
    if os.geteuid() == 0:
        try:
            import pwd
            pwd.getpwnam(_RUN_AS)
        except KeyError:
            return f"running as root and there is no '{_RUN_AS}' user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and runuser(1) is missing"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One throwaway server. `dsn` connects to its `postgres` database."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.log_path = root / "server.log"
        self.port = port
        self.host = "127.0.0.1"
        self.user = "postgres"
        self.running = False

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    # ---- commands --------------------------------------------------------------------

    def _run(self, *args: str, timeout: float = _START_TIMEOUT_S) -> subprocess.CompletedProcess:
        cmd = list(args)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", _RUN_AS, "--", *cmd]
        # a clean environment: no PG* variables of the caller leak in
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=self.root, check=False)

    def _check(self, proc: subprocess.CompletedProcess, what: str) -> None:
        if proc.returncode != 0:
            log = self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""
            raise RuntimeError(f"{what} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n"
                               f"--- server log ---\n{log}")

    def init(self) -> None:
        proc = self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust",
                         "-E", "UTF8", "--no-locale", "--no-sync")
        self._check(proc, "initdb")
        # loopback only; the socket lives in the private folder
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(
                "\n# courtly tests\n"
                "listen_addresses = '127.0.0.1'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 200\nshared_buffers = 64MB\n"
                "log_min_messages = warning\nlog_connections = off\n"
            )
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host  all all 127.0.0.1/32 trust\n"
        )

    def start(self) -> None:
        proc = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w",
                         "-t", str(_START_TIMEOUT_S), "start", timeout=_START_TIMEOUT_S + 10)
        self._check(proc, "pg_ctl start")
        self.running = True
        self._wait_for_port()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clean) or `immediate` (like a crash)."""
        if not self.running:
            return
        proc = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", str(_STOP_TIMEOUT_S),
                         "stop", timeout=_STOP_TIMEOUT_S + 10)
        self._check(proc, "pg_ctl stop")
        self.running = False

    def restart(self, mode: str = "fast", down_s: float = 0.0) -> None:
        """Stop, stay down `down_s`, start again on the same port and folder."""
        self.stop(mode)
        if down_s:
            time.sleep(down_s)
        self.start()

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    # ---- databases -------------------------------------------------------------------

    def create_database(self, name: str | None = None) -> str:
        """A fresh empty database; returns its DSN."""
        name = name or f"t{os.getpid()}_{next(_names)}"
        createdb = Path(shutil.which("pg_ctl") or "pg_ctl").resolve().parent / "createdb"
        if createdb.exists():
            proc = self._run(str(createdb), "-h", self.host, "-p", str(self.port), "-U", self.user,
                             "-T", "template0", name)
            self._check(proc, "createdb")
        else:  # pragma: no cover - only where the client tools are not installed
            import asyncio

            import asyncpg

            async def create() -> None:
                conn = await asyncpg.connect(self.dsn)
                try:
                    await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
                finally:
                    await conn.close()

            asyncio.run(create())
        return self.dsn_for(name)


# Stops the server and removes its folder once the test process is gone, even
# when it was killed (SIGKILL, a CI timeout) and its finally blocks never ran:
# an orphaned PostgreSQL would keep its port, memory and folder for good.
_WATCHDOG = """
import os, shutil, subprocess, sys, time
owner, root, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
while True:
    time.sleep(1.0)
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
subprocess.run(stop, capture_output=True, timeout=60, cwd="/")
shutil.rmtree(root, ignore_errors=True)
"""


def _watchdog(server: PgServer) -> subprocess.Popen:
    stop = ["pg_ctl", "-D", str(server.data), "-m", "immediate", "-w", "stop"]
    if os.geteuid() == 0:
        stop = ["runuser", "-u", _RUN_AS, "--", *stop]
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(server.root), *stop],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)   # a Ctrl-C of the test run must not end it first


@contextlib.contextmanager
def pg_server() -> Iterator[PgServer]:
    """A running throwaway server; stopped and removed on exit."""
    reason = missing_reason()
    if reason:
        raise RuntimeError(reason)
    root = Path(tempfile.mkdtemp(prefix="courtly-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, user=_RUN_AS, group=None)
    os.chmod(root, 0o700)
    server = PgServer(root, _free_port())
    watchdog = None
    try:
        server.init()
        watchdog = _watchdog(server)
        server.start()
        yield server
    finally:
        try:
            server.stop("fast")
        finally:
            shutil.rmtree(root, ignore_errors=True)
            if watchdog is not None:
                watchdog.kill()
                watchdog.wait()


def pg_fixture(scope: str = "session"):
    """A pytest fixture yielding a running `PgServer` (skips when none can run)."""
    import pytest

    @pytest.fixture(scope=scope)
    def _postgres() -> Iterator[PgServer]:
        reason = missing_reason()
        if reason:
            pytest.skip(reason)
        with pg_server() as server:
            yield server

    return _postgres
