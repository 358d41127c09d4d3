"""The layout rules of STYLE.md, checked by reading the imports.

core is pure (no clock, sockets, files, threads or global randomness) and
imports nothing of the project outside core; dependencies point one way:
cli -> runtime -> (core, ports, config), shell -> (core, ports, config).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import courtly

SRC = Path(courtly.__file__).parent
FORBIDDEN_IN_CORE = {"time", "asyncio", "socket", "threading", "os", "sqlite3", "aiohttp", "subprocess",
                     "multiprocessing", "concurrent", "selectors", "signal", "shutil", "pathlib", "io"}
GLOBAL_RANDOM = {"random", "randint", "choice", "choices", "shuffle", "uniform", "sample", "randrange",
                 "getrandbits", "seed"}
# package -> project packages it must not import
NOT_ALLOWED = {
    "core": {"shell", "runtime", "sim", "cli", "config", "ports"},
    "shell": {"runtime", "cli", "sim"},
    "runtime": {"cli", "shell"},
    "config.py": {"shell", "runtime", "cli", "sim"},
    "ports.py": {"shell", "runtime", "cli", "sim", "config"},
}


# runtime modules that build or open concrete technology (the composition root
# and the read-only commands); every other runtime module sees only ports
COMPOSITION_ROOTS = {"wiring", "report", "demo", "cluster", "abuse", "watchlist", "serve", "consumer_report",
                     "crawlview"}   # crawlview: the read-only connection of serve, hosts and urls


def _modules(part: str) -> list[Path]:
    p = SRC / part
    return sorted(p.rglob("*.py")) if p.is_dir() else [p]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


@pytest.mark.parametrize("path", _modules("core"), ids=lambda p: p.name)
def test_core_module_is_pure(path):
    bad = [(n, m) for n, m in _imports(path) if m.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not bad, f"{path.name} imports {bad}"
    tree = ast.parse(path.read_text())
    calls = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
             and node.value.id == "random" and node.attr in GLOBAL_RANDOM]
    assert not calls, f"{path.name} uses module-level random at lines {calls}"


@pytest.mark.parametrize("part", sorted(NOT_ALLOWED))
def test_dependencies_point_one_way(part):
    for path in _modules(part):
        for line, mod in _imports(path):
            parts = mod.split(".")
            if parts[0] != "courtly" or len(parts) < 2:
                continue
            target = parts[1]
            if part == "runtime" and path.stem in COMPOSITION_ROOTS and target == "shell":
                continue
            assert target not in NOT_ALLOWED[part], f"{path.relative_to(SRC)}:{line} imports {mod}"


def test_public_api_is_small_and_documented():
    assert set(courtly.__all__) == {"__version__", "robots_allowed", "normalize_url", "resolve_url",
                                    "is_public_address", "target_allowed"}
    for name in courtly.__all__[1:]:
        assert getattr(courtly, name).__doc__


def test_no_module_grows_past_the_split_limit():
    big = [(p.relative_to(SRC), n) for p in SRC.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 800]
    assert not big, f"split these along a seam: {big}"


# NamedTuple's public API: underscored only so it cannot clash with a field name
NAMEDTUPLE_API = {"_asdict", "_replace", "_fields", "_make", "_field_defaults"}


def _foreign_private(path: Path) -> list[str]:
    """`X._name` in `path` where X is not `self`, `cls` or `super()`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if node.attr in NAMEDTUPLE_API:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_runtime_module_touches_another_objects_private_attributes():
    found = [hit for path in _modules("runtime") for hit in _foreign_private(path)]
    assert not found, "private attributes used from outside their object:\n" + "\n".join(found)


def test_the_private_attribute_check_sees_a_collaborator_reaching_in(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(self, row):\n    self.c._queue(row._asdict())\n    return self._own, super()._x\n")
    assert _foreign_private(sample) == ["sample.py:2: self.c._queue"]


def _runtime_imports(path: Path) -> set[str]:
    """The `courtly.runtime` modules `path` imports anywhere: at module level,
    under `if TYPE_CHECKING:` (a type is a dependency as well) and inside
    functions (a deferred import only hides a dependency, it does not remove it)."""
    found: set[str] = set()
    todo = list(ast.parse(path.read_text()).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "courtly.runtime":
                found.update(f"courtly.runtime.{a.name}" for a in node.names)
            elif node.module.startswith("courtly.runtime."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("courtly.runtime."))
        todo.extend(ast.iter_child_nodes(node))
    return {name.split(".")[2] for name in found}


def _a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as [a, b, ..., a], or [] when it has none."""
    state: dict[str, int] = {}     # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_runtime_modules_import_each_other_without_a_cycle():
    graph = {p.stem: _runtime_imports(p) - {p.stem} for p in _modules("runtime")}
    assert not _a_cycle(graph), " -> ".join(_a_cycle(graph))


def test_the_cycle_check_finds_type_checking_and_deferred_imports(tmp_path):
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from courtly.runtime.b import B\n")
    (tmp_path / "b.py").write_text("from courtly.runtime.a import A\n"
                                   "def later():\n    from courtly.runtime.c import C\n")
    graph = {p.stem: _runtime_imports(p) for p in sorted(tmp_path.glob("*.py"))}
    assert graph == {"a": {"b"}, "b": {"a", "c"}}
    assert _a_cycle(graph) == ["a", "b", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) == []
