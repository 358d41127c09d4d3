"""pywb replay of a crawl's WARC files for `courtly serve --replay`.

What it owns: finding a pywb installation and running it, loopback only, on
a throwaway collection of a crawl folder's closed WARC files.

How it works: pywb pins packages that clash with courtly's, so it lives in a
virtualenv of its own: ``$COURTLY_PYWB_VENV``, else ``.cache/pywb-venv`` in the
working folder, else in the source checkout courtly runs from (where the
test suite builds it). `PywbReplay` runs ``wb-manager init`` and
``wb-manager add`` in a temporary folder (the files are copied and indexed
there, so the crawl folder is never written), starts ``wayback`` on a free
port of the given loopback host, waits until it answers and, on exit,
stops it by its PID and removes the folder.

Rules: never installs anything (a missing pywb is a `PywbError` saying where
it looked and how to install it); every wait is bounded (`START_S`,
`STOP_S`, `MANAGER_S`); ``.open`` files (being written) are left out.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from courtly.shell.warc_index import WARC_SUFFIX

__all__ = ["PywbReplay", "PywbError", "pywb_venv", "clean_env", "free_port", "wait_ready", "COLLECTION"]

COLLECTION = "crawl"
START_S = 60.0
STOP_S = 10.0
MANAGER_S = 600.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PywbError(Exception):
    """pywb is missing or did not start."""


def pywb_venv() -> Path:
    """The virtualenv holding pywb (see the module docstring for the order)."""
    configured = os.environ.get("COURTLY_PYWB_VENV")
    candidates = [Path(configured)] if configured else [
        Path.cwd() / ".cache" / "pywb-venv", Path(__file__).resolve().parents[3] / ".cache" / "pywb-venv"]
    for venv in candidates:
        if (venv / "bin" / "wayback").exists() and (venv / "bin" / "wb-manager").exists():
            return venv
    raise PywbError(f"--replay needs pywb; none found in {', '.join(map(str, candidates))} "
                    "(python3 -m venv .cache/pywb-venv && .cache/pywb-venv/bin/pip install pywb==2.10.0, "
                    "or set COURTLY_PYWB_VENV)")


class PywbReplay:
    """`with PywbReplay(warc_dir) as p:` pywb serves the files at `p.collection_url`."""

    def __init__(self, warc_dir: Path, *, host: str = "127.0.0.1") -> None:
        self.warc_dir = Path(warc_dir)
        self.host = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        self.files = 0
        self.collection_url = ""
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "PywbReplay":
        venv = pywb_venv()
        paths = sorted(self.warc_dir.glob(f"*{WARC_SUFFIX}"))
        if not paths:
            raise PywbError(f"--replay: {self.warc_dir} holds no closed WARC file yet")
        self._tmp = tempfile.TemporaryDirectory(prefix="courtly-pywb-")
        root = Path(self._tmp.name)
        try:
            _manager(venv, root, "init", COLLECTION)
            _manager(venv, root, "add", COLLECTION, *map(str, paths))
            port = free_port(self.host)
            log = open(root / "wayback.log", "wb")
            self._proc = subprocess.Popen(
                [str(venv / "bin" / "wayback"), "-b", self.host, "-p", str(port), "-t", "4"],
                cwd=root, env=clean_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            base = f"http://{self.host}:{port}"
            wait_ready(self._proc, base, root / "wayback.log")
        except BaseException:
            self.__exit__()
            raise
        self.files = len(paths)
        self.collection_url = f"{base}/{COLLECTION}"
        return self

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_S)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def clean_env() -> dict[str, str]:
    """Our environment without what would leak our packages into pywb's venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _manager(venv: Path, root: Path, *args: str) -> None:
    done = subprocess.run([str(venv / "bin" / "wb-manager"), *args], cwd=root, env=clean_env(),
                          capture_output=True, timeout=MANAGER_S)
    if done.returncode != 0:
        raise PywbError(f"wb-manager {args[0]} failed ({done.returncode}): "
                        + (done.stderr or done.stdout).decode(errors="replace").strip()[-500:])


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_ready(proc: subprocess.Popen, base: str, log_path: Path) -> None:
    """Return once `base`/ answers 200; PywbError when wayback exits or START_S pass."""
    deadline_at = time.monotonic() + START_S
    while time.monotonic() < deadline_at:
        if proc.poll() is not None:
            raise PywbError(f"wayback exited with {proc.returncode}: "
                            f"{log_path.read_text(errors='replace').strip()[-500:]}")
        try:
            with _NO_PROXY.open(base + "/", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.1)
    raise PywbError(f"wayback did not answer within {START_S:g} s")
