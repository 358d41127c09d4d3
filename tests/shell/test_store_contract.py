"""The store contract: SqliteStore (one machine) and PostgresStore (a cluster)
answer the same calls the same way, for what the shared engine keeps beside
the crawl data: takedowns, abuse complaints, the exact and near-duplicate
indexes, flags, recrawl histories, and the trap guard's and soft-404 book's
state. Each test runs against both; PostgresStore's coroutines are run to
completion and its async iterators read whole (`SyncPostgres`). And both,
side by side, mark the same URLs for seeded random purges (their SQL filters
differ; the core's match decides in both).
What only a cluster has (partitions, several workers): test_postgres_shared.py.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random

import pytest

from courtly.core.fingerprint import FirstCapture
from courtly.core.purge import purge_of
from courtly.core.soft404 import Soft404Book
from courtly.core.traps import TrapGuard
from courtly.shell.store.postgres import PostgresStore
from courtly.shell.store.sqlite import Batch, SqliteStore
from pg_store_support import ALL, P


async def _all(it) -> list:
    return [r async for r in it]


class SyncPostgres:
    """A PostgresStore on its own event loop, called like SqliteStore: every
    partition held, so `apply(batch)` writes what a worker owning all would."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = self.run(PostgresStore.open(dsn, partitions=P))
        self.epochs = self.run(self.store.acquire_many(ALL, "contract", 600.0))

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 60.0))

    def apply(self, batch: Batch) -> None:
        self.run(self.store.apply(batch, partition_epochs=self.epochs))

    def __getattr__(self, name: str):
        method = getattr(self.store, name)

        def call(*args, **kw):
            out = method(*args, **kw)
            if inspect.isasyncgen(out):
                return self.run(_all(out))
            return self.run(out) if inspect.iscoroutine(out) else out
        return call

    def close(self) -> None:
        self.run(self.store.close())
        self.loop.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "crawl.db")
    else:
        s = SyncPostgres(request.getfixturevalue("postgres").create_database())
    yield s
    s.close()


def _new(url: str, key: str, at: float = 1.0) -> tuple:
    return (url, key, 4, 1, 0, "", at)


def _state(store, url: str) -> tuple:
    rec = store.url_record(url)
    return rec["state"], rec["reason"]


# ---- takedowns ----------------------------------------------------------------------------------

def _crawl(store) -> None:
    store.apply(Batch(new_urls=[_new("http://a.test/x", "a.test"), _new("http://a.test/y", "a.test"),
                                _new("http://www.a.test/z", "a.test"), _new("http://nota.test/a.test", "nota.test"),
                                _new("http://b.test/a", "b.test")]))
    store.apply(Batch(fetched=[(2.0, 200, "http://a.test/y")]))


def test_a_purge_marks_its_scope_at_once_and_counts_queued_urls_apart(store):
    _crawl(store)
    stored, counts = store.add_purge(purge_of("domain", "a.test", reason="court order"), 10.0)
    assert (stored.id, stored.at) == (1, 10.0)
    assert counts == {"queued": 2, "other": 1}
    for url in ("http://a.test/x", "http://a.test/y", "http://www.a.test/z"):
        assert _state(store, url) == ("skipped", "purged")
    assert store.url_record("http://a.test/y")["detail"] == "purge #1 (domain a.test): court order; was fetched"
    # a look-alike host and another host are left alone
    assert _state(store, "http://nota.test/a.test") == ("queued", None)
    assert _state(store, "http://b.test/a") == ("queued", None)


def test_a_url_prefix_purge_covers_only_urls_that_start_with_it(store):
    _crawl(store)
    _, counts = store.add_purge(purge_of("url_prefix", "http://a.test/x"), 10.0)
    assert counts == {"queued": 1, "other": 0}
    assert _state(store, "http://a.test/y") == ("fetched", None)


def test_purges_are_read_back_after_an_id_in_the_order_recorded(store):
    assert store.purges_max_id() == 0 and store.purges(0) == []
    store.add_purge(purge_of("host", "a.test"), 10.0)
    store.add_purge(purge_of("url_prefix", "http://b.test/a", reason="r"), 11.0)
    assert [tuple(r) for r in store.purges(0)] == [(1, "host", "a.test", "", 10.0, None),
                                                   (2, "url_prefix", "http://b.test/a", "r", 11.0, None)]
    assert [r[0] for r in store.purges(1)] == [2]
    assert store.purges_max_id() == 2


