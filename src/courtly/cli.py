"""The `courtly` command.

    courtly crawl [URL ...] [--seeds-file F] [--out DIR] [--config F] ...
    courtly demo                  crawl the bundled simulated web, offline
    courtly explain URL --out DIR a URL's history, or why it was not fetched
    courtly stats --out DIR       what a crawl did
    courtly purge --out DIR --domain D | --host H | --url-prefix P [--reason R]
                                  a takedown (works while the crawl runs)
    courtly export warc|cdxj|text --out DIR --to PATH
                                  WARC files, CDXJ index or main text, without purged content
    courtly worker --db DSN [--out DIR|URL]   a distributed worker (PostgreSQL)
    courtly submit --db DSN URL... | --seeds-file F   create a distributed crawl, add seeds
    courtly status --db DSN       workers, partitions, leases and queues of a distributed crawl
    courtly simweb ...            serve the simulated web (see --help)
    courtly sim ...               the recrawl scheduler against a model web, in virtual time

Bad input (unknown config key, malformed seed, unwritable folder) ends with
one line naming the problem and exit status 2, never a traceback, and never
touches crawl state. Ctrl-C stops a crawl gracefully; the same command resumes.

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

from courtly import __version__

__all__ = ["main", "run"]


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="courtly", description="A polite, host-partitioned web crawler.")
    p.add_argument("--version", action="version", version=f"courtly {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    logs = argparse.ArgumentParser(add_help=False)
    logs.add_argument("--log-format", choices=["text", "json"], default="text",
                      help="stderr log lines: text (default) or JSON lines (every decision included)")
    logs.add_argument("--verbose", action="store_true",
                      help="also log every decision (URL not fetched, with its reason) in text mode")

    c = sub.add_parser("crawl", parents=[logs],
                       help="crawl from seed URLs (resumes when run again on the same --out)")
    c.add_argument("urls", nargs="*", metavar="URL", help="seed URLs")
    c.add_argument("--seeds-file", help="file with one seed URL per line (# comments allowed)")
    c.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    _crawl_options(c)
    c.add_argument("--status", metavar="HOST:PORT",
                   help="serve metrics (/metrics) and a live status page, e.g. 127.0.0.1:8089 "
                        "(default: none; HOST defaults to 127.0.0.1)")
    c.add_argument("--quiet", action="store_true", help="no progress display")

    d = sub.add_parser("demo", parents=[logs], help="start the simulated web on loopback and crawl it (offline)")
    d.add_argument("--out", default="crawl-demo", help="crawl folder (default: crawl-demo)")
    d.add_argument("--max-pages", type=int, default=400,
                   help="stop after this many pages in this run (default: 400; 0 = no limit)")
    d.add_argument("--hosts", type=int, default=12, help="simulated hosts (default: 12)")
    d.add_argument("--seed", type=int, default=7, help="the simulated web's seed (default: 7)")
    d.add_argument("--quiet", action="store_true", help="no progress display")

    e = sub.add_parser("explain", help="show a URL's history: found where, fetched when, or why not")
    e.add_argument("url", help="the URL (exit status 1 if this crawl never saw it)")
    e.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    e.add_argument("--json", action="store_true", help="print JSON instead of text")

    s = sub.add_parser("stats", help="summarise a crawl folder")
    s.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")

    rp = sub.add_parser("report", help="daily skip-decision report: which fetches are not done, and why")
    rp.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    rp.add_argument("--json", action="store_true", help="print JSON instead of text")

    r = sub.add_parser("review", help="the trap review queue: suspected hosts, and resolving them")
    r.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    r.add_argument("--resolve", nargs=2, metavar=("KEY", "trap|legit"),
                   help="close a suspicion: 'legit' re-queues what it denied, 'trap' denies for good")
    r.add_argument("--rule", help="resolve only this rule's suspicion")
    r.add_argument("--json", action="store_true", help="print JSON instead of text")

    dp = sub.add_parser("dups", help="near-duplicate clusters and exact duplicates of a crawl")
    dp.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    dp.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")

    pg = sub.add_parser("purge", parents=[logs],
                        help="take down a domain, host or URL prefix: dropped from the frontier, never "
                             "fetched again, left out of every export (works while a crawl runs)")
    pg.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    what = pg.add_mutually_exclusive_group()
    what.add_argument("--domain", help="a registered domain and all its subdomains, e.g. example.org")
    what.add_argument("--host", help="exactly this host name (any port, any scheme)")
    what.add_argument("--url-prefix", help="every URL starting with this (normalised) prefix")
    what.add_argument("--list", action="store_true", help="list the purges: recorded, applied, effect time")
    pg.add_argument("--reason", default="", help="why (kept with the purge and in every decision; default: empty)")
    pg.add_argument("--json", action="store_true", help="print JSON instead of text")

    x = sub.add_parser("export", parents=[logs],
                       help="export WARC files, a CDXJ index or main text; purged content is never exported")
    x.add_argument("kind", choices=["warc", "cdxj", "text"],
                   help="warc: a new WARC file set (folder); cdxj: one merged index (file); "
                        "text: JSON lines {url, fetched_at, title, text} (file)")
    x.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    x.add_argument("--to", required=True, help="where to write: a folder for warc, a file otherwise "
                                               "(an existing file is replaced; so are same-named files in the folder)")
    x.add_argument("--json", action="store_true", help="print JSON instead of text")

    _distributed_commands(sub, logs)
    sub.add_parser("simweb", help="serve the simulated web on loopback (courtly simweb --help)",
                   add_help=False)
    sub.add_parser("sim", help="deterministic freshness simulation in virtual time (courtly sim --help)",
                   add_help=False)
    return p


def _crawl_options(c: argparse.ArgumentParser) -> None:
    """Options `crawl` and `worker` share (they feed `config_from_args`). A
    flag overrides --config, whose keys default as in README's table."""
    from courtly.config import Config

    d = Config()
    c.add_argument("--config", help="TOML config file (unknown keys are errors; default: none, "
                                    "every key at its default, see README)")
    c.add_argument("--max-pages", type=int, help="stop after this many pages fetched in this run "
                                                 f"(default: crawl.max_pages, else {d.crawl.max_pages} = no limit)")
    c.add_argument("--duration-s", type=float, help="stop after this many seconds (default: crawl.duration_s, "
                                                    f"else {d.crawl.duration_s:g} = no limit)")
    c.add_argument("--intent", choices=["archive", "search", "monitor"],
                   help="archive: discovery only; search: recrawl by change rate; monitor: a watch list "
                        f"(default: crawl.intent, else {d.crawl.intent})")
    c.add_argument("--delay-s", type=float, help="minimum delay between requests to one host "
                                                 f"(default: politeness.delay_s, else {d.politeness.delay_s:g})")
    c.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                   help="also allow these non-public networks (e.g. 127.0.0.0/8); repeatable")
    c.add_argument("--user-agent", help="User-Agent header (default: courtly/VERSION (+contact))")
    c.add_argument("--contact", help="operator contact URL or e-mail, sent in the User-Agent "
                                     "(default: crawl.contact, else none, with a warning)")
    c.add_argument("--resolve", action="append", default=[], metavar="HOST:IP",
                   help="pin a host name to an address, like curl --resolve; repeatable")
    c.add_argument("--hosts-file", help="JSON {host: ip} map (courtly simweb writes one)")
    c.add_argument("--scope", choices=["any", "seed-domains", "seed-hosts"],
                   help="which links to follow: any host, the seeds' registered domains, or the seeds' "
                        f"hosts (default: crawl.scope, else {d.crawl.scope})")


