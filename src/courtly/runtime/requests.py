"""The requests of one lease: one request under the key's and the IP's
limits (`request`), robots.txt with its redirects (`fetch_robots`), the
soft-404 probe (`_probe_soft404`), and the hooks a distributed worker
overrides (`_may_send`, `_shared_ip_slot`, `_shared_ip_done`). A mixin of
`Crawler` (runtime/crawler.py, whose module doc gives the order of the
steps); it uses the crawler's clock, politeness, robots book, resolver,
fetcher, results and batch.
"""

from __future__ import annotations

import asyncio

from courtly.core.frontier import Lease
from courtly.core.health import failure_kind
from courtly.core.hints import sitemap_locations
from courtly.core.robots import REDIRECTS_MAX, RobotsFailed, RobotsFetched
from courtly.core.types import Reason
from courtly.core.urls import UrlError, escape_raw_octets, normalize_url, politeness_key, resolve_url, split_origin
from courtly.runtime.takedown import PurgedNow

__all__ = ["LeaseRequests", "SITEMAPS_PER_ORIGIN_MAX", "path_of"]

SITEMAPS_PER_ORIGIN_MAX = 20


class LeaseRequests:
    """Requests made while serving a lease (see the module doc)."""

    async def request(self, url: str, key: str, ip: str, lease: Lease | None, headers: dict):
        """One request under the key's and the IP's limits. None if the lease was
        lost or the crawl is stopping (the URL stays queued)."""
        async with self._key_locks.hold(key):
            while True:
                if self._stopping:
                    return None
                now = self.clock.now()
                ready = self.politeness.ready_at(key, now)
                if ready > now:
                    await self.pause_until(ready)
                    continue
                ip_ready = self.politeness.ip_ready_at(ip, now, key)
                if ip_ready is None:
                    ev = self._ip_waiters.setdefault(ip, asyncio.Event())
                    ev.clear()
                    await ev.wait()
                    continue
                if ip_ready > now:
                    await self.pause_until(ip_ready)
                    continue
                if not await self._shared_ip_slot(ip, key):
                    continue    # waited for a limit shared with other workers: check again
                break
            if not self._may_send(key, lease, now):
                self._shared_ip_done(ip, key, now)
                return None
            purge = self.takedowns.match(url)   # the last check before the request leaves
            if purge is not None:
                self._shared_ip_done(ip, key, now)
                raise PurgedNow(purge)
            self._in_flight[url] = self._in_flight.get(url, 0) + 1
            self.politeness.started(key, now)
            ip_token = self.politeness.ip_started(ip, now, key)
            self.stats.in_flight += 1
            for o in self.observers:
                o.on_request(url, ip)
            try:
                result = await self.fetcher.fetch(url, ip=ip, headers=headers)
            finally:
                n = self._in_flight.pop(url, 1) - 1
                if n > 0:
                    self._in_flight[url] = n
                self.stats.in_flight -= 1
                done = self.clock.now()
                # the window is measured from completion: it bounds when it arrived
                self.politeness.ip_finished(ip, ip_token, done)
                self._shared_ip_done(ip, key, done)
                ev = self._ip_waiters.pop(ip, None)   # its waiters look again; a map of waited-on IPs only
                if ev is not None:
                    ev.set()
            for o in self.observers:
                o.on_response(result)
            ban = self.bans.answered(key, url, result.status, result.content or result.body or b"")
            self.politeness.finished(
                key, done, response_s=result.elapsed_s, status=result.status,
                retry_after=result.headers.get("retry-after") if result.headers else None,
                error=result.error, ip=ip, ban=ban,
            )
            kind = "ban" if ban else failure_kind(result.status, result.error)
            if kind is not None:
                self.stats.host_failures[kind] = self.stats.host_failures.get(kind, 0) + 1
            self.batch.hosts[key] = self.politeness.key(key).snapshot()
            if result.status in (429, 503):
                # A back-off must survive kill -9: commit now, not at the next tick
                # (what remains is the few microseconds of this synchronous step).
                self.commit()
            return result

    def _may_send(self, key: str, lease: Lease | None, now: float) -> bool:
        """The last check before a request leaves: the host batch is still ours."""
        return lease is None or self.frontier.renew(lease.lease_id, now)

    async def _shared_ip_slot(self, ip: str, key: str) -> bool:
        """A request slot on `ip` under limits shared with other workers: True
        when held, False after a wait (the caller checks everything again)."""
        return True

    def _shared_ip_done(self, ip: str, key: str, now: float) -> None:
        """The request that held the shared slot on `ip` is over at `now`."""

    async def _probe_soft404(self, origin: str, rules, key: str, ip: str, lease: Lease) -> bool:
        """Ask the host once for a path that cannot exist; remember its error answer."""
        url = self.budget.probe_url(origin)
        now = self.clock.now()
        if not rules.allowed(self.token, path_of(url)):
            self.budget.record_probe(origin, url, 404, b"", "", now)  # may not ask: assume honest
            return True
        try:
            result = await self.request(url, key, ip, lease, {})
        except PurgedNow:
            self.budget.record_probe(origin, url, 404, b"", "", self.clock.now())  # may not ask
            return True
        if result is None:
            return False
        self.stats.probes_fetched += 1
        self.results.archive(url, result, kind="soft404-probe", meta={"probe-origin": origin})
        ctype = result.headers.get("content-type", "") if result.headers else ""
        self.budget.record_probe(origin, url, result.status, result.content or b"", ctype, self.clock.now())
        return True

    # ---- robots.txt -----------------------------------------------------------

    async def fetch_robots(self, origin: str, key: str, lease: Lease) -> bool:
        now = self.clock.now()
        self.robots.fetch_started(origin, now)
        url = origin + "/robots.txt"
        hops = 0
        outcome = None
        while outcome is None:
            o = split_origin(url)
            hop_key = politeness_key(o.host, self.cfg.crawl.politeness_key)
            try:
                ip = (await self.resolver.resolve(o.host))[0]
            except Exception as e:
                if not isinstance(getattr(e, "reason", None), Reason):
                    raise
                outcome = RobotsFailed("non_public" if e.reason == Reason.NON_PUBLIC else "dns")
                break
            try:
                result = await self.request(url, hop_key, ip, lease if hop_key == key else None, {})
            except PurgedNow:
                outcome = RobotsFailed("network")   # may not ask: disallow all, retried later
                break
            if result is None:
                return False
            self.stats.robots_fetched += 1
            self.results.archive(url, result, kind="robots", meta={"robots-origin": origin})
            if result.status == 0:
                outcome = RobotsFailed("timeout" if result.error == "timeout" else "network")
            elif 300 <= result.status < 400 and result.headers.get("location"):
                hops += 1
                # RFC 9309 2.3.1.2: at least five redirects, whatever pages may follow
                if hops > REDIRECTS_MAX:
                    outcome = RobotsFailed("too_many_redirects")
                    break
                try:
                    # a Location that is not UTF-8: its octets as %XX, as for a page's redirect
                    location = escape_raw_octets(result.headers["location"])
                    url = normalize_url(resolve_url(url, location), self.rules)
                except UrlError:
                    outcome = RobotsFetched(404, b"", hops)  # unusable redirect: unavailable
            elif 200 <= result.status < 300 and result.truncated in ("time", "disconnect"):
                # a file the network cut short may have lost any later rule (or
                # cut one, "Allow: /abc" read as "Allow: /a"): unreachable, RFC 9309 2.3.1.4
                outcome = RobotsFailed("timeout" if result.truncated == "time" else "network")
            else:
                outcome = RobotsFetched(result.status, result.content or b"", hops)
        done = self.clock.now()
        self.robots.fetch_finished(origin, done, outcome)
        self.batch.robots[origin] = self.robots.snapshot(origin)
        view = self.robots.lookup(origin, done)
        if view.rules is not None and self.cfg.crawl.intent != "monitor":
            # Sitemap lines: discovery and, later, change hints (already-seen ones are no-ops);
            # a search crawl also tries the conventional /sitemap.xml when none is named
            sitemaps = sitemap_locations(view.rules.sitemaps, SITEMAPS_PER_ORIGIN_MAX)
            if not sitemaps and self.cfg.crawl.intent == "search":
                sitemaps = [origin + "/sitemap.xml"]
            for sitemap in sitemaps:
                self.admission.admit(sitemap, via=origin + "/robots.txt", band=2, depth=1, now=done)
        return True


def path_of(url: str) -> str:
    """The path and query of a normalised absolute URL."""
    rest = url.split("://", 1)[1]
    i = rest.find("/")
    return rest[i:] if i >= 0 else "/"
