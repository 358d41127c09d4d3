"""Learned URL templates and what their fetches yield: the trap defence that
does not need to know a trap's shape.

What it owns: the *family* of a URL (host labels below the politeness key
and path segments, values classed), the *template* within it (the family
plus its query parameter names in sorted order, each value classed or, for a
parameter that has taken few values, an enumeration), and per family the
figures the yield rule judges: distinct URLs seen, fetched, and what each
fetch yielded. `courtly.core.traps.TrapGuard` keeps one `FamilyYield` per
family of a host and asks `judge`.

How it works. A trap is a URL space that grows while the content does not.
A fetch is *productive* when its main text is new -- not an exact or near
duplicate, not a soft-404, not empty, and not within `distance` bits (a
looser bound than the near-duplicate one) of the last fingerprints fetched
in the same family -- or when it brought URLs outside its own family (new
pages elsewhere, new templates). A calendar's months, a facet's orders and
subsets, pages past the end of a list, session copies and farm hosts all
fail both: their pages look alike and link only among themselves. The
last `window` fetches of a family are a ring of productive/not; with at
most `share_min` of them productive the family is *slowed* (its new URLs
go to the lowest band) after `slow_after` fetches, and *suspended* (a
suspicion the reviewer sees, its URLs denied) after `window` fetches while
its URL space still grows (more distinct URLs seen than fetched). Real
pages, however many and however deep, each bring new text, so a real deep
site never fills the ring with failures.

Classes of a value: ``{n}`` digits, ``{date}`` a date or a month
(2024-05, 20240531, 2024-05-31), ``{hex}`` a hex id or UUID, ``{id}`` a
mixed token of letters and digits (12+ characters), ``{word}`` a short
word, ``{text}`` anything else, ``{empty}``. A path segment keeps its words
(``/category/garden/``): digit runs inside it become ``{n}``.

Rules: pure (no clock; `now` is not even needed: the ring counts fetches,
not seconds). Every collection is bounded: `VALUES_MAX` values per
parameter, `COMBOS_MAX` parameter combinations, `PRINTS_MAX` fingerprints
and `SAMPLES_MAX` example URLs per family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from courtly.core.urlshape import path_template

__all__ = ["Outcome", "FamilyState", "YieldRule", "FamilyYield", "family_of", "value_class",
           "query_names", "judge", "evidence", "family_to_json", "family_from_json"]

VALUES_MAX = 9       # distinct values kept per parameter: 8 or fewer is an enumeration
PARAMS_MAX = 16      # parameters tracked per family
COMBOS_MAX = 64      # parameter-name combinations counted per family
PRINTS_MAX = 16      # recent main-text fingerprints per family
SAMPLES_MAX = 3      # example URLs per family, for the reviewer

_DATE = re.compile(r"\d{4}-\d{1,2}(?:-\d{1,2})?|\d{4}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])?")
_HEX = re.compile(r"(?=[^-]*\d)[0-9a-f]{8,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_TOKEN = re.compile(r"(?=(?:[^0-9]*[0-9]){2})(?=(?:[^a-z]*[a-z]){2})[0-9a-z_]{12,}", re.I)
_WORD = re.compile(r"[a-z][a-z_\-]{0,23}", re.I)
_LABEL = re.compile(r"[a-z]+(?:-[a-z]+)*", re.I)


class Outcome(StrEnum):
    """What one fetch of a family yielded (`NEW`: new main text)."""

    NEW = "new"
    NEAR_DUP = "near_dup"
    EXACT_DUP = "exact_dup"
    SOFT404 = "soft404"
    EMPTY = "empty"


class FamilyState(StrEnum):
    OK = "ok"
    SLOWED = "slowed"         # its new URLs go to the lowest band
    SUSPENDED = "suspended"   # a suspicion is open: its URLs are denied


@dataclass(frozen=True, slots=True)
class YieldRule:
    """Thresholds of the yield rule (documented in the module docstring)."""

    enabled: bool = True
    window: int = 24
    slow_after: int = 12
    share_min: float = 0.25
    distance: int = 12        # bits: "looks like a page of the family fetched lately"

    def __post_init__(self) -> None:
        if not 1 <= self.slow_after <= self.window:
            raise ValueError("yield rule: want 1 <= slow_after <= window")
        if not 0.0 <= self.share_min < 1.0:
            raise ValueError("yield rule: share_min is a share in [0, 1)")
        if not 0 <= self.distance <= 32:
            raise ValueError("yield rule: distance is 0..32 bits")


@dataclass(slots=True)
class FamilyYield:
    """Figures of one family of one host."""

    urls: int = 0                 # distinct URLs seen (admitted or discovered)
    fetched: int = 0
    productive: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)   # Outcome -> fetches
    outside: int = 0              # new URLs its pages brought outside the family
    ring: list[bool] = field(default_factory=list)    # lists: most families never fill them
    ring_good: int = 0
    prints: list[int] = field(default_factory=list)
    values: dict[str, set[str]] = field(default_factory=dict)    # parameter -> values (bounded)
    combos: dict[str, int] = field(default_factory=dict)         # "a&b" -> distinct URLs
    samples: list[str] = field(default_factory=list)
    state: FamilyState = FamilyState.OK

    def note_url(self, url: str, query: str) -> None:
        self.urls += 1
        if len(self.samples) < SAMPLES_MAX:
            self.samples.append(url)
        names = query_names(query)
        combo = "&".join(names)
        if combo in self.combos or len(self.combos) < COMBOS_MAX:
            self.combos[combo] = self.combos.get(combo, 0) + 1
        for pair in query.split("&") if query else ():
            name, _, value = pair.partition("=")
            seen = self.values.get(name)
            if seen is None:
                if len(self.values) >= PARAMS_MAX:
                    continue
                seen = self.values[name] = set()
            if len(seen) < VALUES_MAX:
                seen.add(value)

    def note_fetch(self, outcome: Outcome, fp: int | None, rule: YieldRule) -> None:
        self.fetched += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        good = outcome is Outcome.NEW
        if good and fp:
            good = all(bin(fp ^ p).count("1") > rule.distance for p in self.prints)
            self.prints.append(fp)
            if len(self.prints) > PRINTS_MAX:
                del self.prints[0]
        self.ring.append(good)
        self.ring_good += good
        self.productive += good
        if len(self.ring) > rule.window:
            self.ring_good -= self.ring.pop(0)

    def credit(self) -> None:
        """The last fetch brought a URL outside the family: it was productive."""
        self.outside += 1
        if self.ring and not self.ring[-1]:
            self.ring[-1] = True
            self.ring_good += 1
            self.productive += 1

    def template(self, family: str) -> str:
        """The family's most common template: parameters in sorted order,
        each an ``{enum}`` (few values) or its value's class."""
        if not self.combos:
            return family
        combo = max(self.combos, key=lambda c: (self.combos[c], c))
        if not combo:
            return family
        parts = []
        for name in combo.split("&"):
            values = self.values.get(name, set())
            if len(values) < VALUES_MAX:
                parts.append(f"{name}={{enum:{'|'.join(sorted(values))}}}")
            else:
                parts.append(f"{name}={value_class(min(values))}")
        return family + "?" + "&".join(parts)


