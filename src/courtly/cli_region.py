"""The region side of the `courtly` command (issue 21): `courtly probe`, the
`--region`/`--source-address` flags of `worker` and `probe`, and the
NAME=VALUE flags of `submit --regions` (`--region-storage`, `--home`).
Kept out of cli.py, which dispatches here; docs/distributed.md, section 7."""

from __future__ import annotations

import argparse
import json

__all__ = ["pairs", "region_config", "cmd_probe"]


def pairs(flag: str, values: list[str]) -> dict[str, str]:
    """['a=b', ...] -> {'a': 'b'}; a value without '=' is a usage error."""
    from courtly.runtime.wiring import UsageError

    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"{flag} wants NAME=VALUE, not {v!r}")
        out[name.strip()] = value.strip()
    return out


def region_config(cfg, args: argparse.Namespace):
    """--region and --source-address over distributed.region and .source_address."""
    over = {k: v for k, v in (("region", args.region), ("source_address", args.source_address)) if v}
    return cfg.replace("distributed", **over) if over else cfg


def cmd_probe(args: argparse.Namespace, cfg) -> int:
    """`courtly probe`: probe the crawl's keys from `cfg.distributed.region`
    and print what moved (`--json`: the whole summary)."""
    from courtly.runtime.cluster import probe_region
    from courtly.runtime.wiring import UsageError, resolve_overrides, run_async

    resolve_overrides(cfg)
    if args.samples < 1:
        raise UsageError("--samples must be at least 1")
    done = run_async(probe_region(cfg, args.db, samples=args.samples))
    if args.json:
        print(json.dumps(done, indent=2))
        return 0
    print(f"region {done['region']}: {done['probes']} probe(s) of {done['keys_probed']} key(s); "
          f"{done['refused_address']} refused by the network policy, {done['partition_held']} held by a worker")
    for m in done["moved"]:
        print(f"  {m['key']}: home {m['from']} -> {m['to']} ({m['reason']})")
    if done["not_moved_partition_held"]:
        print(f"  not moved while a worker holds their partition: {', '.join(done['not_moved_partition_held'])}")
    return 0
