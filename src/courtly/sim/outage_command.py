"""`courtly simweb outage`: serve the failing hosts (sim/outage.py); and the
part of `courtly simweb check` that judges a crawl of them (sim/outage_check.py).

    courtly simweb outage --out DIR [--refused-s S] [--hang-s S] [--duration-s S] ...
    courtly crawl --seeds-file DIR/seeds.txt --hosts-file DIR/hosts.json \\
        --allow-network 127.0.5.0/24 --config C.toml --out CRAWL    (politeness_key = "host")
    courtly simweb check DIR/requests.jsonl --probe-s-min ... --park-after ...

Serving writes DIR/hosts.json, DIR/seeds.txt, DIR/manifest.json (kind
"outage", the schedule; the instants the down host went down and came back
are added when the server stops) and DIR/ready.json once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
from pathlib import Path
from typing import Any, Sequence

from courtly.sim.outage import HOSTS, OutageConfig, OutageWeb

__all__ = ["main", "check"]

NETWORK = "127.0.5.0/24"


def _parser() -> argparse.ArgumentParser:
    d = OutageConfig()
    p = argparse.ArgumentParser(
        prog="courtly simweb outage",
        description="Serve five failing hosts on 127.0.5.1-4 (one port): down.outage.test goes down after "
                    "a few pages (connections cut, then hung, then back), burst.outage.test answers a burst "
                    "of 500/502/504, challenge.outage.test turns into a challenge page, slow.outage.test "
                    "slows down beside neighbour.outage.test on one IP. Crawl them with "
                    f"--allow-network {NETWORK} and politeness_key = \"host\"; judge with `courtly simweb check`.")
    p.add_argument("--out", type=Path, required=True,
                   help="directory for hosts.json, seeds.txt, manifest.json, requests.jsonl, ready.json")
    p.add_argument("--port", type=int, default=0, help="port on every IP (default: 0, a free one)")
    p.add_argument("--duration-s", type=float, help="stop after this long (default: until SIGINT/SIGTERM)")
    for f in dataclasses.fields(OutageConfig):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(getattr(d, f.name)),
                       default=getattr(d, f.name), help="(default: %(default)s)")
    return p


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


async def _serve(args: argparse.Namespace, config: OutageConfig) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "ready.json").unlink(missing_ok=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    web = OutageWeb(config, out / "requests.jsonl")
    async with web:
        manifest = {"kind": "outage", "port": web.port, "hosts": HOSTS, "allowed_networks": [NETWORK],
                    "politeness_key": "host", "config": dataclasses.asdict(config), "started_at": web.started_at}
        _write_json(out / "hosts.json", HOSTS)
        _write_json(out / "manifest.json", manifest)
        (out / "seeds.txt").write_text("\n".join(web.seeds) + "\n", encoding="utf-8")
        _write_json(out / "ready.json", {"port": web.port, "pid": os.getpid(), "log": str(out / "requests.jsonl")})
        print(f"simweb outage: {len(HOSTS)} hosts on {NETWORK}, port {web.port}, out {out}", flush=True)
        try:
            await asyncio.wait_for(stop.wait(), timeout=args.duration_s)
        except asyncio.TimeoutError:
            pass
        manifest.update(down_at=web.state.down_at, up_at=web.up_at)
    _write_json(out / "manifest.json", manifest)
    (out / "ready.json").unlink(missing_ok=True)
    print(f"simweb outage: stopped after {web.log.count} requests", flush=True)
    return 0


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    args = parser.parse_args(list(argv))
    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(OutageConfig)}
    try:
        config = OutageConfig(**fields)
    except ValueError as e:
        parser.exit(2, f"courtly simweb outage: error: {e}\n")
    try:
        return asyncio.run(_serve(args, config))
    except OSError as e:
        parser.exit(2, f"courtly simweb outage: error: {e}\n")


def check(args: argparse.Namespace, manifest: dict, records: list) -> int:
    """`courtly simweb check` on an outage log: prints the figures and the
    violations; 0 when there are none, 1 otherwise, 2 for a log of a server
    still running (no down_at/up_at yet) or of a host never gone down."""
    from courtly.sim.outage_check import check_outage

    if manifest.get("down_at") is None:
        print("simweb check: the manifest has no outage instants (the server is still running, "
              "or the down host never went down)")
        return 2
    config = OutageConfig(**manifest["config"])
    rep = check_outage(records, config, down_at=manifest["down_at"], up_at=manifest["up_at"],
                       delay_s=args.delay_s_min, park_after=args.park_after, probe_s_min=args.probe_s_min,
                       probe_s_max=args.probe_s_max, backoff_s_max=args.retry_after_s_max, ban_run=args.ban_run,
                       fetch_total_s=args.fetch_total_s)
    figures = {"down_attempts": rep.down_attempts, "down_bound": rep.down_bound,
               "down_pages_after": rep.down_pages_after, "challenge_requests": rep.challenge_requests,
               "neighbour_gap_max_s": round(rep.neighbour_gap_max, 3),
               "burst_gaps_s": [round(g, 3) for g in rep.burst_gaps]}
    if args.json:
        print(json.dumps({"ok": rep.ok, **figures, "violations": rep.violations}, indent=1))
    else:
        print(f"outage check: {'PASS' if rep.ok else 'FAIL'}")
        print(f"  down host: {rep.down_attempts} attempts while down (the schedule allows {rep.down_bound}), "
              f"{rep.down_pages_after} pages fetched after it came back")
        print(f"  burst host gaps (s): {' '.join(f'{g:.2f}' for g in rep.burst_gaps)}")
        print(f"  challenge host: {rep.challenge_requests} requests after the challenge began")
        print(f"  slow IP: the neighbour's longest gap {rep.neighbour_gap_max:.3f} s")
        for v in rep.violations:
            print(f"  VIOLATION {v}")
    return 0 if rep.ok else 1
