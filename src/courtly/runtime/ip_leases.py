"""The per-IP limits of a cluster: one worker at a time holds an IP and applies them itself.

What it owns: `IpLeases`, the engine's send policy on a cluster
(runtime/distribution.SendPolicy). The per-IP limits (requests in flight,
requests per second) are the core's (core/politeness), applied by the
engine before it asks the send policy; on one machine they are complete.
On a cluster another worker may send to the same IP, so a worker sends to
an IP only while it holds that IP's lease in the store: the limits are
then complete again, the same rule as one machine, with no statement per
request.

How it works
------------
* `acquire(ip, key)`: the IP held here (its local deadline not passed, not
  being given back): the request goes (True). Otherwise the lease is asked
  for (`ip_lease`; the asks of one loop turn are one statement, and one
  ask per IP is out at a time): granted, the caller checks its limits again
  and comes back (False); held by another worker, which the store then
  marks wanted, the caller waits at most `ASK_S` (False).
* Deadlines. The store answers how long the lease lasts from its statement;
  the local deadline counts from before the statement was sent, less a
  third of the term, on this worker's clock. `holds(ip)` is the fetcher's
  last check when the connection is ready: a request that waited past the
  deadline is not sent.
* `run()`: every third of the term one statement renews the leases of the
  IPs used since the last renewal or with a request on the wire, and one
  gives back the others (idle). A lease another worker wants is not
  renewed: no new request starts on it, and it is given back when its last
  request ends; this worker then leaves the IP to the other for one rate
  window and one renewal period (`_yield_until`: past the instant it is
  free), so two busy workers take turns.
* A lease given back is free one rate window later (the next holder's first
  request cannot crowd the window of the last ones here). A holder that
  stops renewing (killed, frozen, cut off from the store) stops sending at
  its deadline, and its lease lapses `hold_s` after its term in the store:
  its last requests are over by then.

Rules: no shell imports (the store is the port's shape); every wait goes
through the clock and is bounded; the store away: no new lease, and the
held ones end at their deadlines (nothing is sent without one); the maps
hold only IPs held, being given back or yielded (bounded by the IPs in use).
"""

from __future__ import annotations

import asyncio
import uuid

from courtly.ports import StoreUnavailableError

__all__ = ["ASK_S", "IpLeases"]

ASK_S = 1.0       # a worker waiting for an IP held elsewhere asks again this often, at most


