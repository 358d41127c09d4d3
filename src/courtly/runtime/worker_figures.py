"""A distributed worker's own figures, beside its engine's on /metrics and the status page.

What it owns: `worker_figures(worker)`, the part of a status snapshot only a
worker has: the partitions it holds (`worker_partitions_held`) and its
counters under ``worker``: URLs claimed, batches written and refused
(stale epoch), URLs dropped with a lost partition, store errors, the
shared exact-duplicate lookups (runtime/shared_defence.py) and the IP
leases (runtime/ip_leases.py: taken, refused, handed over; held now). The engine's
own figures (fetches, decisions, latency...) come from `CrawlObserver`
(runtime/observe.py) as on one machine; runtime/cluster.py hands this
function to it as `extra`. `courtly status --db` sums the same counters
over the workers (each writes them at its commits: `PUBLISH_KEY`).

Rules: read-only; names are the snapshot keys shell/metrics.py maps.
"""

from __future__ import annotations

import json

__all__ = ["worker_figures", "published", "summed_counters", "render_counters", "PUBLISH_PREFIX", "COUNTERS"]

PUBLISH_PREFIX = "worker_stats/"    # meta key of one worker's counters: this + its id
# snapshot key -> what it counts (docs/observability.md has the metrics)
COUNTERS = {
    "claimed": "URLs claimed from the partitions' inboxes",
    "batches": "batches written",
    "stale_batches": "batches refused for a stale lease epoch",
    "dropped_urls": "URLs dropped here with a lost partition (still queued in the store)",
    "store_errors": "store calls that failed (retried)",
    "payload_lookups": "payload digests looked up in the shared store",
    "payload_lookup_rounds": "statements those lookups took",
    "payload_revisits": "payloads stored first elsewhere (written here as revisits)",
    "ip_leases": "IP leases taken (an IP's per-IP limits held by this worker)",
    "ip_waits": "asks for an IP's lease refused (another worker held it)",
    "ip_handovers": "IP leases given back because another worker wanted them (shared from then)",
    "ip_slots": "requests sent with a slot of a shared IP (two statements each)",
}


def worker_figures(worker) -> dict:
    """What `worker` adds to its engine's status snapshot."""
    s, p = worker.wstats, worker.payloads.stats
    return {
        "worker_partitions_held": len(worker.own.fetching()),
        "worker": {
            "claimed": s.claimed, "batches": s.batches, "stale_batches": s.stale_batches,
            "dropped_urls": s.dropped_urls, "store_errors": s.store_errors,
            "payload_lookups": p.asked, "payload_lookup_rounds": p.rounds, "payload_revisits": p.found,
            "ip_leases": s.ip_leases, "ip_waits": s.ip_waits, "ip_handovers": s.ip_handovers,
            "ip_slots": s.ip_slots,
        },
        "worker_ip_leases_held": len(worker.slots.held()),
    }


def published(worker) -> dict[str, str]:
    """The meta row a worker writes at its commits, for `courtly status --db`."""
    figures = worker_figures(worker)
    return {PUBLISH_PREFIX + worker.worker_id: json.dumps({**figures["worker"],
                                                           "partitions": figures["worker_partitions_held"]})}


def summed_counters(rows: dict[str, str]) -> dict:
    """`courtly status --db`'s part: each worker's last published counters
    (`published`; a worker gone keeps its last row, so totals never go back)
    and their sums."""
    each: dict[str, dict] = {}
    for k, v in rows.items():
        try:
            data = json.loads(v)
        except ValueError:
            continue     # a row this version cannot read is left out, not fatal
        if isinstance(data, dict):
            each[k[len(PUBLISH_PREFIX):]] = {c: int(data.get(c, 0) or 0) for c in COUNTERS}
    totals = {c: sum(w[c] for w in each.values()) for c in COUNTERS}
    return {"worker_counters": each, "worker_totals": totals}


def render_counters(d: dict) -> list[str]:
    """The summed counters as `render_status` lines."""
    each, totals = d.get("worker_counters") or {}, d.get("worker_totals") or {}
    if not each:
        return ["workers' counters: none published yet (a worker publishes them with each batch)"]
    lines = [f"workers' counters, summed over {len(each)} worker(s) that wrote a batch:"]
    lines += [f"  {name.replace('_', ' '):<22} {totals.get(name, 0):>10}  {what}" for name, what in COUNTERS.items()]
    return lines
