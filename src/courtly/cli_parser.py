"""The argument parser of the `courtly` command (cli.py runs what it parses).

Every subcommand's flags, with their defaults in --help; no flag is read here.
"""

from __future__ import annotations

import argparse

from courtly import __version__

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="courtly", description="A polite, host-partitioned web crawler.")
    p.add_argument("--version", action="version", version=f"courtly {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    logs = argparse.ArgumentParser(add_help=False)
    logs.add_argument("--log-format", choices=["text", "json"], default="text",
                      help="stderr log lines: text (default) or JSON lines (every decision included)")
    logs.add_argument("--verbose", action="store_true",
                      help="also log every decision (URL not fetched, with its reason) in text mode")

    from courtly.runtime.exits import EXIT_HELP

    c = sub.add_parser("crawl", parents=[logs], epilog=EXIT_HELP,
                       help="crawl from seed URLs (resumes when run again on the same --out)")
    c.add_argument("urls", nargs="*", metavar="URL", help="seed URLs")
    c.add_argument("--seeds-file", help="file with one seed URL per line (# comments allowed)")
    c.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    _crawl_options(c)
    c.add_argument("--status", metavar="HOST:PORT",
                   help="serve metrics (/metrics) and a live status page, e.g. 127.0.0.1:8089 "
                        "(default: none; HOST defaults to 127.0.0.1)")
    c.add_argument("--quiet", action="store_true", help="no progress display")
    c.add_argument("--consumer", metavar="NAME",
                   help="submit the seeds for this [[consumers]] entry (README: Consumers; default: none)")
    c.add_argument("--priority", type=int, metavar="BAND",
                   help="with --consumer: the seeds' priority band (default: the consumer's priority)")

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
    s.add_argument("--dead-letters", action="store_true",
                   help="list the dead letters instead: pages whose link extraction killed or hung a worker twice")

    rp = sub.add_parser("report", help="daily skip-decision report: which fetches are not done, and why")
    rp.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    rp.add_argument("--json", action="store_true", help="print JSON instead of text")
    rp.add_argument("--consumers", action="store_true",
                    help="the chargeback per consumer instead: fetches, shared, denied by quota, billed, cost")
    rp.add_argument("--config", help="with --consumers: the config declaring them (quotas, prices; default: none)")

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
    pg.add_argument("--db", metavar="DSN", help="a distributed crawl instead: postgresql://user@host[:port]/database "
                                                "(every worker takes the purge up at its next commit; "
                                                "default: none, the --out folder)")
    what = pg.add_mutually_exclusive_group()
    what.add_argument("--domain", help="a registered domain and all its subdomains, e.g. example.org")
    what.add_argument("--host", help="exactly this host name (any port, any scheme)")
    what.add_argument("--url-prefix", help="every URL starting with this (normalised) prefix")
    what.add_argument("--list", action="store_true", help="list the purges: recorded, applied, effect time")
    pg.add_argument("--reason", default="", help="why (kept with the purge and in every decision; default: empty)")
    pg.add_argument("--json", action="store_true", help="print JSON instead of text")

    ab = sub.add_parser("abuse", help="record an abuse complaint about a host (its politeness key is slowed "
                                      "until resolved; works while a crawl runs), resolve or list them")
    ab.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    ab.add_argument("--db", metavar="DSN", help="a distributed crawl instead: postgresql://user@host[:port]/database "
                                                "(default: none, the --out folder)")
    act = ab.add_mutually_exclusive_group()
    act.add_argument("--host", help="the host complained about (a name such as www.example.org)")
    act.add_argument("--resolve", type=int, metavar="ID", help="close complaint ID: the slow-down is lifted")
    act.add_argument("--list", action="store_true", help="list every complaint, open and resolved")
    ab.add_argument("--contact", default="", help="who complained (with --host; default: empty)")
    ab.add_argument("--note", default="", help="what they said (with --host; default: empty)")
    ab.add_argument("--json", action="store_true", help="print JSON instead of text")

    x = sub.add_parser("export", parents=[logs],
                       help="export WARC files, a CDXJ index or main text; purged content is never exported")
    x.add_argument("kind", choices=["warc", "cdxj", "text"],
                   help="warc: a new WARC file set (folder); cdxj: one merged index (file); "
                        "text: JSON lines {url, fetched_at, title, text} (file)")
    x.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    x.add_argument("--to", required=True, help="where to write: a folder for warc, a file otherwise "
                                               "(an existing file is replaced; so are same-named files in the folder)")
    x.add_argument("--json", action="store_true", help="print JSON instead of text")
    x.add_argument("--mix-regions", action="store_true",
                   help="export WARC files of several home regions together (default: refused, one line, exit 2: "
                        "content stays in its region unless you say otherwise)")
    x.add_argument("--include-noindex", action="store_true",
                   help="text: keep pages marked noindex (meta robots or X-Robots-Tag), each row with "
                        "\"noindex\": true (default: left out; WARC and CDXJ always keep them)")
    x.add_argument("--allow-partial", action="store_true",
                   help="exit 0 when a WARC file is damaged (cut short or corrupt) and could be read only in part; "
                        "each is still named on stderr (default: exit status 5)")

    _view_commands(sub)
    _distributed_commands(sub, logs)
    from courtly.runtime.watchlist import add_parser as add_watch_parser

    add_watch_parser(sub)
    sub.add_parser("simweb", help="serve the simulated web on loopback (courtly simweb --help)",
                   add_help=False)
    sub.add_parser("sim", help="deterministic freshness simulation in virtual time; `sim runtime`: the real "
                               "runtime on webs with faults (courtly sim --help)", add_help=False)
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
                   help="also allow these non-public networks (e.g. 10.1.0.0/16; for courtly simweb, the "
                        "allowed_networks of its manifest.json, as it prints); repeatable")
    c.add_argument("--user-agent", help="User-Agent header (default: courtly/VERSION (+contact))")
    c.add_argument("--contact", help="operator contact URL or e-mail, sent in the User-Agent "
                                     "(default: crawl.contact, else none, with a warning)")
    c.add_argument("--resolve", action="append", default=[], metavar="HOST:IP",
                   help="pin a host name to an address, like curl --resolve; repeatable")
    c.add_argument("--hosts-file", help="JSON {host: ip} map (courtly simweb writes one)")
    c.add_argument("--scope", choices=["any", "seed-domains", "seed-hosts"],
                   help="which links to follow: any host, the seeds' registered domains, or the seeds' "
                        f"hosts (default: crawl.scope, else {d.crawl.scope})")


