"""The composition root: builds a crawl from a Config and a crawl folder.

Crawl folder layout:

    DIR/crawl.db        SQLite (WAL): URLs, decisions, fetch log, host and robots state
    DIR/warc/           WARC files (+ .cdxj index beside each closed file)
    DIR/config.json     the effective configuration of the last run
    DIR/lock            held while a crawl runs (two crawls never share a folder)

Running the same command again on the same folder resumes.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import json
import logging
import os
import random
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Awaitable, Callable, Iterable, Iterator

from courtly import __version__
from courtly.config import Config, ConfigError
from courtly.core.netpolicy import NetPolicy
from courtly.runtime.crawler import Crawler, CrawlStats
from courtly.runtime.exits import UsageError   # (defined there so runtime/seeds needs not import this module)
from courtly.runtime.render import page_renders
from courtly.shell.clock import SystemClock
from courtly.shell.extract import ExtractPool
from courtly.shell.fetcher import Http1Fetcher
from courtly.shell.render import ChromiumRenderer
from courtly.shell.resolver import SafeResolver
from courtly.shell.store.sqlite import SqliteStore
from courtly.shell.warc import WarcWriter, repair

log = logging.getLogger("courtly")

__all__ = ["UsageError", "CrawlFolderError", "crawl_folder", "resolve_overrides", "run_crawl",
           "crawl_with_progress", "run_async"]


class CrawlFolderError(Exception):
    """The crawl folder cannot be used (one-line message)."""


@contextmanager
def crawl_folder(out: Path) -> Iterator[Path]:
    """Create/lock the crawl folder; refuse a folder another crawl holds."""
    if out.exists() and not out.is_dir():
        raise CrawlFolderError(f"--out {out} is a file, not a folder: give the crawl folder "
                               "(it is made when missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "warc").mkdir(exist_ok=True)
        probe = out / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise CrawlFolderError(f"cannot write to crawl folder {out}: {e.strerror}") from e
    fh = _lock_folder(out)
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield out
    finally:
        try:   # removed while held: a folder no crawl holds has no lock file
            os.unlink(out / "lock")
        except OSError:
            pass
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _lock_folder(out: Path):
    """The folder's `lock` file, flocked. A lock file whose holder is gone
    (left by kill -9) is simply taken over. The holder removes the file
    before it lets go, so a lock taken on a file that is no longer the one
    at `lock` is taken again on the new one."""
    for _ in range(8):
        fh = open(out / "lock", "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            fh.seek(0)
            holder = fh.read().strip()   # the pid the holder wrote
            fh.close()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise CrawlFolderError(f"{out} is in use by another courtly crawl{who}: wait for it to end, "
                                   f"stop it with Ctrl-C{f' or kill -INT {holder}' if who else ''}, "
                                   "or use another --out") from e
        try:
            if os.stat(out / "lock").st_ino == os.fstat(fh.fileno()).st_ino:
                return fh
        except FileNotFoundError:
            pass
        fh.close()   # removed by the holder that was ending: lock the new one
    raise CrawlFolderError(f"{out}: its lock file keeps changing; is another courtly starting there?")


def same_politeness_key(store: SqliteStore, cfg: Config, out: Path) -> None:
    """A crawl folder keeps the crawl.politeness_key it was started with: its
    queued URLs are stored with their key, so a resume under the other mode
    would give one host two queues (two requests at once, each with its own
    delay). The first run records the mode; a later one with another mode is refused."""
    from courtly.ports import Batch

    mode = store.get_meta("politeness_key")
    if mode is None:
        store.apply(Batch(meta={"politeness_key": cfg.crawl.politeness_key}))
    elif mode != cfg.crawl.politeness_key:
        raise CrawlFolderError(
            f"{out} was crawled with crawl.politeness_key = '{mode}', not '{cfg.crawl.politeness_key}' "
            f"(its queued URLs are keyed so): set it back, or crawl into another --out")


def same_normalization(store: SqliteStore, cfg: Config) -> None:
    """A crawl folder keeps the URL normalisation rules it was made with
    (runtime/normalization): recorded at the first run, a resume under
    others is refused (RulesChanged, a ConfigError) before anything is written."""
    from courtly.ports import Batch
    from courtly.runtime.normalization import META_KEY, rules_meta

    meta = rules_meta(store.get_meta(META_KEY), cfg)
    if meta:
        store.apply(Batch(meta=meta))


def resolve_overrides(cfg: Config) -> dict[str, list[str]]:
    """Host pins from network.resolve ("host:ip") and network.hosts_file (JSON).
    Also checks the coverage canaries file, so a bad one stops nothing mid-way."""
    if cfg.coverage.canaries_file:
        from courtly.runtime.health import read_canaries

        read_canaries(cfg.coverage.canaries_file)
    pins: dict[str, list[str]] = {}
    if cfg.network.hosts_file:
        p = Path(cfg.network.hosts_file)
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read hosts file {p}: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"hosts file {p} must map host names to addresses")
        for host, ip in data.items():
            ips = [ip] if isinstance(ip, str) else ip
            if not isinstance(ips, list) or not ips or not all(isinstance(x, str) for x in ips):
                raise ConfigError(f"hosts file {p}: {host!r} must map to an IP address or a list of them, "
                                  f"not {ip!r}")
            _check_pins(f"hosts file {p}", host, ips)
            pins[str(host).lower()] = list(ips)
    for entry in cfg.network.resolve:
        host, sep, ip = entry.partition(":")
        if not sep or not host or not ip:
            raise ConfigError(f"--resolve wants HOST:IP, not {entry!r}")
        _check_pins("--resolve", host, [ip])
        pins.setdefault(host.lower(), []).append(ip.strip("[]"))
    return pins


def _check_pins(where: str, host: str, ips: list[str]) -> None:
    from courtly.core.netpolicy import parse_ip

    for ip in ips:
        if parse_ip(ip) is None:
            raise ConfigError(f"{where}: {ip!r} (for {host}) is not an IP address")


FILES_RESERVED = 256   # descriptors kept for the store, WARC files, workers, the status server


def connections_that_fit(wanted: int) -> int:
    """`wanted` connections, after raising the soft open-files limit towards
    the hard one so they fit; fewer (with a warning) when the hard limit is lower."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + FILES_RESERVED
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        fit = max(16, soft - FILES_RESERVED)
        log.warning("[fetch] connections_max = %d does not fit the open-files limit (%d): using %d",
                    wanted, soft, fit)
        return fit
    return wanted


