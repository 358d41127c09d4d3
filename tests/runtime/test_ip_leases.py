"""The cluster's per-IP send policy (runtime/ip_leases.py) on virtual time,
over the in-memory lease table (tests/ip_lease_support.py, the same rules as
the SQL): an IP one worker uses is held whole, with no statement per
request; a second worker that wants it gets it shared (slots for both,
never while it is held whole); idle leases are given back; a holder cut
off from the store stops sending at its deadline while its lease lapses."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

from courtly.config import Config
from courtly.ports import StoreUnavailableError
from courtly.runtime.distribution import Deployment, Tenure
from courtly.runtime.ip_leases import ASK_S, IpLeases
from courtly.runtime.partitions import WorkerStats
from courtly.sim.vloop import VirtualClock, run_virtual
from ip_lease_support import LeaseRow, LeaseTable

T0 = 1_700_000_000.0
IP = "192.0.2.7"
CFG = Config()
LEASE_S = CFG.distributed.ip_lease_s


class _Held:
    """Partitions as IpLeases asks them: every key is held under epoch 1."""

    def tenure(self, key: str) -> Tenure:
        return Tenure(0, 1)


class _Seat:
    """One worker's connection to the shared table, which the test can cut."""

    def __init__(self, table: LeaseTable) -> None:
        self.table = table
        self.down = False

    def __getattr__(self, name: str):
        call = getattr(self.table, name)

        async def seat(*args, **kw):
            if self.down:
                raise StoreUnavailableError("cut (test)")
            return await call(*args, **kw)
        return seat


def _leases(table: LeaseTable, clock, name: str) -> tuple[IpLeases, _Seat]:
    seat = _Seat(table)
    return IpLeases(seat, CFG, _Held(), WorkerStats(), clock, name), seat


def _one_worker(loop):
    """A clock, a table and one worker's leases with their renewal loop running."""
    clock = VirtualClock(loop)
    table = LeaseTable(clock)
    a, _ = _leases(table, clock, "a")
    return clock, table, a, asyncio.create_task(a.run())


async def _traffic(leases: IpLeases, name: str, clock, until: float, log: list, tasks: int = 3,
                   ip: str = IP) -> None:
    """`tasks` request loops on `ip` until `until`: each request lasts 0.3 s;
    logged with whether the IP was held whole when it started."""
    async def one(i: int) -> None:
        key = f"{name}-k{i}.example"
        while clock.now() < until:
            if not await leases.acquire(ip, key):
                continue
            start, whole = clock.now(), ip in leases.held()
            assert leases.holds(ip)
            await clock.sleep(0.3)
            log.append((name, start, clock.now(), whole))
            leases.release(ip, key, clock.now())

    await asyncio.gather(*(one(i) for i in range(tasks)))


def test_one_worker_sends_every_request_under_one_lease_renewed_not_one_statement_each():
    async def main(loop):
        clock, table, a, renewer = _one_worker(loop)
        log: list = []
        await _traffic(a, "a", clock, T0 + 60.0, log)
        renewer.cancel()
        return table, log

    table, log = run_virtual(main, start_at=T0)
    assert len(log) >= 500
    assert table.calls["lease"] == 1                       # one ask, then renewals only
    assert 60 / (LEASE_S / 3) - 1 <= table.calls["renew"] <= 60 / (LEASE_S / 3) + 1
    assert table.rows[IP].owner is not None and table.rows[IP].owner.startswith("a/")


def test_a_second_worker_that_wants_an_ip_gets_it_shared_and_never_overlaps_its_whole_holder():
    async def main(loop):
        clock = VirtualClock(loop)
        table = LeaseTable(clock)
        (a, _), (b, _) = _leases(table, clock, "a"), _leases(table, clock, "b")
        loops = [asyncio.create_task(x.run()) for x in (a, b)]
        log: list = []
        late_b = asyncio.create_task(_b_later(b, clock, log))
        await _traffic(a, "a", clock, T0 + 60.0, log)
        await late_b
        for t in loops:
            t.cancel()
        return a, b, table, log

    async def _b_later(b, clock, log):
        await clock.sleep(10.0)                       # a holds it whole for 10 s, then b wants it too
        await _traffic(b, "b", clock, T0 + 60.0, log)

    a, b, table, log = run_virtual(main, start_at=T0)
    whole = [r for r in log if r[3]]
    shared = [r for r in log if not r[3]]
    assert whole and all(r[0] == "a" for r in whole)            # only a ever held it whole
    last_whole_end = max(r[2] for r in whole)
    # nothing of b (or shared) overlaps a request sent under the whole lease, and a rate window between
    assert all(r[1] >= last_whole_end + a.span_s - 1e-9 for r in shared)
    assert {r[0] for r in shared} == {"a", "b"}                 # both send, with slots
    # a is told within a second (it polls what is wanted), its requests end, then one rate window
    assert min(r[1] for r in shared) <= T0 + 10.0 + 2 * ASK_S + 0.3 + a.span_s + 0.1
    events = sorted([(r[1], 1) for r in shared] + [(r[2], -1) for r in shared])
    peak = max(sum(d for _, d in events[:i + 1]) for i in range(len(events)))
    assert peak <= CFG.politeness.ip_concurrency
    assert a.stats.ip_handovers == 1 and a.stats.ip_slots and b.stats.ip_slots and b.stats.ip_leases == 0
    assert table.rows[IP].owner is None and table.rows[IP].shared_until > T0 + 60.0


