"""Rendering in the crawl: which fetched pages go to the browser, under which
rules its subrequests go out, and what is kept.

What it owns: the render stage after a page's raw extraction
(`PageRenders.after_extract`), the gate every subrequest of a render passes
(`SubrequestGate`), the records and flags a render leaves, and the render
figures (`RenderStats`) that the status page and the report read.

How it works
------------
* The raw fetch always comes first and stays the record of what the server
  said. After its links are queued, core/render_policy decides (HTML? a
  shell? band? budget?). A shell parsed raw because the budget or the render
  queue ran out gets the flag `render_budget`; `courtly report` counts them.
* A render's subrequests never leave the browser on their own
  (shell/render.py): each comes here. In order: GET or HEAD only; images,
  fonts and media only with `render.images`; at most `subrequests_max` a
  render; the URL normalised; not purged; resolved and checked against the
  network policy by the crawl's resolver (invariant 4); robots.txt of its
  origin obeyed (fetched first if need be, as for a page); then it waits for
  its key's and its IP's turn unless that turn falls after the render's
  deadline (then it is dropped), and goes out through the crawl's own
  `request` (the same fetcher, the same politeness state: invariants 1 and 2
  hold for subrequests because they are the same requests). Its exchange is
  written to WARC (fetch kind `render-subrequest`) and fulfilled into the
  page. A refused subrequest is aborted in the browser and flagged
  `render_blocked` with its reason.
* A rendered DOM is written as a WARC `conversion` record that refers to the
  page's response record; its links are extracted in the sandboxed pool, and
  those the raw page did not have are queued (flag `render_link`, the page
  that revealed them as detail). The page counts as fetched in the store only
  after its render, so a crash re-fetches and re-renders it.
* A page whose render crashed or hung the browser twice is a dead letter and
  is not rendered again.

Rules: a subrequest in flight is never cancelled (politeness counts it until
it completes); every wait is bounded by the render deadline; every refusal
has a reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from courtly import __version__
from courtly.config import Config
from courtly.core.intent import profile_of
from courtly.core.render import RenderOutcome, SubResponse, is_media
from courtly.core.render_policy import RenderBudget, RenderChoice, RenderPolicy, ShellTest
from courtly.core.robots import RobotsState
from courtly.core.types import Reason, UrlItem
from courtly.core.urls import UrlError, normalize_url, origin_text_of_normalized, politeness_key, split_origin
from courtly.ports import FetchKind, ResolveFailed
from courtly.runtime.requests import path_of
from courtly.runtime.takedown import PurgedNow

__all__ = ["PageRenders", "RenderStats", "RenderRefusal", "page_renders", "STRIKES_MAX"]

log = logging.getLogger("courtly")

STRIKES_MAX = 2            # renders that crashed or hung the browser before a page is a dead letter
REFUSALS_FLAGGED_MAX = 50  # refused subrequests flagged per render (the rest are counted)
RENDER_S_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class RenderRefusal:
    """Reasons a subrequest is refused beyond the crawl's own `Reason`s."""

    METHOD = "method"
    MEDIA = "media"
    TOO_MANY = "subrequests_max"
    DEADLINE = "deadline"
    ROBOTS_PENDING = "robots_pending"
    STOPPING = "stopping"
    NETWORK = "network"


@dataclass(slots=True)
class RenderStats:
    renders: int = 0                  # renders that produced a DOM
    attempts: int = 0                 # renders started
    outcomes: dict[str, int] = field(default_factory=dict)
    budget_raw: int = 0               # shells parsed raw: budget or queue ran out
    links_added: int = 0              # links queued that only the rendered DOM had
    subrequests: int = 0              # subrequests sent
    blocked: dict[str, int] = field(default_factory=dict)   # refused subrequests by reason
    dead_letters: int = 0
    render_s_sum: float = 0.0
    render_s_buckets: list[int] = field(default_factory=lambda: [0] * (len(RENDER_S_BUCKETS) + 1))

    def observe(self, seconds: float) -> None:
        self.render_s_sum += seconds
        i = next((i for i, b in enumerate(RENDER_S_BUCKETS) if seconds <= b), len(RENDER_S_BUCKETS))
        self.render_s_buckets[i] += 1


def page_renders(cfg: Config, crawler, renderer) -> "PageRenders | None":
    """The render stage for `crawler` with `renderer` (shell/render's
    ChromiumRenderer, built by runtime/wiring), or None: rendering is off, or
    it cannot run here (then the crawl says why, once, and parses every page raw)."""
    if not cfg.render.enabled:
        return None
    why = renderer.available()
    if why:
        log.warning("rendering is off for this crawl: %s; every page is parsed raw", why)
        return None
    return PageRenders(crawler, renderer, cfg)


