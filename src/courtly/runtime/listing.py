"""`courtly hosts` and `courtly urls`: a crawl folder's hosts and URLs in the terminal.

What it owns: turning `runtime.crawlview.CrawlView` rows into text tables or
JSON, with the same data `courtly serve` shows. Both read the store
read-only, so they work while a crawl runs.

Rules: JSON output is one document (``{"total", "rows", ...}``) whose rows
have the same fields as the status server's API; text output is one line per
row and ends with a line saying how many rows of how many were shown and how
to page on; an unknown ``--reason`` or ``--sort`` is a usage error (a typo
must not look like an empty result).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from courtly.core.types import Reason
from courtly.runtime.crawlview import CrawlView, HostRow

__all__ = ["HOST_SORTS", "hosts_text", "urls_text"]

# --sort of `courtly hosts` -> how a row sorts (descending for counts)
HOST_SORTS = {
    "key": (lambda r: r.key, False),
    "state": (lambda r: (r.state, r.key), False),
    "fetched": (lambda r: r.fetched, True),
    "queued": (lambda r: r.queued, True),
    "denied": (lambda r: sum(r.denied.values()), True),
    "errors": (lambda r: r.errors, True),
    "delay": (lambda r: r.delay_s or 0.0, True),
}


def hosts_text(out: Path, *, sort: str = "key", limit: int = 0, as_json: bool = False,
               now: float | None = None) -> str:
    """Every politeness key with its state, delay, counts and trap status."""
    if sort not in HOST_SORTS:
        raise ValueError(f"--sort must be one of {', '.join(HOST_SORTS)}, not {sort!r}")
    if limit < 0:
        raise ValueError(f"--limit must be >= 0, not {limit}")
    now = time.time() if now is None else now
    with CrawlView(out) as view:
        rows = view.host_rows(now)
    value, desc = HOST_SORTS[sort]
    rows.sort(key=lambda r: r.key)
    rows.sort(key=value, reverse=desc)
    shown = rows[:limit] if limit else rows
    if as_json:
        return json.dumps({"total": len(rows), "sort": sort, "now": now, "rows": [r.as_dict() for r in shown]},
                          indent=2)
    if not rows:
        return "no hosts yet (nothing was queued)"
    width = max(12, *(len(r.key) for r in shown))
    lines = [f"{'host key':<{width}}  {'state':<11}  {'delay':>7}  {'fetched':>7}  {'queued':>7}  "
             f"{'errors':>6}  {'denied':>6}  robots / trap / denied by reason"]
    lines += [_host_line(r, width) for r in shown]
    lines.append(f"{len(shown)} of {len(rows)} host keys" + ("" if len(shown) == len(rows) else
                                                               " (raise --limit, or 0 for all)"))
    return "\n".join(lines)


def _host_line(r: HostRow, width: int) -> str:
    delay = "-" if r.delay_s is None else f"{r.delay_s:.2f}s"
    notes = []
    if r.robots:
        notes.append(f"robots {r.robots}")
    if r.trap:
        notes.append(f"trap suspect: {r.trap}")
    if r.backoff:
        notes.append(f"backing off: {r.backoff}")
    if r.denied:
        notes.append(", ".join(f"{k} {n}" for k, n in r.denied.items()))
    return (f"{r.key:<{width}}  {r.state:<11}  {delay:>7}  {r.fetched:>7}  {r.queued:>7}  "
            f"{r.errors:>6}  {sum(r.denied.values()):>6}  {'; '.join(notes)}")


def urls_text(out: Path, *, state: str | None = None, reason: str | None = None, host: str | None = None,
              offset: int = 0, limit: int = 100, as_json: bool = False) -> str:
    """One page of URL records filtered by state, skip reason and host key."""
    if reason is not None and reason not in {r.value for r in Reason}:
        raise ValueError(f"--reason must be one of {', '.join(r.value for r in Reason)}, not {reason!r}")
    with CrawlView(out) as view:
        total, rows = view.urls(state=state, reason=reason, host=host, offset=offset, limit=limit)
        key = view.key_of(host) if host else None
    if as_json:
        return json.dumps({"total": total, "offset": offset, "limit": limit, "state": state, "reason": reason,
                           "host_key": key, "rows": [asdict(r) for r in rows]}, indent=2)
    lines = []
    for r in rows:
        what = r.state if r.state != "skipped" else f"skipped ({r.reason}{': ' + r.detail if r.detail else ''})"
        if r.status is not None and r.state == "fetched":
            what += f" {r.status}"
        lines.append(f"{r.url}  {what}")
    end = offset + len(rows)
    if total == 0:
        lines.append("no URL matches")
    elif end < total:
        lines.append(f"{offset + 1}-{end} of {total} URLs (next page: --offset {end})")
    else:
        lines.append(f"{offset + 1}-{end} of {total} URLs")
    return "\n".join(lines)