def test_a_shared_ip_nobody_uses_for_a_term_is_held_whole_again():
    async def main(loop):
        clock = VirtualClock(loop)
        table = LeaseTable(clock)
        a, _ = _leases(table, clock, "a")
        table.rows[IP] = LeaseRow(shared_until=T0 + 5.0)     # as a wanted give-back leaves it
        first = await table.ip_lease(IP, a.owner, LEASE_S, a.hold_s)
        assert await table.ip_slot(IP, None, 2, 10.0, hold_s=a.hold_s, shared_s=a.shared_s) is None
        await table.ip_release(IP)
        await clock.sleep_until(T0 + a.shared_s + 0.1)
        later = await table.ip_lease(IP, a.owner, LEASE_S, a.hold_s)
        return first, later

    first, later = run_virtual(main, start_at=T0)
    assert first[0] == "shared" and later == ("held", LEASE_S)


def test_an_idle_lease_is_given_back_at_the_next_renewal():
    async def main(loop):
        clock, table, a, renewer = _one_worker(loop)
        log: list = []
        await _traffic(a, "a", clock, T0 + 1.0, log, tasks=1)
        held_after_use = a.held()
        await clock.sleep(LEASE_S)                    # two renewals: used in the first, idle in the second
        renewer.cancel()
        return held_after_use, a.held(), table.rows[IP]

    held_after_use, held_later, row = run_virtual(main, start_at=T0)
    assert held_after_use == [IP] and held_later == []
    assert row.owner is None and not row.wanted


def test_a_holder_cut_off_from_the_store_stops_at_its_deadline_and_its_lease_lapses_after_hold_s():
    async def main(loop):
        clock = VirtualClock(loop)
        table = LeaseTable(clock)
        (a, seat_a), (b, _) = _leases(table, clock, "a"), _leases(table, clock, "b")
        renewer = asyncio.create_task(a.run())
        assert not await a.acquire(IP, "a.example") and await a.acquire(IP, "a.example")   # asked, then held
        until = table.rows[IP].until               # a.example's request stays on the wire (a slow server)
        seat_a.down = True                          # renewals fail from now on
        deadline = T0 + LEASE_S - a.period_s
        await clock.sleep_until(deadline - 0.01)
        still = a.holds(IP)
        await clock.sleep_until(deadline + 0.01)
        after = a.holds(IP), await a.acquire(IP, "b.example")
        granted_early = await table.ip_lease(IP, b.owner, LEASE_S, b.hold_s, now=until + b.hold_s - 0.01)
        granted_late = await table.ip_lease(IP, b.owner, LEASE_S, b.hold_s, now=until + b.hold_s + 0.01)
        renewer.cancel()
        return still, after, granted_early, granted_late

    still, after, early, late = run_virtual(main, start_at=T0)
    assert still and after == (False, False)
    assert early[0] == "wait" and late == ("held", LEASE_S)


def test_a_request_for_a_key_outside_any_lease_takes_no_ip_lease():
    class _Nobody(_Held):
        def tenure(self, key: str) -> Tenure:
            return Tenure(0, None)

    async def main(loop):
        clock = VirtualClock(loop)
        table = LeaseTable(clock)
        a = IpLeases(table, CFG, _Nobody(), WorkerStats(), clock, "a")
        got = await a.acquire(IP, "x.example")
        a.release(IP, "x.example", clock.now())
        return got, table.calls

    got, calls = run_virtual(main, start_at=T0)
    assert got is True and not calls


def test_the_engine_takes_the_ip_lease_again_when_it_ended_while_the_request_waited_for_a_connection(tmp_path):
    from courtly.runtime.crawler import Crawler
    from courtly.runtime.distribution import OwnsEverything
    from courtly.shell.store.sqlite import SqliteStore
    from clock_support import ManualClock

    class _Cluster(OwnsEverything):
        def tenure(self, key: str) -> Tenure:
            return Tenure(0, 1)

        def gate(self, tenure: Tenure):
            return lambda: True

    class _Lapsing:
        """The send policy: the first request's lease ends before its connection is ready."""

        def __init__(self) -> None:
            self.acquired = 0
            self.asked = 0

        async def acquire(self, ip: str, key: str) -> bool:
            self.acquired += 1
            return True

        def release(self, ip: str, key: str, now: float) -> None:
            pass

        def holds(self, ip: str) -> bool:
            self.asked += 1
            return self.asked > 1

    class _Fetcher:
        def __init__(self) -> None:
            self.sent: list[bool] = []

        async def fetch(self, url, *, ip, headers, gate=None):
            ok = gate()
            self.sent.append(ok)
            return SimpleNamespace(url=url, ip=ip, status=404 if ok else 0, elapsed_s=0.1, headers={}, body=b"",
                                   content=b"", truncated=None, error=None if ok else "not_sent",
                                   request_head=b"", response_head=b"", started_at=T0)

    policy = _Lapsing()
    c = Crawler(replace(CFG), clock=ManualClock(T0), resolver=None, fetcher=_Fetcher(),
                warc=SimpleNamespace(flush=lambda: None), store=SqliteStore(tmp_path / "crawl.db"),
                extractor=None, deployment=Deployment(tenancy=_Cluster(), sending=policy))
    got = asyncio.run(c.requests.request("https://a.example/", "a.example", "10.0.0.1", None, {}))
    assert got is not None and got.status == 404
    assert c.fetcher.sent == [False, True] and policy.acquired == 2
