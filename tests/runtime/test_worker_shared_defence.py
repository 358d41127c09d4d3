"""A worker's budget defence is the cluster's: trap flags, the soft-404 book
and the duplicate indexes go with a partition from one worker to the next
(runtime/shared_defence.py).

Unit tests with a fake store first, then on a throwaway PostgreSQL: a worker
that takes a partition over (or a restarted one) has the state its previous
owner wrote, and a payload stored by one worker becomes a revisit record in
another's WARC (read back with warcio).
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from warcio.archiveiterator import ArchiveIterator

from courtly.config import Config
from courtly.core.fingerprint import FirstCapture, to_signed64
from courtly.core.types import UrlItem
from courtly.core.urls import partition_of
from courtly.ports import Batch, FetchResult, StoreUnavailableError
from courtly.runtime.budget import BudgetDefence
from courtly.runtime.cluster import render_status, status_data
from courtly.runtime.shared_defence import SharedDefence, SharedPayloads
from courtly.runtime.worker import Worker
from courtly.shell.store.postgres import PostgresStore
from courtly.shell.warc import WarcWriter
from clock_support import ManualClock
from pg_support import pg_fixture

T0 = 1_700_000_000.0
P = 8
DEEP = "/deep/" + "/".join(str(i) for i in range(20))   # more path segments than the trap guard takes

postgres = pg_fixture()


def _keys_in_two_partitions() -> tuple[str, str]:
    first = "a.test"
    for i in range(100):
        other = f"other{i}.test"
        if partition_of(other, P) != partition_of(first, P):
            return first, other
    raise AssertionError


KEY_A, KEY_B = _keys_in_two_partitions()


def _budget() -> BudgetDefence:
    return BudgetDefence(Config(), random.Random(1))


def _suspect_keys(budget: BudgetDefence) -> set[str]:
    return {s.key for s in budget.suspects()}


class _FakePg:
    """The store's shared-defence reads, over one saved budget's snapshots."""

    def __init__(self, saved: BudgetDefence | None = None, digests: dict[str, FirstCapture] | None = None,
                 fail: bool = False) -> None:
        batch = Batch()
        if saved is not None:
            saved.save(batch)
        self.traps = json.loads(batch.meta.get("traps", '{"version": 1, "allow": [], "hosts": {}}'))
        self.soft = json.loads(batch.meta.get("soft404", '{"version": 2, "hosts": {}}'))
        self.prints = [("http://a.test/1", to_signed64(0xF0F0), "a.test"),
                       (f"http://{KEY_B}/1", to_signed64(0x0F0F), KEY_B)]
        self.digests = digests or {}
        self.fail = fail
        self.asked: list[list[str]] = []

    def _of(self, k: str) -> int:
        return partition_of(k.split("//")[-1].split(":")[0], P)

    async def trap_snapshot(self, partitions):
        keep = set(partitions)
        return {**self.traps, "hosts": {k: v for k, v in self.traps["hosts"].items() if self._of(k) in keep}}

    async def soft404_snapshot(self, partitions):
        keep = set(partitions)
        return {**self.soft, "hosts": {k: v for k, v in self.soft["hosts"].items() if self._of(k) in keep}}

    async def iter_simhashes(self, partitions):
        for row in self.prints:
            if self._of(row[2]) in set(partitions):
                yield row

    async def digest_records(self, digests):
        self.asked.append(list(digests))
        if self.fail:
            raise StoreUnavailableError("away")
        return {d: self.digests[d] for d in digests if d in self.digests}


def _previous_owner() -> BudgetDefence:
    b = _budget()
    for key in (KEY_A, KEY_B):
        b.admit(key, f"http://{key}{DEEP}", 1, T0)
        b.record_probe(f"http://{key}", f"http://{key}/nope", 200, b"<p>sorry, nothing here</p>", "text/html", T0)
    assert _suspect_keys(b) == {KEY_A, KEY_B} and b.soft404.is_soft(f"http://{KEY_A}")
    return b


def _defence(budget: BudgetDefence, pg) -> SharedDefence:
    return SharedDefence(pg, budget, lambda k: partition_of(k, P), lambda o: partition_of(o.split("//")[-1], P))


def test_adopting_a_partition_takes_its_trap_soft404_and_simhash_rows_and_no_others():
    pg = _FakePg(_previous_owner())
    b = _budget()
    taken = asyncio.run(_defence(b, pg).adopt([partition_of(KEY_A, P)]))
    assert taken == (1, 1, 1)
    assert _suspect_keys(b) == {KEY_A}
    assert b.soft404.is_soft(f"http://{KEY_A}") and not b.soft404.is_soft(f"http://{KEY_B}")
    assert "http://a.test/1" in b.near and f"http://{KEY_B}/1" not in b.near


def test_losing_a_partition_saves_then_drops_its_keys_state_only():
    b = _previous_owner()
    d, first, batch = _defence(b, _FakePg()), Batch(), Batch()
    d.save(first, T0)                     # the first cut saves; the next one within SAVE_S does not
    assert set(first.defence["traps"]) == {KEY_A, KEY_B} and "traps" not in first.meta
    d.save(batch, T0 + 1)
    assert not batch.defence
    b.admit(KEY_B, f"http://{KEY_B}/more{DEEP}", 1, T0 + 1)      # KEY_B changes after that save
    d.forget(partition_of(KEY_B, P))
    assert _suspect_keys(b) == {KEY_A, KEY_B}                   # kept until the batch is cut
    d.save(batch, T0 + 2)
    assert set(batch.defence["traps"]) == {KEY_B}               # its change, written if its epoch still allows
    assert _suspect_keys(b) == {KEY_A}
    assert not b.soft404.is_soft(f"http://{KEY_B}") and b.soft404.is_soft(f"http://{KEY_A}")


def test_a_save_carries_only_the_rows_changed_since_the_last_and_they_are_the_snapshots_rows():
    b = _previous_owner()
    d, first, later = _defence(b, _FakePg()), Batch(), Batch()
    d.save(first, T0)
    whole = b.traps.snapshot()["hosts"]
    assert {k: json.loads(v) for k, v in first.defence["traps"].items()} == json.loads(json.dumps(whole))
    book = b.soft404.snapshot()["hosts"]
    assert {k: json.loads(v) for k, v in first.defence["soft404"].items()} == json.loads(json.dumps(book))
    assert json.loads(first.meta["traps_allow"]) == b.traps.snapshot()["allow"]
    b.admit(KEY_A, f"http://{KEY_A}/other{DEEP}", 1, T0 + 20)
    d.save(later, T0 + 20)
    assert set(later.defence["traps"]) == {KEY_A} and not later.defence["soft404"]


def test_partitions_lost_together_are_all_in_the_one_save_of_the_next_cut():
    b = _previous_owner()
    d, batch = _defence(b, _FakePg()), Batch()
    for key in (KEY_A, KEY_B):
        d.forget(partition_of(key, P))
    d.save(batch, T0)
    assert set(batch.defence["traps"]) == {KEY_A, KEY_B}
    assert set(batch.defence["soft404"]) == {f"http://{KEY_A}", f"http://{KEY_B}"}
    assert not _suspect_keys(b)


def test_adoption_replaces_what_this_worker_saw_of_a_keys_links_with_its_owners_rows():
    pg = _FakePg(_previous_owner())
    b = _budget()
    b.admit(KEY_A, f"http://{KEY_A}/page", 1, T0)    # a link to KEY_A went by while another worker owned it
    assert not _suspect_keys(b)
    asyncio.run(_defence(b, pg).adopt([partition_of(KEY_A, P)]))
    assert _suspect_keys(b) == {KEY_A}


def test_digests_looked_up_in_the_same_turn_go_out_in_one_statement_and_hits_become_first_captures():
    first = FirstCapture("http://other.test/x", T0 - 60, "")
    pg = _FakePg(digests={"sha1:AAA": first})
    payloads, b = SharedPayloads(pg), _budget()

    async def body():
        await asyncio.gather(*(payloads.recall(d, b) for d in ("sha1:AAA", "sha1:BBB", "sha1:CCC")))
        await payloads.recall("sha1:AAA", b)          # known here now: no statement
    asyncio.run(body())
    assert pg.asked == [["sha1:AAA", "sha1:BBB", "sha1:CCC"]]
    assert b.first_capture("http://a.test/y", "sha1:AAA", T0, Batch()) == first
    assert b.first_capture("http://a.test/z", "sha1:BBB", T0, Batch()) is None
    assert (payloads.stats.asked, payloads.stats.rounds, payloads.stats.found) == (3, 1, 1)


class _SlowPg(_FakePg):
    """Holds each statement until `go` is set."""

    def __init__(self) -> None:
        super().__init__(digests={"sha1:B2": FirstCapture("http://other.test/b", T0, "")})
        self.go = asyncio.Event()

    async def digest_records(self, digests):
        self.asked.append(list(digests))
        await self.go.wait()
        return {d: self.digests[d] for d in digests if d in self.digests}


def test_digests_arriving_while_a_lookup_is_out_go_together_in_the_next_one():
    async def body():
        pg = _SlowPg()
        payloads, b = SharedPayloads(pg), _budget()
        first = asyncio.ensure_future(payloads.recall("sha1:A", b))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert pg.asked == [["sha1:A"]]                     # out, not answered
        later = [asyncio.ensure_future(payloads.recall(d, b)) for d in ("sha1:B2", "sha1:B1", "sha1:A")]
        await asyncio.sleep(0)
        assert pg.asked == [["sha1:A"]]                     # they wait for it
        pg.go.set()
        await asyncio.wait_for(asyncio.gather(first, *later), 10)
        return pg.asked, payloads.stats, b
    asked, stats, b = asyncio.run(body())
    assert asked == [["sha1:A"], ["sha1:B1", "sha1:B2"]]     # sha1:A asked once
    assert (stats.rounds, stats.found) == (2, 1)
    assert b.exact.first("sha1:B2") == FirstCapture("http://other.test/b", T0, "")


def test_digests_of_pages_finishing_within_the_gather_window_share_one_statement():
    from courtly.sim.vloop import VirtualClock, run_virtual

    async def main(loop):
        clock = VirtualClock(loop)
        pg = _FakePg(digests={"sha1:C": FirstCapture("http://other.test/c", T0, "")})
        payloads, b = SharedPayloads(pg, clock, 0.02), _budget()

        async def page(digest: str, after_s: float) -> float:
            await clock.sleep(after_s)
            await payloads.recall(digest, b)
            return clock.now()

        done = await asyncio.gather(page("sha1:A", 0.0), page("sha1:B", 0.005), page("sha1:C", 0.019),
                                    page("sha1:D", 0.05))
        return pg.asked, done, payloads.stats, b

    asked, done, stats, b = run_virtual(main, start_at=T0)
    assert asked == [["sha1:A", "sha1:B", "sha1:C"], ["sha1:D"]]
    assert done[:3] == [pytest.approx(T0 + 0.02)] * 3 and done[3] == pytest.approx(T0 + 0.07)
    assert (stats.rounds, stats.found) == (2, 1) and b.exact.first("sha1:C") is not None


def test_a_store_that_does_not_answer_the_lookup_leaves_the_page_a_first_capture():
    pg = _FakePg(digests={"sha1:AAA": FirstCapture("http://other.test/x", T0, "")}, fail=True)
    payloads, b = SharedPayloads(pg), _budget()
    asyncio.run(payloads.recall("sha1:AAA", b))
    assert b.first_capture("http://a.test/y", "sha1:AAA", T0, Batch()) is None
    assert payloads.stats.failed == 1


# ---- on PostgreSQL -------------------------------------------------------------------------------


def _worker(store: PostgresStore, worker_id: str, warc=None) -> Worker:
    cfg = Config()
    return Worker(cfg, clock=ManualClock(T0), resolver=None, fetcher=None,
                  warc=warc or SimpleNamespace(flush=lambda: None), store=store, extractor=None,
                  worker_id=worker_id)


async def _start(w: Worker) -> None:
    """What the worker's loops do first: join, take its share, adopt it."""
    await w.prepare()
    await w.own._rebalance()
    await w._adopt_pending()


