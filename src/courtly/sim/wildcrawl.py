"""A crawl of one `WildSite` through the trap guard, judged from the site's
own request log: how many requests its traps cost, when the host entered the
review queue, how much of the real site was fetched.

What it owns: `crawl_wild(site, config, requests_max)`, the loop the runtime
runs for one politeness key, in miniature and on a virtual clock (one
request per second): `check_queued` before a request, the page's main text
and SimHash judged the way `runtime.budget.BudgetDefence` does (exact
duplicates by body, near-duplicates per host name), `note_fetch` with the
outcome, then `check_new_url` for every new normalised link on the key.
Admitted URLs at band 6-7 (a suspect host, a slowed family) wait behind the
others, as the frontier serves bands. Every request goes into the log with
the site's own tag, so the figures do not trust the guard's account.

Used by tests/core/test_traps_wild.py and bench/traps_wild.py (before and
after: the same crawl with the yield rule off is the guard of before).
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from dataclasses import dataclass, field

from courtly.core.fingerprint import NearDupIndex, simhash64
from courtly.core.maintext import main_text
from courtly.core.trap_state import Suspect, TrapConfig
from courtly.core.traps import TrapGuard
from courtly.core.urls import NormalizeRules, UrlError, host_of_normalized, normalize_url, resolve_url
from courtly.core.urlyield import Outcome
from courtly.sim.wildtrap import WildSite

__all__ = ["WildCrawl", "crawl_wild", "START_AT"]

START_AT = 1_764_547_200.0   # 2025-12-01: the calendar's months are all inside the date window


@dataclass(slots=True)
class WildCrawl:
    log: list[tuple[str, str]] = field(default_factory=list)   # (url, tag) of every request, in order
    suspects: list[Suspect] = field(default_factory=list)
    review_at: int | None = None       # requests made when the key first entered the review queue
    denied: dict[str, int] = field(default_factory=dict)       # rule -> URLs denied
    low_band: int = 0                  # URLs admitted at band 6-7 (a suspect host, a slowed family)

    def count(self, tag: str) -> int:
        return sum(1 for _, t in self.log if t == tag)


def crawl_wild(site: WildSite, config: TrapConfig | None = None, requests_max: int = 3000,
               seed: int = 1) -> WildCrawl:
    key = site.domain
    guard = TrapGuard(config or TrapConfig(), random.Random(seed))
    near = NearDupIndex(3)
    bodies: set[bytes] = set()
    rules = NormalizeRules()
    start = f"http://{key}/"
    queues: tuple[deque[str], deque[str]] = (deque([start]), deque())   # normal bands, then 6-7
    seen = {start}
    out = WildCrawl()
    guard.note_discovered(key, start, START_AT)
    while len(out.log) < requests_max and (queues[0] or queues[1]):
        url = (queues[0] or queues[1]).popleft()
        now = START_AT + len(out.log)
        verdict = guard.check_queued(key, url, now)
        if not verdict.allowed:
            out.denied[verdict.rule] = out.denied.get(verdict.rule, 0) + 1
            continue
        host = host_of_normalized(url)
        target = url[url.index("/", url.index("//") + 2):]
        page = site.page(host, target)
        out.log.append((url, page.tag))
        if page.status != 200:
            continue
        digest = hashlib.sha1(page.html).digest()
        if digest in bodies:
            guard.note_fetch(key, url, False, now, outcome=Outcome.EXACT_DUP)
            continue
        bodies.add(digest)
        fp = simhash64(main_text(page.html, "text/html"))
        dup = bool(fp) and bool(near.find(fp, scope=host, limit=1))
        if fp:
            near.add(url, fp, host)
        guard.note_fetch(key, url, dup, now, outcome=None if fp else Outcome.EMPTY, fp=fp or None)
        for href in page.links:
            try:
                link = normalize_url(resolve_url(url, href), rules)
            except UrlError:
                continue
            if link in seen or not (host_of_normalized(link) + "/").endswith(key + "/"):
                continue
            seen.add(link)
            v = guard.check_new_url(key, link, 1, now)
            if v.allowed:
                low = v.band is not None and v.band >= 6
                out.low_band += low
                queues[low].append(link)
            else:
                out.denied[v.rule] = out.denied.get(v.rule, 0) + 1
        if out.review_at is None and guard.suspects():
            out.review_at = len(out.log)
    out.suspects = guard.suspects()
    return out
