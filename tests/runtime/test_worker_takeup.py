"""What a worker takes up from the shared store at each commit: purges and complaints.

A real Worker (its engine, tenancy and send policy) on a fake PostgreSQL
store that holds purge and complaint rows in SqliteStore's shapes. The
end-to-end version (a purge during a three-worker crawl of the simulated
web) is tests/e2e/test_distributed_purge.py.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from courtly.config import Config
from courtly.runtime.worker import Worker
from clock_support import ManualClock
from worker_fakes import OneRegionStore

T0 = 1_700_000_000.0


class _Pg(OneRegionStore):

    def __init__(self) -> None:
        self.purge_rows: list[tuple] = []       # id, scope, value, reason, at, applied_at
        self.complaint_rows: list[tuple] = []   # id, host, key, contact, note, recorded_at, resolved_at
        self.asked_after: list[int] = []

    async def purges(self, after_id: int = 0) -> list[tuple]:
        self.asked_after.append(after_id)
        return [r for r in self.purge_rows if r[0] > after_id]

    async def complaints(self, *, open_only: bool = False) -> list[tuple]:
        return [r for r in self.complaint_rows if not open_only or r[6] is None]


def _worker() -> tuple[Worker, _Pg]:
    pg = _Pg()
    w = Worker(Config(), clock=ManualClock(T0), resolver=None, fetcher=None,
               warc=SimpleNamespace(flush=lambda: None), store=pg, extractor=None, worker_id="w1")
    return w, pg


def test_a_purge_recorded_since_the_last_commit_is_in_force_at_the_next_one_and_read_once():
    w, pg = _worker()
    asyncio.run(w.take_up_shared())
    assert w.engine.takedowns.match("https://www.a.example/x") is None
    pg.purge_rows.append((1, "domain", "a.example", "takedown", T0 - 1, None))
    asyncio.run(w.take_up_shared())
    assert w.engine.takedowns.match("https://www.a.example/x") is not None
    assert w.engine.takedowns.match("https://b.example/") is None
    # a URL of the scope found on a page is refused with a decision, not routed
    assert not w.engine.admission.admit("https://news.a.example/new", via="https://b.example/", band=4, depth=1,
                                        now=T0)
    decisions = [(row[0], row[5]) for row in w.engine.batch.decisions]
    assert decisions == [("https://news.a.example/new", "purged")]
    assert not w.engine.batch.new_urls
    asyncio.run(w.take_up_shared())
    assert pg.asked_after == [0, 0, 1]      # each purge is read once
    assert w.engine.takedowns.to_settle() is not None   # its rows are marked again after the next batch


def test_an_open_complaint_slows_its_key_on_every_worker_and_its_resolution_lifts_it():
    w, pg = _worker()
    pol = w.engine.politeness
    before = pol.key("a.example").delay_s
    pg.complaint_rows.append((1, "www.a.example", "a.example", "abuse@a.example", "too fast", T0 - 5, None))
    asyncio.run(w.take_up_shared())
    slowed = pol.key("a.example").delay_s
    assert slowed > before and slowed >= Config().abuse.delay_s_min
    assert "a.example" in w.engine.batch.hosts
    pg.complaint_rows[0] = pg.complaint_rows[0][:6] + (T0,)
    asyncio.run(w.take_up_shared())
    assert pol.key("a.example").delay_s == before