def _run(coro, timeout_s: float = 90.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout_s)
    return asyncio.run(bounded())


def _takes_over_from_previous_owner(dsn: str, second_id: str) -> BudgetDefence:
    async def body():
        s1 = await PostgresStore.open(dsn, partitions=P)
        w1 = _worker(s1, "w1")
        await _start(w1)
        b = w1.engine.budget
        b.admit(KEY_A, f"http://{KEY_A}{DEEP}", 1, T0)
        b.record_probe(f"http://{KEY_A}", f"http://{KEY_A}/nope", 200, b"<p>sorry, nothing</p>", "text/html", T0)
        assert await w1.flush()     # the worker saves the guard and the book with its first batch
        await w1.own.close()       # releases every partition
        await s1.close()
        s2 = await PostgresStore.open(dsn, partitions=P)
        try:
            w2 = _worker(s2, second_id)
            assert not _suspect_keys(w2.engine.budget)
            await _start(w2)
            return w2.engine.budget
        finally:
            await s2.close()
    return _run(body())


def test_a_worker_taking_a_partition_over_has_the_trap_flags_and_soft404_book_its_previous_owner_wrote(postgres):
    b = _takes_over_from_previous_owner(postgres.create_database(), "w2")
    assert _suspect_keys(b) == {KEY_A}
    assert b.soft404.is_soft(f"http://{KEY_A}")
    assert b.before_fetch(KEY_A, f"http://{KEY_A}/deep/1/2", T0 + 1).allowed is False


