"""Read by mypy, never run: the shell's implementations have the shapes of the ports.

tests/test_typing.py checks this file with the project's [tool.mypy] settings.
Each function turns an implementation into the port it serves; a missing
method or a changed signature is a type error. `Partial` shows the check
can fail: its `# type: ignore` is reported as unused (warn_unused_ignores,
part of --strict) the day a one-method class passes for a whole port.
"""

from __future__ import annotations

from courtly import ports
from courtly.shell.clock import SystemClock
from courtly.shell.extract import ExtractPool
from courtly.shell.fetcher import Http1Fetcher
from courtly.shell.resolver import SafeResolver
from courtly.shell.store.postgres import PostgresStore
from courtly.shell.store.sqlite import SqliteStore
from courtly.shell.warc import WarcWriter


def store(s: SqliteStore) -> ports.Store:
    return s


def narrow_stores(s: SqliteStore) -> tuple[ports.BatchWriter, ports.UrlLookup, ports.QueueStore,
                                           ports.HostStateStore, ports.MetaStore, ports.DecisionStore,
                                           ports.PurgeStore, ports.ComplaintStore, ports.IndexStore]:
    return s, s, s, s, s, s, s, s, s


def clock(c: SystemClock) -> ports.Clock:
    return c


def resolver(r: SafeResolver) -> ports.Resolver:
    return r


def fetcher(f: Http1Fetcher) -> ports.Fetcher:
    return f


def extractor(x: ExtractPool) -> ports.Extractor:
    return x


def warc_sink(w: WarcWriter) -> ports.WarcSink:
    return w


class Partial:
    def has_url(self, url: str) -> bool:
        return False


def partial(p: Partial) -> ports.UrlLookup:
    return p  # type: ignore[return-value]


def cluster_store(s: PostgresStore) -> ports.ClusterStore:
    return s


def narrow_cluster_stores(s: PostgresStore) -> tuple[ports.SharedBatchWriter, ports.LeaseStore, ports.InboxStore,
                                                     ports.IpLeaseStore, ports.SharedHostState, ports.SharedMeta,
                                                     ports.SharedTakeUp, ports.SharedDefenceStore]:
    return s, s, s, s, s, s, s, s


class PartialAsync:
    async def get_meta(self, k: str) -> str | None:
        return None


def partial_async(p: PartialAsync) -> ports.SharedHostState:
    return p  # type: ignore[return-value]
