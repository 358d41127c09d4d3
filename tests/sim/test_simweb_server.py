"""Each behaviour of the simulated web, served on loopback, seen by a plain HTTP client."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import sys
import zlib
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import aiohttp
import brotli
import pytest
import zstandard

from courtly.sim.model import BAIT_IP
from courtly.sim.page import http_date, page_version
from courtly.sim.reqlog import load_log
from courtly.sim.server import SimWebServer

sys.path.insert(0, str(Path(__file__).parent))
from simclient import get, run_with_server, small_hostile  # noqa: E402


def _host(srv: SimWebServer, pred: Any) -> Any:
    return next(s for s in srv.web.hosts if pred(s))


def _plain(s: Any) -> bool:
    return s.robots in ("rules", "allow_all") and not s.latency_s and not any(
        b.startswith("throttle") for b in s.behaviours)


def test_pages_have_validators_and_answer_304(tmp_path: Path) -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, _plain)
        g = await get(s, srv, spec.name, "/")
        assert g.status == 200 and g.headers["Content-Type"].startswith("text/html")
        assert b"<a href=" in g.body and b'rel="canonical"' in g.body
        etag, lm = g.headers["ETag"], g.headers["Last-Modified"]
        assert (await get(s, srv, spec.name, "/", {"If-None-Match": etag})).status == 304
        assert (await get(s, srv, spec.name, "/", {"If-Modified-Since": lm})).status == 304
        assert (await get(s, srv, spec.name, "/", {"If-None-Match": '"other"'})).status == 200
        old = http_date(parsedate_to_datetime(lm).timestamp() - 3600)
        assert (await get(s, srv, spec.name, "/", {"If-Modified-Since": old})).status == 200
        srv.flush()
        recs = [r for r in srv.records() if r.path == "/"]
        assert [r.conditional for r in recs] == [False, True, True, True, True]
        assert [r.status for r in recs] == [200, 304, 304, 200, 200]

    run_with_server(small_hostile(), go, tmp_path / "log.jsonl")
    assert len(load_log(tmp_path / "log.jsonl")) == 5


def test_etag_follows_the_page_epoch_at_arrival() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, lambda h: _plain(h) and h.has("changing"))
        lay = srv.web.layout(spec.name)
        for k in range(lay.n_pages):
            g = await get(s, srv, spec.name, lay.path_of(k))
            rec = srv.records()[-1]
            v = page_version(lay, k, "", rec.arrived_at - srv.started_at, srv.started_at)
            assert g.headers["ETag"] == v.etag
            assert f"Revision {v.epoch}.".encode() in g.body
        assert any(lay.change_rate(k) > 0 for k in range(lay.n_pages))

    run_with_server(small_hostile(change_rate_per_s=2.0), go)


def test_request_log_records_connection_and_local_ip() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        shared = next(ip for ip, names in srv.web.hosts_by_ip.items() if len(names) >= 2)
        a, b = srv.web.hosts_by_ip[shared][:2]
        ga, gb = await get(s, srv, a, "/"), await get(s, srv, b, "/")
        assert ga.body != gb.body, "shared-IP hosts are told apart by Host"
        # a bare IP literal serves that IP's first host
        gi = await get(s, srv, shared, "/robots.txt")
        g0 = await get(s, srv, a, "/robots.txt")
        assert gi.status == g0.status
        recs = srv.records()
        assert {r.ip for r in recs} == {shared}
        assert all(r.conn.startswith("127.") and ":" in r.conn for r in recs)
        assert all(r.completed_at >= r.arrived_at for r in recs)

    run_with_server(small_hostile(), go)


def test_unknown_paths_are_404_or_soft404() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        normal = _host(srv, lambda h: _plain(h) and not h.has("soft404"))
        soft = _host(srv, lambda h: h.has("soft404"))
        assert (await get(s, srv, normal.name, "/no/such/page.html")).status == 404
        g = await get(s, srv, soft.name, "/no/such/page.html")
        assert g.status == 200 and b"not found" in g.body
        assert srv.records()[-1].tag == "soft404"

    run_with_server(small_hostile(), go)


def test_robots_variants_answer_as_described() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        want = {"missing_404": 404, "forbidden_403": 403, "error_500": 500, "rules": 200,
                "allow_all": 200, "disallow_all": 200, "garbage": 200, "bom": 200, "large": 200,
                "redirect_chain": 301, "redirect_too_long": 301}
        for variant, status in want.items():
            spec = _host(srv, lambda h, variant=variant: h.robots == variant)
            g = await get(s, srv, spec.name, "/robots.txt")
            assert g.status == status, variant
            if variant == "bom":
                assert g.body.startswith(b"\xef\xbb\xbf")
            if variant == "large":
                assert len(g.body) > 500 * 1024
            if variant == "rules":
                text = g.body.decode()
                for needle in ("User-agent: *", "Disallow: /*.pdf$", "Allow: /private/public-", "Sitemap: "):
                    assert needle in text
                assert "courtly" in text.lower()
        for variant, hops in (("redirect_chain", None), ("redirect_too_long", 6)):
            spec = _host(srv, lambda h, variant=variant: h.robots == variant)
            g = await get(s, srv, spec.name, "/robots.txt")
            seen_hosts, n = {spec.name}, 0
            while g.status in (301, 302) and n < 10:
                loc = aiohttp.client.URL(g.headers["Location"])
                seen_hosts.add(loc.host)
                g = await get(s, srv, loc.host, loc.raw_path_qs)
                n += 1
            assert g.status == 200 and (hops is None or n == hops)
            assert len(seen_hosts) == 2, "the chain crosses hosts"
            assert srv.records()[-1].tag == "robots_hop"
        spec = _host(srv, lambda h: h.robots == "timeout")
        with pytest.raises(asyncio.TimeoutError):
            await get(s, srv, spec.name, "/robots.txt", timeout=aiohttp.ClientTimeout(total=0.5))
        await asyncio.sleep(0.2)
        rec = [r for r in srv.records() if r.tag == "robots_timeout"][-1]
        assert rec.aborted and rec.status == 0

    run_with_server(small_hostile(), go)


def test_slow_and_throttled_hosts() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        cfg = srv.config
        slow = _host(srv, lambda h: h.latency_s > 0)
        await get(s, srv, slow.name, "/")
        rec = srv.records()[-1]
        assert rec.tag == "slow" and rec.completed_at - rec.arrived_at >= slow.latency_s * 0.9
        h429 = _host(srv, lambda h: h.has("throttle_429"))
        got = [await get(s, srv, h429.name, "/") for _ in range(cfg.throttle_requests + 1)]
        assert [g.status for g in got] == [429] * cfg.throttle_requests + [200]
        assert got[0].headers["Retry-After"] == str(cfg.retry_after_s)
        assert srv.records()[-2].retry_after_at is not None
        bare = _host(srv, lambda h: h.has("throttle_503_bare"))
        g = await get(s, srv, bare.name, "/")
        assert g.status == 503 and "Retry-After" not in g.headers
        dated = _host(srv, lambda h: h.has("throttle_503_date"))
        g = await get(s, srv, dated.name, "/")
        assert g.status == 503
        at = parsedate_to_datetime(g.headers["Retry-After"]).timestamp()
        rec = srv.records()[-1]
        assert rec.retry_after_at == at and at > rec.arrived_at
        assert (await get(s, srv, h429.name, "/robots.txt")).status != 429, "robots.txt is never throttled"

    run_with_server(small_hostile(), go)


def test_traps_are_endless() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        for trap, entry in (("trap_calendar", "/calendar/2024/01/"), ("trap_session", "/shop/item-0.html?s=" + "0" * 32),
                            ("trap_filters", "/catalog?color=red"), ("trap_repeat", "/repeat/a/"),
                            ("trap_deep", "/deep/1/")):
            spec = _host(srv, lambda h, trap=trap: h.has(trap))
            url, seen = f"http://{spec.name}:{srv.port}{entry}", set()
            for _ in range(25):
                target = url.split(f":{srv.port}", 1)[1]
                g = await get(s, srv, spec.name, target)
                assert g.status == 200 and srv.records()[-1].tag == trap
                seen.add(target)
                hrefs = [h.decode().replace("&amp;", "&") for h in
                         __import__("re").findall(rb'<li><a href="([^"]+)"', g.body)]
                url = str(aiohttp.client.URL(url).join(aiohttp.client.URL(hrefs[-1])))
            assert len(seen) == 25, trap

    run_with_server(small_hostile(), go)


def test_redirect_chains_cross_hosts_and_loops() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, lambda h: h.has("redirects"))
        paths = srv.manifest["hosts"][spec.name]["paths"]
        for chain in paths["redirect_chains"]:
            url, hops, hosts = aiohttp.client.URL(chain["start"]), 0, set()
            while hops < 10:
                g = await get(s, srv, url.host, url.raw_path_qs)
                if g.status not in (301, 302, 303, 307, 308):
                    break
                hosts.add(url.host)
                url = aiohttp.client.URL(g.headers["Location"])
                hops += 1
            assert hops == chain["hops"] and str(url) == chain["final"] and g.status == 200
            assert (len(hosts) == 2) == chain["cross_host"]
        g = await get(s, srv, spec.name, paths["redirect_loop"][0])
        assert g.status == 302 and g.headers["Location"].endswith(paths["redirect_loop"][1])
        g = await get(s, srv, spec.name, paths["redirect_loop"][1])
        assert g.headers["Location"].endswith(paths["redirect_loop"][0])

    run_with_server(small_hostile(), go)


def test_duplicates_over_http() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, lambda h: h.has("duplicates"))
        for d in srv.manifest["hosts"][spec.name]["paths"]["duplicates"]:
            a = await get(s, srv, spec.name, d["of"])
            b = await get(s, srv, spec.name, d["path"])
            assert a.status == b.status == 200
            assert (a.body == b.body) == (d["kind"] == "exact")

    run_with_server(small_hostile(), go)


def _inflate_capped(data: bytes, kind: str, cap: int) -> int:
    if kind == "gzip":
        d = zlib.decompressobj(31)
        return len(d.decompress(data, cap))
    if kind == "br":
        out = brotli.Decompressor().process(data)  # small bomb size in tests
        return len(out[:cap])
    reader = zstandard.ZstdDecompressor().stream_reader(data)
    return len(reader.read(cap))


def test_hostile_bodies() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, lambda h: h.has("hostile_bodies"))
        for name, enc in (("gzip-bomb", "gzip"), ("brotli-bomb", "br"), ("zstd-bomb", "zstd")):
            g = await get(s, srv, spec.name, f"/hostile/{name}", headers={"Accept-Encoding": f"gzip, {enc}"})
            assert g.headers["Content-Encoding"] == enc
            assert _inflate_capped(g.body, enc, 32 << 20) >= 100 * len(g.body)
            # a client that does not accept the coding gets the bomb gzip-coded, as from a real server
            g = await get(s, srv, spec.name, f"/hostile/{name}", headers={"Accept-Encoding": "gzip, deflate"})
            assert g.headers["Content-Encoding"] == "gzip"
            assert _inflate_capped(g.body, "gzip", 32 << 20) >= 100 * len(g.body)
        g = await get(s, srv, spec.name, "/hostile/deep-nesting")
        assert g.body.count(b"<div>") == 100_000
        g = await get(s, srv, spec.name, "/hostile/bad-utf8")
        with pytest.raises(UnicodeDecodeError):
            g.body.decode("utf-8")
        g = await get(s, srv, spec.name, "/hostile/bad-charset")
        assert "x-no-such-charset" in g.headers["Content-Type"]
        g = await get(s, srv, spec.name, "/hostile/bad-gzip")
        with pytest.raises(OSError):
            gzip.decompress(g.body)
        with pytest.raises(aiohttp.ClientPayloadError):
            await get(s, srv, spec.name, "/hostile/length-mismatch")
        ip = srv.hosts_map[spec.name]
        async with s.get(f"http://{ip}:{srv.port}/hostile/endless-chunked", headers={"Host": spec.name}) as r:
            assert r.headers["Transfer-Encoding"] == "chunked"
            n = 0
            async for chunk in r.content.iter_chunked(1 << 16):
                n += len(chunk)
                if n > 4 << 20:
                    break
            assert n > 4 << 20 and not r.content.at_eof()
        async with s.get(f"http://{ip}:{srv.port}/hostile/drip", headers={"Host": spec.name}) as r:
            total = int(r.headers["Content-Length"])
            assert await r.content.readexactly(3)
        await asyncio.sleep(0.3)
        drip = [r for r in srv.records() if r.tag == "hostile_drip"][-1]
        assert drip.aborted and drip.bytes < total, "the body was dripping, not sent at once"

    run_with_server(small_hostile(), go)


def test_huge_headers_over_a_raw_socket() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> bytes:
        spec = _host(srv, lambda h: h.has("hostile_bodies"))
        reader, writer = await asyncio.open_connection(srv.hosts_map[spec.name], srv.port)
        writer.write(f"GET /hostile/huge-headers HTTP/1.1\r\nHost: {spec.name}\r\nConnection: close\r\n\r\n".encode())
        head = await asyncio.wait_for(_read_head(reader), 10)
        writer.close()
        return head

    head = run_with_server(small_hostile(), go)
    lines = head.split(b"\r\n")
    assert lines[0].startswith(b"HTTP/1.1 200")
    assert sum(1 for x in lines if x.startswith(b"X-Filler-")) == 200
    assert any(len(x) > 65536 for x in lines)


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf and len(buf) < 1 << 20:
        chunk = await reader.read(65536)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\r\n\r\n", 1)[0]


def test_ssrf_bait_links_redirects_and_listener() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, lambda h: h.has("ssrf_bait"))
        home = (await get(s, srv, spec.name, "/")).body.decode()
        for needle in ("169.254.169.254", "10.0.0.1", "192.168.1.1", "//localhost:", "//2130706433:",
                       "//0x7f000001:", "//intranet.test:"):
            assert needle in home
        paths = srv.manifest["hosts"][spec.name]["paths"]["ssrf_bait_redirects"]
        for path, location in paths.items():
            g = await get(s, srv, spec.name, path)
            assert g.status == 302 and g.headers["Location"] == location
        assert srv.hosts_map["intranet.test"] == BAIT_IP
        # an impolite client that follows the bait reaches the bait listener, which logs it
        async with s.get(f"http://{BAIT_IP}:{srv.port}/admin", headers={"Host": f"localhost:{srv.port}"}) as r:
            await r.read()
        assert srv.records()[-1].tag == "ssrf_bait"

    run_with_server(small_hostile(), go)


def test_sitemaps_and_feeds() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> None:
        spec = _host(srv, lambda h: h.has("sitemaps") and _plain(h))
        idx = (await get(s, srv, spec.name, "/sitemap.xml")).body.decode()
        assert "<sitemapindex" in idx and "sitemap-1.xml.gz" in idx and "<lastmod>" in idx
        part0 = (await get(s, srv, spec.name, "/sitemap-0.xml")).body.decode()
        part1 = gzip.decompress((await get(s, srv, spec.name, "/sitemap-1.xml.gz")).body).decode()
        locs = part0.count("<loc>") + part1.count("<loc>")
        assert locs == srv.web.layout(spec.name).n_pages and "<lastmod>" in part1
        feedy = _host(srv, lambda h: h.has("feeds") and _plain(h))
        rss = (await get(s, srv, feedy.name, "/feed.rss")).body.decode()
        atom = (await get(s, srv, feedy.name, "/feed.atom")).body.decode()
        assert "<rss" in rss and rss.count("<item>") == 10
        assert "<feed" in atom and atom.count("<entry>") == 10

    run_with_server(small_hostile(), go)


def test_manifest_lists_every_host_with_ip_robots_and_behaviours() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> dict[str, Any]:
        return srv.manifest

    m = run_with_server(small_hostile(), go)
    json.dumps(m)
    assert m["port"] > 0 and m["bait_ip"] == BAIT_IP
    for h in m["hosts"].values():
        assert {"ip", "robots", "behaviours", "crawl_delay_s", "domain", "paths"} <= set(h)
    assert all(n.startswith("127.0.") for n in m["allowed_networks"])
    assert "127.0.0.0/24" not in m["allowed_networks"]


def test_listens_on_loopback_only() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> list[str]:
        return [sock.getsockname()[0] for l in srv._listeners for sock in l.sockets]

    addrs = run_with_server(small_hostile(), go)
    assert addrs and all(a.startswith("127.") for a in addrs)
    assert socket.inet_aton(addrs[0])
