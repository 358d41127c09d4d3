"""The `courtly` command.

    courtly crawl [URL ...] [--seeds-file F] [--out DIR] [--config F] ...
    courtly demo                  crawl the bundled simulated web, offline
    courtly explain URL --out DIR a URL's history, or why it was not fetched
    courtly stats --out DIR       what a crawl did
    courtly purge --out DIR|--db DSN --domain D | --host H | --url-prefix P [--reason R]
                                  a takedown (works while the crawl runs)
    courtly abuse --out DIR|--db DSN --host H --contact C --note N | --resolve ID | --list
                                  an abuse complaint: the host is slowed until resolved
    courtly export warc|cdxj|text --out DIR --to PATH
                                  WARC files, CDXJ index or main text, without purged content
    courtly hosts --out DIR       every host key: state, delay, fetched, denied by reason, errors, trap
    courtly urls --out DIR [--reason R] [--host H] [--state S]   URL records, filtered and paged
    courtly serve --out DIR       the status page of a finished or running crawl, from its folder
    courtly worker --db DSN [--out DIR|URL]   a distributed worker (PostgreSQL)
    courtly submit --db DSN URL... | --seeds-file F   create a distributed crawl, add seeds
    courtly status --db DSN       workers, partitions, leases and queues of a distributed crawl
    courtly probe --db DSN --region R   probe the crawl's keys from a region, choose their homes
    courtly alerts                the Prometheus alerting rules for courtly's metrics
    courtly watch add|list|remove|pause|changes|dead|feed --out DIR ...
                                  the watch list of a monitor crawl (courtly watch --help)
    courtly simweb ...            serve the simulated web (see --help)
    courtly sim ...               the recrawl scheduler against a model web, in virtual time
    courtly sim runtime ...       the real runtime on seeded webs with faults, checked, in virtual time

Bad input (unknown config key, malformed seed, unwritable folder) ends with
one line naming the problem and exit status 2, never a traceback, and never
touches crawl state. Ctrl-C stops a crawl gracefully; the same command resumes.
`courtly crawl` exits 0 finished, 3 every seed refused, 4 environment error
(a full disk: one line, state saved), 130/143 stopped by a signal
(runtime/exits; README "Exit statuses").

Logs go to stderr through the `courtly` logger: human-readable lines by
default (decisions, i.e. URLs not fetched, only with --verbose), or with
--log-format json one JSON object per line, every decision included, each
carrying the crawl id, the URL and the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import NoReturn

from courtly.cli_log import json_logs, say, setup_logging
from courtly.cli_parser import build_parser
from courtly.cli_region import cmd_probe, pairs, region_config

__all__ = ["main", "run"]


def _cmd_view(args: argparse.Namespace) -> int:
    from courtly.runtime.crawlview import CrawlViewError
    from courtly.runtime.wiring import UsageError
    from courtly.shell.pywb import PywbError

    out = Path(args.out)
    try:
        if args.command == "hosts":
            from courtly.runtime.listing import hosts_text

            print(hosts_text(out, sort=args.sort, limit=args.limit, as_json=args.json))
        elif args.command == "urls":
            from courtly.runtime.listing import urls_text

            print(urls_text(out, state=args.state, reason=args.reason, host=args.host, offset=args.offset,
                            limit=args.limit, as_json=args.json))
        else:
            from courtly.runtime.serve import serve

            listen = _parse_status(args.listen, "--listen")
            return serve(out, listen, replay=args.replay, say=say)
    except (CrawlViewError, PywbError, ValueError) as e:
        raise UsageError(str(e)) from e
    return 0


def run() -> NoReturn:
    """The program (`courtly`, `python -m courtly`): `main()`, then `leave()`."""
    leave(main())


def leave(status: int | None) -> NoReturn:
    """End the process with `status` without the interpreter's teardown.

    A finished crawl still holds millions of small objects (frontier, link
    caches, trap state); the interpreter freed them one by one at exit, 0.5 s
    of a 12 s S2 run (`bench/compare.py`). When `main` returns, everything
    that must reach the disk is closed: the store committed, the WARC files
    finished, the extraction workers stopped. The atexit handlers still run
    (logging's flush, multiprocessing's joins), then stdout and stderr are
    flushed. A non-daemon thread still alive gets the ordinary exit, which
    waits for it.
    """
    import atexit
    import os
    import threading

    main_thread = threading.main_thread()
    if not isinstance(status, int) or any(t is not main_thread and not t.daemon and t.is_alive()
                                          for t in threading.enumerate()):
        sys.exit(status)   # None or a message (sys.exit's other forms), or a thread to wait for
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("simweb", "sim"):
        try:
            if argv[0] == "simweb":
                from courtly.sim.command import main as simweb_main

                return simweb_main(argv[1:])
            from courtly.sim.vsim_command import main as sim_main

            return sim_main(argv[1:])
        except BrokenPipeError:   # courtly simweb check LOG | head
            return _reader_gone()
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(getattr(args, "log_format", "text"), getattr(args, "verbose", False))
    if not args.command:
        parser.print_help()
        return 2
    try:
        if args.command == "crawl":
            return _cmd_crawl(args)
        if args.command == "demo":
            from courtly.runtime.demo import run_demo

            return run_demo(args)
        if args.command == "explain":
            return _cmd_explain(args)
        if args.command == "stats":
            return _cmd_stats(args)
        if args.command == "review":
            return _cmd_review(args)
        if args.command == "purge":
            return _cmd_purge(args)
        if args.command == "dups":
            from courtly.runtime.dups import dups

            print(dups(Path(args.out), as_json=args.format == "json"))
            return 0
        if args.command == "export":
            return _cmd_export(args)
        if args.command == "abuse":
            return _cmd_abuse(args)
        if args.command in ("hosts", "urls", "serve"):
            return _cmd_view(args)
        if args.command == "worker":
            return _cmd_worker(args)
        if args.command == "submit":
            return _cmd_submit(args)
        if args.command == "status":
            return _cmd_status(args)
        if args.command == "probe":
            return cmd_probe(args, region_config(config_from_args(args), args))
        if args.command == "alerts":
            from importlib import resources

            sys.stdout.write(resources.files("courtly.shell").joinpath("alerts.yml").read_text(encoding="utf-8"))
            return 0
        if args.command == "watch":
            from courtly.runtime.watchlist import run as run_watch
            from courtly.runtime.wiring import UsageError

            return run_watch(args, UsageError, time.time())
        if args.command == "report" and args.consumers:
            from courtly.config import load_config
            from courtly.runtime.consumer_report import as_text, chargeback
            from courtly.runtime.wiring import UsageError

            try:
                print(as_text(chargeback(Path(args.out), load_config(args.config)), args.json))
            except ValueError as e:
                raise UsageError(str(e)) from e
            return 0
        if args.command == "report":
            from courtly.runtime.report import daily_report

            print(daily_report(Path(args.out), as_json=args.json))
            return 0
    except KeyboardInterrupt:
        print("courtly: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except _expected_errors() as e:
        problem = _environment_problem(e)
        if problem:
            return _environment_exit(problem, e)
        if json_logs():   # stderr stays one JSON object per line
            import logging

            logging.getLogger("courtly").error(str(e), extra={"event": "error"})
        else:
            print(f"courtly: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        problem = _environment_problem(e)
        if not problem:
            raise   # a bug: its traceback is the report
        return _environment_exit(problem, e)
    parser.print_help()
    return 2


def _reader_gone() -> int:
    """The reader of stdout went away (courtly stats | head): not an error
    worth a traceback; stdout goes to /dev/null so the exit's flush is quiet."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _environment_problem(e: BaseException) -> str:
    from courtly.runtime.exits import environment_problem

    return environment_problem(e)