def test_a_restarted_worker_has_the_trap_flags_and_soft404_book_it_wrote_before(postgres):
    b = _takes_over_from_previous_owner(postgres.create_database(), "w1")
    assert _suspect_keys(b) == {KEY_A}
    assert b.soft404.is_soft(f"http://{KEY_A}")


BODY = b"%PDF-1.4 the same report, served under two names " * 40


def _fetched(url: str, at: float) -> FetchResult:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\nContent-Length: {len(BODY)}\r\n\r\n".encode()
    return FetchResult(url=url, ip="127.0.0.1", status=200, request_head=f"GET {url} HTTP/1.1\r\n\r\n".encode(),
                       response_head=head, headers={"content-type": "application/pdf"}, body=BODY, content=b"",
                       truncated=None, started_at=at, elapsed_s=0.01)


def _records(folder: Path) -> list[tuple[str, str, dict[str, str]]]:
    out = []
    for path in sorted(folder.glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"),
                                dict(rec.rec_headers.headers)))
    return out


def test_a_payload_stored_by_another_worker_becomes_a_revisit_record_here(postgres, tmp_path: Path):
    dsn = postgres.create_database()
    dirs = {w: tmp_path / w for w in ("wa", "wb")}

    async def body():
        stores = [await PostgresStore.open(dsn, partitions=P) for _ in dirs]
        writers = [WarcWriter(d, prefix=w, fsync=False) for w, d in dirs.items()]
        try:
            wa, wb = (_worker(s, w, warc) for s, w, warc in zip(stores, dirs, writers))
            for w in (wa, wb):
                await w.prepare()
            for w in (wa, wb):
                await w.own._rebalance()
                await w._adopt_pending()
            held = {w.worker_id: set(w.own.fetching()) for w in (wa, wb)}
            assert held["wa"] and held["wb"] and not held["wa"] & held["wb"]
            key_a = next(f"h{i}.test" for i in range(200) if partition_of(f"h{i}.test", P) in held["wa"])
            key_b = next(f"h{i}.test" for i in range(200) if partition_of(f"h{i}.test", P) in held["wb"])
            url_a, url_b = f"http://{key_a}/report.pdf", f"http://{key_b}/copy.pdf"
            await wa.engine.results.handle(UrlItem(url=url_a, key=key_a, band=4, depth=1), _fetched(url_a, T0))
            assert await wa.flush()
            await wb.engine.results.handle(UrlItem(url=url_b, key=key_b, band=4, depth=1),
                                           _fetched(url_b, T0 + 5))
            assert await wb.flush()
            return wb.payloads.stats, await status_data(dsn)
        finally:
            for x in writers:
                x.close()
            for s in stores:
                await s.close()

    stats, status = _run(body())
    (kind_a, uri_a, _), = _records(dirs["wa"])
    (kind_b, uri_b, h), = _records(dirs["wb"])
    assert (kind_a, kind_b) == ("response", "revisit")
    assert h["WARC-Profile"].endswith("/revisit/identical-payload-digest")
    assert h["WARC-Refers-To-Target-URI"] == uri_a
    assert h["WARC-Refers-To-Date"].startswith("2023-11-14T22:13:20")
    assert (stats.rounds, stats.found) == (1, 1)
    # `courtly status --db` sums what each worker published with its batch
    assert sorted(status["worker_counters"]) == ["wa", "wb"]
    assert status["worker_totals"]["payload_lookups"] == 2      # each worker's first sight of the payload
    assert status["worker_totals"]["payload_revisits"] == 1
    assert "payload revisits" in render_status(status)
