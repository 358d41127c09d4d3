"""The simulated web with two regions (sim/region.py): a host near one region
and far from the other, a host that geo-blocks one region; home regions
chosen from probes made from each region's source address (core/region.py).

Assertions about time are lower bounds only (a loaded machine makes replies
later, never earlier); the geo-block verdict does not depend on time."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from courtly.core.fingerprint import warc_payload_digest
from courtly.core.region import HomeReason, Probe, choose_home
from courtly.sim.region import RegionWeb
from courtly.sim.server import SimWebServer
from courtly.sim.webconfig import profile_config

REGIONS = ("us", "eu")
CLIENTS = {"127.0.0.1": "us", "127.0.0.2": "eu"}
FAR_S = 0.3


def _probe_all() -> dict:
    """Three GETs of / of two hosts from each region's source address."""
    config = profile_config("bench", seed=3, hosts=3, pages_per_host=10, latency_s=0.0)

    async def main() -> dict:
        async with SimWebServer(config, keep_records=True) as srv:
            blocked, near_eu = sorted(h for h in srv.hosts_map if h.startswith("site"))[:2]
            srv.regions = RegionWeb(REGIONS, CLIENTS, near={near_eu: "eu"}, blocked={blocked: "us"},
                                    far_latency_s=FAR_S)
            probes = []
            for client, region in CLIENTS.items():
                conn = aiohttp.TCPConnector(local_addr=(client, 0), force_close=True)
                async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=15)) as s:
                    for host in (blocked, near_eu):
                        for _ in range(3):
                            started = time.monotonic()
                            async with s.get(f"http://{srv.hosts_map[host]}:{srv.port}/",
                                             headers={"Host": f"{host}:{srv.port}"}, allow_redirects=False) as r:
                                body = await r.read()
                            probes.append((host, Probe(region, time.monotonic() - started, r.status,
                                                       warc_payload_digest(body))))
            return {"probes": probes, "records": srv.records(), "blocked": blocked, "near_eu": near_eu}

    return asyncio.run(main())


@pytest.fixture(scope="module")
def probed():
    return _probe_all()


def test_a_geo_blocking_host_refuses_one_region_with_451_and_serves_the_other(probed):
    statuses = {(p.region, p.status) for h, p in probed["probes"] if h == probed["blocked"]}
    assert statuses == {("us", 451), ("eu", 200)}
    tags = {r.tag for r in probed["records"] if r.host.startswith(probed["blocked"]) and r.status == 451}
    assert tags == {"geo_block"}


def test_a_geo_blocking_host_is_homed_in_the_region_it_serves(probed):
    mine = [p for h, p in probed["probes"] if h == probed["blocked"]]
    choice = choose_home(mine, REGIONS, default="us", current="us")
    assert (choice.region, choice.reason, choice.blocked) == ("eu", HomeReason.GEO_BLOCK, ("us",))


def test_the_far_region_waits_at_least_the_far_latency_for_each_answer(probed):
    near_eu = probed["near_eu"]
    far = [r for r in probed["records"] if r.host.startswith(near_eu) and r.conn.startswith("127.0.0.1:")]
    assert len(far) == 3
    assert all(r.completed_at - r.arrived_at >= FAR_S for r in far)
    far_probes = [p.rtt_s for h, p in probed["probes"] if h == near_eu and p.region == "us"]
    assert min(far_probes) >= FAR_S


def test_an_unknown_region_in_the_web_is_refused():
    with pytest.raises(ValueError, match="unknown region 'ap'"):
        RegionWeb(REGIONS, CLIENTS, near={"a.test": "ap"})