def _view_commands(sub) -> None:
    """`hosts`, `urls` and `serve`: a crawl folder read back, read-only (they work while it runs)."""
    from courtly.runtime.crawlview import LIMIT_MAX, STATES
    from courtly.runtime.listing import HOST_SORTS

    h = sub.add_parser("hosts", help="every host key: state, delay, fetched, queued, errors, denied by reason, "
                                     "robots.txt and trap status")
    h.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    h.add_argument("--sort", default="key", choices=list(HOST_SORTS),
                   help="order (counts and delay: largest first; default: key)")
    h.add_argument("--limit", type=int, default=0, help="show at most N hosts (default: 0 = all)")
    h.add_argument("--json", action="store_true", help="print JSON instead of text")
    u = sub.add_parser("urls", help="URL records filtered by skip reason, host and state, in discovery order")
    u.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    u.add_argument("--reason", help="only URLs skipped for this reason (robots, trap, dns, ...; default: any)")
    u.add_argument("--host", help="only URLs of this host's politeness key (default: any)")
    u.add_argument("--state", choices=list(STATES), help="only URLs in this state (default: any)")
    u.add_argument("--limit", type=int, default=100, help=f"at most N URLs, 1..{LIMIT_MAX} (default: 100)")
    u.add_argument("--offset", type=int, default=0, help="skip the first N matching URLs (default: 0)")
    u.add_argument("--json", action="store_true", help="print JSON instead of text")
    v = sub.add_parser("serve", help="serve the status page of a finished or running crawl from its folder")
    v.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    v.add_argument("--listen", default="127.0.0.1:8089", metavar="HOST:PORT",
                   help="where to serve (default: 127.0.0.1:8089; port 0 picks a free one)")
    v.add_argument("--replay", action="store_true",
                   help="also start pywb (from $COURTLY_PYWB_VENV, else .cache/pywb-venv) on the crawl's WARC "
                        "files and link captures to it (default: link the raw archived record)")


