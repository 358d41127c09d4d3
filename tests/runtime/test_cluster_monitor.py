"""runtime/cluster_monitor: a worker checks only the watches of the partitions it
holds, starts from what their last owner learned, and writes states and change
events only while it still holds their partition under the same epoch, in
one write the store refuses whole when an epoch moved on."""

from __future__ import annotations

import asyncio

import pytest

from courtly.config import Config
from courtly.core.watch import LEARN_CHECKS, Watch, WatchState
from courtly.ports import StaleEpochError, StoreUnavailableError
from courtly.runtime.cluster_monitor import ClusterWatches
from courtly.runtime.monitor import Monitor
from courtly.sim.watchpage import WatchPage

PART = {"a.test": 0, "b.test": 1, "c.test": 2, "d.test": 3}


class Stale(StaleEpochError):
    def __init__(self, partitions):
        self.partitions = frozenset(partitions)
        super().__init__(f"stale epoch for {sorted(partitions)}")


class FakeAsyncWatches:
    """PostgresWatchStore's methods the worker uses, in memory; `epochs` is
    the database's view of each partition's epoch (write_checks is fenced on it)."""

    def __init__(self, watches, states=None, epochs=None):
        self.list, self.v = list(watches), 1
        self.stored = dict(states or {})
        self.changes: list = []
        self.epochs = epochs
        self.writes = 0

    async def version(self):
        return self.v

    async def watches(self):
        return list(self.list)

    async def states(self):
        return dict(self.stored)

    async def write_checks(self, states, events, tenure):
        self.writes += 1
        stale = {p for p, e in tenure.values() if self.epochs.get(p) != e}
        if stale:
            raise Stale(stale)
        self.stored.update(states)
        self.changes.extend(events)
        return list(range(len(self.changes) - len(events) + 1, len(self.changes) + 1))


def part_of_url(url: str) -> int:
    return PART[url.split("//", 1)[1].split("/", 1)[0]]


def cluster(held: dict[int, int], states=None, epochs=None):
    """`epochs`: the database's epochs when they differ from what the worker believes it holds."""
    watches = [Watch(f"http://{h}/p", every_s=10, id=i + 1) for i, h in enumerate(PART)]
    store = FakeAsyncWatches(watches, states, held if epochs is None else epochs)
    m = Monitor(Config().replace("crawl", intent="monitor"))
    known: list[str] = []
    port = ClusterWatches(store, m, held=lambda: held, part_of_url=part_of_url, know=known.append)
    m.attach(port, [])
    return m, port, store, known


def test_a_worker_checks_only_the_watches_of_the_partitions_it_holds():
    held = {0: 3, 2: 1}
    m, port, _, known = cluster(held)
    asyncio.run(port.sync(0.0))
    assert sorted(m.due(0.0)) == ["http://a.test/p", "http://c.test/p"]
    assert sorted(known) == ["http://a.test/p", "http://c.test/p"]     # queued as recrawls, not routed


def test_a_partition_taken_over_brings_its_watches_with_what_they_learned():
    learned = WatchState(checks=9, learning_left=0, last_checked_at=5.0)
    held: dict[int, int] = {0: 1}
    m, port, _, _ = cluster(held, states={2: learned})
    asyncio.run(port.sync(0.0))
    assert not m.owns("http://b.test/p")
    held[1] = 4                       # the lease loop granted partition 1
    asyncio.run(port.sync(1.0))
    assert m.owns("http://b.test/p") and m.states[2].checks == 9


def test_a_partition_lost_drops_its_watch_and_fences_its_change_event():
    page = WatchPage("/p", "real", (100.0,), 7)
    held = {0: 1, 1: 1}
    m, port, store, _ = cluster(held)
    asyncio.run(port.sync(0.0))
    for n in range(LEARN_CHECKS + 6):
        at = 10.0 * n
        for url in sorted(m.due(at)):
            m.fetched(url, 200, page.html(at, n), "text/html", at, at)
    del held[0]                       # lost before the commit: a's event and state are the next owner's
    m.save()
    asyncio.run(port.write())
    assert [ev.url for ev, _ in store.changes] == ["http://b.test/p"]
    assert set(store.stored) == {2} and port.fenced == 2
    asyncio.run(port.sync(200.0))
    assert not m.owns("http://a.test/p") and m.owns("http://b.test/p")


