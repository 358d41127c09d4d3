"""Home regions of a distributed crawl (issue 21): probing keys from a region,
choosing their homes, and the region rules a worker starts under.

    region_output(store, region, out)   where a worker of `region` writes its
                                        WARC files: its region's storage,
                                        never another's
    probe(cfg, store, ..., samples=3)   `courtly probe --region R`: probe the
                                        crawl's keys from R, then re-home the
                                        keys whose probes from every region
                                        are in (core/region.choose_home)

How probing works
-----------------
A probe is a GET of the key's robots.txt (always allowed, RFC 9309) sent from
the region's egress (`distributed.source_address`), through the same
network policy, resolver and fetcher as a worker's. It is polite like any
request: one probe in flight per key from all regions, the key's delay
apart (`probe_gap_s`: the crawler's delay rule; the key's probe slot in
`homes`, database clock), and the per-IP
limits shared with the workers (the IP's lease for the probe, or a slot if it is shared: runtime/ip_leases). A key whose partition a
worker holds is not probed (its owner's politeness state does not know the
probe) and not moved: probe before the region's workers start, or while its
partitions are free. Then every key with `samples` probes from each region
gets `choose_home`: a geo-blocked key (403/451 or no answer from a region
while another gets answers) goes home to a region it serves; otherwise the
fastest region wins by a margin. An override (`courtly submit --home`) is
never probed or moved.

Rules: every probe bounded by `fetch.total_s`; every wait bounded; keys
that cannot be probed (address refused by the network policy, partition
held) are counted in the summary, never silently left out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from courtly.config import Config
from courtly.core.fingerprint import warc_payload_digest
from courtly.core.region import HomeReason, Probe, choose_home
from courtly.core.robots_txt import parse_robots
from courtly.core.urls import split_origin
from courtly.runtime.ip_leases import LeaseTerms

__all__ = ["RegionSetupError", "region_output", "check_region", "probe", "PROBE_CONCURRENCY"]

log = logging.getLogger("courtly")

PROBE_CONCURRENCY = 8      # keys probed at once (each key's probes are sequential)
SLOT_WAITS_MAX = 600       # probe-slot and IP-slot waits per probe, each at most 1 s


class RegionSetupError(ValueError):
    """A worker or probe whose region does not fit the crawl (one line)."""


def check_region(store, region: str) -> None:
    """`region` fits the crawl in `store`: given when the crawl has regions,
    one of them; absent when it has none."""
    if store.layout is None:
        if region:
            raise RegionSetupError(f"this crawl has one region: --region {region} needs a crawl submitted "
                                   "with --regions")
        return
    names = ", ".join(store.layout.regions)
    if not region:
        raise RegionSetupError(f"this crawl has regions {names}: give the worker's --region")
    if region not in store.layout.regions:
        raise RegionSetupError(f"unknown region {region!r} (this crawl has {names})")


def region_output(store, region: str, out: str | None) -> str:
    """The WARC output of a worker of `region`: the storage the crawl declares
    for it (`--out` may only repeat it), else `out`, else crawl-out."""
    check_region(store, region)
    home = store.storage.get(region, "") if region else ""
    if home and out and out.rstrip("/") != home.rstrip("/"):
        raise RegionSetupError(f"region {region} keeps its WARC files in {home}, not {out}: "
                               "bytes never leave their region")
    return home or out or "crawl-out"


async def probe(cfg: Config, store, resolver, fetcher, clock, *, samples: int = 3, keys_max: int = 10_000) -> dict:
    """Probe the crawl's keys from `cfg.distributed.region`, then choose homes
    (see the module doc). Returns the summary `courtly probe --json` prints.
    The caller (runtime/cluster.probe_region) opens and closes what it passes."""
    region = cfg.distributed.region
    check_region(store, region)
    if not region:
        raise RegionSetupError("courtly probe needs a crawl of several regions (courtly submit --regions)")
    targets = await store.probe_targets(region, samples, keys_max)
    leased = await _leased(store)
    counts = {"probes": 0, "refused_address": 0, "partition_held": 0}
    sem = asyncio.Semaphore(PROBE_CONCURRENCY)

    async def one_key(key: str, url: str) -> None:
        async with sem:
            have = sum(1 for p in (await store.probes_of([key])).get(key, []) if p.region == region)
            for _ in range(max(0, samples - have)):
                outcome = await _probe_once(cfg, store, resolver, fetcher, clock, key, url, leased)
                if outcome != "probed":
                    counts[outcome] += 1
                    return
                counts["probes"] += 1

    await asyncio.gather(*(one_key(k, u) for k, u in sorted(targets.items())))
    homes = await _decide(store, sorted(targets))
    return {"region": region, "keys_probed": len(targets), **counts, "samples": samples, **homes}


async def _leased(store) -> frozenset[int]:
    now = await store.db_now()
    return frozenset(r.partition for r in await store.leases() if r.owner and r.lease_until > now)


async def _probe_once(cfg: Config, store, resolver, fetcher, clock, key: str, url: str, leased) -> str:
    """One polite probe of `key`'s robots.txt from this region: 'probed',
    'refused_address' or 'partition_held'."""
    if store.partition_of_key(key) in leased:
        return "partition_held"
    origin = split_origin(url)
    robots = f"{origin}/robots.txt"
    try:
        ip = (await resolver.resolve(origin.host))[0]
    except Exception as e:
        if getattr(e, "reason", None) is None:
            raise
        return "refused_address"
    pol = cfg.politeness
    for _ in range(SLOT_WAITS_MAX):           # the key's probe slot, shared by every region
        wait = await store.probe_slot(key, cfg.fetch.total_s + 10.0)
        if wait is None:
            break
        await clock.sleep(min(wait, 1.0))
    else:
        raise TimeoutError(f"no probe slot for {key} in {SLOT_WAITS_MAX} waits")
    terms = LeaseTerms.of(cfg)
    holder = f"probe/{cfg.distributed.region}/{uuid.uuid4().hex[:8]}"
    slot = False
    for _ in range(SLOT_WAITS_MAX):     # the IP whole, or a slot if shared (runtime/ip_leases)
        if slot:
            wait = await store.ip_slot(ip, None, pol.ip_concurrency, pol.ip_rate, hold_s=terms.hold_s,
                                       shared_s=terms.shared_s)
            if wait is None:
                break
        else:
            answer, wait = await store.ip_lease(ip, holder, terms.hold_s, terms.hold_s)
            if answer == "held":
                break
            slot = answer == "shared"
            if slot:
                continue
        await clock.sleep(min(wait, 1.0))
    else:
        raise TimeoutError(f"no lease or slot of {ip} in {SLOT_WAITS_MAX} waits")
    started = clock.now()
    try:
        result = await fetcher.fetch(robots, ip=ip)
    finally:
        if slot:
            await store.ip_release(ip, None)
        else:
            await store.ip_leases_give(holder, [ip], terms.span_s)
    rtt = clock.now() - started
    answered = result.status != 0
    p = Probe(cfg.distributed.region, rtt if answered else None, result.status,
              warc_payload_digest(result.content) if answered else "")
    await store.probe_done(key, p, probe_gap_s(cfg, result.status, result.content, rtt))
    log.info("probe %s from %s: %s in %.3f s", robots, p.region, p.status or result.error, rtt,
             extra={"event": "probe", "key": key, "region": p.region, "status": p.status, "rtt_s": rtt})
    return "probed"


def probe_gap_s(cfg: Config, status: int, robots_txt: bytes, rtt_s: float) -> float:
    """How long the key rests after a probe: the crawler's delay rule
    (core/politeness: the floor, the capped Crawl-delay of the robots.txt the
    probe read, the response factor). A probe that read no robots.txt (a
    refusal, an error) cannot know the site's Crawl-delay, which other regions
    may see: the key rests the longest Crawl-delay honoured, doubled after a
    429 or 5xx."""
    pol = cfg.politeness
    gap = max(pol.delay_s, min(pol.response_factor * rtt_s, pol.response_delay_s_max))
    if 200 <= status < 300:
        delay = parse_robots(robots_txt).crawl_delay(cfg.robots.token)
        if delay is not None:
            gap = max(gap, min(delay, pol.crawl_delay_s_max))
    else:
        gap = max(gap, pol.crawl_delay_s_max)
    if status == 429 or status >= 500:
        gap *= 2
    return gap


async def _decide(store, keys: list[str]) -> dict:
    """choose_home for `keys` whose probes are complete; move those whose home
    changed (while their partition is free)."""
    layout = store.layout
    homes = await store.homes(keys)
    probes = await store.probes_of(keys)
    moved, held, out = [], [], {}
    for key in keys:
        region, reason, _blocked = homes[key]
        choice = choose_home(probes.get(key, []), layout.regions, default=layout.regions[0], current=region)
        if reason == "override" or choice.reason is HomeReason.DEFAULT:
            out[key] = {"region": region, "reason": reason, "blocked": []}
            continue
        if (choice.region, str(choice.reason), ",".join(choice.blocked)) != (region, reason, _blocked):
            if not await store.rehome(key, choice.region, str(choice.reason), choice.blocked):
                held.append(key)
                out[key] = {"region": region, "reason": reason, "blocked": []}
                continue
            if choice.region != region:
                moved.append({"key": key, "from": region, "to": choice.region, "reason": str(choice.reason)})
        out[key] = {"region": choice.region, "reason": str(choice.reason), "blocked": list(choice.blocked),
                    "variants": choice.variants}
    return {"homes": out, "moved": moved, "not_moved_partition_held": held}