def _distributed_commands(sub, logs) -> None:
    w = sub.add_parser("worker", parents=[logs],
                       help="run a distributed worker against PostgreSQL (docs/distributed.md)")
    w.add_argument("--db", required=True, metavar="DSN", help="postgresql://user@host[:port]/database")
    w.add_argument("--out", default="crawl-out",
                   help="WARC output: a folder or an fsspec URL such as s3://bucket/crawl (default: crawl-out)")
    _crawl_options(w)
    w.add_argument("--worker-id", help="this worker's id (default: host-pid-random; used in WARC file names)")
    w.add_argument("--spool", help="local spool folder for WARC files bound for an fsspec URL")
    w.add_argument("--quiet", action="store_true", help="only the start and end lines")
    w.add_argument("--exit-when-done", action="store_true",
                   help="stop once no URL is queued any more (default: run until SIGTERM)")
    s = sub.add_parser("submit", help="create a distributed crawl in PostgreSQL and add seed URLs")
    s.add_argument("urls", nargs="*", metavar="URL", help="seed URLs")
    s.add_argument("--db", required=True, metavar="DSN", help="postgresql://user@host[:port]/database")
    s.add_argument("--seeds-file", help="file with one seed URL per line (# comments allowed)")
    s.add_argument("--partitions", type=int, default=1024,
                   help="partitions of a new crawl (fixed once created; default 1024)")
    s.add_argument("--politeness-key", choices=["domain", "host"], default="domain",
                   help="must match the workers' crawl.politeness_key (default: domain)")
    st = sub.add_parser("status", help="workers, partitions per owner, leases and queues of a distributed crawl")
    st.add_argument("--db", required=True, metavar="DSN", help="postgresql://user@host[:port]/database")
    st.add_argument("--json", action="store_true", help="print JSON instead of text")


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
    if argv and argv[0] == "simweb":
        from courtly.sim.command import main as simweb_main

        return simweb_main(argv[1:])
    if argv and argv[0] == "sim":
        from courtly.sim.vsim_command import main as sim_main

        return sim_main(argv[1:])
    parser = _build_parser()
    args = parser.parse_args(argv)
    _setup_logging(getattr(args, "log_format", "text"), getattr(args, "verbose", False))
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
        if args.command == "worker":
            return _cmd_worker(args)
        if args.command == "submit":
            return _cmd_submit(args)
        if args.command == "status":
            return _cmd_status(args)
        if args.command == "report":
            from courtly.runtime.report import daily_report

            print(daily_report(Path(args.out), as_json=args.json))
            return 0
    except KeyboardInterrupt:
        print("courtly: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (courtly stats | head): not an error worth a traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except _expected_errors() as e:
        if _JSON_LOGS:   # stderr stays one JSON object per line
            import logging

            logging.getLogger("courtly").error(str(e), extra={"event": "error"})
        else:
            print(f"courtly: error: {e}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


_JSON_LOGS = False


def _setup_logging(log_format: str = "text", verbose: bool = False) -> None:
    """The `courtly` logger on stderr: text (decisions at DEBUG, shown with
    --verbose) or JSON lines (everything, decisions included)."""
    import logging

    global _JSON_LOGS
    _JSON_LOGS = log_format == "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if _JSON_LOGS
                         else logging.Formatter("courtly: %(levelname)s: %(message)s"))
    root = logging.getLogger("courtly")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if (_JSON_LOGS or verbose) else logging.INFO)
    root.propagate = False