def build_network(cfg: Config, *, send_gate: bool = False) -> tuple[SafeResolver, Http1Fetcher, ExtractPool]:
    """The resolver (network policy, host pins), the fetcher (with a last-moment
    send gate for distributed workers) and the extraction pool."""
    resolver = SafeResolver(NetPolicy(cfg.network.allow), overrides=resolve_overrides(cfg),
                            stale_s_max=cfg.network.dns_stale_s_max)
    f = cfg.fetch
    fetcher = Http1Fetcher(
        resolver, user_agent=cfg.crawl.agent(), connect_s=f.connect_s, total_s=f.total_s,
        body_bytes_max=f.body_bytes_max, decoded_bytes_max=f.decoded_bytes_max,
        decode_ratio_max=f.decode_ratio_max, header_bytes_max=f.header_bytes_max, send_gate=send_gate,
        connections_max=connections_that_fit(f.connections_max),
        accept_encoding=", ".join(f.accept_encodings) or "identity",
        source_address=cfg.distributed.source_address,
    )
    e = cfg.extract
    # 8 pages in flight per worker, not 2: the worker finds its next page waiting
    # and runs several before it blocks, so the crawler and the worker switch
    # less often when they share a core (bench: ~10 % less CPU per page). The
    # pool sends them as one batch and the worker answers in one reply; in S1
    # the batches are full (~7.9 pages). 16 measured the same as 8.
    extractor = ExtractPool(e.workers, task_s_max=e.task_s_max, memory_bytes_max=e.memory_bytes_max,
                            tasks_per_child=e.tasks_per_child, pipeline_depth=8, links_max=e.links_max,
                            fingerprints=cfg.budget.enabled)
    return resolver, fetcher, extractor


def warcinfo(cfg: Config) -> dict[str, str]:
    """The warcinfo record's fields: who crawled, how."""
    return {
        "software": f"courtly/{__version__}",
        "format": "WARC File Format 1.1",
        "operator": cfg.crawl.contact or "unknown",
        "http-header-user-agent": cfg.crawl.agent(),
        "robots": "obey (RFC 9309)",
        "intent": cfg.crawl.intent,
    }


