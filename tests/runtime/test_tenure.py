"""The lease epoch travels with the request; the worker's tenancy decides what is ours.

A real Crawler built with injected strategies (runtime/distribution.py), a
manual clock and a fetcher that records what it was asked; no network, no
database. The cluster's own strategies (runtime/worker.Partitions) run over
a fake `Ownership` that holds some partitions under given epochs.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from courtly.config import Config
from courtly.core.types import UrlItem
from courtly.runtime.crawler import Crawler
from courtly.runtime.distribution import Deployment, OwnsEverything, Tenure
from courtly.runtime.partitions import Partitions, WorkerStats
from courtly.shell.store.sqlite import SqliteStore
from clock_support import ManualClock

T0 = 1_700_000_000.0


class _Fetcher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bool | None]] = []   # URL, what its gate said when it was sent

    async def fetch(self, url: str, *, ip: str, headers: dict, gate=None):
        open_ = None if gate is None else gate()
        self.sent.append((url, open_))
        return SimpleNamespace(url=url, ip=ip, status=404 if open_ is not False else 0, elapsed_s=0.1,
                               headers={}, body=b"", content=b"", truncated=None,
                               error=None if open_ is not False else "not_sent", request_head=b"",
                               response_head=b"", started_at=T0)


class _Epochs(OwnsEverything):
    """One partition, held under `epoch` (changed by the test): a request may be
    sent only under the epoch held now."""

    def __init__(self) -> None:
        self.epoch = 1
        self.asked: list[Tenure] = []

    def tenure(self, key: str) -> Tenure:
        return Tenure(0, self.epoch)

    def may_send(self, tenure: Tenure, now: float) -> bool:
        self.asked.append(tenure)
        return tenure.epoch == self.epoch

    def gate(self, tenure: Tenure):
        return lambda: tenure.epoch == self.epoch


def _crawler(tmp_path, deployment: Deployment) -> Crawler:
    return Crawler(Config(), clock=ManualClock(T0), resolver=None, fetcher=_Fetcher(),
                   warc=SimpleNamespace(flush=lambda: None), store=SqliteStore(tmp_path / "crawl.db"),
                   extractor=None, deployment=deployment)


def test_a_request_is_judged_under_the_tenure_it_carries_not_the_one_held_now(tmp_path):
    epochs = _Epochs()
    c = _crawler(tmp_path, Deployment(tenancy=epochs))
    started = c.tenancy.tenure("a.example")      # what a host batch takes when it starts
    epochs.epoch = 2                             # the partition was lost and taken again meanwhile

    async def go():
        late = await c.requests.request("https://a.example/1", "a.example", "10.0.0.1", None, {}, started)
        fresh = await c.requests.request("https://a.example/2", "a.example", "10.0.0.1", None, {})
        return late, fresh

    late, fresh = asyncio.run(go())
    assert late is None and fresh.status == 404
    assert epochs.asked == [Tenure(0, 1), Tenure(0, 2)]
    assert c.fetcher.sent == [("https://a.example/2", True)]


def test_a_gate_that_closes_while_the_request_waits_for_a_connection_sends_nothing(tmp_path):
    epochs = _Epochs()
    c = _crawler(tmp_path, Deployment(tenancy=epochs))

    class _Closing(_Fetcher):
        async def fetch(self, url, *, ip, headers, gate=None):
            epochs.epoch = 3     # lost between the last check and the ready connection
            return await super().fetch(url, ip=ip, headers=headers, gate=gate)

    c2 = Crawler(Config(), clock=ManualClock(T0), resolver=None, fetcher=_Closing(), warc=c.warc, store=c.store,
                 extractor=None, deployment=Deployment(tenancy=epochs))
    got = asyncio.run(c2.requests.request("https://a.example/", "a.example", "10.0.0.1", None, {}))
    assert got is None and c2.fetcher.sent == [("https://a.example/", False)]
    assert c2.politeness.key("a.example").fetches == 0    # nothing was sent: the key's state is untouched


class _Ownership:
    """runtime/ownership.Ownership as Partitions asks it: held partitions and epochs."""

    def __init__(self, held: dict[int, int]) -> None:
        self.held = held

    def epoch(self, p: int) -> int | None:
        return self.held.get(p)

    def may_fetch(self, p: int, epoch: int | None, now: float) -> bool:
        return epoch is not None and self.held.get(p) == epoch


def _keys_in(parts: Partitions) -> tuple[str, str]:
    """A key of partition 0 and a key of another partition."""
    keys = [f"h{i}.example" for i in range(200)]
    ours = next(k for k in keys if parts.partition(k) == 0)
    theirs = next(k for k in keys if parts.partition(k) != 0)
    return ours, theirs


def test_a_worker_queues_only_its_partitions_keys_and_holds_a_key_new_after_a_take_over(tmp_path):
    stats = WorkerStats()
    parts = Partitions(_Ownership({0: 7}), 4, Config(), ManualClock(T0), stats)
    c = _crawler(tmp_path, Deployment(tenancy=parts))
    ours, theirs = _keys_in(parts)
    parts.hold(T0 + 30)
    assert c.queue(UrlItem(url=f"https://{theirs}/", key=theirs, band=1, depth=0), T0)   # "done": its owner's
    assert c.queue(UrlItem(url=f"https://{ours}/", key=ours, band=1, depth=0), T0)
    assert len(c.frontier) == 1 and c.frontier.has_key(ours) and not c.frontier.has_key(theirs)
    assert c.politeness.ready_at(ours, T0) >= T0 + 30
    assert parts.tenure(ours) == Tenure(0, 7) and parts.tenure(theirs).epoch is None


def test_a_robots_redirect_into_another_workers_partition_is_answered_unsent_not_requested(tmp_path):
    stats = WorkerStats()
    parts = Partitions(_Ownership({0: 7}), 4, Config(), ManualClock(T0), stats)
    c = _crawler(tmp_path, Deployment(tenancy=parts))
    ours, theirs = _keys_in(parts)
    answer = asyncio.run(c.requests.request(f"https://{theirs}/robots.txt", theirs, "10.0.0.1", None, {}))
    assert (answer.status, answer.error) == (0, "not_owner") and stats.not_owner_hops == 1
    sent = asyncio.run(c.requests.request(f"https://{ours}/robots.txt", ours, "10.0.0.1", None, {}))
    assert sent.status == 404
    assert c.fetcher.sent == [(f"https://{ours}/robots.txt", True)]


def test_a_robots_fetch_whose_lease_was_lost_is_asked_again_not_left_in_flight(tmp_path):
    """The partition went elsewhere while robots.txt waited for its turn: no
    request left, so the book must not keep the fetch in flight (its URLs
    would wait out the fetch timeout, then be refused as unreachable)."""
    from courtly.core.robots import Phase, RobotsState

    class _Resolver:
        async def resolve(self, host):
            return ["10.0.0.1"]

    epochs = _Epochs()
    c = Crawler(Config(), clock=ManualClock(T0), resolver=_Resolver(), fetcher=_Fetcher(),
                warc=SimpleNamespace(flush=lambda: None), store=SqliteStore(tmp_path / "crawl.db"),
                extractor=None, deployment=Deployment(tenancy=epochs))
    started = c.tenancy.tenure("a.example")
    epochs.epoch = 2                                  # lost (and taken again) meanwhile
    got = asyncio.run(c.requests.fetch_robots("https://a.example", "a.example", None, started))
    assert got is False and c.fetcher.sent == []
    assert c.robots.phase("https://a.example") is Phase.ABSENT
    assert c.robots.lookup("https://a.example", T0).state is RobotsState.NEED_FETCH