class _JsonFormatter:
    """One JSON object per record: at, level, logger, message, and the record's
    extra fields (event, crawl_id, url, reason, detail, ...)."""

    _STANDARD: frozenset[str] = frozenset()

    def format(self, record) -> str:
        import logging

        if not self._STANDARD:
            _JsonFormatter._STANDARD = frozenset(
                logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
        out = {"at": record.created, "level": record.levelname.lower(), "logger": record.name,
               "message": record.getMessage()}
        for k, v in record.__dict__.items():
            if k not in self._STANDARD and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exc"] = logging.Formatter().formatException(record.exc_info)
        return json.dumps(out, default=str)


def _say(message: str, level: str = "info") -> None:
    """A line for the operator on stderr: `courtly: ...` as text, or a log
    record in JSON mode (so stderr stays one JSON object per line)."""
    import logging

    if _JSON_LOGS:
        getattr(logging.getLogger("courtly"), level)(message)
    elif level == "warning":
        print(f"courtly: WARNING: {message}", file=sys.stderr)
    else:
        print(f"courtly: {message}", file=sys.stderr)


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


def config_from_args(args: argparse.Namespace):
    from courtly.config import check_networks, load_config

    cfg = load_config(args.config)
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
        raise UsageError("no seeds: give URLs or --seeds-file (or --out of a crawl to resume)")
    status = _parse_status(args.status)
    if status is not None:
        from courtly.runtime.wiring import port_problem

        problem = port_problem(*status)
        if problem:
            raise UsageError(problem)
    with crawl_folder(out):
        for w in cfg.warnings():
            _say(w, "warning")
        progress = Progress(enabled=not args.quiet and not _JSON_LOGS)
        tune_gc()
        stats = run_async(crawl_with_progress(cfg, out, seeds, progress, status=status))
        if not cfg.warc.keep_purged_originals:
            from courtly.runtime.report import rewrite_purged_originals

            done = rewrite_purged_originals(out)
            if done:
                _say(done)
    elapsed = max(1e-9, time.time() - stats.started_at)
    _say(
        f"{stats.fetched} pages fetched in {elapsed:.1f} s "
        f"({stats.fetched / elapsed:.1f}/s), {stats.robots_fetched} robots.txt, "
        f"{stats.errors} errors, {stats.decisions} URLs not fetched (reasons: courtly stats --out {out})"
    )
    if stats.stopped_by:
        _say(f"stopped by {stats.stopped_by}, state saved: run the same command again to resume")
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from courtly.runtime.cluster import new_worker_id, run_worker
    from courtly.runtime.wiring import UsageError, resolve_overrides, run_async

    cfg = config_from_args(args)
    resolve_overrides(cfg)
    if cfg.crawl.intent != "archive":
        raise UsageError("courtly worker crawls with intent 'archive' (recrawl scheduling is single-machine)")
    worker_id = args.worker_id or new_worker_id()
    if not all(c.isalnum() or c in "._-" for c in worker_id):
        raise UsageError(f"--worker-id may hold letters, digits, '.', '_' and '-' only: {worker_id!r}")
    for w in cfg.warnings():
        _say(w, "warning")
    _say(f"worker {worker_id} starting (database {args.db.split('@')[-1]}, WARC to {args.out})")
    worker, stats = run_async(run_worker(cfg, args.db, args.out, worker_id=worker_id,
                                         exit_when_done=args.exit_when_done, spool=args.spool))
    elapsed = max(1e-9, time.time() - stats.started_at)
    w = worker.wstats
    _say(f"worker {worker_id}: {stats.fetched} pages in {elapsed:.1f} s ({stats.fetched / elapsed:.1f}/s), "
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
    if args.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    done = run_async(submit(args.db, seeds, partitions=args.partitions, politeness_key_mode=args.politeness_key))
    _say(f"crawl has {done['partitions']} partitions; {done['seeds']} seed(s), {done['queued']} newly queued")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from courtly.runtime.cluster import render_status, status_data
    from courtly.runtime.wiring import run_async

    data = run_async(status_data(args.db))
    print(json.dumps(data, indent=2) if args.json else render_status(data))
    return 0


def _parse_status(value: str | None) -> tuple[str, int] | None:
    if not value:
        return None
    from courtly.runtime.wiring import UsageError

    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--status wants HOST:PORT, not {value!r}")
    return (host.strip("[]") or "127.0.0.1", int(port))


def _cmd_explain(args: argparse.Namespace) -> int:
    from courtly.runtime.report import explain

    text, found = explain(Path(args.out), args.url, as_json=args.json)
    print(text)
    return 0 if found else 1


def _cmd_stats(args: argparse.Namespace) -> int:
    from courtly.runtime.report import stats

    print(stats(Path(args.out), as_json=args.json))
    return 0


def _cmd_purge(args: argparse.Namespace) -> int:
    """Record a takedown in the store (one transaction; no folder lock, so it
    works while a crawl runs) or list them."""
    from courtly.runtime.report import purge, purges
    from courtly.runtime.wiring import UsageError

    out = Path(args.out)
    if args.list:
        print(purges(out, as_json=args.json))
        return 0
    scope, value = next(((s, v) for s, v in (("domain", args.domain), ("host", args.host),
                                             ("url_prefix", args.url_prefix)) if v), (None, None))
    if scope is None:
        raise UsageError("purge wants --domain D, --host H or --url-prefix P (or --list)")
    try:
        text = purge(out, scope, value, args.reason, as_json=args.json)
    except ValueError as e:
        raise UsageError(str(e)) from e
    print(text)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from courtly.runtime.report import export
    from courtly.runtime.wiring import UsageError

    try:
        text = export(Path(args.out), args.kind, Path(args.to), as_json=args.json)
    except ValueError as e:
        raise UsageError(str(e)) from e
    except OSError as e:
        raise UsageError(f"cannot export to {args.to}: {e.strerror or e}") from e
    print(text)
    return 0


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
