"""`courtly review`: suspected traps are listed, and resolving them acts on the store."""

import json
import random

from courtly.core.traps import TrapConfig, TrapGuard
from courtly.ports import Batch
from courtly.runtime.report import review, stats
from courtly.shell.store.sqlite import SqliteStore


def _crawl_with_a_trap(tmp_path):
    guard = TrapGuard(TrapConfig(), random.Random(1))
    denied = []
    for n in range(1, 8):
        url = "http://t.test/repeat/" + "a/" * n
        v = guard.check_new_url("t.test", url, 1, 100.0 + n)
        if not v.allowed:
            denied.append((url, "t.test", "http://t.test/", 100.0, "skipped", str(v.reason),
                           f"{v.rule}: {v.detail}", 1))
    assert denied and guard.suspects()
    store = SqliteStore(tmp_path / "crawl.db")
    store.apply(Batch(decisions=denied, meta={"traps": json.dumps(guard.snapshot())}))
    store.close()
    return len(denied)


def test_review_lists_the_suspect_with_its_rule_and_evidence(tmp_path):
    n = _crawl_with_a_trap(tmp_path)
    text = review(tmp_path)
    assert "t.test" in text and "repeated_segments" in text and f"{n} URLs denied" in text
    assert "open trap suspects 1" in stats(tmp_path)


def test_resolving_legit_requeues_what_the_rule_denied(tmp_path):
    n = _crawl_with_a_trap(tmp_path)
    out = review(tmp_path, resolve=("t.test", "legit"), now=200.0)
    assert f"{n} denied URLs queued again" in out
    store = SqliteStore(tmp_path / "crawl.db")
    assert len(list(store.iter_queued())) == n
    store.close()
    assert "review queue empty" in review(tmp_path)


def test_resolving_trap_keeps_the_denials(tmp_path):
    _crawl_with_a_trap(tmp_path)
    review(tmp_path, resolve=("t.test", "trap"), now=200.0)
    store = SqliteStore(tmp_path / "crawl.db")
    assert list(store.iter_queued()) == []
    assert store.count_denied("t.test", "trap") > 0
    store.close()
