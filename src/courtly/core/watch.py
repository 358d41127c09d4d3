"""A watch: one monitored URL, its schedule, its state and its change events.

What it owns: the `Watch` value (what the user asked for), `WatchState`
(what the monitor knows: the last observation, what it learned, the current
interval), the step that turns one check into at most one `ChangeEvent`
(`checked`, `not_modified`), when a watch is due (`next_check_at`), and the
politeness verdict of a host's watches (`host_verdicts`). Pure: every
instant is an argument.

How it works

- Learning: a new watch is checked `LEARN_CHECKS` times as fast as the
  host's politeness allows; those checks set the baseline and teach the
  `NoiseBook` (core/change) what changes on every fetch. They never report.
- After that, each check is compared with the last one (core/change.compare).
  A real change is one `ChangeEvent` with the diff and both capture instants;
  the new observation becomes the baseline either way.
- Interval: `every_s` after a change, then x`GROWTH` per unchanged check up
  to `target_s` (the longest the user accepts between a change and its
  detection; equal to `every_s` unless set): quiet pages cost less, and no
  check is ever further apart than the target.
- Politeness is absolute: checks are queued like any URL, one request at a
  time per key at the key's delay. n watches on a key with delay d are each
  checked at best every n x d seconds, the best time-to-detect the host
  allows; a watch whose target is shorter is named impossible by
  `host_verdicts` (and `courtly report`).

Rules: intervals are at least `EVERY_S_MIN`; a paused watch is never due;
`LEARN_CHECKS` is two more than the changes noise learning needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, NamedTuple

from courtly.core.change import (
    NOISE_CHANGES_MIN, NoiseBook, Observation, WatchRuleError, WatchRules, compare, compile_rules, observe,
)

__all__ = ["Watch", "WatchState", "ChangeEvent", "HostVerdict", "checked", "not_modified", "next_check_at",
           "host_verdicts", "iso", "EVERY_S_MIN", "EVERY_S_DEFAULT", "LEARN_CHECKS", "GROWTH", "WatchRuleError"]

EVERY_S_MIN = 1.0
EVERY_S_DEFAULT = 300.0
LEARN_CHECKS = NOISE_CHANGES_MIN + 2   # one spare: a noisy part may repeat once
GROWTH = 1.25


@dataclass(frozen=True, slots=True)
class Watch:
    """What the user asked to watch (`courtly watch add`, the HTTP API)."""

    url: str
    every_s: float = EVERY_S_DEFAULT     # check interval (the shortest the monitor uses)
    target_s: float = 0.0                # longest gap between a change and its detection (0: every_s)
    webhook: str = ""                    # POST each change event here
    select: tuple[str, ...] = ()         # CSS: only these elements are compared
    exclude: tuple[str, ...] = ()        # CSS: these elements are removed first
    ignore: tuple[str, ...] = ()         # regular expressions masked in the text
    trigger: str = ""                    # text whose appearance (or disappearance) is the change
    trigger_on: str = "appear"           # appear | disappear
    keep: tuple[str, ...] = ()           # generic masks not applied (core/change.MASK_NAMES)
    paused: bool = False
    id: int = 0                          # given by the store
    added_at: float = 0.0

    @property
    def interval_s_max(self) -> float:
        return self.target_s or self.every_s

    def rules(self) -> WatchRules:
        return compile_rules(self.select, self.exclude, self.ignore, self.trigger, self.trigger_on, self.keep)

    def check(self) -> "Watch":
        """Itself when valid; raises `WatchRuleError` naming the problem."""
        if not self.url.startswith(("http://", "https://")):
            raise WatchRuleError(f"a watch needs an http(s) URL, not {self.url!r}")
        if not self.every_s >= EVERY_S_MIN:
            raise WatchRuleError(f"every_s must be at least {EVERY_S_MIN}, not {self.every_s}")
        if self.target_s and not self.target_s >= self.every_s:
            raise WatchRuleError(f"target_s ({self.target_s}) must be 0 or at least every_s ({self.every_s})")
        if self.webhook and not self.webhook.startswith(("http://", "https://")):
            raise WatchRuleError(f"a webhook needs an http(s) URL, not {self.webhook!r}")
        self.rules()
        return self

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "url": self.url, "every_s": self.every_s, "target_s": self.target_s,
                "webhook": self.webhook, "select": list(self.select), "exclude": list(self.exclude),
                "ignore": list(self.ignore), "trigger": self.trigger, "trigger_on": self.trigger_on,
                "keep": list(self.keep), "paused": self.paused, "added_at": self.added_at}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Watch":
        known = {k: d[k] for k in ("id", "url", "every_s", "target_s", "webhook", "trigger", "trigger_on",
                                   "paused", "added_at") if k in d}
        lists: dict[str, Any] = {k: tuple(str(x) for x in d.get(k) or ())
                                 for k in ("select", "exclude", "ignore", "keep")}
        return cls(**known, **lists)


@dataclass(slots=True)
class WatchState:
    """What the monitor knows of a watch; saved with it."""

    checks: int = 0
    changes: int = 0
    learning_left: int = LEARN_CHECKS
    interval_s: float = 0.0                   # current interval (0: not set yet)
    last_checked_at: float | None = None
    last_changed_at: float | None = None
    capture_at: float | None = None           # the capture the baseline came from
    blocks: tuple[str, ...] = ()              # the baseline, masked
    fingerprint: str = ""
    trigger_present: bool = False
    noise: NoiseBook = field(default_factory=NoiseBook)

    def to_json(self) -> dict[str, Any]:
        return {"checks": self.checks, "changes": self.changes, "learning_left": self.learning_left,
                "interval_s": self.interval_s, "last_checked_at": self.last_checked_at,
                "last_changed_at": self.last_changed_at, "capture_at": self.capture_at,
                "blocks": list(self.blocks), "fingerprint": self.fingerprint,
                "trigger_present": self.trigger_present, "noise": self.noise.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "WatchState":
        s = cls(**{k: d[k] for k in ("checks", "changes", "learning_left", "interval_s", "last_checked_at",
                                     "last_changed_at", "capture_at", "fingerprint", "trigger_present") if k in d})
        s.blocks = tuple(d.get("blocks") or ())
        s.noise = NoiseBook.from_json(d.get("noise") or {})
        return s


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    watch_id: int
    url: str
    detected_at: float
    previous_capture: float | None
    capture: float
    diff: dict[str, Any]
    before: tuple[str, ...]      # both contents, masked, for the side-by-side view
    after: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The line of `changes.jsonl` and the webhook's body."""
        return {"url": self.url, "watch": self.watch_id, "detected_at": iso(self.detected_at),
                "previous_capture": iso(self.previous_capture) if self.previous_capture is not None else None,
                "capture": iso(self.capture), "diff": self.diff}