def _environment_exit(problem: str, e: BaseException) -> int:
    """A full disk and its kin: one line, exit status 4 (runtime/exits)."""
    from courtly.runtime.exits import Exit, environment_advice

    say(f"{problem}; the crawl state is saved: {environment_advice(e)}", "error")
    return int(Exit.ENVIRONMENT)


def _expected_errors() -> tuple[type[BaseException], ...]:
    from courtly.config import ConfigError
    from courtly.runtime.wiring import CrawlFolderError, UsageError
    from courtly.runtime.cluster import ClusterError
    from courtly.shell.store.sqlite import StoreError

    return (UsageError, ConfigError, CrawlFolderError, StoreError, ClusterError)


def read_seeds(urls: list[str], seeds_file: str | None):
    """Validate seeds up front (a bad seed is a usage error naming it); the
    file is read again, lazily, when the crawl admits them."""
    from courtly.runtime.seeds import SeedList

    return SeedList(urls, seeds_file).validate()


_FLAG_OF_KEY = {"crawl.max_pages": "--max-pages", "crawl.duration_s": "--duration-s",
               "crawl.user_agent": "--user-agent", "crawl.contact": "--contact", "politeness.delay_s": "--delay-s"}


def config_from_args(args: argparse.Namespace):
    """The config file's settings with the flags laid over them; a bad flag
    value is an error naming the flag (the file's own errors name its keys)."""
    from courtly.config import ConfigError, load_config

    cfg = load_config(args.config)
    try:
        return _flags_over(cfg, args)
    except ConfigError as e:
        message = str(e)
        for key, flag in _FLAG_OF_KEY.items():
            message = message.replace(key, flag)
        raise ConfigError(message) from e


