"""The composition root of distributed mode: `courtly worker`, `submit`, `status`.

    run_worker(cfg, dsn, out)   a Worker on PostgresStore, the same fetcher,
                                resolver, extraction pool and WARC writer as
                                `courtly crawl` (WARC into a folder or an
                                fsspec URL, names carrying the worker id);
                                intent monitor: the watch list, its webhook
                                deliverer (shell/webhook_cluster) and, with
                                --status, its HTTP API (shell/watch_api)
    submit(dsn, seeds, P)       create the crawl (P partitions, fixed; with
                                `regions`, each region's range, storage and
                                configured homes) and route the seeds like
                                discovered URLs
    status(dsn)                 workers, partitions per owner, leases, queues

Errors a user can cause (a malformed DSN, a database that cannot be reached,
no crawl yet) are `ClusterError` with one line naming the problem.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import time
from collections import Counter
from pathlib import Path

from courtly.config import Config, ConfigError
from courtly.core.urls import UrlError, normalize_url, politeness_key, split_origin
from courtly.ports import Batch
from courtly.runtime.crawler import SEED_BAND
from courtly.runtime.homing import RegionSetupError, probe, region_output
from courtly.runtime.wiring import build_network, start_servers, status_server, stop_on_signals, warcinfo
from courtly.runtime.worker import Worker
from courtly.runtime.worker_figures import PUBLISH_PREFIX, render_counters, summed_counters, worker_figures
from courtly.shell.blob import open_warc_output
from courtly.shell.clock import SystemClock
from courtly.shell.store.postgres import PostgresStore, StoreError, StoreUnavailable

__all__ = ["ClusterError", "run_worker", "submit", "status_data", "render_status", "new_worker_id",
           "open_store"]

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0   # a statement that takes longer counts as "unavailable" (retried)


class ClusterError(Exception):
    """A one-line problem with the database or the crawl in it."""


def new_worker_id() -> str:
    """host-pid-random: unique per process, safe in file names."""
    host = "".join(c if c.isalnum() or c in "-." else "-" for c in socket.gethostname())[:32] or "host"
    return f"{host}-{os.getpid()}-{os.urandom(2).hex()}"


def _check_dsn(dsn: str) -> None:
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise ClusterError(f"--db wants a postgresql://user@host[:port]/database URL, not {dsn!r}")


async def open_store(dsn: str, *, partitions: int | None = None, pool_max: int = 8,
                     need_crawl: bool = True, region: str = "") -> PostgresStore:
    _check_dsn(dsn)
    try:
        store = await asyncio.wait_for(
            PostgresStore.open(dsn, partitions=partitions, pool_min=0, pool_max=pool_max,
                               command_timeout_s=COMMAND_TIMEOUT_S, region=region), CONNECT_TIMEOUT_S)
    except asyncio.TimeoutError as e:
        raise ClusterError(f"cannot reach PostgreSQL at {_safe(dsn)}: no answer in {CONNECT_TIMEOUT_S:.0f} s") from e
    except StoreUnavailable as e:
        raise ClusterError(f"cannot reach PostgreSQL at {_safe(dsn)}: {_first_line(e)}") from e
    except StoreError as e:
        raise ClusterError(_first_line(e)) from e
    except (ValueError, OSError) as e:      # a malformed DSN, an unknown host
        raise ClusterError(f"bad --db {_safe(dsn)}: {_first_line(e)}") from e
    except Exception as e:                  # asyncpg: no such database, authentication failed, ...
        raise ClusterError(f"cannot open {_safe(dsn)}: {_first_line(e)}") from e
    if need_crawl and store.partitions is None:
        await store.close()
        raise ClusterError(f"no crawl in {_safe(dsn)}: create one with `courtly submit --db ... URL...`")
    return store


def _safe(dsn: str) -> str:
    """The DSN without a password."""
    if "@" in dsn and ":" in dsn.split("://", 1)[-1].split("@", 1)[0]:
        scheme, rest = dsn.split("://", 1)
        user = rest.split("@", 1)[0].split(":", 1)[0]
        return f"{scheme}://{user}:***@{rest.split('@', 1)[1]}"
    return dsn


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


# ---- worker -----------------------------------------------------------------------------------

async def run_worker(cfg: Config, dsn: str, out: str | None, *, worker_id: str | None = None,
                     exit_when_done: bool = False, spool: str | None = None,
                     install_signals: bool = True, on_start=None, status: tuple[str, int] | None = None):
    """`status`: serve /metrics and the status page on (host, port), as `courtly crawl --status`.
    `out` None: the worker's region's storage (runtime/homing), else crawl-out."""
    worker_id = worker_id or new_worker_id()
    region = cfg.distributed.region
    store = await open_store(dsn, pool_max=cfg.distributed.pool_max, region=region)
    try:
        out = region_output(store, region, out)
    except RegionSetupError as e:
        await store.close()
        raise ClusterError(str(e)) from e
    mode = await store.get_meta("politeness_key")
    if mode and mode != cfg.crawl.politeness_key:
        await store.close()
        raise ClusterError(f"this crawl was submitted with politeness key '{mode}', the worker's config says "
                           f"crawl.politeness_key = '{cfg.crawl.politeness_key}'")
    try:
        await same_rules(store, cfg)
    except ConfigError:
        await store.close()
        raise
    resolver, fetcher, extractor = build_network(cfg, send_gate=True)
    warc = watches = deliveries = None
    servers: list = []
    try:
        # every WARC file of a region carries its residency tag (name, warcinfo, each record)
        info = {**warcinfo(cfg), **({"courtly-region": region} if region else {})}
        warc = open_warc_output(out, worker_id, prefix=f"{cfg.warc.prefix}-{region}" if region else cfg.warc.prefix,
                                spool=spool, file_bytes_max=cfg.warc.file_bytes_max, warcinfo=info,
                                fsync=cfg.warc.fsync,
                                record_fields={"Courtly-Region": region} if region else None)
        if cfg.crawl.intent == "monitor":   # the cluster's watch list (courtly watch --db)
            from courtly.shell.store.watch_postgres import PostgresWatchStore

            watches = await PostgresWatchStore.open(dsn)
            sender = _webhook_sender(cfg, watches, worker_id, lambda: worker.watching.tenure())
        worker = Worker(cfg, clock=SystemClock(), resolver=resolver, fetcher=fetcher, warc=warc,
                        store=store, extractor=extractor, worker_id=worker_id, exit_when_done=exit_when_done,
                        watches=watches, change_sinks=[sender] if watches is not None else [])
        with stop_on_signals(worker.stop, install_signals):
            try:
                await worker.prepare()
            except StoreUnavailable as e:
                raise ClusterError(f"PostgreSQL went away: {_first_line(e)}") from e
            if on_start is not None:
                on_start(worker)
            if status is not None:
                local = None if "://" in out else Path(out)
                servers.append(status_server(worker.engine, status, out=local, watch_api=_watch_api(cfg, watches),
                                             extra=lambda: worker_figures(worker)))
                await start_servers(servers)()
            if watches is not None:     # the held watches' webhooks (shell/webhook_cluster)
                deliveries = asyncio.create_task(sender.run())
                deliveries.add_done_callback(lambda t: _ended_loudly(t, worker))
            stats = await worker.run()
            if worker.fatal is not None:
                raise worker.fatal
            return worker, stats
    finally:
        if deliveries is not None:
            deliveries.cancel()
            await asyncio.gather(deliveries, return_exceptions=True)
        for server in servers:
            await server.stop()
        await fetcher.close()
        await extractor.close()
        if warc is not None:
            warc.close()
        if watches is not None:
            await watches.close()
        await store.close()


def _webhook_sender(cfg: Config, watches, worker_id: str, tenure):  # type: ignore[no-untyped-def]
    """The worker's webhook deliverer, with the single machine's settings (`[monitor]`)."""
    from courtly.shell.webhook import Retries
    from courtly.shell.webhook_cluster import ClusterWebhookSender

    m = cfg.monitor
    return ClusterWebhookSender(SystemClock(), watches, worker_id, tenure,
                                retries=Retries(m.webhook_attempts_max, m.webhook_backoff_s, m.webhook_backoff_s_max,
                                                m.webhook_backoff_jitter, random.Random(worker_id)),
                                timeout_s=m.webhook_timeout_s, secret=m.webhook_secret)


def _ended_loudly(task: asyncio.Task, worker: Worker) -> None:
    """The delivery loop ended by itself: a bug; the worker stops with it."""
    if not task.cancelled() and task.exception() is not None:
        worker.engine.fail(task.exception())


def _watch_api(cfg: Config, watches):  # type: ignore[no-untyped-def]
    """A monitor worker's status server serves the cluster's watch list API and feeds (shell/watch_api)."""
    if watches is None:
        return None
    from courtly.shell.watch_api import WatchApi

    return WatchApi(watches, cfg.monitor.api_token, SystemClock().now)


async def same_rules(store, cfg: Config) -> None:
    """The crawl keeps the URL normalisation rules its first worker had
    (runtime/normalization); a worker under others is refused (RulesChanged)."""
    from courtly.runtime.normalization import META_KEY, rules_meta

    meta = rules_meta(await store.get_meta(META_KEY), cfg)
    if meta:
        await store.apply(Batch(meta=meta))


async def probe_region(cfg: Config, dsn: str, *, samples: int = 3) -> dict:
    """`courtly probe`: runtime/homing.probe with this region's network (its
    egress, network policy and resolver, as a worker's)."""
    store = await open_store(dsn, pool_max=4, region=cfg.distributed.region)
    resolver, fetcher, extractor = build_network(cfg)
    await extractor.close()          # probes are not parsed
    try:
        return await probe(cfg, store, resolver, fetcher, SystemClock(), samples=samples)
    except RegionSetupError as e:
        raise ClusterError(str(e)) from e
    except StoreUnavailable as e:
        raise ClusterError(f"PostgreSQL went away: {_first_line(e)}") from e
    finally:
        await fetcher.close()
        await store.close()


