"""Every package the code imports is one `pip install .` installs: a module that
only arrived with the test extra (surt, through cdxj-indexer) once broke the
README's first command on a fresh machine while the suite stayed green."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imported_top_level_modules() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / "src" / "courtly").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("courtly", "__future__"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_imported_package_is_a_declared_run_time_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    # an optional extra's package is imported lazily, where the feature starts (see the test below)
    declared = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["render"]}
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module, files in sorted(_imported_top_level_modules().items()):
        dists = {_name(d) for d in distributions.get(module, [])}
        if not dists & declared:
            missing[module] = (sorted(dists) or ["(not installed)"], sorted(files))
    assert not missing, f"imported but not in [project] dependencies: {missing}"


def test_the_render_extra_is_imported_only_inside_functions():
    """`pip install .` without [render] still imports every module: playwright is
    imported where a browser starts, so a crawl without it runs raw-only."""
    top_level = []
    for path in (ROOT / "src" / "courtly").rglob("*.py"):
        for node in ast.parse(path.read_text("utf-8")).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n.split(".")[0] == "playwright" for n in names):
                    top_level.append(str(path.relative_to(ROOT)))
    assert not top_level
