"""A committer that fails must stop the crawl loudly, not leave it fetching
with nothing written.

The commit loop runs beside the fetch tasks. If it ended on an unexpected
error and nobody noticed, a distributed worker (which never goes idle: it
waits for more work) would go on fetching and never write a batch again: its
pages stay queued in the shared store and every worker waits for them
forever. A real Crawler and SqliteStore with the fakes of test_overflow.
"""

from __future__ import annotations

import asyncio

import pytest

from courtly.runtime.crawler import Crawler
from courtly.runtime.distribution import Deployment, OwnsEverything
from courtly.shell.store.sqlite import SqliteStore
from test_overflow import HOSTS, _Clock, _config, _Extractor, _Fetcher, _Resolver, _Warc, _web


class _BrokenStore(SqliteStore):
    """Writes fail from the second batch on with an error that is not a
    store outage (a bug, a driver in a state it does not expect)."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.applied = 0

    def apply(self, batch, **kw):
        self.applied += 1
        if self.applied > 1:
            raise RuntimeError("the store driver is in a state it does not expect")
        return super().apply(batch, **kw)


class _Endless(OwnsEverything):
    endless = True     # like a distributed worker: wait for more work, stop only when told


def test_a_failing_committer_stops_the_crawl_with_its_error(tmp_path):
    web = _web()
    ref: list = []
    fetcher = _Fetcher(web, ref)
    store = _BrokenStore(tmp_path / "crawl.db")
    c = Crawler(_config(memory_max=10_000, key_memory_max=1_000), clock=_Clock(), resolver=_Resolver(),
                fetcher=fetcher, warc=_Warc(), store=store, extractor=_Extractor(web),
                deployment=Deployment(tenancy=_Endless()))
    ref.append(c)
    c.load()
    c.add_seeds([f"https://{h}/" for h in HOSTS])

    async def bounded():
        # the bound only keeps a regression from hanging the suite: without the
        # fix this crawler never ends
        return await asyncio.wait_for(c.run(), 60)

    with pytest.raises(RuntimeError, match="does not expect"):
        asyncio.run(bounded())
    assert isinstance(c.fatal, RuntimeError) and c.stopping
    store.close()
