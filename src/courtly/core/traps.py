"""Crawler traps and per-host budgets: keep an endless URL space from eating
the fetch budget, without silently losing real pages.

API (pure; `now` is an argument, randomness the injected `rng`)
---------------------------------------------------------------
``guard = TrapGuard(TrapConfig(...), rng)``

* ``check_new_url(key, url, depth, now) -> Verdict``: once per URL the seen
  store says is new (normalised), before it enters the frontier. Allowed
  URLs are counted (budget, templates, rate). ``verdict.band`` is 7 while
  the host is a suspect (None: keep yours); a denial has a `Reason` and the
  rule's name, and ``verdict.decision(url, now)`` is the Decision to record.
* ``check_queued(key, url, now) -> Verdict``: just before fetching a queued
  URL: denied if a suspicion opened since covers it (nothing is counted).
* ``note_discovered(key, url, now)``: count a new URL that entered without a
  check (seed, sitemap, operator); never refused.
* ``note_fetch(key, url, near_dup, now, *, outcome=None, fp=None,
  refetch=False)``: a page of `key` was fetched; `near_dup`: its SimHash
  matched an earlier page of the same host (``NearDupIndex.find(fp,
  scope=host)`` non-empty before adding it). `outcome` (an exact duplicate,
  a soft-404, no main text) and `fp` (the SimHash) feed the yield rule; the
  new URLs checked next on the same key are that page's yield.
* ``suspects() -> list[Suspect]``: the review queue, oldest first.
* ``resolve_suspect(key, "trap" | "legit", now, rule=None)``: "legit" closes
  it and mutes the rule for that scope on that host (the runtime may re-admit
  what was denied: those Decisions name the rule); "trap" denies the scope
  for good ("" = the whole host).
* ``allow(AllowEntry)``, ``budget_of(key, now)``, ``band_of(key)``;
  ``snapshot()`` / ``TrapGuard.restore(data, config, rng)``: JSON state;
  ``snapshot_json()`` is ``json.dumps(snapshot())``, re-encoding only the
  hosts touched since the last call (the runtime saves it every 10 s).

URL rules, in the order `check_new_url` applies them
----------------------------------------------------
1. ``confirmed`` (TRAP): in the scope of a suspicion resolved as "trap".
2. ``length`` (LENGTH): longer than `url_length_max` (2048).
3. ``segments`` (TRAP): more than `path_segments_max` (16) path segments,
   the ever-deeper /deep/1/2/3/... Opens a Suspect on ``prefix:/deep/``.
4. ``repeated_segments`` (TRAP): a segment or a pair of segments repeated
   `segment_repeats_max` (3) times in a row (/x/x/x/, /a/b/a/b/a/b/). Opens a
   Suspect on the path before the repetition (``prefix:/repeat/``): the
   cube-free a/b/b/a/b/... paths of the same tree wait there too.
5. ``session_id`` (TRAP): a session id (sid, jsessionid, phpsessid, any name
   with "sess", s=<32 hex>, ;jsessionid=, ASP.NET (S(...))) *and* the same
   URL without it was already admitted here: the first copy of each page is
   kept, the endless copies are not. Normalisation strips the known names;
   this catches the rest. Opens a Suspect on ``rule:session_id`` (fences
   nothing more).
6. ``depth`` (DEPTH): more than `depth_max` (16) hops from a seed. A plain
   limit, not trap evidence (a long next/prev chain reaches it too).
7. ``suspect`` (TRAP): in the scope of an open suspicion -- except a random
   `suspect_sample_share` (1 %) let through at band 7, so evidence and
   samples for the reviewer keep coming.
8. ``budget`` (BUDGET): `daily_new_urls_max` (50,000) new URLs admitted
   today (day = floor(now / 86400)); an `AllowEntry` (key, budget, owner,
   expires_at) replaces the number until it expires.

Host rules (evidence accumulates; firing opens a Suspect: band 7 for the
host, rule 7 for the scope)
-----------------------------------------------------------------------
* ``calendar`` (template): `calendar_urls_min` (3) URLs of one template
  have a date outside [`year_min`, this year + `future_years_max`]
  (/calendar/2027/05/, ?date=1712-01-01). Real archives have past dates.
* ``query_combinations`` (path): one path has more than `query_shapes_max`
  (64) query shapes (multisets of parameter names): filters combining
  without end.
* ``template`` (template): more than `template_urls_max` (1,000) URLs *and*
  corroboration: >= half of its fetched pages (>= 20) near-duplicates, or
  out-of-range dates, or the host's rate rule firing. Thousands of real
  pages under /article/<n> are distinct, so they never fire it.
* ``near_dup`` (host): more than `near_dup_ratio_max` (80 %) of the last
  `near_dup_window` (100) fetches were near-duplicates.
* ``rate`` (host): over the last `rate_window` (50) fetches, >= `rate_floor`
  (20) new URLs per fetch and >= `rate_factor` (10) x the host's earlier
  average. Per fetch, not per second: independent of crawl speed and clock.
* ``yield`` (family, `courtly.core.urlyield`): the rule that needs no shape.
  Each URL's family (host labels below the key and the path, values
  classed) keeps its distinct URLs and what its fetches yielded; when at
  most a quarter of its last 12 fetches brought new text or URLs outside
  it, its new URLs go to band 7 (slowed); after 24 such fetches while it
  still grows, a suspicion on ``family:<family>`` names its template, the
  figures and example URLs. It backs the fixed-window rules above: a
  calendar that stays inside [`year_min`, next year] is caught by its yield.

Templates, query shapes, dates and session ids are read by
`courtly.core.urlshape` (``url_template`` is re-exported here): a path
segment that is a number, a date, a hex id or a UUID becomes a placeholder
(``/news/2024/05/story-12.html?page=3`` -> ``/news/{n}/{n}/story-{n}.html?page=*``).

Bounds: per host `templates_max` templates (then one overflow template) and
`session_keys_max` pages with session ids; `templates_total_max` templates over
all hosts (slug URLs make one template per page: without it ten million queued
URLs kept ~2.5 GB of templates); `hosts_max` hosts (least recently used first,
hosts with suspicions kept). Cost per new URL: bench/admission_micro.py and
docs/performance.md.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, Literal

from courtly.core.trap_state import (
    ALLOW, HOST_SCOPE, AllowEntry, HostState, Suspect, TemplateStats, TrapConfig, Verdict, host_from_json,
    host_to_json,
)
from courtly.core.trap_rules import (
    DAY_S, in_scope, key64, near_dup_evidence, rate_evidence, structural, template_evidence, year_of,
)
from courtly.core.types import Reason
from courtly.core.urlshape import (dates_out_of_range, path_query, path_template, query_shape, query_template,
                                   repeated_run, url_template, without_session, years)
from courtly.core.urlyield import FamilyState, FamilyYield, Outcome, evidence, family_of, judge

__all__ = [
    "AllowEntry",
    "TrapConfig",
    "Verdict",
    "Suspect",
    "TrapGuard",
    "url_template",
    "RULES",
]

RULES = (
    "confirmed", "length", "segments", "repeated_segments", "session_id", "depth",
    "suspect", "budget", "calendar", "query_combinations", "template", "near_dup", "rate", "yield",
)
_OVERFLOW = "{overflow}"
_FAMILY = "family:"   # a suspicion's scope: one family of core/urlyield

# the URL-shape helpers under their old names here (tests/core/test_traps.py uses them)
_path_query, _repeated_run, _years, _without_session = path_query, repeated_run, years, without_session


class TrapGuard:
    """Per-host trap rules and budgets (see module docstring)."""

    def __init__(self, config: TrapConfig | None = None, rng: random.Random | None = None) -> None:
        self.config = config or TrapConfig()
        self.rng = rng or random.Random(0)  # picks the sample of suspect URLs let through
        self._hosts: dict[str, HostState] = {}
        self._allow: list[AllowEntry] = list(self.config.allowlist)
        self._host_texts: dict[str, str] = {}   # key -> '"key": {...}' as of the last snapshot_json
        self._touched: set[str] = set()         # keys whose host may differ from its text
        self._changed: set[str] = set()         # keys changed here since the last `changed_rows`
        self._templates = 0                      # templates held over all hosts
        self._families = 0                       # urlyield families held over all hosts
        self._last_key: str | None = None        # key of the last note_fetch (whose links come next)

    # ---------------------------------------------------------------- API

    def check_new_url(self, key: str, url: str, depth: int, now: float) -> Verdict:
        cfg = self.config
        host = self._host(key, now)
        path, query = path_query(url)
        segments = path.split("/")
        shape = path_template(segments)
        template = self._template_key(host, shape + query_template(query) if query else shape)
        path_t = "path:" + shape
        fenced = self._fenced(host, template, path_t, path, now, url, key) if host.confirmed or host.open else None
        if fenced is not None:
            return fenced
        if len(url) > cfg.url_length_max:
            return self._deny(Reason.LENGTH, "length", f"{len(url)} > {cfg.url_length_max} characters")
        stripped = without_session(path, query)   # path?query without its session ids, or None
        denied = self._structural(key, host, url, segments, stripped, now)
        if denied is not None:
            return denied
        if depth > cfg.depth_max:
            return self._deny(Reason.DEPTH, "depth", f"{depth} > {cfg.depth_max} hops")
        if self._count_template(key, host, url, template, path_t, path, query, now):
            fenced = self._fenced(host, template, path_t, path, now, url, key)  # a rule just fired
            if fenced is not None:
                return fenced
        budget = self.budget_of(key, now)
        if host.day_new >= budget:
            return self._deny(Reason.BUDGET, "budget", f"{budget} new URLs today")
        self._admit(host, stripped)
        fam = self._note_family_url(key, host, url, path, query)
        slowed = fam is not None and fam.state is not FamilyState.OK
        return Verdict(True, cfg.suspect_band) if host.open or slowed else ALLOW

    def check_queued(self, key: str, url: str, now: float) -> Verdict:
        """Re-check a URL admitted earlier, just before it is fetched: denied
        if a suspicion opened since covers it (rules 1 and 7 only; nothing
        is counted). Keeps a trap found late from draining its queue."""
        host = self._hosts.get(key)
        if host is None or not (host.open or host.confirmed):
            return ALLOW
        path, query = path_query(url)
        shape = url_template(path)
        template = self._template_key(host, shape + query_template(query))
        fenced = self._fenced(host, template, "path:" + shape, path, now, url, key)
        if fenced is not None:
            return fenced
        return Verdict(True, self.config.suspect_band) if host.open else ALLOW

    def note_discovered(self, key: str, url: str, now: float) -> None:
        host = self._host(key, now)
        path, query = path_query(url)
        shape = url_template(path)
        template = self._template_key(host, shape + query_template(query))
        self._count_template(key, host, url, template, "path:" + shape, path, query, now)
        self._admit(host, without_session(path, query))
        self._note_family_url(key, host, url, path, query, credit=False)

    def note_fetch(self, key: str, url: str, near_dup: bool, now: float, *,
                   outcome: Outcome | None = None, fp: int | None = None, refetch: bool = False) -> None:
        """`outcome` (default: NEAR_DUP or NEW by `near_dup`) and `fp`, the
        page's main-text SimHash, feed the yield rule (core/urlyield); a
        `refetch` (a recrawl of a known URL) says nothing about the URL space
        and is left out of it."""
        cfg = self.config
        host = self._host(key, now)
        if refetch:
            self._last_key = None
        else:
            self._note_family_fetch(key, host, url, outcome or (Outcome.NEAR_DUP if near_dup else Outcome.NEW),
                                    fp, now)
        host.fetches += 1
        path, query = path_query(url)
        template = self._template_key(host, url_template(path, query))
        stats = host.templates.get(template)
        if stats is None:
            stats = host.templates[template] = TemplateStats(sample=url)
            self._templates += 1
        stats.fetched += 1
        stats.near_dups += near_dup
        host.dup_window.append(near_dup)
        host.dup_count += near_dup
        if len(host.dup_window) > cfg.near_dup_window:
            host.dup_count -= host.dup_window.popleft()
        host.rate_ring.append(host.new_since_fetch)
        host.rate_sum += host.new_since_fetch
        host.new_since_fetch = 0
        if len(host.rate_ring) > cfg.rate_window:
            host.rate_sum -= host.rate_ring.popleft()
        self._check_near_dup(key, host, now)
        self._check_rate(key, host, now)
        self._check_template(key, host, template, stats, now)

    def near_dup_shares(self, pages_min: int) -> list[tuple[str, float]]:
        """(key, near-duplicate share of its last `near_dup_window` judged
        pages) for keys with at least `pages_min` pages in that window: the
        figure the near-duplicate rule compares with `near_dup_ratio_max`."""
        return [(k, h.dup_count / len(h.dup_window)) for k, h in self._hosts.items()
                if len(h.dup_window) >= max(1, pages_min)]

    def suspects(self) -> list[Suspect]:
        """Open suspicions, oldest first (the review queue)."""
        out = [s for host in self._hosts.values() for s in host.open.values()]
        return sorted(out, key=lambda s: (s.since, s.key, s.rule, s.scope))

    def resolve_suspect(
        self, key: str, verdict: Literal["trap", "legit"], now: float, rule: str | None = None
    ) -> int:
        """Close `key`'s open suspicions (only `rule`'s when given); returns
        how many. "legit" mutes the rule for that scope; "trap" keeps denying
        the scope for good."""
        if verdict not in ("trap", "legit"):
            raise ValueError("verdict must be 'trap' or 'legit'")
        host = self._hosts.get(key)
        if host is None:
            return 0
        self._touched.add(key)
        self._changed.add(key)
        closing = [k for k in host.open if rule is None or k[0] == rule]
        for k in closing:
            del host.open[k]
            (host.confirmed if verdict == "trap" else host.muted)[k] = now
        return len(closing)

    def allow(self, entry: AllowEntry) -> None:
        """Add a budget exception (kept in the snapshot)."""
        if entry.budget < 0:
            raise ValueError("budget must be >= 0")
        self._allow.append(entry)

    def budget_of(self, key: str, now: float) -> int:
        """New URLs `key` may admit per day at `now` (allowlist applied)."""
        valid = [e for e in self._allow if e.key == key and e.expires_at > now] if self._allow else None
        if not valid:
            return self.config.daily_new_urls_max
        return max(valid, key=lambda e: e.expires_at).budget

    def band_of(self, key: str) -> int | None:
        """7 while `key` has an open suspicion, else None."""
        host = self._hosts.get(key)
        return self.config.suspect_band if host is not None and host.open else None

    # ---------------------------------------------------------------- URL rules

    def _fenced(self, host: HostState, template: str, path_t: str, path: str, now: float, url: str,
                key: str) -> Verdict | None:
        """Rules 1 and 7: the URL is in the scope of a confirmed trap, or of
        an open suspicion (bar the random sample let through)."""
        family = None
        for rule, scope in host.confirmed:
            if scope.startswith(_FAMILY) and family is None:
                family = family_of(url, key, path)
            if in_scope(scope, template, path_t, path, family):
                return self._deny(Reason.TRAP, "confirmed", f"{rule} confirmed as a trap ({scope or 'host'})")
        for (rule, scope), suspect in host.open.items():
            if scope.startswith(_FAMILY) and family is None:
                family = family_of(url, key, path)
            if scope and in_scope(scope, template, path_t, path, family):
                if self.rng.random() >= self.config.suspect_sample_share:
                    return self._deny(Reason.TRAP, "suspect", f"{rule} ({scope}) under review since {suspect.since:.0f}")
        return None

    def _structural(self, key: str, host: HostState, url: str, split: list[str], stripped: str | None,
                    now: float) -> Verdict | None:
        """Rules 3-5; `split` is the path split on "/", `stripped` its `without_session`."""
        found = structural(host, split, stripped, self.config)
        return None if found is None else self._trap(key, host, *found[:2], url, found[2], now)

    def _trap(self, key: str, host: HostState, rule: str, scope: str, url: str, detail: str, now: float) -> Verdict:
        self._open(key, host, rule, scope, f"{detail}; e.g. {url}", now)
        return self._deny(Reason.TRAP, rule, detail)

    @staticmethod
    def _deny(reason: Reason, rule: str, detail: str) -> Verdict:
        return Verdict(False, None, reason, rule, detail)

    # ---------------------------------------------------------------- counting

    def _admit(self, host: HostState, stripped: str | None) -> None:
        host.day_new += 1
        host.new_total += 1
        host.new_since_fetch += 1
        if stripped is not None and len(host.session_keys) < self.config.session_keys_max:
            host.session_keys.add(key64(stripped))

    def _count_template(
        self, key: str, host: HostState, url: str, template: str, path_t: str, path: str, query: str, now: float
    ) -> bool:
        """Count a discovered URL; True when a host rule fired on it."""
        cfg = self.config
        stats = host.templates.get(template)
        if stats is None:
            stats = host.templates[template] = TemplateStats(sample=url)
            self._templates += 1
        stats.urls += 1
        fired = False
        year_max = year_of(now) + cfg.future_years_max
        if dates_out_of_range(path, query, cfg.year_min, year_max):
            stats.bad_dates += 1
            if stats.bad_dates >= cfg.calendar_urls_min:
                fired |= self._open(key, host, "calendar", "template:" + template,
                                    f"{stats.bad_dates} URLs of {template} with dates outside "
                                    f"{cfg.year_min}..{year_max}; e.g. {url}", now)
        if query:
            shapes = host.shapes.setdefault(path_t, set())
            if len(shapes) <= cfg.query_shapes_max:
                shapes.add(query_shape(query))
                if len(shapes) > cfg.query_shapes_max:
                    fired |= self._open(key, host, "query_combinations", path_t,
                                        f"more than {cfg.query_shapes_max} parameter combinations on "
                                        f"{path_t[5:]}; e.g. {url}", now)
        return self._check_template(key, host, template, stats, now) or fired

    def _template_key(self, host: HostState, template: str) -> str:
        if template in host.templates:
            return template
        cfg = self.config
        if len(host.templates) < cfg.templates_max and self._templates < cfg.templates_total_max:
            return template
        return _OVERFLOW

    # ---------------------------------------------------------------- yield (core/urlyield)

    def _family(self, host: HostState, family: str) -> FamilyYield:
        fam = host.families.get(family)
        if fam is None:
            cfg = self.config
            if len(host.families) >= cfg.families_max or self._families >= cfg.families_total_max:
                family = _OVERFLOW
                fam = host.families.get(family)
            if fam is None:
                fam = host.families[family] = FamilyYield()
                self._families += 1
        return fam

    def _note_family_url(self, key: str, host: HostState, url: str, path: str, query: str,
                         credit: bool = True) -> FamilyYield | None:
        """Count an admitted URL in its family; a URL outside the family of
        the page just fetched on this key is that page's yield."""
        if not self.config.yield_rule.enabled:
            return None
        family = family_of(url, key, path)
        fam = self._family(host, family)
        fam.note_url(url, query)
        last = host.last_family
        if credit and last is not None and last != family and self._last_key == key:
            source = host.families.get(last)
            if source is not None:
                source.credit()
        return fam

    def _note_family_fetch(self, key: str, host: HostState, url: str, outcome: Outcome, fp: int | None,
                           now: float) -> None:
        rule = self.config.yield_rule
        self._last_key = key
        if not rule.enabled:
            return
        path, _ = path_query(url)
        family = family_of(url, key, path)
        fam = self._family(host, family)
        host.last_family = family if family in host.families else _OVERFLOW
        fam.note_fetch(outcome, fp, rule)
        scope = _FAMILY + family
        if ("yield", scope) in host.muted:
            fam.state = FamilyState.OK   # a reviewer said legit
            return
        state = judge(fam, rule)
        if state is FamilyState.SUSPENDED and fam.state is not FamilyState.SUSPENDED:
            self._open(key, host, "yield", scope, evidence(family, fam, rule), now)
        fam.state = state

    # ---------------------------------------------------------------- host rules

    def _check_template(self, key: str, host: HostState, template: str, stats: TemplateStats, now: float) -> bool:
        why = template_evidence(host, template, stats, self.config)
        return why is not None and self._open(key, host, "template", "template:" + template, why, now)

    def _check_near_dup(self, key: str, host: HostState, now: float) -> None:
        why = near_dup_evidence(host, self.config)
        if why is not None:
            self._open(key, host, "near_dup", HOST_SCOPE, why, now)

    def _check_rate(self, key: str, host: HostState, now: float) -> None:
        why = rate_evidence(host, self.config)
        if why is not None:
            self._open(key, host, "rate", HOST_SCOPE, why, now)

    def _open(self, key: str, host: HostState, rule: str, scope: str, evidence: str, now: float) -> bool:
        """Open a suspicion unless it is open, muted or confirmed already."""
        k = (rule, scope)
        if k in host.open or k in host.muted or k in host.confirmed:
            return False
        host.open[k] = Suspect(key, rule, evidence, now, scope)
        return True

    # ---------------------------------------------------------------- hosts

    def _host(self, key: str, now: float) -> HostState:
        """`key`'s state, made most recently used; the caller may change it."""
        self._touched.add(key)
        self._changed.add(key)
        host = self._hosts.pop(key, None)
        if host is None:
            host = HostState()
            if len(self._hosts) >= self.config.hosts_max:
                self._evict()
        self._hosts[key] = host  # most recently used last
        day = int(now // DAY_S)
        if day != host.day:
            host.day, host.day_new = day, 0
        return host

    def _evict(self) -> None:
        """Drop the oldest host with nothing to keep, else the oldest."""
        self._drop(next((k for k, h in self._hosts.items() if not h.kept()), next(iter(self._hosts))))

    def _drop(self, key: str) -> None:
        host = self._hosts.pop(key)
        self._changed.discard(key)      # bounded by the hosts held (one machine never takes it)
        self._templates -= len(host.templates)
        self._families -= len(host.families)

    # ---------------------------------------------------------------- persistence

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": 1,
            "allow": self._allow_rows(),
            "hosts": {key: host_to_json(h) for key, h in self._hosts.items()},
        }

    def _allow_rows(self) -> list[list[Any]]:
        return [[e.key, e.budget, e.owner, e.expires_at] for e in self._allow if e not in self.config.allowlist]

    def snapshot_json(self) -> str:
        """``json.dumps(self.snapshot())``, the same text, at the cost of the
        hosts touched since the last call (the others' text is kept)."""
        texts = self._host_texts
        for key in self._touched:
            host = self._hosts.get(key)
            if host is not None:
                texts[key] = json.dumps(key) + ": " + json.dumps(host_to_json(host))
        self._touched.clear()
        if len(texts) > len(self._hosts):   # evicted hosts
            self._host_texts = texts = {k: t for k, t in texts.items() if k in self._hosts}
        head = json.dumps({"version": 1, "allow": self._allow_rows(), "hosts": {}})   # ends '"hosts": {}}'
        return head[:-2] + ", ".join([texts[k] for k in self._hosts]) + "}}"

    def changed_rows(self) -> dict[str, str]:
        """key -> its host's JSON (a row of `snapshot()["hosts"]`), for the keys
        changed here since the last call (a worker's save into shared rows:
        runtime/shared_defence). Hosts taken by `adopt` came from those rows."""
        rows = {k: json.dumps(host_to_json(self._hosts[k])) for k in self._changed if k in self._hosts}
        self._changed.clear()
        return rows

    def allow_json(self) -> str:
        """`snapshot()["allow"]` as JSON."""
        return json.dumps(self._allow_rows())

    @classmethod
    def restore(cls, data: dict[str, Any], config: TrapConfig | None = None,
                rng: random.Random | None = None) -> TrapGuard:
        if data.get("version") != 1:
            raise ValueError("unknown TrapGuard snapshot version")
        guard = cls(config, rng)
        for key, budget, owner, expires_at in data["allow"]:
            guard._allow.append(AllowEntry(str(key), int(budget), str(owner), float(expires_at)))
        guard.adopt(data)
        return guard

    def adopt(self, data: dict[str, Any]) -> int:
        """Take the hosts of a snapshot (a partition taken over) this guard does
        not hold, its own being newer, within `hosts_max`; how many."""
        if data.get("version") != 1:
            raise ValueError("unknown TrapGuard snapshot version")
        new = [(key, h) for key, h in data["hosts"].items() if key not in self._hosts]
        for key, h in new:
            if len(self._hosts) >= self.config.hosts_max:
                self._evict()
            self._hosts[key] = host = host_from_json(key, h, self.config)
            self._templates += len(host.templates)
            self._families += len(host.families)
            self._touched.add(key)
        return len(new)

    def forget(self, keys: Callable[[str], bool]) -> int:
        """Drop the hosts of the keys selected (a partition lost); how many."""
        gone = [k for k in self._hosts if keys(k)]
        for key in gone:
            self._drop(key)
        return len(gone)
