"""Recrawl in the running crawl: the scheduler fed by real fetches.

What it owns: one `RecrawlScheduler` (core/recrawl) for the `search` and
`monitor` intents (`archive` recrawls nothing), the persistence of each URL's
change history, and the period clock that asks the scheduler for a plan.

How it works: every fetched page is tracked. Its tier is the one its
depth asks for (seeds and their links are the top tiers), or the one the
operator's importance asks for (`recrawl.importance_file`, used as given:
a tenfold step down is a tier down), as far as the budget can keep the
tiers' max ages (runtime/recrawl_tiers.py: a tier holds the pages whose
forced refetches fit its share of the budget, the least important move
down). Each answer updates its history (content
hash, ETag, Last-Modified; a 304 is "unchanged") and so its estimated change
rate. Every `period_s` the scheduler grants the URLs worth refetching within
the daily budget, which covers discovery too: the discovery fetches answered
since the last plan are charged to it first (any answer to a URL that was not
a granted recrawl is discovery), the discovery floor is kept free when
discovery has work, and what the floor held back unused flows back;
they enter the frontier as `recrawl` items, which politeness treats like any
other, and are fetched with If-None-Match / If-Modified-Since. Sitemap and
feed entries newer than a URL's last fetch make it due early.

A crash loses only the recrawls in flight: histories are in the store and
the scheduler re-plans from them.
"""

from __future__ import annotations

import json
from collections import deque

from courtly.core.importance import Opic
from courtly.core.hints import Hint, parse_feed, parse_sitemap, raise_priority
from courtly.core.recrawl import ChangeHistory, RecrawlScheduler, Tier, conditional_headers, policy_for_intent
from courtly.runtime.recrawl_tiers import TierPlacer, importance_tier

__all__ = ["Recrawl", "history_to_json", "history_from_json", "period_row", "XML_TYPES", "PERIODS_KEPT",
           "DUPLICATE_WEIGHT"]

XML_TYPES = ("application/xml", "text/xml", "application/rss+xml", "application/atom+xml",
             "application/x-gzip", "application/gzip")
DUPLICATE_WEIGHT = 1e-3   # a near-duplicate's share of its importance: its canonical carries the rest
PERIODS_KEPT = 288   # per-period budget rows kept for `courtly report` (a day of 5-minute periods)


def period_row(plan) -> dict:
    """One period of the budget (a `RecrawlPlan`): granted, spent, left, and why
    any was left. `left` is the period's budget that neither the discovery
    fetches charged to it nor the recrawls granted took."""
    granted = len(plan.urls)
    left = max(0, plan.budget - plan.discovery_spent - granted)
    if plan.backlog_s > 0:
        why = "budget: due recrawls left waiting"
    elif left and plan.recrawl_budget > granted:
        why = "nothing due: every known page is inside its minimum interval or fresh enough"
    elif left:
        why = "discovery floor held back"
    else:
        why = "all spent"
    return {"at": plan.at, "budget": plan.budget, "recrawl_budget": plan.recrawl_budget, "granted": granted,
            "discovery_spent": plan.discovery_spent, "flowed_back": plan.flowed_back, "left": left, "why": why}


def history_to_json(h: ChangeHistory) -> str:
    return json.dumps({
        "n": h.history_max, "f": h.last_fetched_at, "c": h.last_changed_at, "h": h.content_hash,
        "e": h.etag, "m": h.last_modified, "fe": h.fetches, "ch": h.changes, "fa": h.failures,
        "i": list(h.intervals), "x": [bool(x) for x in h.changed], "o": list(h.older), "oa": h.older_at,
        "p": h.capture,
    })


def history_from_json(text: str) -> ChangeHistory:
    d = json.loads(text)
    return ChangeHistory(
        history_max=d["n"], last_fetched_at=d["f"], last_changed_at=d["c"], content_hash=d["h"],
        etag=d["e"], last_modified=d["m"], fetches=d["fe"], changes=d["ch"], failures=d["fa"],
        intervals=deque(d["i"], maxlen=d["n"]), changed=deque(d["x"], maxlen=d["n"]),
        older=tuple(d["o"]), older_at=d["oa"], capture=tuple(d["p"]) if d.get("p") else None,
    )