def _flags_over(cfg, args: argparse.Namespace):
    from courtly.config import check_networks

    crawl = {}
    if args.max_pages is not None:
        crawl["max_pages"] = args.max_pages
    if args.duration_s is not None:
        crawl["duration_s"] = args.duration_s
    if args.intent:
        crawl["intent"] = args.intent
    if args.user_agent:
        crawl["user_agent"] = args.user_agent
    if args.contact:
        crawl["contact"] = args.contact
    if args.scope:
        crawl["scope"] = args.scope
    if crawl:
        cfg = cfg.replace("crawl", **crawl)
    if args.delay_s is not None:
        cfg = cfg.replace("politeness", delay_s=args.delay_s)
    net = {}
    if args.allow_network:
        check_networks("--allow-network", args.allow_network)   # a typo is a one-line error naming the flag
        net["allow"] = tuple(cfg.network.allow) + tuple(args.allow_network)
    if args.resolve:
        net["resolve"] = tuple(cfg.network.resolve) + tuple(args.resolve)
    if args.hosts_file:
        net["hosts_file"] = args.hosts_file
    if net:
        cfg = cfg.replace("network", **net)
    return cfg


def _cmd_crawl(args: argparse.Namespace) -> int:
    from courtly.runtime.progress import Progress
    from courtly.runtime.wiring import (UsageError, crawl_folder, crawl_with_progress, resolve_overrides,
                                        run_async, tune_gc)

    cfg = config_from_args(args)
    resolve_overrides(cfg)  # validate before anything starts
    seeds = read_seeds(args.urls, args.seeds_file)
    out = Path(args.out)
    if not seeds and not (out / "crawl.db").exists():
        if args.seeds_file:
            raise UsageError(f"no seeds: {args.seeds_file} holds no URL (one per line; # starts a comment)")
        if cfg.crawl.intent == "monitor":
            raise UsageError(f"no watch list in {out}: courtly watch add URL --out {out} (or give seeds)")
        raise UsageError("no seeds: give URLs or --seeds-file (or --out of a crawl to resume)")
    status = _parse_status(args.status)
    if args.priority is not None and not args.consumer:
        raise UsageError("--priority goes with --consumer")
    from courtly.shell.store.sqlite_folder import refuse_foreign

    refuse_foreign(out / "crawl.db")   # before anything is made or said: one line, exit 2
    with crawl_folder(out):
        if args.consumer:   # the seeds become the consumer's submissions (runtime/consumers)
            from courtly.runtime.consumer_report import submit

            try:
                submit(out, cfg, args.consumer, seeds, priority=args.priority, intent=cfg.crawl.intent,
                       now=time.time())
            except ValueError as e:
                raise UsageError(str(e)) from e
            seeds = []
        for w in cfg.warnings():
            say(w, "warning")
        progress = Progress(enabled=not args.quiet and not json_logs())
        tune_gc()
        stats = run_async(crawl_with_progress(cfg, out, seeds, progress, status=status))
        if not cfg.warc.keep_purged_originals:
            from courtly.runtime.report import rewrite_purged_originals

            done = rewrite_purged_originals(out)
            if done:
                say(done)
    elapsed = max(1e-9, time.time() - stats.started_at)
    say(
        f"{stats.fetched} pages fetched in {elapsed:.1f} s "
        f"({stats.fetched / elapsed:.1f}/s), {stats.robots_fetched} robots.txt, "
        f"{stats.errors} errors, {stats.decisions} URLs not fetched (reasons: courtly stats --out {out})"
    )
    if stats.stopped_by:
        say(f"stopped by {stats.stopped_by}, state saved: run the same command again to resume")
    return _crawl_status(out, cfg, stats)