@contextmanager
def stop_on_signals(stop: Callable[[], None], enabled: bool = True,
                    abort: Callable[[], None] | None = None,
                    stopped_by: Callable[[str], None] | None = None) -> Iterator[None]:
    """Inside, SIGINT and SIGTERM call `stop` (a graceful stop), not the
    default, and say so (a stop waits for the requests in flight, up to
    fetch.total_s); a second signal calls `abort`, when given.
    `stopped_by(name)` learns which signal stopped the run."""
    loop = asyncio.get_running_loop()
    sigs = (signal.SIGINT, signal.SIGTERM) if enabled else ()
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        if len(received) == 1:
            if stopped_by is not None:
                stopped_by(sig.name)
            log.info("%s: stopping; requests in flight finish first%s", sig.name,
                     " (send it again to stop at once)" if abort is not None else "",
                     extra={"event": "stopping", "signal": sig.name})
            stop()
        elif abort is not None and len(received) == 2:
            log.info("%s again: stopping now; the requests in flight are fetched again by the next run",
                     sig.name, extra={"event": "aborting", "signal": sig.name})
            abort()

    for sig in sigs:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in sigs:
            loop.remove_signal_handler(sig)


async def run_crawl(
    cfg: Config,
    out: Path,
    seeds: Iterable[str],
    *,
    on_start: Callable[[Crawler], None] | None = None,
    on_started: Callable[[], Awaitable[None]] | None = None,
    install_signals: bool = True,
) -> CrawlStats:
    clock = SystemClock()
    repair(out / "warc", clock.now())
    store = SqliteStore(out / "crawl.db")
    try:
        same_politeness_key(store, cfg, out)
        same_normalization(store, cfg)
    except (CrawlFolderError, ConfigError):
        store.close()
        raise
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2, default=str))
    resolver, fetcher, extractor = build_network(cfg)
    warc = WarcWriter(out / "warc", prefix=cfg.warc.prefix, file_bytes_max=cfg.warc.file_bytes_max,
                      warcinfo=warcinfo(cfg), fsync=cfg.warc.fsync)
    crawler = Crawler(cfg, clock=clock, resolver=resolver, fetcher=fetcher, warc=warc,
                      store=store, extractor=extractor)
    if cfg.render.enabled:
        crawler.use_renders(page_renders(cfg, crawler, ChromiumRenderer.from_config(
            cfg.render, clock=clock, user_agent=cfg.crawl.agent())))
    monitor = _attach_monitor(crawler, out, clock) if cfg.crawl.intent == "monitor" else None
    consumer_store = None
    if cfg.consumers:   # runtime/consumers: submissions, streams, chargeback
        from courtly.shell.store.consumers_sqlite import SqliteConsumerStore

        consumer_store = SqliteConsumerStore(out / "crawl.db")
        crawler.consumers.attach(consumer_store, out, clock.now())
    try:
        with stop_on_signals(crawler.stop, install_signals, abort=crawler.abort,
                             stopped_by=lambda name: setattr(crawler.stats, "stopped_by", name)):
            from courtly.runtime import refusal
            from courtly.runtime.seeds import feed_seeds

            crawler.load()
            crawler.tell_seed_refusals(refusal.SeedRefusals(cfg.crawl.scope, crawler.crawl_id, crawler.stats))
            await feed_seeds(crawler, seeds)
            refusal.reconsider(crawler, refusal.settings_of(cfg, resolve_overrides(cfg)), clock.now())
            if on_start is not None:
                on_start(crawler)
            if on_started is not None:
                await on_started()
            sender = asyncio.create_task(monitor[2].run()) if monitor else None
            hooks = consumer_webhooks(cfg, out, clock)        # consumers whose sink is a URL
            forwarding = [asyncio.create_task(h.run()) for h in hooks]
            try:
                stats = await crawler.run()
            finally:
                if sender is not None:
                    sender.cancel()
                    await asyncio.gather(sender, return_exceptions=True)
                for t in forwarding:
                    t.cancel()
                await asyncio.gather(*forwarding, return_exceptions=True)
                for h in hooks:                               # what the last commit wrote
                    await h.stop()
            if crawler.fatal is not None:
                raise crawler.fatal
            return stats
    finally:
        if crawler.renders is not None:
            await crawler.renders.close()
        if monitor is not None:
            monitor[1].close()
            monitor[0].close()
        if consumer_store is not None:
            consumer_store.close()
        await fetcher.close()
        await extractor.close()
        try:
            warc.close()
        finally:   # a full disk can fail the WARC file's last flush: the store still closes
            store.close()


def consumer_webhooks(cfg: Config, out: Path, clock) -> list:
    """A StreamForwarder per consumer whose sink is a URL (shell/stream_webhook)."""
    from courtly.runtime.consumers import stream_path
    from courtly.shell.stream_webhook import StreamForwarder, is_webhook

    return [StreamForwarder(clock, k.name, stream_path(k.sink, out, k.name), k.sink, secret=cfg.monitor.webhook_secret)
            for k in cfg.consumers if is_webhook(k.sink)]


