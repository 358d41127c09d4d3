"""The trap guard's rules as tests on one host's counts: pure functions of the state and the config.

What it owns: what each rule of core/traps.py looks at and the evidence it
gives when it fires (the structural URL rules 3-5, the `template`,
`near_dup` and `rate` host rules), and the small helpers both need (a
suspicion's scope, the 64-bit key of a session-free URL, the year of a
day). Split from core/traps.py by size; the rules' order, thresholds and
wording are documented there.

How it works: each function reads a `HostState` (trap_state.py) and the
`TrapConfig` and returns None when its rule does not fire, else what the
guard needs to open a suspicion (rule, scope and detail, or the evidence
text). `TrapGuard` does the bookkeeping: opening suspicions, counting,
bounds, persistence.

Rules: pure; no clock (`now` is an argument where a date matters); the only
state changed is `rate_evidence` setting `host.rate_high`, which the
`template` rule reads as corroboration.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, datetime

from courtly.core.trap_state import HostState, TemplateStats, TrapConfig
from courtly.core.urlshape import repeated_run

__all__ = ["DAY_S", "SESSION_SCOPE", "in_scope", "key64", "near_dup_evidence", "rate_evidence", "structural",
           "template_evidence", "year_of"]

DAY_S = 86_400
SESSION_SCOPE = "rule:session_id"  # only the duplicate copies are denied, nothing more


def structural(host: HostState, split: list[str], stripped: str | None,
               cfg: TrapConfig) -> tuple[str, str, str] | None:
    """Rules 3-5 (segments, repeated_segments, session_id) on a URL whose
    path split on "/" is `split` and whose `without_session` form is
    `stripped`: (rule, scope, detail) of the first that fires and is not
    muted on this host, else None."""
    n = len(split) - split.count("")   # path segments
    segments = [s for s in split if s] if n > cfg.path_segments_max or n >= cfg.segment_repeats_max else []
    if len(segments) > cfg.path_segments_max:
        scope = f"prefix:/{segments[0]}/"
        if ("segments", scope) not in host.muted:
            return "segments", scope, f"{len(segments)} > {cfg.path_segments_max} path segments"
    found = repeated_run(segments, cfg.segment_repeats_max)   # none in fewer segments than repeats
    if found is not None:
        unit, start = found
        scope = "prefix:/" + "".join(s + "/" for s in segments[: max(start, 1)])
        if ("repeated_segments", scope) not in host.muted:
            return "repeated_segments", scope, f"'{unit}' repeated {cfg.segment_repeats_max} times"
    if stripped is not None and ("session_id", SESSION_SCOPE) not in host.muted:
        if key64(stripped) in host.session_keys:
            return "session_id", SESSION_SCOPE, f"same page as {stripped} with another session id"
    return None


def template_evidence(host: HostState, template: str, stats: TemplateStats, cfg: TrapConfig) -> str | None:
    """The `template` rule: too many URLs of one template *and* corroboration."""
    if stats.urls <= cfg.template_urls_max:
        return None
    near = stats.fetched >= cfg.template_fetches_min and (
        stats.near_dups >= cfg.template_near_dup_ratio * stats.fetched
    )
    if not (near or stats.bad_dates or host.rate_high):
        return None
    why = ("near-duplicate pages" if near else "out-of-range dates" if stats.bad_dates
           else "a new-URL rate far above the host's baseline")
    return (f"{stats.urls} URLs of {template} ({stats.near_dups}/{stats.fetched} fetched pages "
            f"near-duplicate) with {why}; e.g. {stats.sample}")


def near_dup_evidence(host: HostState, cfg: TrapConfig) -> str | None:
    """The `near_dup` rule: most of the last fetches were near-duplicates."""
    if len(host.dup_window) >= cfg.near_dup_window and host.dup_count > cfg.near_dup_ratio_max * len(host.dup_window):
        return f"{host.dup_count} of the last {len(host.dup_window)} fetches were near-duplicates"
    return None


def rate_evidence(host: HostState, cfg: TrapConfig) -> str | None:
    """The `rate` rule: new URLs per fetch far above the host's earlier
    average (sets `host.rate_high`, the template rule's corroboration)."""
    ring = len(host.rate_ring)
    earlier = host.fetches - ring
    host.rate_high = False
    if host.fetches < cfg.rate_warmup_fetches or ring < cfg.rate_window or earlier <= 0:
        return None
    recent = host.rate_sum / ring
    baseline = (host.new_total - host.new_since_fetch - host.rate_sum) / earlier
    if recent >= cfg.rate_floor and recent >= cfg.rate_factor * max(baseline, 1.0):
        host.rate_high = True
        return f"{recent:.1f} new URLs per fetch over the last {ring} fetches, baseline {baseline:.1f}"
    return None


def in_scope(scope: str, template: str, path_t: str, path: str, family: str | None = None) -> bool:
    """Does a suspicion's scope cover a URL (its template, path template,
    path, urlyield family)?"""
    if not scope:
        return True  # the whole host
    kind, _, value = scope.partition(":")
    if kind == "family":
        return value == family
    if kind == "template":
        return value == template
    if kind == "path":
        return scope == path_t
    if kind == "prefix":
        return path.startswith(value)
    return False  # rule:<name>: the rule's own URLs only


def key64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


@functools.lru_cache(maxsize=4)
def _year_of_day(day: int) -> int:
    return datetime.fromtimestamp(day * DAY_S, UTC).year


def year_of(now: float) -> int:
    return _year_of_day(int(now // DAY_S))