# ---- submit -----------------------------------------------------------------------------------

async def submit(dsn: str, seeds: list[str], *, partitions: int, politeness_key_mode: str = "domain",
                 regions: tuple[str, ...] = (), storage: dict[str, str] | None = None,
                 homes: dict[str, str] | None = None) -> dict:
    """Create the crawl (or check its partition count) and add `seeds`. With
    `regions` (in order; the first is every key's default home): each
    region's partition range, its WARC `storage`, and configured `homes`."""
    store = await open_store(dsn, partitions=partitions, need_crawl=False)
    try:
        if regions or storage or homes:
            try:
                if regions:
                    await store.create_regions(regions, storage or {})
                elif storage:
                    raise ClusterError("--region-storage needs --regions")
                await store.set_homes(homes or {})
            except (StoreError, ValueError) as e:
                raise ClusterError(_first_line(e)) from e
        mode = await store.get_meta("politeness_key")
        if mode and mode != politeness_key_mode:
            raise ClusterError(f"this crawl uses politeness key '{mode}', not '{politeness_key_mode}'")
        now = time.time()
        rows, urls = [], []
        for raw in seeds:
            try:
                url = normalize_url(raw)
            except UrlError as e:
                raise ClusterError(f"bad seed URL {raw!r}: {e}") from e
            key = politeness_key(split_origin(url).host, politeness_key_mode)
            rows.append((url, key, SEED_BAND, 0, 0, "", now))
            urls.append(url)
        known = json.loads(await store.get_meta("seeds") or "[]")
        added = await store.insert_urls(rows) if rows else []
        meta = {"seeds": json.dumps(sorted(set(known) | set(urls))), "politeness_key": politeness_key_mode}
        if not await store.get_meta("crawl_id"):
            meta["crawl_id"] = os.urandom(6).hex()
        await store.apply(Batch(meta=meta))
        return {"partitions": store.partitions, "seeds": len(urls), "queued": len(added),
                "regions": list(store.layout.regions) if store.layout else []}
    except StoreUnavailable as e:
        raise ClusterError(f"PostgreSQL went away: {_first_line(e)}") from e
    finally:
        await store.close()


