"""setup.py's build of the optional C extension (courtly.core._speedups).

Without a working compiler or the upstream header `xxhash.h` the build says
so in one line and succeeds without the extension (the pure-Python paths are
used); with them it builds an extension that imports. Each build goes to a
temporary folder, never over the build in src/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MISSING = "courtly: the C extension courtly.core._speedups is skipped"


def _build(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "temp")],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=240,
    )


def _built(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "lib").rglob("_speedups*.so"))


def test_without_a_compiler_the_build_skips_the_extension_in_one_line_and_succeeds(tmp_path):
    # `false` stands for a compiler that cannot compile the probe, as when
    # xxhash.h is missing: the probe fails and the extension is skipped
    done = _build(tmp_path, CC="false")
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith(MISSING)], done.stderr
    assert _built(tmp_path) == []


@pytest.mark.skipif(shutil.which("gcc") is None or not Path("/usr/include/xxhash.h").exists(),
                    reason="needs gcc and xxhash.h (Debian: libxxhash-dev)")
def test_with_a_compiler_and_xxhash_h_the_extension_builds_and_imports(tmp_path):
    done = _build(tmp_path)
    assert done.returncode == 0, done.stderr
    assert MISSING not in done.stderr
    (so,) = _built(tmp_path)
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('courtly.core._speedups', "
            f"{str(so)!r}); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "print(m.xxh64(b'abc'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    import xxhash

    assert int(out.stdout) == xxhash.xxh64_intdigest(b"abc")
