"""Every wait of the crawl goes through the injected clock (shell/clock.py,
sim/vloop.py): no module of core/ or runtime/ sleeps, sets a loop timer or
reads the time itself, outside the small allow-list below. So the runtime
runs in virtual time (`courtly sim runtime`) with nothing left in real time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import courtly

SRC = Path(courtly.__file__).parent

# what a module may still use, and why; anything else found is an error
ALLOWED = {
    "runtime/progress.py": ({"asyncio.sleep", "time.monotonic"},
                            "the CLI's live progress line paces itself in real time; it never waits for the crawl"),
    "runtime/report.py": ({"time.time"}, "a command's `now` default when its caller gives none"),
    "runtime/abuse.py": ({"time.time"}, "a command's `now` default when its caller gives none"),
    "runtime/cluster_takedown.py": ({"time.time"}, "a command's `now` default when its caller gives none"),
    "runtime/listing.py": ({"time.time"}, "a command's `now` default when its caller gives none"),
    "runtime/serve.py": ({"time.time"}, "the status page's `now` default when its caller gives none"),
    "runtime/demo.py": ({"time.time", "time.monotonic", "time.sleep"},
                        "`courtly demo` waits in real time for the simulated web it starts"),
    "runtime/cluster.py": ({"asyncio.wait_for", "time.time"},
                           "the bound on connecting to PostgreSQL at start; `now` of `courtly submit`"),
}
FORBIDDEN_ASYNCIO = {"sleep", "wait_for", "timeout", "timeout_at"}
FORBIDDEN_LOOP = {"call_later", "call_at"}
# time's clock readers and its sleep (its formatting functions are not clocks)
TIME_READERS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
                "process_time", "thread_time", "sleep"}


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each clock or timer use in `tree`."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "wait"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio"
                and (len(node.args) > 1 or any(k.arg == "timeout" for k in node.keywords))):
            found.append((node.lineno, "asyncio.wait(timeout)"))
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [(node.lineno, f"time.{a.name}") for a in node.names if a.name in TIME_READERS]
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id == "time" and node.attr in TIME_READERS:
            found.append((node.lineno, f"time.{node.attr}"))
        elif node.attr in ("now", "utcnow", "today") and (
                (isinstance(value, ast.Name) and value.id in ("datetime", "date"))
                or (isinstance(value, ast.Attribute) and value.attr in ("datetime", "date"))):
            found.append((node.lineno, f"datetime.{node.attr}"))
        elif isinstance(value, ast.Name) and value.id == "asyncio" and node.attr in FORBIDDEN_ASYNCIO:
            found.append((node.lineno, f"asyncio.{node.attr}"))
        elif node.attr in FORBIDDEN_LOOP:
            found.append((node.lineno, node.attr))
        elif node.attr == "time" and (
                (isinstance(value, ast.Name) and value.id == "loop")
                or (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr in ("get_running_loop", "get_event_loop"))):
            found.append((node.lineno, "loop.time"))
    return found


def _yields(tree: ast.AST) -> set[int]:
    """Lines of `asyncio.sleep(0)`: a turn of the loop given away, not a wait."""
    return {node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sleep"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio"
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0}


def _modules() -> list[Path]:
    return sorted([*(SRC / "core").rglob("*.py"), *(SRC / "runtime").rglob("*.py")])


@pytest.mark.parametrize("path", _modules(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_core_and_runtime_wait_only_through_the_clock(path):
    name = f"{path.parent.name}/{path.name}"
    tree = ast.parse(path.read_text(), filename=str(path))
    allowed = ALLOWED.get(name, (set(), ""))[0]
    yields = _yields(tree)
    bad = [(line, use) for line, use in _uses(tree)
           if use not in allowed and not (use == "asyncio.sleep" and line in yields)]
    assert not bad, f"{name} waits or reads the time itself (use the injected clock): {bad}"


def test_every_allowance_is_still_needed():
    for name, (allowed, _why) in ALLOWED.items():
        tree = ast.parse((SRC / name).read_text())
        used = {use for _, use in _uses(tree)}
        assert allowed <= used, f"{name} no longer uses {sorted(allowed - used)}: drop it from ALLOWED"


def test_the_check_sees_each_kind_of_wait():
    src = ("import asyncio, time\nfrom time import monotonic\n"
           "async def f(loop):\n"
           "    await asyncio.sleep(1)\n    await asyncio.wait_for(g(), 2)\n"
           "    loop.call_later(1, g)\n    loop.call_at(5, g)\n    time.time()\n"
           "    loop.time()\n    asyncio.get_running_loop().time()\n    await asyncio.sleep(0)\n"
           "    datetime.datetime.now()\n    time.strftime('%Y', time.gmtime(0))\n"
           "    await asyncio.wait({g()}, timeout=3)\n    await asyncio.wait({g()})\n")
    tree = ast.parse(src)
    uses = _uses(tree)
    assert {u for _, u in uses} == {"time.monotonic", "asyncio.sleep", "asyncio.wait_for", "call_later", "call_at",
                                    "time.time", "loop.time", "datetime.now", "asyncio.wait(timeout)"}
    assert _yields(tree) == {11}
