"""The consumers' commands: `courtly submit --consumer` and `courtly report --consumers`.

What it owns: checking a submission against the consumer's declaration
(its priority range) and recording it in the crawl folder's store, where a
running crawl takes it at its next commit (runtime/consumers); and the
chargeback report, which bills each request once: a request made for n
consumers costs each of them 1/n, and requests made for nobody (robots.txt,
soft-404 probes, render subrequests, URLs no consumer asked for) are the
`overhead` row, so the rows add up to the requests in the fetch log.

Rules: one-line errors (`ValueError`, made a usage error by the CLI).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Iterable

from courtly.config import Config

__all__ = ["submit", "chargeback", "render_chargeback"]

INTENTS = ("archive", "search", "monitor")


def submit(out: Path, cfg: Config, consumer: str, urls: Iterable[str], *, priority: int | None,
           intent: str, now: float) -> dict:
    """Record `urls` for `consumer` in the crawl folder `out`. Raises ConfigError
    (unknown consumer) or ValueError (priority outside its range)."""
    from courtly.shell.store.consumers_sqlite import SqliteConsumerStore

    decl = cfg.consumer(consumer)
    band = decl.priority if priority is None else priority
    if not decl.priority_min <= band <= decl.priority_max:
        raise ValueError(f"consumer {consumer} may submit with priority {decl.priority_min}..{decl.priority_max}, "
                         f"not {band}")
    if intent not in INTENTS:
        raise ValueError(f"intent must be one of {', '.join(INTENTS)}, not {intent!r}")
    store = SqliteConsumerStore(out / "crawl.db")
    try:
        n = store.submit(consumer, list(urls), band, intent, now)
    finally:
        store.close()
    return {"consumer": consumer, "submitted": n, "priority": band, "intent": intent}


def chargeback(out: Path, cfg: Config) -> dict:
    """Per consumer: fetches, bytes, shared, denied, charged (requests billed),
    quota and cost; plus the overhead and the fetch log's total."""
    db_path = out / "crawl.db"
    if not db_path.exists():
        raise ValueError(f"no crawl in {out} (crawl.db missing)")
    from courtly.shell.store.consumers_sqlite import EMPTY_TOTALS, SqliteConsumerStore

    store = SqliteConsumerStore(db_path)
    try:
        totals = store.totals()
    finally:
        store.close()
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        requests = db.execute("SELECT count(*) FROM fetches").fetchone()[0]
    finally:
        db.close()
    rows = []
    declared = {c.name: c for c in cfg.consumers}
    for name in sorted(set(declared) | set(totals)):
        t = totals.get(name, EMPTY_TOTALS)
        d = declared.get(name)
        price = d.price_per_million if d else 0.0
        rows.append({"consumer": name, **t, "charged": round(t["charged"], 6),
                     "fetches_per_day": d.fetches_per_day if d else None,
                     "price_per_million": price, "cost": round(t["charged"] * price / 1e6, 6)})
    charged = sum(r["charged"] for r in rows)
    return {"consumers": rows, "requests": requests, "overhead": round(requests - charged, 6)}


def render_chargeback(data: dict) -> str:
    lines = [f"{'consumer':<16} {'fetches':>8} {'shared':>7} {'denied':>7} {'decided':>7} {'billed':>10} "
             f"{'bytes':>12} {'quota/day':>9} {'cost':>10}"]
    for r in data["consumers"]:
        quota = r["fetches_per_day"] or "-"
        lines.append(f"{r['consumer']:<16} {r['fetches']:>8} {r['shared']:>7} {r['denied']:>7} {r['decided']:>7} "
                     f"{r['charged']:>10.2f} {r['bytes']:>12} {quota!s:>9} {r['cost']:>10.4f}")
    lines.append(f"{'overhead':<16} {'':>8} {'':>7} {'':>7} {'':>7} {data['overhead']:>10.2f}  "
                 "(robots.txt, probes, URLs no consumer asked for)")
    lines.append(f"requests in the fetch log: {data['requests']} (billed + overhead)")
    return "\n".join(lines)


def as_text(data: dict, as_json: bool) -> str:
    return json.dumps(data, indent=2) if as_json else render_chargeback(data)