# ---- status -----------------------------------------------------------------------------------

async def status_data(dsn: str, live_s: float = 15.0) -> dict:
    store = await open_store(dsn, pool_max=2)
    try:
        now = await store.db_now()
        workers = await store.workers()
        leases = await store.leases()
        inbox = await store.queued_by_partition()
        inboxes = await store.queue_sizes()
        counts = await store.counts()
        regions = {r: {"partitions": len(store.layout.range_of(r)), "storage": store.storage.get(r, "")}
                   for r in (store.layout.regions if store.layout else ())}
        published = await store.meta_prefixed(PUBLISH_PREFIX)
    except StoreUnavailable as e:
        raise ClusterError(f"PostgreSQL went away: {_first_line(e)}") from e
    finally:
        await store.close()
    owners = Counter(l.owner for l in leases if l.owner and l.lease_until > now)
    expired = sum(1 for l in leases if l.owner and l.lease_until <= now)
    left = [l.lease_until - now for l in leases if l.owner and l.lease_until > now]
    return {
        "partitions": len(leases),
        "workers": [{"id": w, "up_s": round(up, 1), "heartbeat_age_s": round(age, 1), "live": age < live_s,
                     "partitions": owners.get(w, 0), "region": region} for w, up, age, region in workers],
        "regions": regions,
        "unowned": sum(1 for l in leases if not l.owner),
        "expired_leases": expired,
        "lease_left_s": {"min": round(min(left), 1), "max": round(max(left), 1)} if left else None,
        "max_epoch": max((l.epoch for l in leases), default=0),
        "queued": sum(inbox.values()),
        "queued_by_owner": _by_owner(inbox, leases, now),
        "inbox": sum(inboxes.values()),
        "states": counts["states"],
        "fetches": counts["fetches"],
        "bytes": counts["bytes"],
        **summed_counters(published),
    }