def iso(at: float) -> str:
    """An instant as ISO 8601 UTC with milliseconds."""
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def next_check_at(watch: Watch, state: WatchState) -> float | None:
    """When `watch` is due next; None when paused. Learning checks are due
    at once (politeness spaces them)."""
    if watch.paused:
        return None
    if state.last_checked_at is None:
        return watch.added_at
    if state.learning_left > 0:
        return state.last_checked_at
    return state.last_checked_at + (state.interval_s or watch.every_s)


def checked(watch: Watch, rules: WatchRules, state: WatchState, raw_blocks: list[str], now: float,
            capture_at: float) -> ChangeEvent | None:
    """One check's content (core/change.content_of): updates `state`, and
    returns the change event when it is a real change."""
    cur = observe(raw_blocks, rules, state.noise)
    _count(state, now)
    if not state.fingerprint:   # the first observation is the baseline
        _take(state, cur, capture_at)
        state.learning_left = max(0, state.learning_left - 1)
        return None
    prev = Observation(state.blocks, state.fingerprint, state.trigger_present)
    if state.noise.observe(list(prev.blocks), list(cur.blocks)):
        # learned something: judge both sides with it
        prev = observe(list(prev.blocks), rules, state.noise)
        prev = replace(prev, trigger_present=state.trigger_present)
        cur = replace(observe(list(cur.blocks), rules, state.noise), trigger_present=cur.trigger_present)
    judged = compare(prev, cur, rules)
    previous_capture = state.capture_at
    _take(state, cur, capture_at)
    if state.learning_left > 0:
        state.learning_left -= 1
        return None
    if not judged.changed:
        _grow(watch, state)
        return None
    state.changes += 1
    state.last_changed_at = now
    state.interval_s = watch.every_s
    return ChangeEvent(watch.id, watch.url, now, previous_capture, capture_at, judged.diff, prev.blocks, cur.blocks)


def not_modified(watch: Watch, state: WatchState, now: float) -> None:
    """A 304: the baseline stands."""
    _count(state, now)
    if state.learning_left > 0:
        state.learning_left -= 1
    else:
        _grow(watch, state)


def _count(state: WatchState, now: float) -> None:
    state.checks += 1
    state.last_checked_at = now


def _take(state: WatchState, cur: Observation, capture_at: float) -> None:
    state.blocks, state.fingerprint, state.trigger_present = cur.blocks, cur.fingerprint, cur.trigger_present
    state.capture_at = capture_at


def _grow(watch: Watch, state: WatchState) -> None:
    state.interval_s = min(watch.interval_s_max, (state.interval_s or watch.every_s) * GROWTH)


class HostVerdict(NamedTuple):
    key: str
    delay_s: float
    watches: int
    best_detect_s: float                  # n x delay: each watch's best time-to-detect on this key
    impossible: tuple[tuple[str, float], ...]   # (url, target_s) the host's politeness cannot meet


def host_verdicts(watches: list[tuple[Watch, str]], delay_s: dict[str, float], default_delay_s: float) -> list[HostVerdict]:
    """Per politeness key: how fast its watches can be checked, and which
    targets that makes impossible (active watches only)."""
    by_key: dict[str, list[Watch]] = {}
    for w, key in watches:
        if not w.paused:
            by_key.setdefault(key, []).append(w)
    out = []
    for key in sorted(by_key):
        ws = by_key[key]
        d = delay_s.get(key, default_delay_s)
        best = len(ws) * d
        bad = tuple((w.url, w.interval_s_max) for w in ws if w.interval_s_max < best)
        out.append(HostVerdict(key, d, len(ws), best, bad))
    return out