class IpLeases:
    """The engine's send policy on a cluster (see the module doc)."""

    def __init__(self, pg, cfg, parts, stats, clock, worker_id: str) -> None:
        self.pg = pg
        self.parts = parts
        self.stats = stats
        self.clock = clock
        self.owner = f"{worker_id}/{uuid.uuid4().hex[:8]}"   # a restarted worker is a new holder
        self.lease_s = cfg.distributed.ip_lease_s
        self.period_s = self.lease_s / 3.0
        rate = cfg.politeness.ip_rate
        self.span_s = (1.0 if rate >= 1 else 1.0 / rate) + 0.01     # one rate window (core/politeness)
        self.hold_s = cfg.fetch.total_s + self.span_s + 1.0         # a request started in term is over
        self.retry_s = min(1.0, cfg.distributed.store_retry_s_max)
        self._until: dict[str, float] = {}        # IP held -> local deadline for starting a request
        self._on_wire: dict[str, int] = {}        # IP -> requests sent under its lease, not yet over
        self._used: set[str] = set()              # IPs a request took since the last renewal
        self._giving: dict[str, asyncio.Future[None]] = {}   # IP -> done when given back
        self._asking: dict[str, asyncio.Task[None]] = {}     # IP -> the ask out for it
        self._yield_until: dict[str, float] = {}  # IP given to a worker that wanted it -> not asked before
        self._slots: dict[str, str] = {}          # key -> IP its request holds
        self._bg: set[asyncio.Task] = set()

    # ---- the send policy ------------------------------------------------------------------

    async def acquire(self, ip: str, key: str) -> bool:
        now = self.clock.now()
        if ip not in self._giving and self._until.get(ip, now) > now:
            self._slots[key] = ip
            self._on_wire[ip] = self._on_wire.get(ip, 0) + 1
            self._used.add(ip)
            return True
        if self.parts.tenure(key).epoch is None:
            return True     # the gate refuses next: no lease needed
        giving = self._giving.get(ip)
        if giving is not None:       # wait until it is given back, then ask like anyone
            await self.clock.wait_until(asyncio.shield(giving), now + ASK_S)
            return False
        after = self._yield_until.get(ip)
        if after is not None:
            if after > now:
                self.stats.ip_waits += 1
                await self.clock.sleep(min(after - now, ASK_S))
                return False
            del self._yield_until[ip]
        ask = self._asking.get(ip)
        if ask is None:
            ask = self._asking[ip] = asyncio.get_running_loop().create_task(self._ask(ip))
        await asyncio.shield(ask)    # one caller cancelled does not cancel the others' ask
        return False

    def release(self, ip: str, key: str, now: float) -> None:
        if self._slots.pop(key, None) is None:
            return
        n = self._on_wire.get(ip, 0) - 1
        if n > 0:
            self._on_wire[ip] = n
            return
        self._on_wire.pop(ip, None)
        if ip in self._giving and ip in self._until:      # wanted elsewhere: its last request ended
            self._background(self._give([ip], yield_s=self.span_s + self.period_s))

    def holds(self, ip: str) -> bool:
        """A request acquired on `ip` may still be sent (its lease's deadline is ahead)."""
        return self._until.get(ip, 0.0) > self.clock.now()

    # ---- asking, renewing, giving back ------------------------------------------------------

    async def _ask(self, ip: str) -> None:
        try:
            t0 = self.clock.now()
            try:
                granted, s = await self.pg.ip_lease(ip, self.owner, self.lease_s, self.hold_s)
            except StoreUnavailableError:
                self.stats.store_errors += 1
                await self.clock.sleep(self.retry_s)
                return
            if granted:
                self._until[ip] = t0 + s - self.period_s
                self.stats.ip_leases += 1
                return
            self.stats.ip_waits += 1
            await self.clock.sleep(min(max(s, 0.01), ASK_S))
        finally:
            self._asking.pop(ip, None)

    async def run(self) -> None:
        """Renew the leases in use and give back the idle ones, every third of the term."""
        while True:
            await self.clock.sleep(self.period_s)
            await self.renew()

    async def renew(self) -> None:
        now = self.clock.now()
        for ip in [ip for ip, t in self._yield_until.items() if t <= now]:
            del self._yield_until[ip]
        held = [ip for ip in self._until if ip not in self._giving]
        keep = [ip for ip in held if ip in self._used or ip in self._on_wire]
        idle = [ip for ip in held if ip not in self._used and ip not in self._on_wire]
        self._used.clear()
        if idle:
            await self._give(idle, yield_s=0.0)
        if not keep:
            return
        t0 = self.clock.now()
        try:
            renewed = await self.pg.ip_leases_renew(self.owner, keep, self.lease_s)
        except StoreUnavailableError:
            self.stats.store_errors += 1      # the leases end at their deadlines
            return
        done = []
        for ip in keep:
            if ip not in self._until or ip in self._giving:
                continue
            if ip in renewed:
                self._until[ip] = max(self._until[ip], t0 + self.lease_s - self.period_s)
                continue
            self._giving[ip] = asyncio.get_running_loop().create_future()   # wanted: nothing new starts
            if ip not in self._on_wire:
                done.append(ip)
        if done:
            await self._give(done, yield_s=self.span_s + self.period_s)

    async def _give(self, ips: list[str], *, yield_s: float) -> None:
        loop = asyncio.get_running_loop()
        for ip in ips:
            if ip not in self._giving:
                self._giving[ip] = loop.create_future()
        try:
            await self.pg.ip_leases_give(self.owner, ips, self.span_s)
            if yield_s:
                self.stats.ip_handovers += len(ips)
        except StoreUnavailableError:
            self.stats.store_errors += 1      # still ours in the store: it lapses, or is asked for again
        finally:
            now = self.clock.now()
            for ip in ips:
                self._until.pop(ip, None)
                if yield_s:
                    self._yield_until[ip] = now + yield_s
                fut = self._giving.pop(ip, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)

    def _background(self, coro) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    def held(self) -> list[str]:
        """The IPs whose lease this worker holds now (tests, the status page)."""
        return sorted(self._until)

    async def close(self) -> None:
        """Give every lease back (the engine stopped: no request is on the wire)."""
        if self._bg:
            await self.clock.wait_until(asyncio.wait(set(self._bg)), self.clock.now() + 5.0)
        for t in list(self._asking.values()):
            t.cancel()
        held = [ip for ip in self._until if ip not in self._giving]
        if held:
            try:
                await self.clock.wait_until(self._give(held, yield_s=0.0), self.clock.now() + 5.0)
            except StoreUnavailableError:
                pass
