"""The per-IP limits of a cluster: an IP one worker uses is held whole by it; a shared IP takes slots.

What it owns: `IpLeases`, the engine's send policy on a cluster
(runtime/distribution.SendPolicy). The per-IP limits (requests in flight,
requests per second, the window counted from completion) are the core's
(core/politeness), applied by the engine before it asks the send policy; on
one machine they are complete. On a cluster another worker may send to the
same IP. So an IP is in one of two modes in the store:

* **Held** by one worker (the IP's lease): the holder's own limits are
  complete again, the same rule as one machine, with no statement per
  request. Most IPs, and every IP of a one-worker crawl, are in this mode.
* **Shared**, once a second worker wanted it: every request of every worker
  takes a slot from the store (`ip_slot`, the window rule over all of them,
  database clock) and gives it back (`ip_release`), two statements a page,
  batched per loop turn (shell/store/pg_coalesce.py). It stays shared while
  slots are taken; a lease term after the last one, it can be held again.
  Holding it in turns instead would cut the IP's parallelism to one
  worker's keys at a time (4 workers on the bench web: 4x the wall time).

How it works
------------
* `acquire(ip, key)`: an IP held here (its local deadline not passed, not
  being given back): the request goes (True). An IP known shared: a slot is
  asked for; granted, the caller checks its limits again and comes back
  (False, then True), else waits at most `ASK_S`. Otherwise the lease is
  asked for (`ip_lease`; the asks of one loop turn are one statement, one
  ask per IP out at a time): held, shared or wait (another worker holds it
  and is told it is wanted).
* Deadlines. The store answers how long the lease lasts from its statement;
  the local deadline counts from before the statement was sent, less a
  third of the term, on this worker's clock. `holds(ip)` is the fetcher's
  last check when the connection is ready: a request that waited past the
  deadline of an IP held whole is not sent (it is asked for again).
* `run()`: every third of the term one statement renews the leases of the
  IPs used since the last renewal or with a request on the wire, and one
  gives back the others (idle); in between, every ASK_S, one statement asks
  which of the leases held here another worker wants (an index of wanted
  rows: it costs what is wanted, not what is held). A wanted lease is not
  renewed: no new request starts on it, and it is given back, shared, when
  its last request ends.
* A lease given back is free one rate window later (the next requests cannot
  crowd the window of the last ones here). A holder that stops renewing
  (killed, frozen, cut off from the store) stops sending at its deadline,
  and its lease lapses `hold_s` after its term in the store: its last
  requests are over by then; a slot not given back lapses after `hold_s`.

Rules: no shell imports (the store is the port's shape); every wait goes
through the clock and is bounded; the store away: no new lease or slot, and
the held leases end at their deadlines (nothing is sent without one); the
maps hold only IPs held, being given back, known shared or with a request
out (bounded by the IPs in use).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from courtly.ports import StoreUnavailableError

__all__ = ["ASK_S", "IpLeases", "LeaseTerms"]

ASK_S = 1.0       # a worker waiting for an IP held elsewhere asks again this often, at most
RELEASE_TRIES = 3


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """The times of the per-IP leases and slots, from the configuration."""

    lease_s: float      # a lease's term, renewed every third of it
    span_s: float       # one rate window (core/politeness): a lease given back is free this much later
    hold_s: float       # a request started in term is over after this: a silent holder's lease lapses
    shared_s: float     # an IP stays shared this long after a slot

    @classmethod
    def of(cls, cfg) -> LeaseTerms:
        rate = cfg.politeness.ip_rate
        span = (1.0 if rate >= 1 else 1.0 / rate) + 0.01
        hold = cfg.fetch.total_s + span + 1.0
        lease = cfg.distributed.ip_lease_s
        return cls(lease, span, hold, max(lease, hold + span))


class IpLeases:
    """The engine's send policy on a cluster (see the module doc)."""

    def __init__(self, pg, cfg, parts, stats, clock, worker_id: str) -> None:
        self.pg = pg
        self.parts = parts
        self.stats = stats
        self.clock = clock
        self.owner = f"{worker_id}/{uuid.uuid4().hex[:8]}"   # a restarted worker is a new holder
        pol = cfg.politeness
        self.conc, self.rate = pol.ip_concurrency, pol.ip_rate
        t = LeaseTerms.of(cfg)
        self.lease_s, self.span_s, self.hold_s, self.shared_s = t.lease_s, t.span_s, t.hold_s, t.shared_s
        self.period_s = self.lease_s / 3.0
        self.retry_s = min(1.0, cfg.distributed.store_retry_s_max)
        self._until: dict[str, float] = {}        # IP held whole -> local deadline for starting a request
        self._on_wire: dict[str, int] = {}        # IP held -> requests sent under its lease, not yet over
        self._used: set[str] = set()              # IPs held that a request took since the last renewal
        self._giving: dict[str, asyncio.Future[None]] = {}   # IP -> done when given back
        self._asking: dict[str, asyncio.Task[None]] = {}     # IP -> the lease ask out for it
        self._shared: dict[str, float] = {}       # IP known shared -> local deadline of that knowledge
        self._slots: dict[str, tuple[str, bool]] = {}   # key -> (IP, a slot: True / the lease: False)
        self._bg: set[asyncio.Task] = set()

    # ---- the send policy ------------------------------------------------------------------

    async def acquire(self, ip: str, key: str) -> bool:
        now = self.clock.now()
        if self._slots.get(key) == (ip, True):
            return True     # the slot taken at the last call: the engine checked its limits again
        if ip not in self._giving and self._until.get(ip, now) > now:
            self._slots[key] = (ip, False)
            self._on_wire[ip] = self._on_wire.get(ip, 0) + 1
            self._used.add(ip)
            return True
        if self.parts.tenure(key).epoch is None:
            return True     # the gate refuses next: no lease needed
        giving = self._giving.get(ip)
        if giving is not None:       # wait until it is given back (shared), then ask like anyone
            await self.clock.wait_until(asyncio.shield(giving), now + ASK_S)
            return False
        if self._shared.get(ip, now) > now:
            await self._slot(ip, key)
            return False
        ask = self._asking.get(ip)
        if ask is None:
            ask = self._asking[ip] = asyncio.get_running_loop().create_task(self._ask(ip))
        await asyncio.shield(ask)    # one caller cancelled does not cancel the others' ask
        return False

    def release(self, ip: str, key: str, now: float) -> None:
        got = self._slots.pop(key, None)
        if got is None:
            return
        if got[1]:
            self._background(self._release_slot(ip))
            return
        n = self._on_wire.get(ip, 0) - 1
        if n > 0:
            self._on_wire[ip] = n
            return
        self._on_wire.pop(ip, None)
        if ip in self._giving and ip in self._until:      # wanted elsewhere: its last request ended
            self._background(self._give([ip], wanted=True))

    def holds(self, ip: str) -> bool:
        """A request acquired on `ip` may still be sent: the deadline of an IP
        held whole is ahead (a slot of a shared IP lapses in the store)."""
        return ip not in self._until or self._until[ip] > self.clock.now()

    # ---- slots of shared IPs ----------------------------------------------------------------

    async def _slot(self, ip: str, key: str) -> None:
        t0 = self.clock.now()
        try:
            wait = await self.pg.ip_slot(ip, None, self.conc, self.rate, hold_s=self.hold_s,
                                         shared_s=self.shared_s)
        except StoreUnavailableError:
            self.stats.store_errors += 1
            await self.clock.sleep(self.retry_s)
            return
        if wait is None:
            self._slots[key] = (ip, True)
            self._shared[ip] = max(self._shared.get(ip, t0), t0 + self.shared_s)   # the slot kept it shared
            self.stats.ip_slots += 1
            return
        self.stats.ip_waits += 1
        await self.clock.sleep(min(max(wait, 0.01), ASK_S))

    async def _release_slot(self, ip: str) -> None:
        for attempt in range(RELEASE_TRIES):
            try:
                await self.pg.ip_release(ip, None)
                return
            except StoreUnavailableError:
                await self.clock.sleep(0.5 * (attempt + 1))   # then it lapses after hold_s

    # ---- asking, renewing, giving back ------------------------------------------------------

    async def _ask(self, ip: str) -> None:
        try:
            t0 = self.clock.now()
            try:
                answer, s = await self.pg.ip_lease(ip, self.owner, self.lease_s, self.hold_s)
            except StoreUnavailableError:
                self.stats.store_errors += 1
                await self.clock.sleep(self.retry_s)
                return
            if answer == "held":
                self._until[ip] = t0 + s - self.period_s
                self._shared.pop(ip, None)
                self.stats.ip_leases += 1
                return
            if answer == "shared":      # a slot refuses if it is held whole again: no margin needed
                self._shared[ip] = t0 + s
                return
            self.stats.ip_waits += 1
            await self.clock.sleep(min(max(s, 0.01), ASK_S))
        finally:
            self._asking.pop(ip, None)

    async def run(self) -> None:
        """Renew the leases in use and give back the idle ones, every third of
        the term; in between, every ASK_S, give back those another worker wants."""
        next_renewal = self.clock.now() + self.period_s
        while True:
            await self.clock.sleep(min(ASK_S, self.period_s))
            if self.clock.now() >= next_renewal - 1e-6:     # the timer may land a rounding error early
                next_renewal = max(next_renewal + self.period_s, self.clock.now())
                await self.renew()
            elif self._until:
                await self.give_wanted()

    async def give_wanted(self) -> None:
        """The leases held here that another worker asked for: no new request
        starts on them, and each is given back, shared, when its last ends."""
        try:
            wanted = await self.pg.ip_leases_wanted(self.owner)
        except StoreUnavailableError:
            self.stats.store_errors += 1
            return
        self._hand_over([ip for ip in wanted if ip in self._until and ip not in self._giving])

    async def renew(self) -> None:
        now = self.clock.now()
        for ip in [ip for ip, t in self._shared.items() if t <= now]:
            del self._shared[ip]
        held = [ip for ip in self._until if ip not in self._giving]
        keep = [ip for ip in held if ip in self._used or ip in self._on_wire]
        idle = [ip for ip in held if ip not in self._used and ip not in self._on_wire]
        self._used.clear()
        if idle:
            await self._give(idle, wanted=False)
        if not keep:
            return
        t0 = self.clock.now()
        try:
            renewed = await self.pg.ip_leases_renew(self.owner, keep, self.lease_s)
        except StoreUnavailableError:
            self.stats.store_errors += 1      # the leases end at their deadlines
            return
        lost = []
        for ip in keep:
            if ip not in self._until or ip in self._giving:
                continue
            if ip in renewed:
                self._until[ip] = max(self._until[ip], t0 + self.lease_s - self.period_s)
            else:
                lost.append(ip)
        self._hand_over(lost)

    def _hand_over(self, ips: list[str]) -> None:
        """`ips` are wanted elsewhere: nothing new starts on them; those with no
        request on the wire are given back now, the others when their last ends."""
        loop = asyncio.get_running_loop()
        done = []
        for ip in ips:
            self._giving[ip] = loop.create_future()
            if ip not in self._on_wire:
                done.append(ip)
        if done:
            self._background(self._give(done, wanted=True))

    async def _give(self, ips: list[str], *, wanted: bool) -> None:
        loop = asyncio.get_running_loop()
        for ip in ips:
            if ip not in self._giving:
                self._giving[ip] = loop.create_future()
        try:
            await self.pg.ip_leases_give(self.owner, ips, self.span_s, self.shared_s if wanted else 0.0)
            if wanted:
                self.stats.ip_handovers += len(ips)
        except StoreUnavailableError:
            self.stats.store_errors += 1      # still ours in the store: it lapses, or is asked for again
        finally:
            for ip in ips:
                self._until.pop(ip, None)
                fut = self._giving.pop(ip, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)

    def _background(self, coro) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    def held(self) -> list[str]:
        """The IPs whose lease this worker holds now (tests, /metrics)."""
        return sorted(self._until)

    async def close(self) -> None:
        """Give every lease back (the engine stopped: no request is on the wire)."""
        if self._bg:
            await self.clock.wait_until(asyncio.wait(set(self._bg)), self.clock.now() + 5.0)
        for t in list(self._asking.values()):
            t.cancel()
        held = [ip for ip in self._until if ip not in self._giving]
        if held:
            await self.clock.wait_until(self._give(held, wanted=False), self.clock.now() + 5.0)
