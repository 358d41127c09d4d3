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
  and its hosts' SimHashes (`iter_simhashes`) are taken, replacing what
  this worker had for those keys (only what it saw of their links while
  another worker owned them: the rows are the owner's).
* `SharedDefence.save(batch, now)` (each batch the worker cuts): the rows of
  the guard and the book changed since the last save go into the batch
  (`Batch.defence`) every SAVE_S, as the single machine's commit saves its
  snapshots, and at the last cut; `apply` writes those of the partitions
  held. No whole snapshot is encoded or parsed: a save costs the keys
  changed since the last one.
* `SharedDefence.forget(partition)` (the worker's `stop_fetching`: lost or
  released) marks it; at the worker's next cut the guard and the book are
  saved into the batch once (written for partitions whose
  epoch still allows it, fenced by the store) and the state of every
  partition gone meanwhile is dropped. One save per cut, however many
  partitions a rebalance hands back: a second save would replace the first
  in the batch, without the keys already dropped.
* `SharedPayloads.recall(digest, budget)` (the engine, before a 200's
  record is written): on a miss in the in-memory exact index the store's
  `digests` table (every worker's first captures) is asked; a hit is added
  to the index, so the engine's `first_capture` finds it and the WARC gets
  the revisit record the single machine would write. One `digest_records`
  statement is out at a time: the digests of pages that finish within
  GATHER_S of the first (a worker's; no wait when built without a clock),
  or while one is out, go together in the next (so the batches grow with
  the page rate: at 400 pages/s, about eight digests a statement instead of
  one, for 20 ms more before a page's record is written). The store away: the page is stored whole (a second copy, never
  a lost one). Two workers storing one payload in the same commit interval
  both keep a copy: the table learns of a capture when its batch commits.

Rules: no shell imports (the store is the port's shape); the one wait (the
gather window) goes through the injected clock; a lookup that fails only
costs a duplicate copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from courtly.core.fingerprint import FirstCapture, from_signed64
from courtly.ports import StoreUnavailableError

__all__ = ["GATHER_S", "SharedDefence", "SharedPayloads", "PayloadStats", "SAVE_S"]

SAVE_S = 10.0    # the trap guard and soft-404 book are saved this often (the single machine's period)
GATHER_S = 0.02  # a worker's payload lookups wait this long for others to share their statement


class SharedDefence:
    """Adopt and forget a partition's trap, soft-404 and near-duplicate state."""

    def __init__(self, pg, budget, partition_of_key: Callable[[str], int],
                 partition_of_origin: Callable[[str], int]) -> None:
        self.pg = pg
        self.budget = budget
        self.of_key = partition_of_key
        self.of_origin = partition_of_origin
        self._parting: set[int] = set()    # lost or released, state not yet saved and dropped
        self._saved_at = -SAVE_S

    async def start(self) -> None:
        """The allowlist rows (no host yet: each comes with its partition)."""
        b = self.budget
        if b.enabled:
            b.restore_traps(await self.pg.trap_snapshot([]))

    async def adopt(self, partitions: list[int]) -> tuple[int, int, int]:
        """Take the stored state of `partitions`; (trap keys, origins, SimHashes) taken.

        What this worker holds for their keys is dropped first: it did not
        own them, so it only saw their links go by (admission checks every
        discovered URL, routed or not), while the rows are the owner's."""
        b = self.budget
        if not b.enabled or not partitions:
            return (0, 0, 0)
        wanted = set(partitions)
        self._parting -= wanted
        traps = await self.pg.trap_snapshot(partitions)
        soft = await self.pg.soft404_snapshot(partitions)
        self._drop(wanted)
        keys, origins = b.traps.adopt(traps), b.soft404.adopt(soft)
        prints = 0
        async for doc_id, fp, scope in self.pg.iter_simhashes(partitions):
            if doc_id not in b.near:
                b.near.add(doc_id, from_signed64(fp), scope)
                prints += 1
        return (keys, origins, prints)

    def forget(self, partition: int) -> None:
        """`partition` was lost or released: its state is saved and dropped at
        the next `save` (one save for every partition gone meanwhile)."""
        self._parting.add(partition)

    def save(self, batch, now: float, *, final: bool = False) -> None:
        """At a batch cut: save the trap guard and soft-404 book into `batch`
        every SAVE_S (as the single machine's commit does), at the last cut,
        and whenever partitions went since the last cut (their last state is
        written if their epochs still allow: the store fences it); then drop
        those partitions' keys."""
        b = self.budget
        if not b.enabled:
            self._parting.clear()
            return
        if final or self._parting or now - self._saved_at >= SAVE_S:
            b.save_rows(batch)
            self._saved_at = now
        if self._parting:
            self._drop(self._parting)
            self._parting = set()

    def _drop(self, partitions: set[int]) -> None:
        b = self.budget
        b.traps.forget(lambda key: self.of_key(key) in partitions)
        b.soft404.forget(lambda origin: self.of_origin(origin) in partitions)


@dataclass(slots=True)
class PayloadStats:
    asked: int = 0       # digests looked up in the store (misses of the local index)
    rounds: int = 0      # statements that asked them
    found: int = 0       # stored first by another worker (or an earlier run): revisits
    failed: int = 0      # rounds the store did not answer (those pages are stored whole)


class SharedPayloads:
    """The engine's exact-duplicate lookup beyond this process (see the module doc)."""

    def __init__(self, pg, clock=None, gather_s: float = 0.0) -> None:
        self.pg = pg
        self.clock = clock
        self.gather_s = gather_s if clock is not None else 0.0
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
            if self.gather_s > 0:       # the digests of the next moment join this round
                await self.clock.sleep(self.gather_s)
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