def test_a_partition_held_again_under_a_new_epoch_reloads_the_stored_state():
    held = {0: 1}
    m, port, store, _ = cluster(held, states={1: WatchState(checks=2)})
    asyncio.run(port.sync(0.0))
    store.stored[1] = WatchState(checks=7)     # another worker held it meanwhile
    held[0] = 2
    asyncio.run(port.sync(1.0))
    assert m.states[1].checks == 7


def test_a_check_in_flight_when_its_partition_moves_is_due_again_once_it_is_held_again():
    held = {0: 1}
    m, port, _, _ = cluster(held)
    asyncio.run(port.sync(0.0))
    assert m.due(0.0) == ["http://a.test/p"]     # queued; the partition goes before it is answered
    del held[0]
    asyncio.run(port.sync(1.0))
    held[0] = 2
    asyncio.run(port.sync(2.0))
    assert m.due(2.0) == ["http://a.test/p"]


def test_an_event_the_store_could_not_take_is_written_at_the_next_commit():
    page = WatchPage("/p", "real", (100.0,), 7)
    m, port, store, _ = cluster({0: 1})
    asyncio.run(port.sync(0.0))
    for n in range(LEARN_CHECKS + 6):
        for url in m.due(10.0 * n):
            m.fetched(url, 200, page.html(10.0 * n, n), "text/html", 10.0 * n, 10.0 * n)
    m.save()
    working = store.write_checks

    async def down(states, events, tenure):
        raise ConnectionRefusedError("PostgreSQL is away")
    store.write_checks = down
    with pytest.raises(StoreUnavailableError):
        asyncio.run(port.write())
    store.write_checks = working
    asyncio.run(port.write())
    assert [ev.url for ev, _ in store.changes] == ["http://a.test/p"] and 1 in store.stored


def _judge_a_change_on_every_watch(m, port):
    page = WatchPage("/p", "real", (100.0,), 7)
    asyncio.run(port.sync(0.0))
    for n in range(LEARN_CHECKS + 6):
        for url in sorted(m.due(10.0 * n)):
            m.fetched(url, 200, page.html(10.0 * n, n), "text/html", 10.0 * n, 10.0 * n)
    m.save()


def test_a_writer_stalled_past_its_lease_has_its_partitions_write_refused_and_the_rest_written_once():
    held = {0: 1, 1: 1}
    m, port, store, _ = cluster(held, epochs={0: 2, 1: 1})   # partition 0 taken over at epoch 2 meanwhile
    _judge_a_change_on_every_watch(m, port)
    asyncio.run(port.write())
    assert [ev.url for ev, _ in store.changes] == ["http://b.test/p"] and set(store.stored) == {2}
    assert store.writes == 2 and port.recorded == 1 and port.fenced == 2    # a's event and state
    asyncio.run(port.write())                                              # nothing left to write again
    assert [ev.url for ev, _ in store.changes] == ["http://b.test/p"] and store.writes == 2


def test_states_and_events_of_one_commit_go_in_one_write():
    m, port, store, _ = cluster({0: 1, 1: 5})
    _judge_a_change_on_every_watch(m, port)
    asyncio.run(port.write())
    assert store.writes == 1 and sorted(ev.url for ev, _ in store.changes) == ["http://a.test/p", "http://b.test/p"]


def test_tenure_names_the_watches_held_here_with_the_partition_and_epoch_they_are_held_under():
    held = {0: 3, 2: 1}
    _, port, _, _ = cluster(held)
    asyncio.run(port.sync(0.0))
    assert port.tenure() == {1: (0, 3), 3: (2, 1)}
    held[0] = 4                        # lost and taken again: the old tenure is not ours any more
    assert port.tenure() == {3: (2, 1)}