class Recrawl:
    def __init__(self, cfg, rng) -> None:
        r = cfg.recrawl
        self.intent = cfg.crawl.intent
        self.enabled = self.intent != "archive"
        self.period_s = r.period_s
        tiers = tuple(Tier(t.name, t.interval_s_min, t.interval_s_max) for t in r.tiers)
        overrides = {"period_s": r.period_s}
        if tiers:
            overrides["tiers"] = tiers
        self.scheduler = (RecrawlScheduler(policy_for_intent(self.intent, r.daily_budget, **overrides), rng)
                          if self.enabled else None)
        self.tier_count = len(self.scheduler.policy.tiers) if self.scheduler is not None else 1
        # importance = the operator's map where it names the URL (as given: blending it with
        # OPIC flattened it), online OPIC over the link graph elsewhere
        user = load_importance(r.importance_file) if self.enabled else {}
        top = max(user.values(), default=1.0)
        self._user = {u: v / top for u, v in user.items()}
        self.opic = (Opic(user_map=user, user_weight=1.0, prior_rounds=r.importance_prior_rounds)
                     if self.enabled and r.importance == "opic" else None)
        self.placer = (TierPlacer([t.interval_s_max for t in self.scheduler.policy.tiers], r.daily_budget,
                                  r.tier_budget_share)
                       if self.enabled and self.tier_count > 1 else None)
        self.next_plan_at = 0.0
        self._depth: dict[str, int] = {}
        self.granted = 0
        self.hinted = 0
        self._duplicates: set[str] = set()    # tracked URLs judged copies of another (`judged`; at most the tracked)
        self._outstanding: set[str] = set()   # granted recrawls not answered yet (bounded by the grants)
        self.discovery_fetched = 0            # answers to URLs that were not granted recrawls, in all
        self._discovery_since_plan = 0
        self.last_plan = None                 # the scheduler's last RecrawlPlan
        self.periods: deque[dict] = deque(maxlen=PERIODS_KEPT)   # `period_row`s, oldest first

    # ---- persistence ----------------------------------------------------------

    def load(self, store, now: float) -> None:
        if not self.enabled:
            return
        for url, host, _saved_tier, depth, text in store.iter_histories():
            self.scheduler.add(url, now, host=host, tier=self._place(url, depth, now),
                               importance=self._importance(url), history=history_from_json(text))
            self._depth[url] = depth
        report = store.get_meta("recrawl_report")
        self._saved_report = json.loads(report) if report else []
        periods = store.get_meta("recrawl_periods")
        self.periods.extend(json.loads(periods) if periods else [])

    def save(self, batch) -> None:
        if self.enabled:
            batch.meta["recrawl_report"] = json.dumps(self.report_rows())
            batch.meta["recrawl_periods"] = json.dumps(list(self.periods))

    def report_rows(self) -> list[dict]:
        if not self.enabled:
            return []
        return [{"day": r.day, "tier": r.tier, "allocated": r.allocated, "forced": r.forced,
                 "hinted": r.hinted, "denied_budget": r.denied_budget,
                 "denied_min_interval": r.denied_min_interval, "age_p50_s": r.age_p50_s,
                 "age_p90_s": r.age_p90_s} for r in self.scheduler.report()]

    # ---- fetches --------------------------------------------------------------

    def tier_of(self, depth: int) -> int:
        return min(depth, self.tier_count - 1)

    def wanted_tier(self, url: str, depth: int) -> int:
        """The tier a URL asks for: the operator's importance's, else its depth's."""
        w = self._user.get(url)
        return self.tier_of(depth) if w is None else importance_tier(w, self.tier_count)

    def _place(self, url: str, depth: int, now: float) -> int:
        """The tier of a URL seen for the first time; URLs it pushes down get theirs."""
        wanted = self.wanted_tier(url, depth)
        if self.placer is None:
            return wanted
        tier = wanted
        for u, t, w in self.placer.place(url, wanted, self._importance(url)):
            if u == url:
                tier = t
            elif u in self.scheduler:
                self.scheduler.add(u, now, host="", tier=t, importance=w)
        return tier

    def _tier(self, url: str, depth: int) -> int:
        if self.placer is None:
            return self.tier_of(depth)
        t = self.placer.tier(url)
        return self.tier_count - 1 if t is None else t

    def headers(self, url: str) -> dict[str, str]:
        """Validators for a conditional GET when we have fetched `url` before."""
        if not self.enabled or url not in self.scheduler:
            return {}
        return conditional_headers(self.scheduler.history(url))

    def last_capture(self, url: str) -> tuple[str, float] | None:
        """(url, fetched_at) of the WARC record holding the payload that the
        validators of `url`'s conditional GET name (`observe`'s `capture`)."""
        if not self.enabled or url not in self.scheduler:
            return None
        return self.scheduler.history(url).capture

    def fetched(self, url: str, host: str, depth: int, now: float, *, status: int, content_hash: str | None,
                etag: str | None, last_modified: str | None, batch,
                capture: tuple[str, float] | None = None) -> bool:
        """Record an answer (2xx, 304, 404/410...); returns "changed"."""
        if not self.enabled:
            return False
        if url in self._outstanding:
            self._outstanding.discard(url)
        else:
            self.discovery_fetched += 1
            self._discovery_since_plan += 1
        s = self.scheduler
        if url not in s:
            s.add(url, now, host=host, tier=self._place(url, depth, now))
            self._depth[url] = depth
        tier = self._tier(url, depth)
        if self.opic is not None or url in self._duplicates:
            s.set_importance(url, self._importance(url))
        changed = s.record_fetch(url, now, status=status, content_hash=content_hash, etag=etag,
                                 last_modified=last_modified, capture=capture)
        batch.histories[url] = (url, host, tier, depth, history_to_json(s.history(url)))
        return changed

    def judged(self, url: str, duplicate_of: str | None) -> None:
        """A fetched page is a copy of another when its bytes are another
        page's (an exact duplicate) or the budget defence found its main text
        a near-duplicate of another page's (`duplicate_of`: the first copy, or
        its cluster's canonical, rel=canonical breaking the tie). A copy weighs
        `DUPLICATE_WEIGHT` of its importance, so it waits for its tier's max
        age: its text is kept fresh through the page it copies. A copy of a
        copy is not one: of a page and its print view fetched at the same
        version, whichever comes second is the other's exact copy. A page
        judged not a copy (again) weighs in full. The page's own rel=canonical
        alone does not make it a copy: a misconfigured one (every page naming
        the home page) would starve the site."""
        if not self.enabled or url not in self.scheduler:
            return
        dup = duplicate_of is not None and duplicate_of != url and duplicate_of not in self._duplicates
        if dup == (url in self._duplicates):
            return
        if dup:
            self._duplicates.add(url)
            if len(self._duplicates) > len(self.scheduler):   # URLs the scheduler dropped since: forget them
                self._duplicates = {u for u in self._duplicates if u in self.scheduler}
        else:
            self._duplicates.discard(url)
        self.scheduler.set_importance(url, self._importance(url))

    def _importance(self, url: str) -> float:
        w = self.opic.importance(url) if self.opic is not None else 1.0
        return w * DUPLICATE_WEIGHT if url in self._duplicates else w

    def links(self, url: str, out_links: list[str]) -> None:
        """The page's (normalised) out-links: OPIC moves its cash on to them."""
        if self.opic is not None:
            self.opic.fetched(url, out_links)

    def failed(self, url: str, now: float) -> None:
        self._outstanding.discard(url)
        if self.enabled and url in self.scheduler:
            self.scheduler.record_failure(url, now)

    def released(self, url: str, now: float) -> None:
        """A granted recrawl that was not fetched (robots, trap rule, ...)."""
        self._outstanding.discard(url)
        if self.enabled and url in self.scheduler:
            self.scheduler.release(url, now)

    # ---- planning -------------------------------------------------------------

    def due(self, now: float) -> bool:
        return self.enabled and now >= self.next_plan_at

    def plan(self, now: float, discovery_pending: int) -> list[tuple[str, int]]:
        """(url, depth) of the recrawls granted for the next period."""
        self.next_plan_at = now + self.period_s
        plan = self.scheduler.plan(now, discovery_pending=discovery_pending,
                                   discovery_spent=self._discovery_since_plan)
        self._discovery_since_plan = 0
        self._outstanding.update(plan.urls)
        self.last_plan = plan
        self.periods.append(period_row(plan))
        self.granted += len(plan.urls)
        return [(u, self._depth.get(u, 0)) for u in plan.urls]

    def next_wakeup(self) -> float | None:
        return self.next_plan_at if self.enabled else None

    # ---- hints ----------------------------------------------------------------

    def hints(self, body: bytes, now: float) -> tuple[list[str], int]:
        """Read a sitemap (or index) or an RSS/Atom feed: (URLs to discover,
        hints taken). A dated entry for a page we track makes it due early when
        newer than our last fetch; everything else listed is discovery."""
        try:
            sm = parse_sitemap(body)
            if sm.kind == "sitemapindex":
                return [e.loc for e in sm.sitemaps], 0
            if sm.kind == "urlset":
                entries = [(e.loc, e.lastmod_at) for e in sm.urls]
            else:
                feed = parse_feed(body)
                entries = [(e.url, e.updated_at) for e in feed.entries]
        except ValueError:   # HintError: too big, a DTD, not XML
            return [], 0
        unknown, taken = [], 0
        for url, lastmod_at in entries:
            if self.enabled and url in self.scheduler:
                if lastmod_at is not None:
                    taken += raise_priority(self.scheduler, Hint(url, lastmod_at), now)
            else:
                unknown.append(url)
        self.hinted += taken
        return unknown, taken


def load_importance(path: str) -> dict[str, float]:
    """A user importance file: "URL<TAB or space>score" per line, # comments."""
    if not path:
        return {}
    from courtly.config import ConfigError

    out: dict[str, float] = {}
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read recrawl.importance_file {path}: {e.strerror}") from e
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            score = float(parts[1])
            if score <= 0:
                raise ValueError
        except (IndexError, ValueError):
            raise ConfigError(f"{path}:{n}: want 'URL score' with a positive score") from None
        out[parts[0]] = score
    return out
