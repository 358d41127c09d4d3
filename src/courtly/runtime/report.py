"""Read-only views of a crawl folder: `courtly explain` and `courtly stats`.

Opens the store read-only in spirit (never writes), so it is safe to run
while a crawl is going on (SQLite WAL readers do not block the writer).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from courtly.shell.store.sqlite import SqliteStore, StoreError

__all__ = ["explain", "stats"]


def _open(out: Path) -> SqliteStore:
    db = out / "crawl.db"
    if not db.exists():
        raise StoreError(f"{out} is not a crawl folder (no crawl.db)")
    return SqliteStore(db)


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


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
    finally:
        store.close()
    if as_json:
        return json.dumps({"url": url, "normalized": norm, "record": rec, "fetches": fetches,
                           "via_chain": chain, "links_sample": children, "note": note},
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
        "not fetched, by reason:",
    ]
    if c["reasons"]:
        lines += [f"  {k:<20} {v}" for k, v in c["reasons"].items()]
    else:
        lines.append("  (none)")
    return "\n".join(lines)
