"""Failing, parked and down hosts as `courtly explain`, `stats` and `report`
show them, read from the keys' saved politeness state (core/health.py).

A row says which key, its health, since when (the first failure of the
current run of failures), how many failures in a row and of what kind, the
last one, and the next probe. Read-only, like the rest of runtime/report.
"""

from __future__ import annotations

from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["HostHealthRow", "unhealthy_hosts", "health_line", "health_lines"]

UNHEALTHY = ("failing", "parked", "paused", "down")


@dataclass(frozen=True, slots=True)
class HostHealthRow:
    key: str
    health: str
    since_at: float
    failures: int
    kind: str
    last_failure_at: float
    next_probe_at: float | None


def unhealthy_hosts(hosts: Mapping[str, Mapping[str, Any]]) -> list[HostHealthRow]:
    """Keys whose saved state is failing, parked or down, worst first."""
    rows = []
    for key, h in hosts.items():
        health = str(h.get("health", "healthy"))
        if health not in UNHEALTHY:
            continue
        probe = float(h.get("backoff_until", 0.0)) if health != "failing" else None
        rows.append(HostHealthRow(key, health, float(h.get("first_failure_at", 0.0)), int(h.get("failures", 0)),
                                  str(h.get("failure_kind", "")), float(h.get("last_failure_at", 0.0)), probe))
    rows.sort(key=lambda r: (-UNHEALTHY.index(r.health), r.since_at, r.key))
    return rows


def _at(t: float | None) -> str:
    if not t:
        return "-"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def health_line(r: HostHealthRow) -> str:
    """One line: `parked since ..., 5 connect failures in a row (last ...), next probe ...`."""
    text = (f"{r.health} since {_at(r.since_at)}, {r.failures} {r.kind or 'failure'} failures in a row"
            f" (last {_at(r.last_failure_at)})")
    if r.next_probe_at is not None:
        text += f", next probe {_at(r.next_probe_at)}"
    if r.health == "down":
        text += ": its URLs are given up (host_down or banned) until a probe is answered"
    elif r.health == "paused":
        text += ": it answers with a ban or a challenge page; its URLs wait"
    return text


def health_lines(rows: list[HostHealthRow], limit: int = 20) -> list[str]:
    """The section `stats` and `report` print: a count per health and the worst rows."""
    counts = {h: sum(r.health == h for r in rows) for h in UNHEALTHY}
    lines = ["hosts failing, parked or down: " + "  ".join(f"{h} {n}" for h, n in counts.items())]
    lines += [f"  {r.key}  {health_line(r)}" for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more (--json lists all)")
    return lines
