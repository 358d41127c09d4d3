"""The monitor in the running crawl: the watch list checked inside the manners.

What it owns: the live watch list of a `monitor` crawl (read from the
crawl's store, re-read when `courtly watch` or the HTTP API edits it), which
watch is due and which check is in flight, the judging of each answer
(core/change + core/watch), and the hand-over of each change event to its
sinks: the store (`changes` table: status page, feeds, dead letters), the
change log (`DIR/changes.jsonl`) and the webhook sender.

How it works: the crawler asks `due(now)` in its main loop and queues each
URL as a `recrawl` item, so the frontier applies politeness exactly as to any
URL (one request at a time per key, the key's delay, robots.txt, purges) and
the fetch is conditional (the recrawl history's validators). A watch is in
flight from then until its answer (`fetched`, `not_modified`) or a decision
(`released`), so it is never queued twice. `next_wakeup()` is the earliest
due watch: nothing polls. Change events and states are written at each
commit (`save`), after the WARC writer is flushed: an event never names a
capture whose bytes are not on disk (it costs up to one commit interval of
time-to-detect).

It sees the store, the change log and the sender only through the small
protocols below (the composition root, runtime/wiring, gives the concrete
ones); without them (another intent) it is inert.
"""

from __future__ import annotations

import heapq
import logging
from typing import Protocol

from courtly.core.change import WatchRules, content_of
from courtly.core.watch import ChangeEvent, Watch, WatchState, checked, next_check_at, not_modified

__all__ = ["Monitor", "WatchStorePort", "ChangeSink"]

log = logging.getLogger("courtly")


class WatchStorePort(Protocol):
    def version(self) -> int: ...
    def watches(self) -> list[Watch]: ...
    def states(self) -> dict[int, WatchState]: ...
    def save_states(self, states: dict[int, WatchState]) -> None: ...
    def record_change(self, ev: ChangeEvent, webhook: str) -> int: ...


class ChangeSink(Protocol):
    def change(self, seq: int, ev: ChangeEvent, webhook: str) -> None: ...
    def counts(self) -> dict[str, int]: ...   # outcomes for the metrics (webhook: delivered, dead)


