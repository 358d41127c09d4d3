"""The trap guard's values and state (core/traps.py's `TrapGuard` applies
the rules): its thresholds (`TrapConfig`), budget exceptions (`AllowEntry`),
verdicts, open suspicions, and the per-host state with its JSON form (the
snapshot the runtime saves). Pure.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from courtly.core.types import Decision, Reason
from courtly.core.urlyield import FamilyYield, YieldRule, family_from_json, family_to_json

__all__ = ["AllowEntry", "TrapConfig", "Verdict", "ALLOW", "Suspect", "TemplateStats", "HostState",
           "host_to_json", "host_from_json", "SUSPECT_BAND", "HOST_SCOPE"]

SUSPECT_BAND = 7
HOST_SCOPE = ""     # a suspicion's scope: the whole host


@dataclass(frozen=True, slots=True)
class AllowEntry:
    """A negotiated budget exception: `key` may admit `budget` new URLs a
    day until `expires_at`; `owner` is who asked (kept for the audit)."""

    key: str
    budget: int
    owner: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class TrapConfig:
    """Thresholds of `TrapGuard` (see the module docstring for each rule)."""

    daily_new_urls_max: int = 50_000
    allowlist: tuple[AllowEntry, ...] = ()
    depth_max: int = 16
    url_length_max: int = 2048
    path_segments_max: int = 16
    segment_repeats_max: int = 3
    calendar_urls_min: int = 3
    year_min: int = 1900
    future_years_max: int = 1
    query_shapes_max: int = 64
    template_urls_max: int = 1_000
    template_fetches_min: int = 20
    template_near_dup_ratio: float = 0.5
    near_dup_ratio_max: float = 0.8
    near_dup_window: int = 100
    rate_window: int = 50
    rate_warmup_fetches: int = 100
    rate_floor: float = 20.0
    rate_factor: float = 10.0
    suspect_band: int = SUSPECT_BAND
    suspect_sample_share: float = 0.01
    templates_max: int = 4_096
    templates_total_max: int = 250_000    # over all hosts (~250 B each: ~60 MB)
    session_keys_max: int = 100_000
    hosts_max: int = 1_000_000
    yield_rule: YieldRule = YieldRule()   # core/urlyield: slow, then suspend, families that yield nothing
    families_max: int = 1_024             # per host (then one overflow family)
    families_total_max: int = 200_000     # over all hosts (~0.4-1.5 KB each)

    def __post_init__(self) -> None:
        positive = ("daily_new_urls_max", "depth_max", "url_length_max", "path_segments_max",
                    "calendar_urls_min", "query_shapes_max", "template_urls_max",
                    "template_fetches_min", "near_dup_window", "rate_window", "templates_max", "templates_total_max",
                    "session_keys_max", "hosts_max", "families_max", "families_total_max")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.segment_repeats_max < 2:
            raise ValueError("segment_repeats_max must be at least 2")
        if not 0.0 < self.near_dup_ratio_max <= 1.0 or not 0.0 < self.template_near_dup_ratio <= 1.0:
            raise ValueError("near-duplicate ratios must be in (0, 1]")
        if not 0.0 <= self.suspect_sample_share <= 1.0:
            raise ValueError("suspect_sample_share must be in [0, 1]")
        if not 0 <= self.suspect_band <= 7:
            raise ValueError("suspect_band must be 0..7")
        for entry in self.allowlist:
            if entry.budget < 0:
                raise ValueError(f"allowlist budget must be >= 0: {entry}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of `check_new_url`: allowed (band None: keep yours; 7: the
    host is a suspect) or denied with a `Reason` and the rule's name."""

    allowed: bool
    band: int | None = None
    reason: Reason | None = None
    rule: str = ""
    detail: str = ""

    def decision(self, url: str, now: float) -> Decision | None:
        """The `Decision` to record for a denied URL (None if allowed)."""
        if self.allowed or self.reason is None:
            return None
        return Decision(url, self.reason, f"{self.rule}: {self.detail}" if self.detail else self.rule, now)


ALLOW = Verdict(True)


