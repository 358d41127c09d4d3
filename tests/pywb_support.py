"""pywb for replay tests: a venv of its own and a loopback server.

pywb pins dependencies that conflict with courtly's (brotlipy), so it never
goes into the project's environment. ``pywb_venv()`` returns a virtualenv
with pywb in it: ``$COURTLY_PYWB_VENV`` if set, else ``<repo>/.cache/pywb-venv``
(git-ignored), created on first use with ``python -m venv`` + ``pip install``
under a file lock and marked ready only when the install finished.

``pywb_server(warc_paths, port)`` builds a collection in a temporary folder
(``wb-manager init`` + ``wb-manager add``, or our own ``.cdxj`` files with
``use_our_index=True``), runs ``wayback`` bound to 127.0.0.1, waits until it
answers, yields the server's base URL (``http://127.0.0.1:PORT``) and stops it
by its PID. ``fetch_replay()`` gets ``/<coll>/<timestamp>id_/<url>`` without
any proxy and without decoding the body.

Use it from a test (``tests/`` must be on sys.path; tests/shell/conftest.py
does that)::

    from pywb_support import fetch_replay, pywb_server
    with pywb_server(paths) as base:
        status, headers, body = fetch_replay(base, "20240101000000", url)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

from courtly.shell.pywb import clean_env as _clean_env
from courtly.shell.pywb import free_port
from courtly.shell.pywb import wait_ready as _wait_ready
from courtly.shell.warc import cdxj_path

PYWB_REQUIREMENT = "pywb==2.10.0"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENV = REPO_ROOT / ".cache" / "pywb-venv"
COLLECTION = "coll"
_READY_MARKER = ".courtly-pywb-ready"
_INSTALL_TIMEOUT_S = 900
_STOP_TIMEOUT_S = 10.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def pywb_venv() -> Path:
    """A virtualenv with pywb installed (created and cached when missing)."""
    configured = os.environ.get("COURTLY_PYWB_VENV")
    if configured:
        venv = Path(configured)
        if not _bin(venv, "wayback").exists():
            raise RuntimeError(f"COURTLY_PYWB_VENV={venv} has no bin/wayback")
        return venv
    venv = DEFAULT_VENV
    if (venv / _READY_MARKER).exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / "pywb-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if not (venv / _READY_MARKER).exists():
            _build_venv(venv)
    return venv


def _build_venv(venv: Path) -> None:
    if venv.exists():
        shutil.rmtree(venv)  # a half-built one from an interrupted run
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_clean_env())
    subprocess.run(
        [str(_bin(venv, "python")), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", PYWB_REQUIREMENT],
        check=True,
        env=_clean_env(),
        timeout=_INSTALL_TIMEOUT_S,
    )
    if not _bin(venv, "wayback").exists():
        raise RuntimeError(f"pip installed {PYWB_REQUIREMENT} but {venv}/bin/wayback is missing")
    (venv / _READY_MARKER).write_text(PYWB_REQUIREMENT + "\n")


@contextlib.contextmanager
def pywb_server(
    warc_paths: Iterable[Path],
    port: int | None = None,
    *,
    use_our_index: bool = False,
    collection: str = COLLECTION,
) -> Iterator[str]:
    """Serve ``warc_paths`` from a fresh pywb collection on 127.0.0.1.

    ``port`` None or 0 picks a free port. With ``use_our_index`` the files'
    ``.cdxj`` (beside each WARC) become the collection's index instead of
    pywb's own indexing, which checks that pywb accepts our CDXJ.
    """
    venv = pywb_venv()
    paths = [Path(p).resolve() for p in warc_paths]
    with tempfile.TemporaryDirectory(prefix="courtly-pywb-") as tmp:
        root = Path(tmp)
        _wb_manager(venv, root, "init", collection)
        if use_our_index:
            _install_our_index(root / "collections" / collection, paths)
        else:
            _wb_manager(venv, root, "add", collection, *map(str, paths))
        port = port or free_port("127.0.0.1")
        log_path = root / "wayback.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(_bin(venv, "wayback")), "-b", "127.0.0.1", "-p", str(port), "-t", "4"],
                cwd=root,
                env=_clean_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                base = f"http://127.0.0.1:{port}"
                _wait_ready(proc, base, log_path)
                yield base
            finally:
                _stop(proc)


def fetch_replay(
    base_url: str, timestamp: str, url: str, *, collection: str = COLLECTION
) -> tuple[int, dict[str, str], bytes]:
    """GET the original bytes of a capture (``id_`` mode): status, headers
    (lower-cased names), body as sent by pywb (not content-decoded here)."""
    request = urllib.request.Request(
        f"{base_url}/{collection}/{timestamp}id_/{url}",
        headers={"Accept-Encoding": "gzip, deflate, br"},
    )
    try:
        with _NO_PROXY.open(request, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


# ---------------------------------------------------------------- internals


def _bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def _wb_manager(venv: Path, root: Path, *args: str) -> None:
    done = subprocess.run(
        [str(_bin(venv, "wb-manager")), *args],
        cwd=root,
        env=_clean_env(),
        capture_output=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"wb-manager {' '.join(args[:2])} failed ({done.returncode}):\n"
            + done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        )


def _install_our_index(coll_dir: Path, paths: list[Path]) -> None:
    archive, indexes = coll_dir / "archive", coll_dir / "indexes"
    lines: list[str] = []
    for path in paths:
        shutil.copy2(path, archive / path.name)
        lines.extend(cdxj_path(path).read_text().splitlines())
    (indexes / "index.cdxj").write_text("".join(line + "\n" for line in sorted(lines)))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # SIGTERM to proc.pid
    try:
        proc.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=_STOP_TIMEOUT_S)
