"""The budget defence of a distributed worker, shared through PostgreSQL.

What it owns: how a worker's `BudgetDefence` (runtime/budget.py: trap guard,
soft-404 book, exact and near-duplicate indexes) holds the state of exactly
the partitions it fetches, so that a partition taken over, or a worker
restarted, goes on where the previous owner stopped, and a payload stored
first by another worker becomes a revisit here.

How it works
------------
* `SharedDefence.start` (the worker's `prepare`): the trap guard's allowlist
  rows (`courtly allow`), read with no partition's hosts.
* `SharedDefence.adopt(partitions)` (the worker's `_adopt_pending`, before a
  partition taken over is claimed from): the trap rows of its keys
  (`trap_snapshot`), the soft-404 rows of its origins (`soft404_snapshot`)
  and its hosts' SimHashes (`iter_simhashes`) are merged in (`adopt`; what
  this worker holds already is newer and stays).
* `SharedDefence.forget(partition)` (the worker's `stop_fetching`: lost or
  released): the state of its keys is saved into the engine's batch first
  (written if the partition's epoch still lets it, fenced by the store) and
  then dropped, so it cannot outlive a newer owner's.
* `SharedPayloads.recall(digest, budget)` (the engine, before a 200's
  record is written): on a miss in the in-memory exact index the store's
  `digests` table (every worker's first captures) is asked; a hit is added
  to the index, so the engine's `first_capture` finds it and the WARC gets
  the revisit record the single machine would write. One `digest_records`
  statement is out at a time: the digests of pages that finish in the same
  event-loop turn, or while one is out, go together in the next (so the
  batches grow with the page rate, without a wait). The store away: the page is stored whole (a second copy, never
  a lost one). Two workers storing one payload in the same commit interval
  both keep a copy: the table learns of a capture when its batch commits.

Rules: no shell imports (the store is the port's shape); nothing here waits
on a clock; a lookup that fails only costs a duplicate copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from courtly.core.fingerprint import FirstCapture, from_signed64
from courtly.ports import StoreUnavailableError

__all__ = ["SharedDefence", "SharedPayloads", "PayloadStats"]


class SharedDefence:
    """Adopt and forget a partition's trap, soft-404 and near-duplicate state."""

    def __init__(self, pg, budget, partition_of_key: Callable[[str], int],
                 partition_of_origin: Callable[[str], int]) -> None:
        self.pg = pg
        self.budget = budget
        self.of_key = partition_of_key
        self.of_origin = partition_of_origin

    async def start(self) -> None:
        """The allowlist rows (no host yet: each comes with its partition)."""
        b = self.budget
        if b.enabled:
            b.restore_traps(await self.pg.trap_snapshot([]))

    async def adopt(self, partitions: list[int]) -> tuple[int, int, int]:
        """Merge in the state of `partitions`; (trap keys, origins, SimHashes) taken."""
        b = self.budget
        if not b.enabled or not partitions:
            return (0, 0, 0)
        keys = b.traps.adopt(await self.pg.trap_snapshot(partitions))
        origins = b.soft404.adopt(await self.pg.soft404_snapshot(partitions))
        prints = 0
        async for doc_id, fp, scope in self.pg.iter_simhashes(partitions):
            if doc_id not in b.near:
                b.near.add(doc_id, from_signed64(fp), scope)
                prints += 1
        return (keys, origins, prints)

    def forget(self, partition: int, batch=None) -> None:
        """Save into `batch` (when given), then drop, the trap and soft-404
        state of `partition`'s keys."""
        b = self.budget
        if not b.enabled:
            return
        if batch is not None:
            b.save(batch)
        b.traps.forget(lambda key: self.of_key(key) == partition)
        b.soft404.forget(lambda origin: self.of_origin(origin) == partition)


@dataclass(slots=True)
class PayloadStats:
    asked: int = 0       # digests looked up in the store (misses of the local index)
    rounds: int = 0      # statements that asked them
    found: int = 0       # stored first by another worker (or an earlier run): revisits
    failed: int = 0      # rounds the store did not answer (those pages are stored whole)


class SharedPayloads:
    """The engine's exact-duplicate lookup beyond this process (see the module doc)."""

    def __init__(self, pg) -> None:
        self.pg = pg
        self.stats = PayloadStats()
        self._asked: dict[str, asyncio.Future[FirstCapture | None]] = {}   # digest -> its answer
        self._next: list[str] = []                     # digests for the next round
        self._rounds: asyncio.Task | None = None

    async def recall(self, digest: str, budget) -> None:
        """Make the exact index know `digest`'s first capture if any worker stored it."""
        if not budget.enabled or not digest or budget.exact.first(digest) is not None:
            return
        answer = self._asked.get(digest)
        if answer is None:
            loop = asyncio.get_running_loop()
            answer = self._asked[digest] = loop.create_future()
            self._next.append(digest)
            if self._rounds is None:
                # its first step runs after every callback already ready: their digests join this round
                self._rounds = loop.create_task(self._ask())
        hit = await asyncio.shield(answer)     # one page cancelled does not cancel the others' answer
        if hit is not None and budget.exact.first(digest) is None:
            budget.exact.add(digest, hit.url, hit.date, hit.record_id)

    async def _ask(self) -> None:
        """One statement at a time: digests that arrive while one is out go
        together in the next (batches grow with the page rate, no wait)."""
        try:
            while self._next:
                wanted, self._next = sorted(self._next), []
                self.stats.asked += len(wanted)
                self.stats.rounds += 1
                try:
                    found = await self.pg.digest_records(wanted)
                except StoreUnavailableError:
                    self.stats.failed += 1
                    found = {}
                self.stats.found += len(found)
                for d in wanted:
                    self._asked.pop(d).set_result(found.get(d))
        except BaseException as e:   # a bug, or the loop going away: no page may wait for ever
            for answer in self._asked.values():
                if not answer.done():
                    answer.set_exception(e if isinstance(e, Exception) else asyncio.CancelledError())
            self._asked.clear()
            self._next = []
            if not isinstance(e, Exception):
                raise
        finally:
            self._rounds = None