def _region_options(p: argparse.ArgumentParser) -> None:
    """`worker` and `probe`: the region they act for (distributed.region and
    distributed.source_address in the config)."""
    p.add_argument("--region", help="this process's region in a crawl of several (default: the config's "
                                    "distributed.region, none)")
    p.add_argument("--source-address", metavar="IP",
                   help="local IP requests leave from, the region's egress (default: the config's "
                        "distributed.source_address, the system's choice)")


def _distributed_commands(sub, logs) -> None:
    w = sub.add_parser("worker", parents=[logs],
                       help="run a distributed worker against PostgreSQL (docs/distributed.md)")
    w.add_argument("--db", required=True, metavar="DSN", help="postgresql://user@host[:port]/database")
    w.add_argument("--out", default=None,
                   help="WARC output: a folder or an fsspec URL such as s3://bucket/crawl (default: the storage "
                        "the crawl declares for --region, else crawl-out)")
    _crawl_options(w)
    _region_options(w)
    w.add_argument("--worker-id", help="this worker's id (default: host-pid-random; used in WARC file names)")
    w.add_argument("--spool", help="local spool folder for WARC files bound for an fsspec URL")
    w.add_argument("--quiet", action="store_true", help="only the start and end lines")
    w.add_argument("--exit-when-done", action="store_true",
                   help="stop once no URL is queued any more (default: run until SIGTERM)")
    w.add_argument("--status", metavar="HOST:PORT",
                   help="serve this worker's metrics (/metrics) and status page, e.g. 127.0.0.1:8089 "
                        "(default: none; HOST defaults to 127.0.0.1)")
    s = sub.add_parser("submit", help="create a distributed crawl in PostgreSQL and add seed URLs, or "
                                      "(--consumer) submit URLs for a consumer to a crawl folder")
    s.add_argument("urls", nargs="*", metavar="URL", help="seed URLs")
    s.add_argument("--db", metavar="DSN", help="postgresql://user@host[:port]/database (distributed)")
    s.add_argument("--consumer", metavar="NAME", help="submit for this [[consumers]] entry to the crawl "
                   "folder --out; a running crawl takes them at its next commit (README: Consumers)")
    s.add_argument("--out", default="crawl-out", help="with --consumer: crawl folder (default: crawl-out)")
    s.add_argument("--config", help="with --consumer: the config declaring the consumers")
    s.add_argument("--priority", type=int, metavar="BAND",
                   help="with --consumer: priority band 0..7 (default: the consumer's priority)")
    s.add_argument("--intent", choices=["archive", "search", "monitor"], default="archive",
                   help="with --consumer: what the consumer wants the URLs for (default: archive)")
    s.add_argument("--json", action="store_true", help="with --consumer: print JSON instead of text")
    s.add_argument("--seeds-file", help="file with one seed URL per line (# comments allowed)")
    s.add_argument("--partitions", type=int, default=1024,
                   help="partitions of a new crawl (fixed once created; default 1024)")
    s.add_argument("--politeness-key", choices=["domain", "host"], default="domain",
                   help="must match the workers' crawl.politeness_key (default: domain)")
    s.add_argument("--regions", metavar="R1,R2",
                   help="a new crawl's regions, in order; the first is every key's default home "
                        "(default: one region; docs/distributed.md, section 7)")
    s.add_argument("--region-storage", action="append", default=[], metavar="REGION=URL",
                   help="where REGION's workers write WARC files (folder or fsspec URL; repeatable; default: "
                        "each worker's --out)")
    s.add_argument("--home", action="append", default=[], metavar="KEY=REGION",
                   help="configured home region of a politeness key; probes never move it (repeatable)")
    pr = sub.add_parser("probe", help="probe a distributed crawl's keys from one region and choose their home "
                                      "regions (docs/distributed.md, section 7)")
    pr.add_argument("--db", required=True, metavar="DSN", help="postgresql://user@host[:port]/database")
    _crawl_options(pr)
    _region_options(pr)
    pr.add_argument("--samples", type=int, default=3,
                    help="robots.txt probes per key from this region (default: %(default)s)")
    pr.add_argument("--json", action="store_true", help="print JSON instead of text")
    st = sub.add_parser("status", help="workers, partitions per owner, leases and queues of a distributed crawl")
    st.add_argument("--db", required=True, metavar="DSN", help="postgresql://user@host[:port]/database")
    st.add_argument("--json", action="store_true", help="print JSON instead of text")
    sub.add_parser("alerts", help="print the Prometheus alerting rules for courtly's metrics "
                                  "(docs/observability.md; load with rule_files)")