class PageRenders:
    def __init__(self, crawler, renderer, cfg: Config) -> None:
        r = cfg.render
        self.c = crawler
        self.cfg = r
        self.renderer = renderer
        self.policy = RenderPolicy(
            ShellTest(text_chars_max=r.text_chars_max, script_share_min=r.script_share_min, roots=r.roots),
            RenderBudget(r.share_max, r.burst), band_max=r.band_max, enabled=True)
        self.stats = RenderStats()
        self.discovers = profile_of(cfg.crawl.intent).discovers
        self.waiting_max = r.queue_max + r.contexts_max   # waiting for a context, and rendering
        self._active = 0                 # renders waiting for or holding a context
        self._strikes: OrderedDict[str, int] = OrderedDict()

    async def close(self) -> None:
        await self.renderer.close()

    def snapshot(self) -> dict:
        """The `render` part of the status snapshot (shell/metrics: courtly_render*)."""
        s = self.stats
        counts, running = [], 0
        for n in s.render_s_buckets:
            running += n
            counts.append(running)
        return {"outcomes": dict(s.outcomes), "budget_used": self.policy.budget.used, "budget_raw": s.budget_raw,
                "links_added": s.links_added, "subrequests": s.subrequests, "blocked": dict(s.blocked),
                "restarts": dict(self.renderer.restart_reasons),
                "render_s": {"le": list(RENDER_S_BUCKETS), "counts": counts, "sum": s.render_s_sum,
                             "count": running}}

    # ---- after a page's raw extraction ---------------------------------------------

    async def after_extract(self, item: UrlItem, result, content_type: str, page, record_id: str) -> None:
        """Render `item`'s page if the policy says so; queue what only the DOM links to."""
        c = self.c
        choice, sign = self.policy.decide(item.key, item.band, content_type, result.content or b"")
        if choice is RenderChoice.RENDER:
            if self._strikes.get(item.url, 0) >= STRIKES_MAX or not record_id:
                choice = RenderChoice.DEAD   # (no record id: nothing for the DOM to refer to; never here)
            elif self._active >= self.waiting_max:
                choice = RenderChoice.QUEUE_FULL
            if choice is not RenderChoice.RENDER:
                self.policy.budget.returned(item.key)
        if choice.budget_ran_out:
            self.stats.budget_raw += 1
            c.batch.flags.append((item.url, c.clock.now(), "render_budget", str(choice)))
            return
        if choice is not RenderChoice.RENDER:
            return
        self._active += 1
        try:
            await self._render(item, result, page, record_id, str(sign))
        finally:
            self._active -= 1

    async def _render(self, item: UrlItem, result, page, record_id: str, sign: str) -> None:
        c = self.c
        self.stats.attempts += 1
        gate = SubrequestGate(self, item.url)
        document = SubResponse(result.status, tuple((result.headers or {}).items()), result.content or b"")
        rendered = await self.renderer.render(item.url, document, gate)
        now = c.clock.now()
        outcome = str(rendered.outcome)
        self.stats.outcomes[outcome] = self.stats.outcomes.get(outcome, 0) + 1
        self.stats.observe(rendered.elapsed_s)
        if rendered.outcome in (RenderOutcome.CRASHED, RenderOutcome.HUNG):
            self._strike(item.url, now, rendered.detail)
        if rendered.outcome is not RenderOutcome.RENDERED:
            c.batch.flags.append((item.url, now, "render_failed", f"{outcome}: {rendered.detail}"[:500]))
            return
        self.stats.renders += 1
        c.warc.write_conversion(
            url=item.url, fetched_at=now, body=rendered.dom,
            content_type="text/html; charset=utf-8", refers_to_record_id=record_id,
            refers_to_uri=item.url, refers_to_date=result.started_at,
            metadata={"software": f"courtly/{__version__}", "conversion": "rendered-dom",
                      "render-shell-sign": sign, "render-subrequests": str(gate.sent),
                      "render-refused": str(gate.refused)})
        xrt = result.headers.get("x-robots-tag", "") if result.headers else ""   # the page's header still applies
        added = await self._queue_new_links(item, page, rendered.dom, xrt, now)
        c.batch.flags.append((item.url, now, "rendered", f"{sign}: {added} new links, {gate.sent} subrequests"))

    async def _queue_new_links(self, item: UrlItem, raw_page, dom: bytes, xrt: str, now: float) -> int:
        c = self.c
        if not self.discovers:
            return 0   # a watch list discovers nothing
        page = await c.extractor.submit(dom, item.url, "text/html; charset=utf-8", xrt)
        if not hasattr(page, "links"):
            return 0
        known = {link.url for link in raw_page.links}
        added = 0
        depth = item.depth + 1
        for link in page.links:
            if link.url in known:
                continue
            known.add(link.url)
            if page.nofollow or link.nofollow:
                c.admission.admit_link(page, link, item, now, depth, False)   # records the nofollow decision
            elif c.admission.admit(link.url, via=item.url, band=4, depth=depth, now=now):
                added += 1
                c.batch.flags.append((link.url, now, "render_link", item.url))
        self.stats.links_added += added
        return added

    def _strike(self, url: str, now: float, detail: str) -> None:
        strikes = self._strikes.pop(url, 0) + 1
        self._strikes[url] = strikes
        if len(self._strikes) > 10_000:
            self._strikes.popitem(last=False)
        if strikes == STRIKES_MAX:
            self.stats.dead_letters += 1
            self.c.batch.dead_letters.append((url, now, f"render: the page crashed or hung the browser "
                                                        f"{strikes} times ({detail})"[:500]))


