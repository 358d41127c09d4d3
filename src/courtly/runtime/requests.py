"""The requests of one lease: one request under the key's and the IP's
limits (`request`), robots.txt with its redirects (`fetch_robots`) and the
soft-404 probe (`probe_soft404`). A collaborator of `Crawler`
(runtime/crawler.py, whose module doc gives the order of the steps), built
with it; it sees the crawler through `roles.RequestsHost` and owns the state
of the request path: one lock per key, the IP waiters, the URLs on the wire.

The deployment's strategies (runtime/distribution.py) decide the rest: the
`Tenure` a request is sent under travels with it (taken by the caller when its
host batch started) and is judged by `tenancy.may_send` right before the
request leaves and by the fetcher's send gate once the connection is ready;
`sending` holds the per-IP limits beyond this process.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from courtly.core.frontier import Lease
from courtly.core.health import failure_kind
from courtly.core.hints import sitemap_locations
from courtly.core.robots import REDIRECTS_MAX, RobotsFailed, RobotsFailure, RobotsFetched
from courtly.core.types import Reason
from courtly.core.urls import UrlError, escape_raw_octets, normalize_url, politeness_key, resolve_url, split_origin
from courtly.runtime.distribution import Tenure
from courtly.runtime.keylocks import KeyLocks
from courtly.runtime.takedown import PurgedNow
from courtly.ports import ResolveFailed

if TYPE_CHECKING:
    from courtly.runtime.roles import RequestsHost

__all__ = ["LeaseRequests", "SITEMAPS_PER_ORIGIN_MAX", "path_of"]

SITEMAPS_PER_ORIGIN_MAX = 20


class LeaseRequests:
    """Requests made while serving a lease (see the module doc)."""

    def __init__(self, crawler: "RequestsHost") -> None:
        self.c = crawler
        self._key_locks = KeyLocks()   # a lock exists only while a request holds or waits for it
        self._ip_waiters: dict[str, asyncio.Event] = {}
        self._in_flight: dict[str, int] = {}   # URL -> requests on the wire

    def waiting(self) -> tuple[int, int]:
        """(keys whose lock is held or awaited, IPs with a waiter): both shrink to 0 when idle."""
        return len(self._key_locks), len(self._ip_waiters)

    def key_held(self, key: str) -> bool:
        """A request of `key` holds or waits for its lock (its state stays in memory)."""
        return key in self._key_locks

    def in_flight_urls(self) -> list[str]:
        return list(self._in_flight)

    def stop(self) -> None:
        """The crawl stops: requests waiting for an IP's turn look again (and end)."""
        for ev in self._ip_waiters.values():
            ev.set()

    async def request(self, url: str, key: str, ip: str, lease: Lease | None, headers: dict,
                      tenure: Tenure | None = None):
        """One request under the key's and the IP's limits, sent under `tenure`
        (that of the lease's start; None: the key's tenure now). None if the
        lease was lost or the crawl is stopping (the URL stays queued)."""
        c = self.c
        refused = c.tenancy.refuse(url, key, c.clock.now()) if lease is None else None
        if refused is not None:
            return refused
        if tenure is None:
            tenure = c.tenancy.tenure(key)
        async with self._key_locks.hold(key):
            while True:      # again only when the IP's lease ended before the request left
                now = await self._turn(key, ip)
                if now is None:
                    return None
                if not self._may_send(key, lease, tenure, now):
                    c.sending.release(ip, key, now)
                    return None
                purge = c.takedowns.match(url)   # the last check before the request leaves
                if purge is not None:
                    c.sending.release(ip, key, now)
                    raise PurgedNow(purge)
                self._in_flight[url] = self._in_flight.get(url, 0) + 1
                c.politeness.started(key, now)
                ip_token = c.politeness.ip_started(ip, now, key)
                c.stats.in_flight += 1
                for o in c.observers:
                    o.on_request(url, ip)
                gate = c.tenancy.gate(tenure)
                try:
                    if gate is None:
                        result = await c.fetcher.fetch(url, ip=ip, headers=headers)
                    else:
                        result = await c.fetcher.fetch(
                            url, ip=ip, headers=headers,
                            gate=lambda g=gate: not c.stopping and g() and c.sending.holds(ip))   # IP lease too
                finally:
                    n = self._in_flight.pop(url, 1) - 1
                    if n > 0:
                        self._in_flight[url] = n
                    c.stats.in_flight -= 1
                    done = c.clock.now()
                    # the window is measured from completion: it bounds when it arrived
                    c.politeness.ip_finished(ip, ip_token, done)
                    c.sending.release(ip, key, done)
                    ev = self._ip_waiters.pop(ip, None)   # its waiters look again; a map of waited-on IPs only
                    if ev is not None:
                        ev.set()
                if gate is not None and result.error == "not_sent":
                    # the gate closed while it waited for a connection: nothing was sent
                    c.politeness.unsent(key)
                    if c.stopping or not c.tenancy.may_send(tenure, c.clock.now()):
                        return None
                    continue       # only the IP's lease ended: take it again (or wait for it)
                break
            for o in c.observers:
                o.on_response(result)
            ban = c.bans.answered(key, url, result.status, result.content or result.body or b"")
            c.politeness.finished(
                key, done, response_s=result.elapsed_s, status=result.status,
                retry_after=result.headers.get("retry-after") if result.headers else None,
                error=result.error, ip=ip, ban=ban,
            )
            kind = "ban" if ban else failure_kind(result.status, result.error)
            if kind is not None:
                c.stats.host_failures[kind] = c.stats.host_failures.get(kind, 0) + 1
            c.batch.hosts[key] = c.politeness.key(key).snapshot()
            if result.status in (429, 503):
                # A back-off must survive kill -9: commit now, not at the next tick
                # (what remains is the few microseconds of this synchronous step).
                c.commit()
            return result

    async def _turn(self, key: str, ip: str) -> float | None:
        """Wait for the key's and the IP's turn, then take the send policy's
        slot: the instant, or None when the crawl stops."""
        c = self.c
        while True:
            if c.stopping:
                return None
            now = c.clock.now()
            ready = c.politeness.ready_at(key, now)
            if ready > now:
                await c.pause_until(ready)
                continue
            ip_ready = c.politeness.ip_ready_at(ip, now, key)
            if ip_ready is None:
                ev = self._ip_waiters.setdefault(ip, asyncio.Event())
                ev.clear()
                await ev.wait()
                continue
            if ip_ready > now:
                await c.pause_until(ip_ready)
                continue
            if await c.sending.acquire(ip, key):
                return now
            # waited for a limit shared with other workers: check again

    def _may_send(self, key: str, lease: Lease | None, tenure: Tenure, now: float) -> bool:
        """The last check before a request leaves: the crawl goes on, the host
        batch is still ours, and so is the key under the batch's tenure."""
        c = self.c
        if c.stopping or (lease is not None and not c.frontier.renew(lease.lease_id, now, held=True)):
            return False
        return c.tenancy.may_send(tenure, now)

    async def probe_soft404(self, origin: str, rules, key: str, ip: str, lease: Lease, tenure: Tenure) -> bool:
        """Ask the host once for a path that cannot exist; remember its error answer."""
        c = self.c
        url = c.budget.probe_url(origin)
        now = c.clock.now()
        if not rules.allowed(c.token, path_of(url)):
            c.budget.record_probe(origin, url, 404, b"", "", now)  # may not ask: assume honest
            return True
        try:
            result = await self.request(url, key, ip, lease, {}, tenure)
        except PurgedNow:
            c.budget.record_probe(origin, url, 404, b"", "", c.clock.now())  # may not ask
            return True
        if result is None:
            return False
        c.stats.probes_fetched += 1
        c.results.archive(url, result, kind="soft404-probe", meta={"probe-origin": origin})
        ctype = result.headers.get("content-type", "") if result.headers else ""
        c.budget.record_probe(origin, url, result.status, result.content or b"", ctype, c.clock.now())
        return True

    # ---- robots.txt -----------------------------------------------------------

    async def fetch_robots(self, origin: str, key: str, lease: Lease | None, tenure: Tenure | None = None) -> bool:
        """Fetch robots.txt of `origin` (redirects followed, RFC 9309) for `key`'s
        lease (or none); False when the lease was lost or the crawl stops."""
        c = self.c
        now = c.clock.now()
        c.robots.fetch_started(origin, now)
        try:
            outcome = await self._robots_outcome(origin, key, lease, tenure)
        except BaseException:
            c.robots.fetch_abandoned(origin)    # asked again by whoever serves the key next
            raise
        if outcome is None:             # the lease was lost or the crawl stops: no answer to judge
            c.robots.fetch_abandoned(origin)
            return False
        done = c.clock.now()
        c.robots.fetch_finished(origin, done, outcome)
        c.batch.robots[origin] = c.robots.snapshot(origin)
        view = c.robots.lookup(origin, done)
        if view.rules is not None and c.profile.discovers:
            # Sitemap lines: discovery and, later, change hints (already-seen ones are no-ops);
            # a search crawl also tries the conventional /sitemap.xml when none is named
            sitemaps = sitemap_locations(view.rules.sitemaps, SITEMAPS_PER_ORIGIN_MAX)
            if not sitemaps and c.profile.guesses_sitemap:
                sitemaps = [origin + "/sitemap.xml"]
            for sitemap in sitemaps:
                c.admission.admit(sitemap, via=origin + "/robots.txt", band=2, depth=1, now=done)
        return True

    async def _robots_outcome(self, origin: str, key: str, lease: Lease | None,
                              tenure: Tenure | None) -> RobotsFetched | RobotsFailed | None:
        """robots.txt of `origin` fetched, its redirects followed: the outcome to
        judge, or None when the lease was lost or the crawl stops."""
        c = self.c
        url = origin + "/robots.txt"
        hops = 0
        outcome: RobotsFetched | RobotsFailed | None = None
        while outcome is None:
            o = split_origin(url)
            hop_key = politeness_key(o.host, c.cfg.crawl.politeness_key)
            try:
                ip = (await c.resolver.resolve(o.host))[0]
            except ResolveFailed as e:
                outcome = RobotsFailed(RobotsFailure.NON_PUBLIC if e.reason is Reason.NON_PUBLIC
                                       else RobotsFailure.DNS)
                break
            try:
                result = await (self.request(url, hop_key, ip, lease, {}, tenure) if hop_key == key
                                else self.request(url, hop_key, ip, None, {}))
            except PurgedNow:
                outcome = RobotsFailed(RobotsFailure.NETWORK)   # may not ask: disallow all, retried later
                break
            if result is None:
                return None
            c.stats.robots_fetched += 1
            c.results.archive(url, result, kind="robots", meta={"robots-origin": origin})
            if result.status == 0:
                outcome = RobotsFailed(RobotsFailure.TIMEOUT if result.error == "timeout" else RobotsFailure.NETWORK)
            elif 300 <= result.status < 400 and result.headers.get("location"):
                hops += 1
                # RFC 9309 2.3.1.2: at least five redirects, whatever pages may follow
                if hops > REDIRECTS_MAX:
                    outcome = RobotsFailed(RobotsFailure.TOO_MANY_REDIRECTS)
                    break
                try:
                    # a Location that is not UTF-8: its octets as %XX, as for a page's redirect
                    location = escape_raw_octets(result.headers["location"])
                    url = normalize_url(resolve_url(url, location), c.rules)
                except UrlError:
                    outcome = RobotsFetched(404, b"", hops)  # unusable redirect: unavailable
            elif 200 <= result.status < 300 and result.truncated in ("time", "disconnect"):
                # a file the network cut short may have lost any later rule (or
                # cut one, "Allow: /abc" read as "Allow: /a"): unreachable, RFC 9309 2.3.1.4
                outcome = RobotsFailed(RobotsFailure.TIMEOUT if result.truncated == "time" else RobotsFailure.NETWORK)
            else:
                outcome = RobotsFetched(result.status, result.content or b"", hops)
        return outcome


def path_of(url: str) -> str:
    """The path and query of a normalised absolute URL."""
    rest = url.split("://", 1)[1]
    i = rest.find("/")
    return rest[i:] if i >= 0 else "/"
