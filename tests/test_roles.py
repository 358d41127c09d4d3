"""The crawler has every member its collaborators' protocols (runtime/roles) name,
and each collaborator reads from the crawler only what its protocol names."""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest

import courtly.runtime.roles as roles
from courtly.config import Config
from courtly.runtime.crawler import Crawler
from courtly.shell.store.sqlite import SqliteStore
from clock_support import ManualClock

T0 = 1_700_000_000.0
# collaborator module -> the protocol its constructor or function receives
HOSTS = {"admission": roles.AdmissionHost, "bloom": roles.BloomHost, "consumers": roles.ConsumersHost,
         "overflow": roles.OverflowHost, "refusal": roles.RefusalHost, "results": roles.ResultsHost,
         "requests": roles.RequestsHost, "seeds": roles.SeedsHost, "slowdown": roles.SlowdownHost,
         "takedown": roles.TakedownHost}


def _members(proto: type) -> set[str]:
    """The names a protocol declares (its annotations and methods, its bases' too)."""
    names: set[str] = set()
    for klass in proto.__mro__:
        if klass in (typing.Protocol, typing.Generic, object):
            continue
        names.update(getattr(klass, "__annotations__", {}))
        names.update(n for n, v in vars(klass).items()
                     if not n.startswith("_") and (callable(v) or isinstance(v, property)))
    return names


def _read_from_crawler(path: Path) -> set[str]:
    """Attributes read from `self.c` or from a parameter named `crawler` in `path`
    (and from `c` where the function bound `c = self.c` or `c = crawler`)."""
    names: set[str] = set()
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        aliases = {"crawler"}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target, value = node.targets[0], node.value
            pairs = (zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                     else [(target, value)])   # `c = self.c` or `store, c = crawler.store, crawler`
            aliases.update(t.id for t, v in pairs
                           if isinstance(t, ast.Name) and ast.unparse(v) in ("self.c", "crawler"))
        for node in ast.walk(fn):
            if not isinstance(node, ast.Attribute):
                continue
            owner = ast.unparse(node.value)
            if owner == "self.c" or (isinstance(node.value, ast.Name) and node.value.id in aliases):
                names.add(node.attr)
    return names


def test_the_crawler_has_every_member_its_collaborators_protocols_name(tmp_path):
    c = Crawler(Config(), clock=ManualClock(T0), resolver=None, fetcher=None,
                warc=SimpleNamespace(flush=lambda: None), store=SqliteStore(tmp_path / "crawl.db"), extractor=None)
    missing = {name: sorted(m for m in _members(proto) if not hasattr(c, m)) for name, proto in HOSTS.items()}
    assert not any(missing.values()), missing


@pytest.mark.parametrize("module", sorted(HOSTS))
def test_a_collaborator_reads_from_the_crawler_only_what_its_protocol_names(module):
    path = Path(roles.__file__).with_name(f"{module}.py")
    extra = _read_from_crawler(path) - _members(HOSTS[module])
    assert not extra, f"{module}.py uses crawler members its protocol does not name: {sorted(extra)}"
