"""`courtly simweb`: serve the simulated hostile web, or check a crawl's log.

    courtly simweb [--profile demo|bench|hostile] [--seed N] [--hosts N] ... --out DIR
    courtly simweb check DIR/requests.jsonl [--manifest DIR/manifest.json] [...]
    courtly simweb outage --out DIR [...]     (failing hosts: sim/outage_command.py)

Serving writes DIR/hosts.json, DIR/manifest.json, DIR/seeds.txt, logs every
request to DIR/requests.jsonl, and writes DIR/ready.json ({"port", "pid",
...}) only once every socket listens, so a parent process can poll for it.
SIGTERM/SIGINT (or --duration-s) stop it cleanly, log flushed.
`check` prints the checkers' report and exits 1 on any violation.
`main(argv)` is what `courtly/cli.py` calls with the arguments after `simweb`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from courtly.sim.webconfig import BEHAVIOURS, HOSTILE_BODIES, PROFILES, ROBOTS_VARIANTS, profile_config

__all__ = ["main", "crawl_hint"]


def _epilog() -> str:
    out = ["profiles:"]
    out += [f"  {name:10s} {', '.join(f'{k}={v}' for k, v in p.items()) or 'defaults: small and mixed'}"
            for name, p in PROFILES.items()]
    out.append("\nhost behaviours (manifest.json: behaviours{name: [hosts]}, hosts{h: {paths}}):")
    out += [f"  {k:18s} {v}" for k, v in BEHAVIOURS.items()]
    out.append("\nrobots.txt variants (manifest.json: robots_variants{name: [hosts]}):")
    out += [f"  {k:18s} {v}" for k, v in ROBOTS_VARIANTS.items()]
    out.append("\nhostile bodies (/hostile/<name> on hostile_bodies hosts):")
    out += [f"  {k:18s} {v}" for k, v in HOSTILE_BODIES.items()]
    out.append(
        "\nalways on: 10-50 KB HTML pages with nav, relative/absolute/protocol-relative links,"
        "\n  <base href> (id%5==2), rel=canonical, rel=nofollow links (id%4==1 -> hidden-<id>.html),"
        "\n  broken links (id%9==4), ?print=1 and .pdf links (disallowed by rules robots),"
        "\n  cross-host links, shared-IP hosting (first quarter of the IPs carry tens of hosts),"
        "\n  bare-IP Host header = that IP's first host."
        "\nSSRF bait: 127.0.0.1 is never a host IP; the server also listens there and tags hits"
        "\n  ssrf_bait; bait names: 169.254.169.254 10.0.0.1 192.168.1.1 localhost 127.0.0.1"
        "\n  2130706433 0x7f000001 0177.0.0.1 intranet.test (hosts.json -> 127.0.0.1) [::1]."
        "\n  The crawler must allow only manifest.json's allowed_networks."
        "\nfiles in --out: hosts.json manifest.json seeds.txt requests.jsonl ready.json"
    )
    return "\n".join(out)


def crawl_hint(out: Path | None, allowed_networks: list[str]) -> str:
    """How to crawl this web and check the crawl: its seeds and hosts map, and
    only its own networks allowed (127.0.0.1, the SSRF bait, stays forbidden,
    so 127.0.0.0/8 would fail `check`)."""
    if out is None:
        return "simweb: give --out DIR to write the seeds, hosts map and request log a crawl needs"
    allow = " ".join(f"--allow-network {net}" for net in allowed_networks)
    return (f"simweb: crawl it with\n"
            f"  courtly crawl --seeds-file {out / 'seeds.txt'} --hosts-file {out / 'hosts.json'} {allow} "
            f"--contact you@example.org --out crawl-simweb\n"
            f"simweb: then check the crawl from the servers' side (while this runs, or after)\n"
            f"  courtly simweb check {out / 'requests.jsonl'}")


def _serve_parser() -> argparse.ArgumentParser:
    from courtly.sim.webconfig import SimWebConfig

    d = SimWebConfig()   # the demo profile; the others change what the epilog lists
    p = argparse.ArgumentParser(
        prog="courtly simweb",
        description="Serve a deterministic simulated hostile web on loopback (127.0.0.0/8), "
                    "one port for every host IP. Same seed => same web and manifest. "
                    "Use `courtly simweb check LOG` to check a crawl's politeness afterwards.",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", choices=sorted(PROFILES), default="demo",
                   help="a set of defaults, listed below (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="same seed, same web (default: %(default)s)")
    p.add_argument("--hosts", type=int, help=f"number of hosts (default: the profile's; demo: {d.hosts})")
    p.add_argument("--pages-per-host", type=int,
                   help=f"pages per host, >= 10 (default: the profile's; demo: {d.pages_per_host})")
    p.add_argument("--ips", type=int, help="number of loopback IPs (127.0.1.1 ...; default: the profile's, "
                                           f"at most one per host; demo: {d.ips})")
    p.add_argument("--port", type=int, default=0, help="port on every IP (default: 0, a free one)")
    p.add_argument("--out", type=Path, help="directory for hosts.json, manifest.json, seeds.txt, "
                                            "requests.jsonl and ready.json (default: none, nothing written)")
    p.add_argument("--duration-s", type=float, help="stop after this long (default: until SIGINT/SIGTERM)")
    p.add_argument("--no-log", action="store_true", help="do not write requests.jsonl (benchmarks)")
    p.add_argument("--latency-s", type=float, help=f"base latency of slow hosts (default: {d.latency_s:g})")
    p.add_argument("--retry-after-s", type=int, help=f"Retry-After of throttled hosts (default: {d.retry_after_s})")
    p.add_argument("--throttle-requests", type=int,
                   help=f"requests answered 429/503 on throttled hosts (default: {d.throttle_requests})")
    p.add_argument("--robots-hang-s", type=float,
                   help=f"how long a timeout robots.txt hangs (default: {d.robots_hang_s:g})")
    p.add_argument("--change-rate-per-s", type=float,
                   help=f"base Poisson change rate of pages (default: {d.change_rate_per_s:.3g})")
    p.add_argument("--watch-pages-per-kind", type=int,
                   help="monitor watch pages /watch/{real,noise,both}/N per host (default: 0 = none)")
    p.add_argument("--watch-gap-s-mean", type=float,
                   help=f"mean gap between a watch page's real changes (default: {d.watch_gap_s_mean:g})")
    p.add_argument("--special-share", type=float, help="share of hosts with a special behaviour "
                                                       f"(default: the profile's; demo: {d.special_share:g})")
    p.add_argument("--spa-hosts", type=int, help="single-page-app hosts whose links appear only after "
                                                 f"their script runs (sim/spa.py; default: {d.spa_hosts})")
    p.add_argument("--region", action="append", default=[], metavar="NAME=SOURCE_IP",
                   help="a region and the client source address its crawlers connect from (repeatable, in "
                        "order; default: none, one region; sim/region.py)")
    p.add_argument("--region-near", action="append", default=[], metavar="HOST=REGION",
                   help="HOST is near REGION (default: every host is near the first region)")
    p.add_argument("--region-block", action="append", default=[], metavar="HOST=REGION",
                   help="HOST answers REGION's clients 451 only (geo-blocking; repeatable)")
    p.add_argument("--far-latency-s", type=float, default=0.2,
                   help="extra latency for a region a host is not near (default: %(default)s)")
    p.add_argument("--wild", help="also serve these sim/wildtrap sites (comma-separated kinds, or 'all': "
                                  "wild_calendar, wild_facets, wild_pagination, wild_session, wild_farm, "
                                  "wild_deep), each on <kind with dashes>.test (default: none)")
    return p


def _check_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="courtly simweb check",
        description="Check a simulated-web request log: per-key concurrency and gaps, per-IP "
                    "concurrency and rate, robots.txt first/unreachable/disallowed, SSRF bait, "
                    "traps, duplicate fetches, coverage. Exit 1 on any violation.")
    p.add_argument("log", type=Path, help="requests.jsonl written by courtly simweb")
    p.add_argument("--manifest", type=Path, help="manifest.json (default: next to the log)")
    p.add_argument("--delay-s-min", type=float, default=1.0,
                   help="the crawler's delay between requests to one key (default: %(default)g)")
    p.add_argument("--crawl-delay-s-max", type=float, default=10.0,
                   help="the crawler's cap on robots.txt Crawl-delay (default: %(default)g)")
    p.add_argument("--retry-after-s-max", type=float, default=3600.0,
                   help="the crawler's cap on Retry-After (default: %(default)g)")
    p.add_argument("--backoff-factor", type=float, default=2.0,
                   help="the least delay factor after a 429/503 without Retry-After (default: %(default)g)")
    p.add_argument("--tolerance-s", type=float, default=0.05,
                   help="slack for gaps and rate windows (default: %(default)g)")
    p.add_argument("--concurrency-tolerance-s", type=float, default=0.002,
                   help="slack for overlaps (default: %(default)g)")
    p.add_argument("--key", choices=("domain", "host"), default="domain",
                   help="politeness key: registered domain (last two labels) or exact host (default: %(default)s)")
    p.add_argument("--ip-concurrency", type=int, default=4,
                   help="max requests in flight per IP (default: %(default)s)")
    p.add_argument("--ip-rate", type=float, default=5.0, help="max requests per second per IP (default: %(default)g)")
    p.add_argument("--trap-fetches-max", type=int, help="fail above this many trap URLs fetched per trap host (default: report only)")
    p.add_argument("--duplicate-fetches-max", type=int, default=0,
                   help="fail above this many unconditional refetches after a final answer (default: %(default)s)")
    p.add_argument("--coverage-min", type=float,
                   help="fail below this share of reachable allowed pages fetched (default: report only)")
    p.add_argument("--no-coverage", action="store_true", help="skip the reachability walk (huge webs)")
    p.add_argument("--only-hosts", help="comma-separated hosts the crawl was bounded to (coverage)")
    for flag, default, what in (("--park-after", 3, "failures in a row that park a key"),
                                ("--probe-s-min", 60.0, "a parked key's first probe"),
                                ("--probe-s-max", 21600.0, "the longest probe interval"),
                                ("--ban-run", 10, "challenge answers in a row that pause a key"),
                                ("--fetch-total-s", 60.0, "the crawler's fetch deadline (a held request ended "
                                                          "for it by then)")):
        p.add_argument(flag, type=type(default), default=default, help=f"outage logs: {what} (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    return p


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _config(args: argparse.Namespace):
    return profile_config(
        args.profile, seed=args.seed, hosts=args.hosts, pages_per_host=args.pages_per_host, ips=args.ips,
        latency_s=args.latency_s, retry_after_s=args.retry_after_s, throttle_requests=args.throttle_requests,
        robots_hang_s=args.robots_hang_s, change_rate_per_s=args.change_rate_per_s,
        special_share=args.special_share, spa_hosts=args.spa_hosts,
        watch_pages_per_kind=args.watch_pages_per_kind, watch_gap_s_mean=args.watch_gap_s_mean,
        wild=_wild_kinds(args.wild))


def _regions(args: argparse.Namespace):
    """--region/--region-near/--region-block -> a RegionWeb (None without --region);
    a malformed value ends the command with one line (exit 2)."""
    from courtly.sim.region import RegionWeb

    def pairs(flag: str, values: list[str]) -> list[tuple[str, str]]:
        out = []
        for v in values:
            a, sep, b = v.partition("=")
            if not sep or not a or not b:
                _serve_parser().exit(2, f"courtly simweb: error: {flag} wants A=B, not {v!r}\n")
            out.append((a, b))
        return out

    regions = pairs("--region", args.region)
    if not regions:
        if args.region_near or args.region_block:
            _serve_parser().exit(2, "courtly simweb: error: --region-near/--region-block need --region\n")
        return None
    try:
        return RegionWeb(tuple(r for r, _ in regions), {ip: r for r, ip in regions},
                         near=dict(pairs("--region-near", args.region_near)),
                         blocked=dict(pairs("--region-block", args.region_block)), far_latency_s=args.far_latency_s)
    except ValueError as e:
        _serve_parser().exit(2, f"courtly simweb: error: {e}\n")


def _wild_kinds(text: str | None) -> tuple[str, ...] | None:
    from courtly.sim.wildtrap import WILD_KINDS

    if not text:
        return None
    return WILD_KINDS if text == "all" else tuple(k.strip() for k in text.split(",") if k.strip())


async def _serve(args: argparse.Namespace) -> int:
    from courtly.sim.server import SimWebServer

    config = _config(args)
    out: Path | None = args.out
    log_path = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "ready.json").unlink(missing_ok=True)
        log_path = None if args.no_log else out / "requests.jsonl"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with SimWebServer(config, log_path, port=args.port, regions=_regions(args)) as srv:
        if out is not None:
            _write_json(out / "hosts.json", srv.hosts_map)
            _write_json(out / "manifest.json", srv.manifest)
            (out / "seeds.txt").write_text("\n".join(srv.seeds) + "\n", encoding="utf-8")
            _write_json(out / "ready.json", {
                "port": srv.port, "pid": os.getpid(), "started_at": srv.started_at,
                "hosts_file": str(out / "hosts.json"), "manifest": str(out / "manifest.json"),
                "seeds": str(out / "seeds.txt"), "log": str(log_path) if log_path else None})
        print(f"simweb: {len(srv.web.hosts)} hosts on {len(srv.web.ips)} IPs, port {srv.port}, "
              f"profile {config.profile}, seed {config.seed}" + (f", out {out}" if out else ""), flush=True)
        print(crawl_hint(out, srv.manifest["allowed_networks"]), flush=True)
        try:
            await asyncio.wait_for(stop.wait(), timeout=args.duration_s)
        except asyncio.TimeoutError:
            pass
    if out is not None:
        (out / "ready.json").unlink(missing_ok=True)
    print(f"simweb: stopped after {srv.log.count} requests", flush=True)
    return 0


def _check(args: argparse.Namespace) -> int:
    from courtly.sim.check import CheckParams, check_log
    from courtly.sim.manifest import web_from_manifest
    from courtly.sim.reqlog import load_log

    manifest_path = args.manifest or args.log.parent / "manifest.json"
    what = f"manifest {manifest_path}"
    try:
        manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
        if manifest.get("kind") == "outage":   # `courtly simweb outage`: its own checker
            from courtly.sim.outage_command import check as check_outage

            return check_outage(args, manifest, load_log(args.log))
        web = web_from_manifest(manifest)
        port = int(manifest["port"])
        what = f"request log {args.log}"
        records = load_log(args.log)
    except (OSError, ValueError, KeyError, TypeError) as e:   # a missing file, or not one simweb wrote
        detail = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
        _check_parser().exit(2, f"courtly simweb check: error: cannot read {what}: {detail}"
                                f"{' (give --manifest)' if what.startswith('manifest') and not args.manifest else ''}\n")
    hosts = tuple(h.strip() for h in args.only_hosts.split(",")) if args.only_hosts else None
    params = CheckParams(
        delay_s_min=args.delay_s_min, crawl_delay_s_max=args.crawl_delay_s_max,
        retry_after_s_max=args.retry_after_s_max, backoff_factor=args.backoff_factor,
        tolerance_s=args.tolerance_s, concurrency_tolerance_s=args.concurrency_tolerance_s,
        ip_concurrency=args.ip_concurrency, ip_rate=args.ip_rate,
        trap_fetches_max=args.trap_fetches_max, duplicate_fetches_max=args.duplicate_fetches_max,
        coverage=not args.no_coverage, coverage_min=args.coverage_min, hosts=hosts)
    key_of: Callable[[str], str] | None = (lambda h: h) if args.key == "host" else None
    report = check_log(records, web, params, port=port, key_of=key_of)
    if args.json:
        cov = report.coverage
        print(json.dumps({
            "ok": report.ok, "stats": report.stats,
            "violations": [{"rule": v.rule, "key": v.key, "detail": v.detail, "lines": list(v.lines)}
                           for v in report.violations],
            "trap_fetches": report.trap_fetches, "duplicate_fetches": report.duplicate_fetches,
            "coverage": None if cov is None else {"reachable": cov.reachable, "fetched": cov.fetched,
                                                  "ratio": cov.ratio, "missing": list(cov.missing)},
            "notes": report.notes}, indent=1))
    else:
        print(report.render())
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "simweb":
        args_list = args_list[1:]
    if args_list and args_list[0] == "check":
        return _check(_check_parser().parse_args(args_list[1:]))
    if args_list and args_list[0] == "outage":
        from courtly.sim.outage_command import main as outage_main

        return outage_main(args_list[1:])
    parser = _serve_parser()
    args = parser.parse_args(args_list)
    try:  # validate the knobs before any socket opens: a bad one is one line
        _config(args)
    except (ValueError, TypeError) as e:
        parser.exit(2, f"courtly simweb: error: {e}\n")
    if not 0 <= args.port <= 65535:
        parser.exit(2, f"courtly simweb: error: --port must be in 0..65535, not {args.port}\n")
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            parser.exit(2, f"courtly simweb: error: cannot write to --out {args.out}: {e.strerror}\n")
    try:
        import uvloop

        runner: Callable[[Any], int] = uvloop.run  # type: ignore[assignment]
    except ImportError:
        runner = asyncio.run
    try:
        return runner(_serve(args))
    except OSError as e:   # the port is taken on one of the loopback IPs
        parser.exit(2, f"courtly simweb: error: {e}\n")


if __name__ == "__main__":
    raise SystemExit(main())