def test_apply_purges_marks_rows_written_since_and_keeps_the_first_applied_at(store):
    stored, counts = store.add_purge(purge_of("host", "a.test"), 10.0)
    assert counts == {"queued": 0, "other": 0}
    _crawl(store)   # a worker wrote in scope after the purge was recorded
    assert store.apply_purges([stored], 20.0) == {"queued": 1, "other": 1}
    assert _state(store, "http://a.test/x") == ("skipped", "purged")
    assert _state(store, "http://www.a.test/z") == ("queued", None)   # host scope: not a subdomain
    assert store.apply_purges([stored], 30.0) == {"queued": 0, "other": 0}
    assert store.purges(0)[0][5] == 20.0


# ---- abuse complaints ---------------------------------------------------------------------------

def test_complaints_are_open_until_resolved_once(store):
    first = store.add_complaint("a.test", "a.test", "ops@a.test", "too fast", 5.0)
    second = store.add_complaint("www.b.test", "b.test", "", "", 6.0)
    assert [tuple(r) for r in store.complaints()] == [(first, "a.test", "a.test", "ops@a.test", "too fast", 5.0, None),
                                                      (second, "www.b.test", "b.test", "", "", 6.0, None)]
    assert store.resolve_complaint(first, 7.0) is True
    assert store.resolve_complaint(first, 8.0) is False
    assert store.resolve_complaint(second + 1, 8.0) is False
    assert [r[0] for r in store.complaints(open_only=True)] == [second]
    assert tuple(store.complaints()[0])[6] == 7.0


# ---- duplicates, flags, histories ---------------------------------------------------------------

def test_the_first_capture_of_a_payload_is_kept_and_looked_up_by_digest(store):
    store.apply(Batch(digests=[("sha1:AAA", "http://a.test/1", 1.0, "<urn:uuid:1>"),
                               ("sha1:AAA", "http://a.test/2", 2.0, "<urn:uuid:2>")]))
    store.apply(Batch(digests=[("sha1:AAA", "http://a.test/3", 3.0, ""), ("sha1:BBB", "http://b.test/", 4.0, "")]))
    assert store.digest_record("sha1:AAA") == FirstCapture("http://a.test/1", 1.0, "<urn:uuid:1>")
    assert store.digest_record("sha1:CCC") is None
    assert store.digest_records(["sha1:BBB", "sha1:CCC", "sha1:AAA"]) == {
        "sha1:AAA": FirstCapture("http://a.test/1", 1.0, "<urn:uuid:1>"),
        "sha1:BBB": FirstCapture("http://b.test/", 4.0, "")}
    first: dict[str, tuple] = {}
    for row in store.iter_digests():   # the reader's index takes the first row it meets
        first.setdefault(row[0], tuple(row))
    assert first == {"sha1:AAA": ("sha1:AAA", "http://a.test/1", 1.0, "<urn:uuid:1>"),
                     "sha1:BBB": ("sha1:BBB", "http://b.test/", 4.0, "")}


def test_simhashes_and_flags_read_back_in_the_order_recorded(store):
    prints = [("http://b.test/1", -(2 ** 63), "b.test"), ("http://a.test/1", 2 ** 63 - 1, "a.test"),
              ("http://a.test/2", 12345, "a.test")]
    store.apply(Batch(simhashes=prints[:2], flags=[("http://b.test/1", 2.0, "near_dup", "http://a.test/1")]))
    store.apply(Batch(simhashes=prints[2:], flags=[("http://a.test/2", 1.0, "exact_dup", "http://a.test/1"),
                                                   ("http://a.test/2", 1.0, "soft404", "http://a.test")]))
    assert [tuple(r) for r in store.iter_simhashes()] == prints
    assert [tuple(r) for r in store.iter_flags(("exact_dup", "near_dup"))] == [
        ("http://b.test/1", 2.0, "near_dup", "http://a.test/1"), ("http://a.test/2", 1.0, "exact_dup", "http://a.test/1")]
    assert [tuple(r) for r in store.url_flags("http://a.test/2")] == [
        (1.0, "exact_dup", "http://a.test/1"), (1.0, "soft404", "http://a.test")]


def test_a_recrawl_history_is_replaced_by_its_latest(store):
    store.apply(Batch(histories={"http://a.test/": ("http://a.test/", "a.test", 1, 0, "[1]"),
                                 "http://b.test/x": ("http://b.test/x", "b.test", 2, 1, "[2]")}))
    store.apply(Batch(histories={"http://a.test/": ("http://a.test/", "a.test", 0, 0, "[1, 3]")}))
    assert sorted(tuple(r) for r in store.iter_histories()) == [("http://a.test/", "a.test", 0, 0, "[1, 3]"),
                                                               ("http://b.test/x", "b.test", 2, 1, "[2]")]