class Monitor:
    def __init__(self, cfg, normalize=None) -> None:  # type: ignore[no-untyped-def]
        # the crawl's URL normalisation (its strip_params may differ from the
        # defaults a watch was added with): checks are keyed as the crawl queues them
        self._normalize = normalize or list
        self.store: WatchStorePort | None = None
        self.sinks: list[ChangeSink] = []
        self.by_url: dict[str, Watch] = {}
        self.rules: dict[int, WatchRules] = {}
        self.states: dict[int, WatchState] = {}
        self.in_flight: set[str] = set()
        self._dirty: set[int] = set()
        self._events: list[tuple[Watch, ChangeEvent]] = []   # judged, published at the next save
        self._version = -1
        # when each idle watch is due next: a heap with lazy deletion (an entry
        # whose instant is not `_due_at[url]` any more is stale), so a main-loop
        # turn costs the watches due, not the whole list
        self._heap: list[tuple[float, str]] = []
        self._due_at: dict[str, float] = {}
        self.events = 0
        self.checks = 0

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def attach(self, store: WatchStorePort, sinks: list[ChangeSink]) -> None:
        """Given by the composition root for a `monitor` crawl."""
        self.store = store
        self.sinks = list(sinks)

    def load(self, now: float) -> None:
        if self.store is None:
            return
        self.states = self.store.states()
        self.poll(now)

    def poll(self, now: float) -> None:
        """Re-read the list when it was edited (added, removed, paused)."""
        if self.store is None or self.store.version() == self._version:
            return
        self._version = self.store.version()
        watches = self.store.watches()
        self.by_url = {}
        for w in watches:
            self.by_url[self.normalized(w.url)] = w
        self.rules = {w.id: w.rules() for w in watches}
        for w in watches:
            self.states.setdefault(w.id, WatchState())
        self._heap, self._due_at = [], {}
        for url in self.by_url:
            if url not in self.in_flight:
                self._schedule(url)
        log.info("monitor: %d watches (%d paused)", len(watches), sum(w.paused for w in watches),
                 extra={"event": "watch_list", "watches": len(watches)})

    def save(self) -> None:
        """Publish the events judged since the last save, then save states
        (the crawler calls it at each commit, after the WARC flush)."""
        events, self._events = self._events, []
        for w, ev in events:
            self._publish(w, ev)
        if self.store is not None and self._dirty:
            self.store.save_states({i: self.states[i] for i in self._dirty if i in self.states})
            self._dirty.clear()

    def snapshot(self) -> dict | None:
        """The status snapshot's `monitor` part (None: not a monitor crawl)."""
        if self.store is None:
            return None
        paused = sum(w.paused for w in self.by_url.values())
        webhook: dict[str, int] = {}
        for sink in self.sinks:
            for k, v in sink.counts().items():
                webhook[k] = webhook.get(k, 0) + v
        return {"watches": {"active": len(self.by_url) - paused, "paused": paused}, "checks": self.checks,
                "changes": self.events, "webhook": webhook}

    def normalized(self, url: str) -> str:
        """`url` as the crawl queues it (the key of `by_url`)."""
        forms = self._normalize([url])
        return forms[0] if forms else url

    def owns(self, url: str) -> bool:
        return url in self.by_url

    # ---- schedule -------------------------------------------------------------

    def due(self, now: float) -> list[str]:
        """Watches due now and not in flight; they are in flight from here."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, url = heapq.heappop(heap)
            if self._due_at.get(url) != at:
                continue   # stale: rescheduled since
            del self._due_at[url]
            if url in self.by_url and url not in self.in_flight:
                out.append(url)
                self.in_flight.add(url)
        return out

    def next_wakeup(self) -> float | None:
        heap = self._heap
        while heap and self._due_at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _schedule(self, url: str) -> None:
        w = self.by_url.get(url)
        at = next_check_at(w, self.states[w.id]) if w is not None else None
        if at is None:   # removed or paused
            self._due_at.pop(url, None)
            return
        self._due_at[url] = at
        heapq.heappush(self._heap, (at, url))

    # ---- answers --------------------------------------------------------------

    def fetched(self, url: str, status: int, content: bytes, content_type: str, now: float,
                capture_at: float) -> ChangeEvent | None:
        """An answer for a watched URL (any status but 304)."""
        w = self._answered(url)
        if w is None:
            return None
        st = self.states[w.id]
        self._dirty.add(w.id)
        if not 200 <= status < 300:
            # no content to judge: the next check comes at the usual interval
            st.last_checked_at = now
            self._schedule(url)
            return None
        self.checks += 1
        rules = self.rules[w.id]
        ev = checked(w, rules, st, content_of(content, content_type, rules), now, capture_at)
        if ev is not None:
            self._events.append((w, ev))
        self._schedule(url)
        return ev

    def not_modified(self, url: str, now: float) -> None:
        w = self._answered(url)
        if w is not None:
            self.checks += 1
            not_modified(w, self.states[w.id], now)
            self._dirty.add(w.id)
            self._schedule(url)

    def released(self, url: str, now: float) -> None:
        """Not fetched (a decision: robots, purge, error after retries...)."""
        w = self._answered(url)
        if w is not None:
            self.states[w.id].last_checked_at = now
            self._dirty.add(w.id)
            self._schedule(url)

    def _answered(self, url: str) -> Watch | None:
        self.in_flight.discard(url)
        return self.by_url.get(url)

    def _publish(self, w: Watch, ev: ChangeEvent) -> None:
        assert self.store is not None
        self.events += 1
        seq = self.store.record_change(ev, w.webhook)
        log.info("monitor: %s changed (+%d -%d ~%d)", w.url, len(ev.diff["added"]), len(ev.diff["removed"]),
                 len(ev.diff["changed"]), extra={"event": "change", "url": w.url, "watch": w.id, "seq": seq})
        for sink in self.sinks:
            sink.change(seq, ev, w.webhook)
