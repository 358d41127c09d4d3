"""SafeResolver: overrides, TTL cache, negative cache, coalescing, SSRF refusals.

Most tests inject a `lookup` (a fake DNS that counts its calls). The c-ares
path is checked against a tiny DNS server on loopback, so no test ever sends
a query off the machine.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from courtly.core.netpolicy import NetPolicy
from courtly.core.types import Reason
from courtly.shell.resolver import ResolveFailed, SafeResolver

LOOPBACK = NetPolicy.allowing(["127.0.0.0/8", "::1/128"])


def run(coro, timeout_s: float = 10):
    async def bounded():
        return await asyncio.wait_for(coro, timeout_s)

    return asyncio.run(bounded())


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeDns:
    """An injected lookup: name -> [(ip, ttl)] or a failure; counts calls."""

    def __init__(self, table: dict[str, list[tuple[str, float]]], *, gate: asyncio.Event | None = None) -> None:
        self.table = table
        self.calls: list[str] = []
        self.gate = gate

    async def __call__(self, host: str) -> list[tuple[str, float]]:
        self.calls.append(host)
        if self.gate is not None:
            await self.gate.wait()
        if host not in self.table:
            raise ResolveFailed(Reason.DNS, f"{host}: NXDOMAIN")
        return self.table[host]


def refused(resolver: SafeResolver, host: str) -> ResolveFailed:
    with pytest.raises(ResolveFailed) as info:
        run(resolver.resolve(host))
    return info.value


# -- literals and overrides ----------------------------------------------------


def test_ip_literal_public_is_returned_without_lookup():
    dns = FakeDns({})
    r = SafeResolver(NetPolicy(), lookup=dns)
    assert run(r.resolve("93.184.216.34")) == ["93.184.216.34"]
    assert run(r.resolve("[2606:2800:220:1::1]")) == ["2606:2800:220:1::1"]
    assert dns.calls == []


@pytest.mark.parametrize("literal", ["169.254.169.254", "10.0.0.1", "127.0.0.1", "::1", "::ffff:127.0.0.1", "[::ffff:a9fe:a9fe]"])
def test_ip_literal_non_public_is_refused(literal):
    exc = refused(SafeResolver(NetPolicy(), lookup=FakeDns({})), literal)
    assert exc.reason is Reason.NON_PUBLIC


@pytest.mark.parametrize("host", ["93.184.216.34%25.evil.test", "93.184.216.34%.evil.test"])
def test_ipv4_with_a_zone_id_is_a_name_not_a_literal(host):
    # Taken as the literal 93.184.216.34 it came back as the "address" to
    # connect to, and connect() looked the whole name up again in DNS.
    dns = FakeDns({host: [("127.0.0.1", 60)]})
    exc = refused(SafeResolver(NetPolicy(), lookup=dns), host)
    assert exc.reason is Reason.NON_PUBLIC
    assert dns.calls == [host]


def test_override_takes_precedence_over_dns_and_keeps_order():
    dns = FakeDns({"site.test": [("93.184.216.34", 300)]})
    r = SafeResolver(NetPolicy(), overrides={"Site.Test.": ["198.51.99.1", "8.8.8.8"]}, lookup=dns)
    assert run(r.resolve("site.test")) == ["198.51.99.1", "8.8.8.8"]
    assert run(r.resolve("SITE.test.")) == ["198.51.99.1", "8.8.8.8"]
    assert dns.calls == []


@pytest.mark.parametrize("ip", ["169.254.169.254", "10.0.0.1", "::ffff:127.0.0.1", "100.64.0.1", "fd00::1"])
def test_override_to_non_public_address_is_refused(ip):
    r = SafeResolver(NetPolicy(), overrides={"bait.test": [ip]}, lookup=FakeDns({}))
    exc = refused(r, "bait.test")
    assert exc.reason is Reason.NON_PUBLIC
    assert ip in exc.detail


def test_non_permitted_addresses_are_removed_and_order_kept():
    r = SafeResolver(LOOPBACK, overrides={"mixed.test": ["10.0.0.1", "127.0.0.2", "169.254.169.254", "127.0.0.1"]})
    assert run(r.resolve("mixed.test")) == ["127.0.0.2", "127.0.0.1"]


def test_loopback_allowed_only_when_policy_allows_it():
    over = {"local.test": ["127.0.0.1"], "mapped.test": ["::ffff:127.0.0.1"]}
    assert refused(SafeResolver(NetPolicy(), overrides=over), "local.test").reason is Reason.NON_PUBLIC
    r = SafeResolver(NetPolicy.allowing(["127.0.0.0/8"]), overrides=over)
    assert run(r.resolve("local.test")) == ["127.0.0.1"]
    assert run(r.resolve("mapped.test")) == ["::ffff:127.0.0.1"]  # judged by the embedded v4


def test_override_with_garbage_is_rejected_at_construction():
    with pytest.raises(ValueError):
        SafeResolver(NetPolicy(), overrides={"x.test": ["not-an-ip"]})


# -- cache -----------------------------------------------------------------------


def test_answer_is_cached_until_its_ttl_expires():
    clock = FakeClock()
    dns = FakeDns({"a.test": [("93.184.216.34", 120), ("93.184.216.35", 150)]})
    r = SafeResolver(NetPolicy(), clock=clock, lookup=dns)
    assert run(r.resolve("a.test")) == ["93.184.216.34", "93.184.216.35"]
    clock.now += 119  # the smallest record TTL rules
    assert run(r.resolve("a.test")) == ["93.184.216.34", "93.184.216.35"]
    assert len(dns.calls) == 1
    clock.now += 2
    run(r.resolve("a.test"))
    assert len(dns.calls) == 2
    s = r.stats
    assert (s.hits, s.misses, s.negative_hits) == (1, 2, 0)
    assert s.hit_ratio == pytest.approx(1 / 3)


@pytest.mark.parametrize(("ttl", "kept_s"), [(0, 60), (5, 60), (1_000_000, 3600)])
def test_ttl_is_clamped_to_min_and_max(ttl, kept_s):
    clock = FakeClock()
    dns = FakeDns({"a.test": [("93.184.216.34", ttl)]})
    r = SafeResolver(NetPolicy(), clock=clock, lookup=dns, ttl_s_min=60, ttl_s_max=3600)
    run(r.resolve("a.test"))
    clock.now += kept_s - 0.5
    run(r.resolve("a.test"))
    assert len(dns.calls) == 1
    clock.now += 1
    run(r.resolve("a.test"))
    assert len(dns.calls) == 2


def test_nxdomain_is_cached_negatively_for_negative_ttl():
    clock = FakeClock()
    dns = FakeDns({})
    r = SafeResolver(NetPolicy(), clock=clock, lookup=dns, negative_ttl_s=300)
    assert refused(r, "gone.test").reason is Reason.DNS
    clock.now += 299
    assert refused(r, "gone.test").reason is Reason.DNS
    assert len(dns.calls) == 1
    assert r.stats.negative_hits == 1
    clock.now += 2
    dns.table["gone.test"] = [("93.184.216.34", 300)]
    assert run(r.resolve("gone.test")) == ["93.184.216.34"]
    assert len(dns.calls) == 2


def test_non_public_answer_is_cached_and_refused_again_without_lookup():
    clock = FakeClock()
    dns = FakeDns({"rebind.test": [("169.254.169.254", 600)]})
    r = SafeResolver(NetPolicy(), clock=clock, lookup=dns)
    assert refused(r, "rebind.test").reason is Reason.NON_PUBLIC
    assert refused(r, "rebind.test").reason is Reason.NON_PUBLIC
    assert len(dns.calls) == 1


def test_cached_returns_none_when_a_lookup_is_needed():
    dns = FakeDns({"a.test": [("93.184.216.34", 300)]})
    r = SafeResolver(NetPolicy(), lookup=dns)
    assert r.cached("a.test") is None
    run(r.resolve("a.test"))
    assert r.cached("a.test") == ["93.184.216.34"]


def test_cache_is_bounded_lru():
    dns = FakeDns({f"h{i}.test": [("93.184.216.34", 300)] for i in range(5)})
    r = SafeResolver(NetPolicy(), lookup=dns, cache_entries_max=3)

    async def go():
        for i in range(4):
            await r.resolve(f"h{i}.test")
        await r.resolve("h1.test")  # touch: h1 is now most recent, h2 the oldest
        await r.resolve("h4.test")  # evicts h2

    run(go())
    assert r.stats.entries == 3
    assert r.cached("h1.test") is not None
    assert r.cached("h2.test") is None


def test_concurrent_lookups_of_one_host_share_one_query():
    async def go():
        gate = asyncio.Event()
        dns = FakeDns({"busy.test": [("93.184.216.34", 300)]}, gate=gate)
        r = SafeResolver(NetPolicy(), lookup=dns)
        tasks = [asyncio.create_task(r.resolve("busy.test")) for _ in range(20)]
        await asyncio.sleep(0.01)
        tasks[0].cancel()  # one caller giving up must not cancel the others
        gate.set()
        results = await asyncio.gather(*tasks[1:])
        return dns, r, results

    dns, r, results = run(go())
    assert dns.calls == ["busy.test"]
    assert all(res == ["93.184.216.34"] for res in results)
    assert r.stats.misses == 1 and r.stats.coalesced == 19


def test_concurrent_failures_are_coalesced_too():
    async def go():
        dns = FakeDns({})
        r = SafeResolver(NetPolicy(), lookup=dns)
        outcomes = await asyncio.gather(*(r.resolve("nx.test") for _ in range(5)), return_exceptions=True)
        return dns, outcomes

    dns, outcomes = run(go())
    assert len(dns.calls) == 1
    assert all(isinstance(o, ResolveFailed) and o.reason is Reason.DNS for o in outcomes)


def test_invalid_host_name_fails_as_dns():
    r = SafeResolver(NetPolicy(), lookup=FakeDns({}))
    assert refused(r, "a" * 300).reason is Reason.DNS


# -- the c-ares path, against a DNS server on loopback ----------------------------


class _DnsServer(asyncio.DatagramProtocol):
    """Answers A queries from `table` (name -> (ips, ttl)); NXDOMAIN otherwise."""

    def __init__(self, table: dict[str, tuple[list[str], int]]) -> None:
        self.table = table
        self.queries: list[tuple[str, int]] = []

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        qid, _flags = struct.unpack("!HH", data[:4])
        pos, labels = 12, []
        while data[pos]:
            n = data[pos]
            labels.append(data[pos + 1 : pos + 1 + n].decode().lower())
            pos += 1 + n
        qtype, _qclass = struct.unpack("!HH", data[pos + 1 : pos + 5])
        question = data[12 : pos + 5]
        name = ".".join(labels)
        self.queries.append((name, qtype))
        answers = b""
        count = 0
        rcode = 3  # NXDOMAIN
        if name in self.table:
            rcode = 0
            ips, ttl = self.table[name]
            if qtype == 1:
                for ip in ips:
                    rdata = bytes(int(p) for p in ip.split("."))
                    answers += struct.pack("!HHHIH", 0xC00C, 1, 1, ttl, 4) + rdata
                    count += 1
        header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, count, 0, 0)
        self.transport.sendto(header + question + answers, addr)


def test_cares_lookup_reads_ttl_and_keeps_order():
    clock = FakeClock()

    async def go():
        loop = asyncio.get_running_loop()
        table = {"ttl.test": (["127.0.0.7", "127.0.0.8"], 123)}
        transport, server = await loop.create_datagram_endpoint(lambda: _DnsServer(table), local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        r = SafeResolver(LOOPBACK, clock=clock, nameservers=[f"127.0.0.1:{port}"], ttl_s_min=1)
        try:
            first = await r.resolve("ttl.test")
            clock.now += 122
            again = await r.resolve("ttl.test")
            misses_before = r.stats.misses
            clock.now += 2
            await r.resolve("ttl.test")
            with pytest.raises(ResolveFailed) as info:
                await r.resolve("nowhere.test")
            return first, again, misses_before, r.stats, info.value, server
        finally:
            await r.close()
            transport.close()

    first, again, misses_before, stats, nx, server = run(go())
    assert first == again == ["127.0.0.7", "127.0.0.8"]
    assert misses_before == 1 and stats.hits == 1
    assert stats.misses == 3  # ttl.test twice, nowhere.test once
    assert nx.reason is Reason.DNS
    assert ("ttl.test", 1) in server.queries


def test_localhost_is_refused_unless_policy_allows_loopback():
    async def go():
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _DnsServer({}), local_addr=("127.0.0.1", 0))
        ns = [f"127.0.0.1:{transport.get_extra_info('sockname')[1]}"]
        strict = SafeResolver(NetPolicy(), nameservers=ns)
        loose = SafeResolver(NetPolicy.allowing(["127.0.0.0/8"]), nameservers=ns)
        try:
            with pytest.raises(ResolveFailed) as info:
                await strict.resolve("localhost")
            return info.value, await loose.resolve("localhost")
        finally:
            await strict.close()
            await loose.close()
            transport.close()

    exc, addrs = run(go())
    assert exc.reason is Reason.NON_PUBLIC
    assert addrs == ["127.0.0.1"]  # ::1 dropped: only 127.0.0.0/8 is allowed


def test_falls_back_to_getaddrinfo_without_aiodns(monkeypatch):
    import courtly.shell.resolver as mod

    monkeypatch.setattr(mod, "aiodns", None)
    r = SafeResolver(NetPolicy.allowing(["127.0.0.0/8"]))
    assert run(r.resolve("localhost"))[0] == "127.0.0.1"  # /etc/hosts; ::1 is not allowed
    assert refused(SafeResolver(NetPolicy()), "localhost").reason is Reason.NON_PUBLIC


# -- serve-stale and the DNS metrics (issue 17) -----------------------------------


def test_a_failing_resolver_serves_the_last_good_answer_for_stale_s_max():
    clock = FakeClock()
    dns = FakeDns({"a.test": [("93.184.216.34", 60)]})
    r = SafeResolver(NetPolicy(), clock=clock, lookup=dns, negative_ttl_s=30, stale_s_max=600)
    assert run(r.resolve("a.test")) == ["93.184.216.34"]
    del dns.table["a.test"]                         # the resolver fails from now on
    clock.now += 61
    assert run(r.resolve("a.test")) == ["93.184.216.34"]    # expired 1 s ago: stale, served
    clock.now += 29
    assert run(r.resolve("a.test")) == ["93.184.216.34"]    # the stale answer is cached briefly
    assert len(dns.calls) == 2
    clock.now += 500                                 # 530 s past its expiry: still within stale_s_max
    assert run(r.resolve("a.test")) == ["93.184.216.34"]
    clock.now += 71                                  # 601 s: too old to serve
    assert refused(r, "a.test").reason is Reason.DNS
    s = r.stats
    assert (s.failures, s.stale) == (3, 2)


def test_a_stale_answer_is_checked_against_the_policy_again():
    clock = FakeClock()
    dns = FakeDns({"a.test": [("127.0.0.1", 60)]})
    r = SafeResolver(LOOPBACK, clock=clock, lookup=dns, stale_s_max=600)
    run(r.resolve("a.test"))
    r.policy = NetPolicy()                           # loopback no longer allowed
    del dns.table["a.test"]
    clock.now += 61
    assert refused(r, "a.test").reason is Reason.NON_PUBLIC


def test_lookups_are_timed_into_the_latency_histogram_and_failures_counted():
    clock = FakeClock()

    async def slow_lookup(host: str):
        clock.now += 0.2 if host == "a.test" else 3.0
        if host == "b.test":
            raise ResolveFailed(Reason.DNS, "timeout")
        return [("93.184.216.34", 60)]

    r = SafeResolver(NetPolicy(), clock=clock, lookup=slow_lookup)
    run(r.resolve("a.test"))
    refused(r, "b.test")
    s = r.stats
    from courtly.shell.resolver import DNS_LATENCY_BUCKETS_S

    le = list(DNS_LATENCY_BUCKETS_S)
    assert len(s.latency_counts) == len(le) + 1 and s.latency_counts[-1] == 2
    assert s.latency_counts[le.index(0.25)] == 1 and s.latency_counts[le.index(2.5)] == 1
    assert s.latency_counts[le.index(5.0)] == 2
    assert s.latency_sum_s == pytest.approx(3.2)
    assert (s.failures, s.stale) == (1, 0)