def _crawl_status(out: Path, cfg, stats) -> int:
    """The run's exit status (runtime/exits); when every seed was refused, say so."""
    from courtly.runtime.exits import Exit, crawl_exit
    from courtly.runtime.refusal import seed_outcome
    from courtly.shell.store.sqlite import SqliteStore

    states: dict[str, int] = {}
    lines: list[str] = []
    if not stats.stopped_by and not stats.fetched:   # only then can every seed have been refused
        store = SqliteStore(out / "crawl.db")
        try:
            states, lines = seed_outcome(store, cfg.crawl.scope, stats.seeds_refused)
        finally:
            store.close()
    status = crawl_exit(stats.stopped_by, stats.fetched, states)
    if status is Exit.SEEDS_REFUSED:
        for line in lines:
            say(line, "warning")
        say(f"nothing fetched: every seed was refused or failed (exit status {int(status)})", "warning")
    return int(status)


def _cmd_worker(args: argparse.Namespace) -> int:
    from courtly.runtime.cluster import new_worker_id, run_worker
    from courtly.runtime.wiring import UsageError, resolve_overrides, run_async

    cfg = region_config(config_from_args(args), args)
    resolve_overrides(cfg)
    worker_id = args.worker_id or new_worker_id()
    if not all(c.isalnum() or c in "._-" for c in worker_id):
        raise UsageError(f"--worker-id may hold letters, digits, '.', '_' and '-' only: {worker_id!r}")
    status = _parse_status(args.status)
    for w in cfg.warnings():
        say(w, "warning")
    say(f"worker {worker_id} starting (database {args.db.split('@')[-1]}"
        f"{f', region {cfg.distributed.region}' if cfg.distributed.region else ''}, "
        f"WARC to {args.out or 'the region storage or crawl-out'})")
    worker, stats = run_async(run_worker(cfg, args.db, args.out, worker_id=worker_id,
                                         exit_when_done=args.exit_when_done, spool=args.spool, status=status))
    elapsed = max(1e-9, time.time() - stats.started_at)
    w = worker.wstats
    say(f"worker {worker_id}: {stats.fetched} pages in {elapsed:.1f} s ({stats.fetched / elapsed:.1f}/s), "
         f"{stats.robots_fetched} robots.txt, {stats.errors} errors; {w.batches} batches, "
         f"{worker.pg.statements} statements, {worker.own.acquired} partitions acquired, "
         f"{worker.own.lost} lost, {w.stale_batches} stale batches, {w.readopted} re-adopted")
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    from courtly.runtime.cluster import submit
    from courtly.runtime.wiring import UsageError, run_async

    seeds = read_seeds(args.urls, args.seeds_file)
    if not seeds:
        raise UsageError("no seeds: give URLs or --seeds-file")
    if args.consumer:
        return _cmd_submit_consumer(args, list(seeds))
    if not args.db:
        raise UsageError("submit wants --db DSN (a distributed crawl) or --consumer NAME --out DIR")
    if args.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    regions = tuple(r.strip() for r in (args.regions or "").split(",") if r.strip())
    done = run_async(submit(args.db, seeds, partitions=args.partitions, politeness_key_mode=args.politeness_key,
                            regions=regions, storage=pairs("--region-storage", args.region_storage),
                            homes=pairs("--home", args.home)))
    say(f"crawl has {done['partitions']} partitions; {done['seeds']} seed(s), {done['queued']} newly queued"
        + (f"; regions {', '.join(done['regions'])}" if done["regions"] else ""))
    return 0


def _cmd_submit_consumer(args: argparse.Namespace, urls: list[str]) -> int:
    from courtly.config import load_config
    from courtly.runtime.consumer_report import submit
    from courtly.runtime.wiring import UsageError

    try:
        done = submit(Path(args.out), load_config(args.config), args.consumer, urls, priority=args.priority,
                      intent=args.intent, now=time.time())
    except ValueError as e:
        raise UsageError(str(e)) from e
    print(json.dumps(done) if args.json else
          f"{done['submitted']} URL(s) submitted for {done['consumer']} (priority {done['priority']}, "
          f"intent {done['intent']}); a running crawl takes them at its next commit")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from courtly.runtime.cluster import render_status, status_data
    from courtly.runtime.wiring import run_async

    data = run_async(status_data(args.db))
    print(json.dumps(data, indent=2) if args.json else render_status(data))
    return 0