# ---- trap guard and soft-404 book ----------------------------------------------------------------

def _guard() -> TrapGuard:
    guard = TrapGuard(rng=random.Random(1))
    for i in range(30):
        guard.check_new_url("a.test", f"http://a.test/cal/{2000 + i}/01/", 2, 100.0 + i)
        guard.check_new_url("b.test", f"http://b.test/item?id={i}", 1, 100.0 + i)
        guard.note_fetch("b.test", f"http://b.test/item?id={i}", i % 2 == 0, 100.0 + i)
    return guard


def test_the_trap_guard_is_read_back_as_it_was_saved(store):
    assert store.trap_snapshot()["hosts"] == {}
    guard = _guard()
    store.apply(Batch(meta={"traps": guard.snapshot_json()}))
    saved = json.loads(json.dumps(guard.snapshot()))
    assert store.trap_snapshot() == saved
    assert json.loads(store.get_meta("traps")) == saved
    assert TrapGuard.restore(store.trap_snapshot()).snapshot() == guard.snapshot()
    guard.check_new_url("c.test", "http://c.test/", 1, 200.0)   # a later commit: one host more, others unchanged
    guard.note_fetch("b.test", "http://b.test/item?id=99", True, 201.0)
    store.apply(Batch(meta={"traps": guard.snapshot_json()}))
    assert store.trap_snapshot() == json.loads(json.dumps(guard.snapshot()))


def test_the_soft404_book_is_read_back_as_it_was_saved(store):
    assert store.soft404_snapshot()["hosts"] == {}
    book = Soft404Book()
    book.record_probe("http://a.test", 200, 0xFFFF_0000_1234_5678, 10.0)
    book.record_probe("https://b.test:8443", 404, None, 11.0)
    book.record_probe("http://c.test", 0, None, 12.0)
    store.apply(Batch(meta={"soft404": json.dumps(book.snapshot())}))
    assert store.soft404_snapshot() == book.snapshot()
    back = Soft404Book.restore(store.soft404_snapshot())
    assert back.is_soft("http://a.test") and not back.is_soft("https://b.test:8443")
    assert back.is_soft404("http://a.test", 0xFFFF_0000_1234_5678)


# ---- both stores mark the same URLs -------------------------------------------------------------

_LABELS = ("a", "b", "ab", "a-b", "xn--bcher-kva")
_PATHS = ("/", "/x", "/x/", "/x-2", "/xy?q=1", "/~x", "/a.test/")


def _random_urls(rng: random.Random, n: int) -> list[str]:
    urls = set()
    while len(urls) < n:
        host = ".".join(rng.choice(_LABELS) for _ in range(rng.randint(1, 3))) + ".test"
        if rng.random() < 0.1:
            host = rng.choice(("127.0.0.1", "[::1]", "10.0.0.12"))
        port = rng.choice(("", "", ":8080"))
        urls.add(f"{rng.choice(('http', 'https'))}://{host}{port}{rng.choice(_PATHS)}")
    return sorted(urls)


def _random_purge(rng: random.Random, urls: list[str]):
    url = rng.choice(urls)
    host = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0] if "]" not in url else "[::1]"
    scope = rng.choice(("domain", "host", "url_prefix"))
    if scope == "url_prefix":
        return purge_of(scope, url[:rng.randint(len(url) - 3, len(url))])
    if scope == "domain" and (host[-1].isdigit() or "]" in host or host.count(".") < 2):
        scope = "host"      # a domain purge wants a name below a public suffix
    return purge_of(scope, host if scope == "host" else host.split(".", 1)[1])


def test_sqlite_and_postgres_mark_the_same_urls_for_random_purges(postgres, tmp_path):
    rng = random.Random(16)
    urls = _random_urls(rng, 300)
    lite, pg = SqliteStore(tmp_path / "crawl.db"), SyncPostgres(postgres.create_database())
    try:
        for store in (lite, pg):
            store.apply(Batch(new_urls=[_new(u, "k") for u in urls]))
            store.apply(Batch(fetched=[(2.0, 200, u) for u in urls[::3]]))
        for i in range(25):
            purge = _random_purge(rng, urls)
            got = [store.add_purge(purge, float(i)) for store in (lite, pg)]
            assert got[0] == got[1], purge
            states = [[(u, *_state(store, u)) for u in urls] for store in (lite, pg)]
            assert states[0] == states[1], purge
        assert sum(s[2] == "purged" for s in states[0]) > 0
    finally:
        lite.close()
        pg.close()