def judge(fam: FamilyYield, rule: YieldRule) -> FamilyState:
    """The state the figures call for (never back to OK once suspended)."""
    if not rule.enabled or fam.state is FamilyState.SUSPENDED:
        return fam.state
    ring = len(fam.ring)
    poor = ring >= rule.slow_after and fam.ring_good <= rule.share_min * ring
    if poor and ring >= rule.window and fam.urls > fam.fetched:
        return FamilyState.SUSPENDED
    return FamilyState.SLOWED if poor else FamilyState.OK


def evidence(family: str, fam: FamilyYield, rule: YieldRule) -> str:
    """The figures a reviewer reads: template, counts, outcomes, examples."""
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(fam.outcomes.items()))
    growth = len(fam.combos) if len(fam.combos) < COMBOS_MAX else f"{COMBOS_MAX}+"
    return (f"template {fam.template(family)}: {fam.urls} distinct URLs seen, {fam.fetched} fetched "
            f"({outcomes}); {fam.ring_good} of the last {len(fam.ring)} fetches brought new text or "
            f"URLs outside it (at most {rule.share_min:.0%} is a trap), {fam.outside} such URLs in all; "
            f"{growth} parameter combinations; e.g. {' '.join(fam.samples)}")


# ---------------------------------------------------------------- reading URLs


def family_of(url: str, key: str, path: str) -> str:
    """The host labels below `key` (classed) and the path's template:
    ``http://x7k2p9q8r4t6.farm.test/a/12`` with key ``farm.test`` ->
    ``{id}.|/a/{n}``; a host equal to `key` adds nothing."""
    segments = path.split("/")
    shape = "/".join([_segment(s) for s in segments])
    start = url.find("://")
    if start < 0:
        return shape
    end = len(url)
    for stop in "/?#":
        i = url.find(stop, start + 3)
        if 0 <= i < end:
            end = i
    host = url[start + 3:end].rpartition("@")[2]
    if host.startswith("["):
        return shape
    host = host.partition(":")[0].lower()
    if host == key or not host.endswith("." + key):
        return shape
    labels = host[: -len(key) - 1].split(".")
    return "".join(_label(x) + "." for x in labels) + "|" + shape


def query_names(query: str) -> list[str]:
    return sorted({p.partition("=")[0] for p in query.split("&") if p}) if query else []


def value_class(value: str) -> str:
    if not value:
        return "{empty}"
    if _DATE.fullmatch(value):
        return "{date}"
    if value.isdigit():
        return "{n}"
    if _HEX.fullmatch(value):
        return "{hex}"
    if _TOKEN.fullmatch(value):
        return "{id}"
    if _WORD.fullmatch(value):
        return "{word}"
    return "{text}"


def _segment(segment: str) -> str:
    if len(segment) >= 12 and _TOKEN.fullmatch(segment) and not _HEX.fullmatch(segment):
        return "{id}"
    return path_template([segment])


def _label(label: str) -> str:
    if _LABEL.fullmatch(label) and len(label) <= 24:
        return label   # www, blog, shop: a real subdomain keeps its name
    return "{n}" if label.isdigit() else "{id}"


# ---------------------------------------------------------------- persistence


def family_to_json(f: FamilyYield) -> list[Any]:
    return [f.urls, f.fetched, f.productive, f.outcomes, f.outside, [int(b) for b in f.ring],
            [f"{p:016x}" for p in f.prints], {k: sorted(v) for k, v in f.values.items()}, f.combos,
            f.samples, str(f.state)]


def family_from_json(d: list[Any], rule: YieldRule) -> FamilyYield:
    urls, fetched, productive, outcomes, outside, ring, prints, values, combos, samples, state = d
    f = FamilyYield(int(urls), int(fetched), int(productive), {str(k): int(v) for k, v in outcomes.items()},
                    int(outside))
    f.ring = [bool(b) for b in ring[-rule.window:]]
    f.ring_good = sum(f.ring)
    f.prints = [int(p, 16) for p in prints[-PRINTS_MAX:]]
    f.values = {str(k): set(v) for k, v in values.items()}
    f.combos = {str(k): int(v) for k, v in combos.items()}
    f.samples = [str(s) for s in samples][:SAMPLES_MAX]
    f.state = FamilyState(state)
    return f
