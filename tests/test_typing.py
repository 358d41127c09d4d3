"""mypy --strict holds the pure core and the ports, and the shell has the ports' shapes.

The settings are pyproject.toml's [tool.mypy] (the same run as .ci/run's
`mypy` step), so the suite itself fails on a type error in core/ or ports.py.
tests/ports_conformance.py turns each shell implementation into its port.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[lint]' installs it)")


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@needs_mypy
def test_core_and_ports_have_no_strict_type_error():
    done = _mypy()   # the files of [tool.mypy]: src/courtly/core, src/courtly/ports.py
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues found" in done.stdout


def test_the_strict_files_include_core_and_ports():
    import tomllib

    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert "src/courtly/core" in files and "src/courtly/ports.py" in files


@needs_mypy
def test_the_shell_implements_the_ports_it_is_wired_into():
    done = _mypy(str(ROOT / "tests" / "ports_conformance.py"))
    assert done.returncode == 0, done.stdout + done.stderr


@needs_mypy
def test_the_settings_fail_a_wrong_type_and_an_unannotated_function(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def half(n: int) -> int:\n    return n / 2\n\n\ndef loose(x):\n    return x\n")
    done = _mypy(str(bad))
    assert done.returncode == 1
    assert "Incompatible return value type" in done.stdout
    assert "missing a type annotation" in done.stdout   # --strict, not only the default checks


def test_the_c_extensions_stub_names_every_function_it_exports():
    import ast

    speedups = pytest.importorskip("courtly.core._speedups", reason="the C extension is not built")
    stub = ast.parse((ROOT / "src" / "courtly" / "core" / "_speedups.pyi").read_text())
    typed = {node.name for node in stub.body if isinstance(node, ast.FunctionDef)}
    built = {name for name in dir(speedups) if not name.startswith("_") and callable(getattr(speedups, name))}
    assert typed == built