def _by_owner(queued: dict[int, int], leases, now: float) -> dict[str, int]:
    owner = {l.partition: (l.owner if l.owner and l.lease_until > now else "(none)") for l in leases}
    out: Counter[str] = Counter()
    for p, n in queued.items():
        out[owner.get(p, "(none)")] += n
    return dict(out)


def render_status(d: dict) -> str:
    lines = [f"partitions {d['partitions']}: {d['partitions'] - d['unowned'] - d['expired_leases']} leased, "
             f"{d['unowned']} free, {d['expired_leases']} expired; highest epoch {d['max_epoch']}"]
    if d["lease_left_s"]:
        lines.append(f"leases end in {d['lease_left_s']['min']}-{d['lease_left_s']['max']} s")
    for name, r in d["regions"].items():
        lines.append(f"region {name}: {r['partitions']} partitions, WARC to {r['storage'] or 'each worker --out'}")
    lines.append(f"workers ({len(d['workers'])}):")
    for w in d["workers"]:
        lines.append(f"  {w['id']:<40} {'live' if w['live'] else 'DEAD':<4}  heartbeat {w['heartbeat_age_s']:>6.1f} s"
                     f" ago  up {w['up_s']:>8.1f} s  {w['partitions']:>5} partitions"
                     + (f"  region {w['region']}" if w["region"] else ""))
    lines.append(f"queued URLs {d['queued']} (inbox, not yet claimed: {d['inbox']})")
    for owner, n in sorted(d["queued_by_owner"].items()):
        lines.append(f"  {owner:<40} {n:>8}")
    states = ", ".join(f"{k} {v}" for k, v in sorted(d["states"].items()))
    lines.append(f"URLs: {states or 'none'}; fetches {d['fetches']}, {d['bytes']} bytes")
    lines += render_counters(d)
    return "\n".join(lines)
