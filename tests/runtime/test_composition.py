"""The runtime is composed, not inherited (issue 16, item 3).

Two rules over every module of `src/courtly/runtime/`:

* no class there extends another runtime class (a distributed worker is the
  same engine built with other strategies, runtime/distribution.py); a
  Protocol, an Exception, an Enum, a NamedTuple or a dataclass base is fine;
* no runtime object gets an attribute assigned from outside its own class
  (`crawler.admission = X`): what an object is made of is decided when it is
  built, or changed by a method of its own. Counter records (`...stats.n += 1`)
  are plain mutable records, not objects with behaviour, and so are the
  core's watch states the monitor keeps.

Each rule is a function checked once on a snippet that breaks it (so the
check can fail) and then on the real tree.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import courtly.runtime

RUNTIME = Path(courtly.runtime.__file__).parent
# (module, the object assigned to): records, not runtime objects
RECORDS = {
    ("monitor.py", "st"): "core.watch.WatchState, the monitor's own state record",
    ("monitor.py", "self.states[w.id]"): "core.watch.WatchState, the monitor's own state record",
}


def outside_assignments(source: str, module: str = "") -> list[str]:
    """`x.attr = ...` (or `+=`, or annotated) where `x` is not `self`, as
    'line: target' (counter records and RECORDS left out)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for t in ast.walk(target):
                if not (isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store)):
                    continue
                owner = ast.unparse(t.value)
                if owner == "self" or owner.endswith("stats") or (module, owner) in RECORDS:
                    continue
                out.append(f"{node.lineno}: {ast.unparse(t)}")
    return out


def runtime_bases(cls: type, package: str = "courtly.runtime") -> list[str]:
    """The classes of `package` that `cls` extends, but for the kinds that may be extended."""
    if typing.Protocol in cls.__mro__ and getattr(cls, "_is_protocol", False):
        return []
    bad = []
    for base in cls.__mro__[1:]:
        if not base.__module__.startswith(package + "."):
            continue
        if (getattr(base, "_is_protocol", False) or issubclass(base, (BaseException, enum.Enum))
                or (issubclass(base, tuple) and hasattr(base, "_fields")) or dataclasses.is_dataclass(base)):
            continue
        bad.append(f"{base.__module__}.{base.__qualname__}")
    return bad


def _runtime_modules():
    for info in pkgutil.iter_modules(courtly.runtime.__path__):
        yield importlib.import_module(f"courtly.runtime.{info.name}")


# ---- the checks can fail ----------------------------------------------------------------------

def test_an_attribute_set_on_another_object_is_reported_and_ones_own_or_a_counter_is_not():
    source = (
        "class Worker:\n"
        "    def __init__(self, crawler):\n"
        "        self.engine = crawler\n"
        "        crawler.admission = object()\n"
        "        self.engine.fetcher, n = None, 1\n"
        "        crawler.stats.fetched += 1\n"
    )
    assert outside_assignments(source) == ["4: crawler.admission", "5: self.engine.fetcher"]


def test_a_class_extending_a_runtime_class_is_reported_and_a_protocol_or_record_base_is_not():
    class Engine:
        pass

    class Worker(Engine):
        pass

    class Port(typing.Protocol):
        def send(self) -> None: ...

    class Sender(Port):
        def send(self) -> None:
            pass

    @dataclasses.dataclass
    class Row:
        n: int = 0

    class Wider(Row):
        pass

    class Failure(Exception):
        pass

    class Worse(Failure):
        pass

    here = __name__.rsplit(".", 1)[0] if "." in __name__ else __name__
    assert runtime_bases(Worker, here) == [f"{Engine.__module__}.{Engine.__qualname__}"]
    assert runtime_bases(Sender, here) == runtime_bases(Wider, here) == runtime_bases(Worse, here) == []


# ---- the runtime keeps them -------------------------------------------------------------------

def test_no_runtime_class_extends_another_runtime_class():
    bad = {}
    for mod in _runtime_modules():
        for _name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and runtime_bases(cls):
                bad[f"{mod.__name__}.{cls.__qualname__}"] = runtime_bases(cls)
    assert not bad, f"compose instead (runtime/distribution.py): {bad}"


def test_no_runtime_module_assigns_an_attribute_of_another_object():
    bad = {}
    for path in sorted(RUNTIME.glob("*.py")):
        found = outside_assignments(path.read_text(), path.name)
        if found:
            bad[path.name] = found
    assert not bad, f"build it in, or give its class a method: {bad}"


def test_a_worker_builds_one_engine_with_the_cluster_strategies_and_writes_the_batches_it_hands_over():
    from types import SimpleNamespace

    from courtly.config import Config
    from courtly.core.sitekey import partition_of
    from courtly.runtime.crawler import Crawler
    from courtly.runtime.worker import Worker
    from clock_support import ManualClock

    assert not issubclass(Worker, Crawler)
    w = Worker(Config(), clock=ManualClock(1_700_000_000.0), resolver=None, fetcher=None,
               warc=SimpleNamespace(flush=lambda: None), store=SimpleNamespace(partitions=8, region_range=lambda: None,
                                                        partition_of_key=lambda key: partition_of(key, 8)),
               extractor=None,
               worker_id="w1")
    assert isinstance(w.engine, Crawler)
    assert (w.engine.tenancy, w.engine.sending) == (w.parts, w.slots)
    assert w.engine.admission.admit("https://a.example/", via=None, band=1, depth=0, now=1_700_000_000.0)
    assert len(w.engine.frontier) == 0          # routed to its partition's owner, not queued here
    w.engine.commit()                            # the engine's commit hands the batch to the worker
    assert len(w.engine.batch) == 0 and w.wstats.batches == 0
    (_bid, batch), = w._pending
    assert [row[0] for row in batch.new_urls] == ["https://a.example/"]
