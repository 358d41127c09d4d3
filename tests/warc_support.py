"""Every WARC file the suite writes is read by the ecosystem's own tools.

``check_warcs(paths)`` runs ``warcio check -v`` and ``warcio index`` from the
project's own environment (warcio 1.8 beside the ``brotli`` package courtly
installs: what a user who pip-installed courtly has) on the files and fails
with the tools' output when either does not exit 0.

tests/conftest.py applies it after every passing test to the closed WARC
files (``*.warc.gz``) left under the test's ``tmp_path``; a test that writes
a file warcio cannot read on purpose is marked ``@pytest.mark.warcio_unreadable(why)``
(a damaged file; a br-coded response, which warcio 1.8 cannot decode with
the ``brotli`` package: webrecorder/warcio#73). Tests
whose WARC files live elsewhere (module-scoped crawls) call it themselves.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

TOOL_TIMEOUT_S = 300


def tool(name: str) -> str:
    """A console script installed beside this Python (warcio, cdxj-indexer)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    assert found, f"{name} is not installed (pip install -e '.[test]')"
    return found


def closed_warcs(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*.warc.gz") if p.is_file())


def check_warcs(paths: Iterable[Path]) -> None:
    paths = [str(p) for p in paths]
    if not paths:
        return
    for command in (["check", "-v"], ["index"]):
        proc = subprocess.run([tool("warcio"), *command, *paths], capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (f"warcio {command[0]} failed ({proc.returncode}) on {paths}:\n"
                                      + proc.stdout[-2000:] + proc.stderr[-3000:])