def _parse_status(value: str | None, flag: str = "--status") -> tuple[str, int] | None:
    if not value:
        return None
    from courtly.runtime.wiring import UsageError, port_problem

    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"{flag} wants HOST:PORT, not {value!r}")
    status = (host.strip("[]") or "127.0.0.1", int(port))
    problem = port_problem(*status, flag)
    if problem:
        raise UsageError(problem)
    return status


def _cmd_explain(args: argparse.Namespace) -> int:
    from courtly.runtime.report import explain

    text, found = explain(Path(args.out), args.url, as_json=args.json)
    print(text)
    return 0 if found else 1


def _cmd_stats(args: argparse.Namespace) -> int:
    from courtly.runtime.report import dead_letters, stats

    show = dead_letters if args.dead_letters else stats
    print(show(Path(args.out), as_json=args.json))
    return 0


def _cmd_purge(args: argparse.Namespace) -> int:
    """Record a takedown in the store (one transaction; no folder lock, so it
    works while a crawl runs) or list them."""
    from courtly.runtime.report import purge, purges
    from courtly.runtime.wiring import UsageError, run_async

    out = Path(args.out)
    if args.db:
        from courtly.runtime import cluster_takedown as on_db
    if args.list:
        print(run_async(on_db.purges(args.db, as_json=args.json)) if args.db else purges(out, as_json=args.json))
        return 0
    scope, value = next(((s, v) for s, v in (("domain", args.domain), ("host", args.host),
                                             ("url_prefix", args.url_prefix)) if v), (None, None))
    if scope is None:
        raise UsageError("purge wants --domain D, --host H or --url-prefix P (or --list)")
    try:
        text = (run_async(on_db.purge(args.db, scope, value, args.reason, as_json=args.json)) if args.db
                else purge(out, scope, value, args.reason, as_json=args.json))
    except ValueError as e:
        raise UsageError(str(e)) from e
    print(text)
    return 0


def _cmd_abuse(args: argparse.Namespace) -> int:
    """Record, resolve or list abuse complaints (one statement; no folder lock)."""
    from courtly.runtime import abuse
    from courtly.runtime.wiring import UsageError, run_async

    out = Path(args.out)
    if args.db:   # a distributed crawl: the same commands on its PostgreSQL store
        from courtly.runtime import cluster_takedown as on_db
    try:
        if args.list:
            print(run_async(on_db.listing(args.db, as_json=args.json)) if args.db
                  else abuse.listing(out, as_json=args.json))
        elif args.resolve is not None:
            print(run_async(on_db.resolve(args.db, args.resolve, as_json=args.json)) if args.db
                  else abuse.resolve(out, args.resolve, as_json=args.json))
        elif args.host:
            print(run_async(on_db.record(args.db, args.host, args.contact, args.note, as_json=args.json)) if args.db
                  else abuse.record(out, args.host, args.contact, args.note, as_json=args.json))
        else:
            raise UsageError("abuse wants --host H [--contact C] [--note N], --resolve ID or --list")
    except ValueError as e:
        raise UsageError(str(e)) from e
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from courtly.runtime.report import export
    from courtly.runtime.wiring import UsageError

    try:
        text, damaged = export(Path(args.out), args.kind, Path(args.to), as_json=args.json,
                               include_noindex=args.include_noindex, mix_regions=args.mix_regions)
    except ValueError as e:
        raise UsageError(str(e)) from e
    except OSError as e:
        raise UsageError(f"cannot export to {args.to}: {e.strerror or e}") from e
    print(text)
    for warning in damaged:
        say(warning, "warning")
    if damaged and not args.allow_partial:
        say(f"export incomplete: {len(damaged)} damaged WARC file(s) (exit status {EXIT_EXPORT_PARTIAL}; "
             "--allow-partial accepts what could be read)", "warning")
        return EXIT_EXPORT_PARTIAL
    return 0


EXIT_EXPORT_PARTIAL = 5   # README: exit statuses of `courtly export`


def _cmd_review(args: argparse.Namespace) -> int:
    from courtly.runtime.report import review
    from courtly.runtime.wiring import UsageError, crawl_folder

    out = Path(args.out)
    if args.resolve is None:
        print(review(out, as_json=args.json))
        return 0
    key, verdict = args.resolve
    if verdict not in ("trap", "legit"):
        raise UsageError("--resolve wants KEY trap|legit")
    with crawl_folder(out):   # never while a crawl runs on this folder
        print(review(out, resolve=(key, verdict), rule=args.rule))
    return 0


if __name__ == "__main__":
    sys.exit(main())
