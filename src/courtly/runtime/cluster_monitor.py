"""The `monitor` intent on a cluster: each worker checks the watches of the partitions it holds.

What it owns: the bridge between the engine's `Monitor` (runtime/monitor,
synchronous: it asks a `WatchStorePort`) and the cluster's watch list in
PostgreSQL (`PostgresWatchStore`, async), fenced by partition leases.

How it works: `ClusterWatches` is the monitor's store port, served from
memory. `sync` (the worker calls it at each commit and after adopting
partitions) reads the list's version; when the list or the set of held
partitions changed it reads the watches, keeps those whose URL's key falls in
a held partition, loads their states (the last owner's, from the store) for
the ones new here, and marks their URLs as known to the engine so each check
is queued through the frontier as a recrawl (politeness, conditional GET).
A watch whose partition was lost is released here first (its check in flight
is dropped with the partition's queue). The monitor's writes (states, change
events) are buffered by the port and written by `write`, which the worker
calls after the WARC flush of a commit: an event never names unwritten bytes.

Rules (fencing): a watch is held by exactly one worker at a time because its
partition is; `write` saves states and records events only of watches whose
partition is still held under the epoch it was taken with (the rest are the
new owner's to check again: at-least-once, never twice at once), and it does
so in one transaction that the store refuses whole (StaleEpochError) if one
of those partitions moved to another epoch meanwhile: a worker stalled past
its lease cannot report a change its successor reports too. The writes of
the partitions refused are dropped; the rest are written again at once.
`tenure()` (watch id -> partition, epoch) is what the webhook deliverer
(shell/webhook_cluster) claims with: the events of the watches held here.
No shell imports: the worker gets the store from runtime/cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.ports import StaleEpochError, StoreUnavailableError
from courtly.runtime.monitor import Monitor

__all__ = ["ClusterWatches", "AsyncWatchStore"]

log = logging.getLogger("courtly")


class AsyncWatchStore(Protocol):
    async def version(self) -> int: ...
    async def watches(self) -> list[Watch]: ...
    async def states(self) -> dict[int, WatchState]: ...
    async def write_checks(self, states: dict[int, WatchState], events: list[tuple[ChangeEvent, str]],
                           tenure: dict[int, tuple[int, int]]) -> list[int]: ...


class ClusterWatches:
    """The monitor's store port over the held partitions' watches (see the module doc)."""

    def __init__(self, store: AsyncWatchStore, monitor: Monitor, *, held: Callable[[], dict[int, int]],
                 part_of_url: Callable[[str], int], know: Callable[[str], None]) -> None:
        self._store = store
        self._monitor = monitor
        self._held = held                  # partition -> epoch, fetching now
        self._part_of_url = part_of_url
        self._know = know                  # the engine knows the URL: checks are queued as recrawls
        self._watches: list[Watch] = []
        self._taken: dict[int, tuple[int, int]] = {}     # watch id -> (partition, epoch) it is held under
        self._version = 0
        self._seen: tuple[int, frozenset[tuple[int, int]]] | None = None
        self._states: dict[int, WatchState] = {}
        self._events: list[tuple[ChangeEvent, str]] = []
        self.recorded = 0
        self.fenced = 0                    # writes dropped: the partition moved on

    # ---- the monitor's port (runtime/monitor.WatchStorePort), from memory ----------

    def version(self) -> int:
        return self._version

    def watches(self) -> list[Watch]:
        return list(self._watches)

    def states(self) -> dict[int, WatchState]:
        return {}     # installed by `sync` as watches come in

    def save_states(self, states: dict[int, WatchState]) -> None:
        self._states.update(states)

    def record_change(self, ev: ChangeEvent, webhook: str) -> int:
        self._events.append((ev, webhook))
        return 0      # the store's sequence number is given at `write`

    # ---- the worker's side --------------------------------------------------------

    async def sync(self, now: float) -> None:
        """Take up list edits and partition moves (see the module doc)."""
        await _guarded(self._sync(now))

    async def _sync(self, now: float) -> None:
        held = self._held()
        version = await self._store.version()
        seen = (version, frozenset(held.items()))
        if seen == self._seen:
            return
        mine: list[Watch] = []
        for w in await self._store.watches():
            p = self._part_of_url(self._normalized(w.url))
            if p in held:
                mine.append(w)
        taken = {w.id: (p, held[p]) for w in mine for p in (self._part_of_url(self._normalized(w.url)),)}
        m = self._monitor
        gone = [url for url, w in m.by_url.items() if taken.get(w.id) != self._taken.get(w.id)]
        for url in gone:
            if url in m.in_flight:     # its queued check went with the partition
                m.released(url, now)
        new = [w for w in mine if self._taken.get(w.id) != taken[w.id]]
        if new:
            stored = await self._store.states()    # the last owner's: what each watch learned
            for w in new:
                m.states[w.id] = stored.get(w.id, WatchState())
                self._states.pop(w.id, None)
        for w in mine:
            self._know(self._normalized(w.url))
        self._watches, self._taken, self._seen = mine, taken, seen
        self._version += 1
        m.poll(now)

    async def write(self) -> None:
        await _guarded(self._write())

    async def _write(self) -> None:
        """Record the change events judged and the states changed since the
        last write, of watches still held under the same epoch, in one fenced
        transaction (see the module doc). The worker calls the monitor's
        `save` right after the WARC flush (nothing awaited between), which
        moves them into this port's buffers."""
        events, self._events = self._events, []
        states, self._states = self._states, {}
        kept = [(ev, hook) for ev, hook in events if self._holds(ev.watch_id)]
        mine = {i: s for i, s in states.items() if self._holds(i)}
        self.fenced += len(events) - len(kept) + len(states) - len(mine)
        for _ in range(len(self._taken) + 1):     # each refusal removes a partition
            if not (kept or mine):
                return
            tenure = {i: self._taken[i] for i in {ev.watch_id for ev, _ in kept} | set(mine)}
            try:
                await self._store.write_checks(mine, kept, tenure)
            except StaleEpochError as e:
                gone = set(e.partitions)
                lost = {i for i, (p, _) in tenure.items() if p in gone}
                self.fenced += sum(ev.watch_id in lost for ev, _ in kept) + len(lost & set(mine))
                kept = [(ev, hook) for ev, hook in kept if ev.watch_id not in lost]
                mine = {i: s for i, s in mine.items() if i not in lost}
                continue
            except Exception:
                # the store is away: kept for the next commit (states with them)
                self._events[:0] = kept
                self._states = {**mine, **self._states}
                raise
            self.recorded += len(kept)
            return

    def tenure(self) -> dict[int, tuple[int, int]]:
        """Watch id -> (partition, epoch) of the watches held here now."""
        return {i: t for i, t in self._taken.items() if self._held().get(t[0]) == t[1]}

    def _holds(self, watch_id: int) -> bool:
        t = self._taken.get(watch_id)
        return t is not None and self._held().get(t[0]) == t[1]

    def _normalized(self, url: str) -> str:
        return self._monitor.normalized(url)


async def _guarded(coro) -> None:  # type: ignore[no-untyped-def]
    """The store's connection errors (asyncpg's, OSError) as the cluster's
    `StoreUnavailableError`: the worker counts it and tries at the next commit."""
    try:
        await coro
    except StoreUnavailableError:
        raise
    except Exception as e:
        if not (isinstance(e, OSError) or type(e).__module__.startswith("asyncpg")):
            raise
        raise StoreUnavailableError(f"the watch list: {e}") from e
