"""The rows a worker saves (`changed_rows`): the origins and keys changed since
the last call, each its snapshot row; and the set behind them stays within
the entries held (one machine never takes the rows)."""

from __future__ import annotations

import json
import random

from courtly.core.soft404 import Soft404Book
from courtly.core.traps import TrapConfig, TrapGuard


def test_a_books_changed_rows_are_its_snapshot_rows_of_the_origins_changed_since_the_last_call():
    book = Soft404Book()
    book.record_probe("http://a.test", 404, None, 1.0)
    book.record_probe("http://b.test", 200, 0xABC, 2.0)
    first = book.changed_rows()
    assert {o: json.loads(r) for o, r in first.items()} == json.loads(json.dumps(book.snapshot()["hosts"]))
    book.record_probe("http://b.test", 200, 0xDEF, 3.0)
    assert set(book.changed_rows()) == {"http://b.test"} and book.changed_rows() == {}


def test_what_is_remembered_as_changed_stays_within_the_entries_held():
    book = Soft404Book(origins_max=10)
    guard = TrapGuard(TrapConfig(hosts_max=10), random.Random(1))
    for i in range(1000):
        book.record_probe(f"http://h{i}.test", 404, None, float(i))
        guard.check_new_url(f"h{i}.test", f"http://h{i}.test/a/b", 1, float(i))
    assert len(book._changed) <= 10 and len(guard._changed) <= 10
    assert set(guard.changed_rows()) <= set(guard.snapshot()["hosts"])
    book.forget(lambda o: True)
    assert book.changed_rows() == {}
