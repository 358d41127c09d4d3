"""URLs routed in from other workers pass the owner's trap guard and budget (issue 16, item 3).

Each discovered URL is judged once, by the trap guard that keeps its key: a
link found on a page of its own partition by the worker that fetched the
page (its owner), any other when its owner claims it from its inbox
(runtime/admission `judge_claimed`); refused there, it gets its decision
with a reason, like a refusal at discovery. A URL the owner judged before
(an adoption's rebuilt inbox, `judged`) or fetched before (`attempts`) is
not judged again. A real Worker on a fake store.
"""

from __future__ import annotations

import asyncio
import json
import random
from types import SimpleNamespace

from courtly.config import Config
from courtly.core.lease import PartitionView
from courtly.ports import Batch
from courtly.runtime.budget import BudgetDefence
from courtly.runtime.worker import Worker
from courtly.shell.store.postgres import PostgresStore
from clock_support import ManualClock
from pg_support import pg_fixture
from worker_fakes import OneRegionStore

T0 = 1_700_000_000.0
DEEP = "/" + "/".join(f"s{i}" for i in range(40))    # far more path segments than the trap guard takes


class _Pg(OneRegionStore):
    def __init__(self) -> None:
        self.to_claim: list[tuple] = []

    async def claim_new(self, epochs, limit):
        rows, self.to_claim = self.to_claim, []
        return rows


def _worker() -> tuple[Worker, _Pg]:
    pg = _Pg()
    w = Worker(Config(), clock=ManualClock(T0), resolver=None, fetcher=None,
               warc=SimpleNamespace(flush=lambda: None), store=pg, extractor=None, worker_id="w1")
    for p in range(pg.partitions):
        w.own.views[p] = PartitionView.granted(p, 1, T0, w.own.terms)
        w._claimed[p] = set()
    return w, pg


def _pages(w: Worker) -> tuple[str, str]:
    """A page of the partition of `a.example`, and one of another partition."""
    p = w.parts.partition("a.example")
    other = next(f"other{i}.example" for i in range(100) if w.parts.partition(f"other{i}.example") != p)
    return "https://a.example/home", f"https://{other}/home"


def _claim(w: Worker, pg: _Pg, url: str, via: str | None, *, judged: bool = False, attempts: int = 0) -> None:
    pg.to_claim = [(url, "a.example", 4, 1, 0, via, attempts, judged)]
    asyncio.run(w._claim())


def _refusal_of(url: str) -> tuple[str, str]:
    """What one machine's trap guard says of `url` when it is discovered."""
    v = BudgetDefence(Config(), random.Random(1)).admit("a.example", url, 1, T0)
    assert not v.allowed
    return str(v.reason), v.rule


def _decided(w: Worker) -> dict[str, tuple[str, str]]:
    return {row[0]: (row[5], row[6].split(":")[0]) for row in w.engine.batch.decisions}


def test_a_trap_url_routed_in_from_another_partition_is_refused_by_the_owner_with_its_reason():
    w, pg = _worker()
    _, elsewhere = _pages(w)
    url = "https://a.example" + DEEP
    _claim(w, pg, url, elsewhere)
    assert not w.engine.frontier.has_key("a.example")
    assert _decided(w) == {url: _refusal_of(url)}
    assert w.wstats.refused_claims == 1 and w.wstats.claimed == 0


def test_a_seed_claimed_from_the_inbox_is_admitted_as_one_machine_admits_seeds_and_counted_by_the_owner():
    w, pg = _worker()
    url = "https://a.example" + DEEP
    assert BudgetDefence(Config(), random.Random(1)).admit("a.example", url, 0, T0, seed=True).allowed
    _claim(w, pg, url, None)
    assert w.engine.frontier.has_key("a.example") and not w.engine.batch.decisions
    w.engine.budget.save(w.engine.batch)
    assert "a.example" in json.loads(w.engine.batch.meta["traps"])["hosts"]


def test_a_routed_in_url_the_trap_guard_allows_is_queued_and_counted_by_the_owner():
    w, pg = _worker()
    _, elsewhere = _pages(w)
    _claim(w, pg, "https://a.example/fine", elsewhere)
    assert w.engine.frontier.has_key("a.example") and not w.engine.batch.decisions
    w.engine.budget.save(w.engine.batch)
    assert "a.example" in json.loads(w.engine.batch.meta["traps"])["hosts"]   # the owner's count of the key


def test_urls_judged_before_are_not_judged_again_at_a_claim():
    w, pg = _worker()
    same, elsewhere = _pages(w)
    for n, (via, judged, attempts) in enumerate(((same, False, 0), (elsewhere, True, 0), (elsewhere, False, 2))):
        _claim(w, pg, f"https://a.example/{n}" + DEEP, via, judged=judged, attempts=attempts)
    assert not w.engine.batch.decisions and w.wstats.claimed == 3


def test_a_link_into_another_partition_is_routed_unjudged_and_one_into_its_own_is_judged_at_discovery():
    w, _ = _worker()
    same, elsewhere = _pages(w)
    e = w.engine
    deep = "https://a.example" + DEEP
    assert e.admission.admit(deep, via=elsewhere, band=4, depth=1, now=T0)      # routed: its owner judges it
    assert [r[0] for r in e.batch.new_urls] == [deep] and not e.batch.decisions
    e.budget.save(e.batch)
    assert "a.example" not in json.loads(e.batch.meta["traps"])["hosts"]       # nothing counted here
    other = "https://a.example/x" + DEEP
    assert not e.admission.admit(other, via=same, band=4, depth=1, now=T0)
    assert _decided(w) == {other: _refusal_of(other)}


postgres = pg_fixture()


def test_postgres_marks_an_adoptions_rebuilt_inbox_judged_and_a_fresh_discovery_not(postgres):
    async def body():
        store = await PostgresStore.open(postgres.create_database(), partitions=8)
        try:
            await store.register("w1")
            p = store.partition_of_key("a.example")
            epochs = await store.acquire_many([p], "w1", 60.0)
            b = Batch()
            b.new_urls.append(("https://a.example/1", "a.example", 4, 1, 0, "https://b.example/", T0))
            await store.apply(b, partition_epochs=epochs)
            fresh = await store.claim_new(epochs, 10)
            await store.adopt(p, epochs[p])
            again = await store.claim_new(epochs, 10)
            return fresh, again
        finally:
            await store.close()
    fresh, again = asyncio.run(body())
    assert [(r[0], r[7]) for r in fresh] == [("https://a.example/1", False)]
    assert [(r[0], r[7]) for r in again] == [("https://a.example/1", True)]
