"""Read-only views of a crawl folder: `courtly explain` and `courtly stats`.

Opens the store read-only in spirit (never writes), so it is safe to run
while a crawl is going on (SQLite WAL readers do not block the writer).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from courtly.shell.store.sqlite import SqliteStore, StoreError

__all__ = ["explain", "stats", "review"]


def _open(out: Path) -> SqliteStore:
    db = out / "crawl.db"
    if not db.exists():
        raise StoreError(f"{out} is not a crawl folder (no crawl.db)")
    return SqliteStore(db)


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _open_suspects(out: Path) -> int:
    import random

    from courtly.core.traps import TrapConfig, TrapGuard

    store = _open(out)
    try:
        raw = store.get_meta("traps")
    finally:
        store.close()
    if not raw:
        return 0
    return len(TrapGuard.restore(json.loads(raw), TrapConfig(), random.Random(0)).suspects())


def explain(out: Path, url: str, *, as_json: bool = False) -> tuple[str, bool]:
    """(text, found) for a URL: discovered from where, fetched when, status, or why not."""
    from courtly.core.urls import UrlError, normalize_url

    store = _open(out)
    try:
        try:
            norm = normalize_url(url)
        except UrlError as e:
            norm = url
            note = f"not a crawlable URL ({e.reason}): {e}"
        else:
            note = ""
        rec = store.url_record(norm) or (store.url_record(url) if norm != url else None)
        fetches = store.url_fetches(rec["url"]) if rec else []
        chain = []
        if rec:
            via = rec["via"]
            while via and len(chain) < 20:
                chain.append(via)
                parent = store.url_record(via)
                via = parent["via"] if parent else ""
        children = store.linked_from(rec["url"]) if rec else []
        flags = store.url_flags(rec["url"]) if rec else []
    finally:
        store.close()
    if as_json:
        return json.dumps({"url": url, "normalized": norm, "record": rec, "fetches": fetches,
                           "via_chain": chain, "links_sample": children, "note": note,
                           "flags": [{"at": a, "flag": f, "detail": d} for a, f, d in flags]},
                          indent=2, default=str), rec is not None
    lines = [f"URL        {url}"]
    if norm != url:
        lines.append(f"normalized {norm}")
    if note:
        lines.append(f"note       {note}")
    if rec is None:
        lines.append("never seen by this crawl (not linked from any fetched page, not a seed)")
        return "\n".join(lines), False
    lines.append(f"state      {rec['state']}" + (f" ({rec['reason']}: {rec['detail']})" if rec["reason"] else ""))
    lines.append(f"host key   {rec['key'] or '-'}   depth {rec['depth']}   band {rec['band']}"
                 f"   attempts {rec['attempts']}")
    lines.append(f"discovered {_when(rec['discovered_at'])}" + (f" on {rec['via']}" if rec["via"] else " (seed)"))
    for i, v in enumerate(chain[1:], 1):
        lines.append(f"{'':11}{'  ' * i}<- {v}")
    for f in fetches:
        what = f"status {f['status']}" if f["status"] else f"error {f['error']}"
        warc = f"  warc {f['warc']}" if f["warc"] else ""
        lines.append(f"fetched    {_when(f['at'])}  {what}  {f['bytes']} bytes  {f['elapsed_s']:.3f} s"
                     f"  ip {f['ip'] or '-'}{warc}")
    for at, flag, detail in flags:
        what = {"exact_dup": "exact duplicate of", "near_dup": "near-duplicate of",
                "soft404": "soft-404 (the error page of)"}.get(flag, flag)
        lines.append(f"flagged    {_when(at)}  {what} {detail}")
    if rec["state"] == "queued":
        lines.append("pending    queued, not fetched yet (run the crawl again to continue)")
    if children:
        lines.append(f"links to   {len(children)}{'+' if len(children) >= 20 else ''} URLs first found here, e.g. {children[0]}")
    return "\n".join(lines), True


def stats(out: Path, *, as_json: bool = False) -> str:
    store = _open(out)
    try:
        c = store.counts()
    finally:
        store.close()
    c["trap_suspects_open"] = _open_suspects(out)
    warcs = sorted((out / "warc").glob("*.warc.gz")) if (out / "warc").exists() else []
    c["warc_files"] = len(warcs)
    c["warc_bytes"] = sum(p.stat().st_size for p in warcs)
    if as_json:
        return json.dumps(c, indent=2)
    span = (c["last_at"] - c["first_at"]) if c["first_at"] else 0.0
    lines = [
        f"crawl folder   {out}",
        f"URLs known     {sum(c['states'].values())}  "
        + "  ".join(f"{k} {v}" for k, v in sorted(c["states"].items())),
        f"requests       {c['fetches']} ({c['robots_fetches']} robots.txt) over {span:.1f} s, "
        f"{c['bytes'] / 2**20:.1f} MiB",
        f"hosts (keys)   {c['hosts']}",
        "HTTP statuses  " + ("  ".join(f"{k}: {v}" for k, v in c["statuses"].items()) or "-"),
        f"WARC           {c['warc_files']} files, {c['warc_bytes'] / 2**20:.1f} MiB",
        f"dead letters   {c['dead_letters']}",
        f"budget         exact duplicates {c['flags'].get('exact_dup', 0)} (stored as revisits), "
        f"near-duplicates {c['flags'].get('near_dup', 0)}, soft-404s {c['flags'].get('soft404', 0)}, "
        f"budget denials {c['reasons'].get('budget', 0)}, trap denials {c['reasons'].get('trap', 0)}, "
        f"open trap suspects {c['trap_suspects_open']} (courtly review)",
        "not fetched, by reason:",
    ]
    if c["reasons"]:
        lines += [f"  {k:<20} {v}" for k, v in c["reasons"].items()]
    else:
        lines.append("  (none)")
    return "\n".join(lines)


def review(out: Path, *, resolve: tuple[str, str] | None = None, rule: str | None = None,
           now: float | None = None, as_json: bool = False) -> str:
    """The trap review queue; with `resolve=(key, "trap"|"legit")` close a suspicion.

    Resolving "legit" re-queues the URLs the rule had denied on that host (their
    decisions name the rule); "trap" keeps denying them for good. Resolving
    writes to the store, so it needs the crawl folder unlocked (no crawl running).
    """
    import random
    import time

    from courtly.core.traps import TrapConfig, TrapGuard
    from courtly.ports import Batch

    store = _open(out)
    try:
        raw = store.get_meta("traps")
        guard = TrapGuard.restore(json.loads(raw), TrapConfig(), random.Random(0)) if raw else None
        suspects = guard.suspects() if guard else []
        if resolve is None:
            if as_json:
                return json.dumps([{"key": s.key, "rule": s.rule, "scope": s.scope, "since": s.since,
                                    "evidence": s.evidence} for s in suspects], indent=2)
            if not suspects:
                return "review queue empty: no host is suspected of being a trap"
            lines = [f"{len(suspects)} suspected trap(s); resolve with: courtly review --out {out} "
                     f"--resolve KEY trap|legit [--rule RULE]"]
            for s in suspects:
                denied = store.count_denied(s.key, "trap")
                lines.append(f"  {s.key:<28} rule {s.rule:<20} since {_when(s.since)}  "
                             f"{denied} URLs denied  scope {s.scope or 'host'}\n      evidence: {s.evidence}")
            return "\n".join(lines)
        key, verdict = resolve
        if guard is None or not any(s.key == key for s in suspects):
            raise StoreError(f"{key} is not in the review queue")
        at = time.time() if now is None else now
        closed = guard.resolve_suspect(key, verdict, at, rule)
        requeued = store.requeue_denied(key, "trap", rule) if verdict == "legit" else 0
        store.apply(Batch(meta={"traps": json.dumps(guard.snapshot())}))
        return (f"{key}: {closed} suspicion(s) resolved as {verdict}"
                + (f"; {requeued} denied URLs queued again" if verdict == "legit" else ""))
    finally:
        store.close()


def daily_report(out: Path, *, as_json: bool = False) -> str:
    """Which fetches are we not doing today, and why: per day and tier, recrawls
    allocated and denied by budget, freshness age p50/p90; fetches by reason;
    hosts throttled by politeness; top reasons URLs were not fetched."""
    import time

    store = _open(out)
    try:
        raw = store.get_meta("recrawl_report")
        tiers = json.loads(raw) if raw else []
        by_day = store.fetches_by_day()
        counts = store.counts()
        now = time.time()
        throttled = sorted(
            ((k, h.get("backoff_reason", "")) for k, h in store.hosts().items()
             if h.get("backoff_until", 0) > now or h.get("backoff_reason")),
        )
    finally:
        store.close()
    reasons = {"page": "discovery", "recrawl": "recrawl"}
    fetch_rows = [{"day": _day(d), "reason": reasons.get(k, k), "fetches": n} for d, k, n in by_day]
    data = {"tiers": tiers, "fetches": fetch_rows, "throttled_hosts": [k for k, _ in throttled],
            "not_fetched": counts["reasons"]}
    if as_json:
        return json.dumps(data, indent=2)
    lines = ["fetches by day and reason"]
    lines += [f"  {r['day']}  {r['reason']:<14} {r['fetches']}" for r in fetch_rows] or ["  (none)"]
    lines.append("recrawl scheduler, per day and tier")
    if tiers:
        lines.append(f"  {'day':>10} {'tier':>4} {'allocated':>9} {'forced':>6} {'hinted':>6} "
                     f"{'denied:budget':>13} {'denied:min-interval':>19} {'age p50':>9} {'age p90':>9}")
        for t in tiers:
            lines.append(f"  {_day(t['day']):>10} {t['tier']:>4} {t['allocated']:>9} {t['forced']:>6} {t['hinted']:>6} "
                         f"{t['denied_budget']:>13} {t['denied_min_interval']:>19} "
                         f"{_age(t['age_p50_s']):>9} {_age(t['age_p90_s']):>9}")
    else:
        lines.append("  (no recrawl: intent archive, or no plan yet)")
    lines.append(f"hosts throttled by politeness (429/503 back-off): {len(throttled)}")
    lines += [f"  {k}  {why}" for k, why in throttled[:20]]
    lines.append("top reasons URLs were not fetched")
    lines += [f"  {k:<20} {v}" for k, v in list(counts["reasons"].items())[:10]] or ["  (none)"]
    return "\n".join(lines)


def _day(day: int) -> str:
    return datetime.fromtimestamp(day * 86400, timezone.utc).strftime("%Y-%m-%d")


def _age(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s:.0f} s"