@dataclass(frozen=True, slots=True)
class Suspect:
    """An open suspicion: `key` looks like a trap by `rule`, since `since`.
    Scope: "" the whole host, ``template:<t>``, ``path:<t>``, or
    ``rule:<name>`` for a URL rule that fired on this host."""

    key: str
    rule: str
    evidence: str
    since: float
    scope: str = HOST_SCOPE


@dataclass(slots=True)
class TemplateStats:
    urls: int = 0
    bad_dates: int = 0
    fetched: int = 0
    near_dups: int = 0
    sample: str = ""


@dataclass(slots=True)
class HostState:
    day: int = -1
    day_new: int = 0
    templates: dict[str, TemplateStats] = field(default_factory=dict)
    shapes: dict[str, set[str]] = field(default_factory=dict)
    session_keys: set[int] = field(default_factory=set)
    dup_window: deque[bool] = field(default_factory=deque)
    dup_count: int = 0
    fetches: int = 0
    new_total: int = 0
    new_since_fetch: int = 0
    rate_ring: deque[int] = field(default_factory=deque)
    rate_sum: int = 0
    rate_high: bool = False
    open: dict[tuple[str, str], Suspect] = field(default_factory=dict)
    # (rule, scope) -> when a human resolved it; dicts keep a stable order
    muted: dict[tuple[str, str], float] = field(default_factory=dict)
    confirmed: dict[tuple[str, str], float] = field(default_factory=dict)
    families: dict[str, FamilyYield] = field(default_factory=dict)   # core/urlyield's figures
    last_family: str | None = None   # of the last fetch: new URLs found next are its yield

    def kept(self) -> bool:
        return bool(self.open or self.muted or self.confirmed)


def host_to_json(h: HostState) -> dict[str, Any]:
    return {
        "day": h.day, "day_new": h.day_new,
        "templates": {t: [s.urls, s.bad_dates, s.fetched, s.near_dups, s.sample] for t, s in h.templates.items()},
        "shapes": {p: sorted(s) for p, s in h.shapes.items()},
        "session_keys": sorted(f"{k:016x}" for k in h.session_keys),
        "dup_window": [int(b) for b in h.dup_window],
        "fetches": h.fetches, "new_total": h.new_total, "new_since_fetch": h.new_since_fetch,
        "rate_ring": list(h.rate_ring), "rate_high": h.rate_high,
        "open": [[s.rule, s.scope, s.evidence, s.since] for s in h.open.values()],
        "muted": [[r, s, at] for (r, s), at in h.muted.items()],
        "confirmed": [[r, s, at] for (r, s), at in h.confirmed.items()],
        "families": {f: family_to_json(y) for f, y in h.families.items()},
    }


def host_from_json(key: str, d: dict[str, Any], cfg: TrapConfig) -> HostState:
    h = HostState(day=int(d["day"]), day_new=int(d["day_new"]))
    h.templates = {t: TemplateStats(int(a), int(b), int(c), int(e), str(s)) for t, (a, b, c, e, s) in d["templates"].items()}
    h.shapes = {p: set(s) for p, s in d["shapes"].items()}
    h.session_keys = {int(k, 16) for k in d["session_keys"]}
    h.dup_window = deque(bool(b) for b in d["dup_window"][-cfg.near_dup_window:])
    h.dup_count = sum(h.dup_window)
    h.fetches, h.new_total, h.new_since_fetch = int(d["fetches"]), int(d["new_total"]), int(d["new_since_fetch"])
    h.rate_ring = deque(int(x) for x in d["rate_ring"][-cfg.rate_window:])
    h.rate_sum = sum(h.rate_ring)
    h.rate_high = bool(d["rate_high"])
    h.open = {(r, s): Suspect(key, r, ev, float(since), s) for r, s, ev, since in d["open"]}
    h.muted = {(r, s): float(at) for r, s, at in d["muted"]}
    h.confirmed = {(r, s): float(at) for r, s, at in d["confirmed"]}
    h.families = {f: family_from_json(y, cfg.yield_rule) for f, y in d.get("families", {}).items()}
    return h