def _attach_monitor(crawler: Crawler, out: Path, clock):
    """A monitor crawl's watch store, change log and webhook sender (runtime/monitor)."""
    from courtly.shell.store.watch_sqlite import SqliteWatchStore
    from courtly.shell.webhook import ChangeLog, WebhookSender

    m = crawler.cfg.monitor
    store = SqliteWatchStore(out / "crawl.db")
    changelog = ChangeLog(out / "changes.jsonl")
    sender = WebhookSender(clock, store, attempts_max=m.webhook_attempts_max, backoff_s=m.webhook_backoff_s,
                           backoff_s_max=m.webhook_backoff_s_max, timeout_s=m.webhook_timeout_s,
                           secret=m.webhook_secret, jitter=m.webhook_backoff_jitter,
                           rng=random.Random(crawler.cfg.crawl.seed + 2))   # its own stream, reproducible
    crawler.monitor.attach(store, [changelog, sender])
    sender.load_pending()
    return store, changelog, sender


async def crawl_with_progress(cfg: Config, out: Path, seeds: Iterable[str], progress,
                              status: tuple[str, int] | None = None) -> CrawlStats:
    """A crawl with the live progress display and, when `status` is given, the
    metrics and status page server on that (host, port)."""
    servers = []

    def start(crawler: Crawler) -> None:
        progress.attach(crawler)
        if status is not None:
            api = None
            if crawler.monitor.enabled:
                from courtly.shell.watch_api import WatchApi

                api = WatchApi(crawler.monitor.store, cfg.monitor.api_token, crawler.clock.now)
            if cfg.consumers:   # submissions over HTTP (shell/consumer_api), beside the watch API if any
                api = _with_consumer_api(api, crawler, out)
            servers.append(status_server(crawler, status, watch_api=api))

    try:
        return await run_crawl(cfg, out, seeds, on_start=start, on_started=start_servers(servers))
    finally:
        progress.close()
        for server in servers:
            await server.stop()


def _with_consumer_api(api, crawler: Crawler, out: Path):
    from courtly.runtime.consumer_report import submit
    from courtly.shell.consumer_api import ConsumerApi, RouteSet

    cfg = crawler.cfg

    def record(name: str, urls: list[str], priority: int | None, intent: str) -> dict:
        return submit(out, cfg, name, urls, priority=priority, intent=intent, now=crawler.clock.now())

    return RouteSet(api, ConsumerApi({c.name: c.token for c in cfg.consumers}, record, crawler.consumers.metrics))


def status_server(crawler: Crawler, status: tuple[str, int], out: Path | None = None, watch_api=None,
                  extra=None):
    """The metrics and status page server of one crawler, single machine or
    distributed worker (`out`: the crawl folder, when the store has none;
    `watch_api`: a monitor crawl's watch list API; `extra`: the deployment's
    own figures, a worker's)."""
    from courtly.runtime.observe import CrawlObserver
    from courtly.shell.status import StatusServer

    return StatusServer(CrawlObserver(crawler, out=out, extra=extra), status[0], status[1], now=crawler.clock.now,
                        watch_api=watch_api)


def port_problem(host: str, port: int, flag: str = "--status") -> str:
    """Why (host, port) cannot be served on, or "" (checked before a crawl starts)."""
    import socket

    if port == 0:
        return ""
    try:
        with socket.create_server((host, port)):
            return ""
    except OSError as e:
        return f"{flag} {host}:{port}: {e.strerror}"


def start_servers(servers: list):
    async def started() -> None:
        for server in servers:
            port = await server.start()
            print(f"courtly: status page and /metrics on http://{server.host}:{port}/", file=sys.stderr)
    return started


def tune_gc() -> None:
    """Cyclic GC settings for a crawl process (the `courtly crawl` command,
    not a library caller): objects made at start-up (modules, classes,
    config) go to the permanent generation (`gc.freeze`), so full
    collections stop re-scanning them, and the young generation is collected
    every 10,000 allocations instead of 700. Measured on bench/crawl.py
    (300 hosts, 6,000 pages): GC time in the crawler 0.63 -> 0.22 CPU-s.
    Reference counting frees everything as before; only cycles wait longer."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 10)


def run_async(coro):
    """Run on uvloop when it is installed (the crawler is CPU-bound), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