class SubrequestGate:
    """One render's subrequests under the crawl's rules (see the module doc)."""

    def __init__(self, renders: PageRenders, page_url: str) -> None:
        self.r = renders
        self.page_url = page_url
        self.handed = 0
        self.sent = 0
        self.refused = 0

    async def __call__(self, req):
        cfg = self.r.cfg
        self.handed += 1
        if req.method not in ("GET", "HEAD"):
            return self._refuse(req.url, RenderRefusal.METHOD)
        if not cfg.images and is_media(req.resource_type):
            return self._refuse(req.url, RenderRefusal.MEDIA)
        if self.handed > cfg.subrequests_max:
            return self._refuse(req.url, RenderRefusal.TOO_MANY)
        try:
            url = normalize_url(req.url, self.r.c.rules)
        except UrlError as e:
            return self._refuse(req.url, str(e.reason))
        # shielded: a render that ends (deadline, page closed) never cancels a request on the wire
        # the render's deadline runs from when the browser took it up, not from when it was queued
        task = asyncio.ensure_future(self._checked_fetch(url, req.deadline_at))
        return await asyncio.shield(task)

    async def _checked_fetch(self, url: str, deadline_at: float):
        c = self.r.c
        if c.takedowns.match(url) is not None:
            return self._refuse(url, str(Reason.PURGED))
        host = split_origin(url).host
        key = politeness_key(host, c.cfg.crawl.politeness_key)
        try:
            ip = (await c.resolver.resolve(host))[0]
        except ResolveFailed as e:
            return self._refuse(url, str(e.reason))
        refusal = await self._robots(url, key)
        if refusal:
            return self._refuse(url, refusal)
        if not await self._wait_for_turn(key, ip, deadline_at):
            return self._refuse(url, RenderRefusal.STOPPING if c.stopping else RenderRefusal.DEADLINE)
        try:
            result = await c.requests.request(url, key, ip, None, {})
        except PurgedNow:
            return self._refuse(url, str(Reason.PURGED))
        if result is None:
            return self._refuse(url, RenderRefusal.STOPPING)
        self.sent += 1
        self.r.stats.subrequests += 1
        c.results.archive(url, result, kind=FetchKind.RENDER_SUBREQUEST, meta={"rendered-for": self.page_url})
        if not result.status:
            return self._refuse(url, RenderRefusal.NETWORK)
        return SubResponse(result.status, tuple((result.headers or {}).items()), result.content or b"")

    async def _robots(self, url: str, key: str) -> str:
        """'' when robots.txt of `url`'s origin allows it, else the refusal reason."""
        c = self.r.c
        origin = origin_text_of_normalized(url)
        view = c.robots.lookup(origin, c.clock.now())
        if view.state is RobotsState.NEED_FETCH:
            if not await c.requests.fetch_robots(origin, key, None):
                return RenderRefusal.STOPPING
            view = c.robots.lookup(origin, c.clock.now())
        if view.state is not RobotsState.READY:
            return RenderRefusal.ROBOTS_PENDING   # another task is fetching it: not worth the render's wait
        reason = view.skip_reason(c.token, path_of(url))
        return str(reason) if reason is not None else ""

    async def _wait_for_turn(self, key: str, ip: str, deadline_at: float) -> bool:
        """Sleep until the key's and the IP's next turn; False when that turn
        falls after the render's deadline or the crawl stops. (`request`
        still checks both, and waits for the rare request that took the turn.)"""
        c = self.r.c
        for _ in range(1000):
            if c.stopping:
                return False
            now = c.clock.now()
            ready = max(c.politeness.ready_at(key, now), c.politeness.ip_ready_at(ip, now, key) or now)
            if ready > deadline_at:
                return False
            if ready <= now:
                return True
            await c.pause_until(ready)
        return False

    def _refuse(self, url: str, reason: str) -> str:
        c = self.r.c
        self.refused += 1
        blocked = self.r.stats.blocked
        blocked[reason] = blocked.get(reason, 0) + 1
        if self.refused <= REFUSALS_FLAGGED_MAX:
            c.batch.flags.append((url[:4096], c.clock.now(), "render_blocked", f"{reason}: {self.page_url}"))
        return reason
