"""How the crawler fetches robots.txt: redirects and bodies cut short.

A real Crawler with the fakes of tests/test_overflow.py. The host's
/robots.txt redirects `hops` times along its own /robots-hop/N paths and the
end of the chain disallows /private. RFC 9309 asks crawlers to follow at least
five redirects (and lets them take more as "unavailable": allow all), so
`fetch.redirects_max`, which bounds page redirects, must not change that. A
200 whose body the network cut (`truncated` "time" or "disconnect") is a
network error: unreachable, disallow all (2.3.1.4).
"""

from __future__ import annotations

import asyncio

import pytest
from test_overflow import _config, _crawler, fake_result

ROBOTS = b"User-agent: *\nDisallow: /private\n"


def _crawl(tmp_path, hops: int, redirects_max: int = 5, truncated: str | None = None) -> list[str]:
    web = {"https://h.example/": ["https://h.example/private", "https://h.example/open"],
           "https://h.example/private": [], "https://h.example/open": []}
    cfg = _config(memory_max=100, key_memory_max=10).replace("fetch", redirects_max=redirects_max)
    c, fetcher = _crawler(tmp_path, web, cfg)
    asked: list[str] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        asked.append(url)
        path, cut = "/" + url.split("/", 3)[3], None
        headers_out = {"content-type": "text/html"}
        if path == "/robots.txt" or path.startswith("/robots-hop/"):
            n = 0 if path == "/robots.txt" else int(path.rsplit("/", 1)[1]) + 1
            if n < hops:
                status, body = 301, b""
                headers_out["location"] = f"/robots-hop/{n}"
            else:
                status, body, cut = 200, ROBOTS, truncated
        else:
            status, body = (200, b"<html>x</html>") if url in web else (404, b"")
        return fake_result(url, ip, status, body, headers_out, cut)

    fetcher.fetch = fetch
    c.add_seeds(["https://h.example/"])
    asyncio.run(c.run())
    c.store.close()
    return asked


@pytest.mark.parametrize("redirects_max", [0, 5, 10])
def test_robots_five_redirects_are_followed_whatever_pages_may_follow(tmp_path, redirects_max: int) -> None:
    asked = _crawl(tmp_path, hops=5, redirects_max=redirects_max)
    assert sum("/robots-hop/" in u for u in asked) == 5
    assert "https://h.example/open" in asked and "https://h.example/private" not in asked


@pytest.mark.parametrize("redirects_max", [5, 10])
def test_robots_a_sixth_redirect_is_unavailable_allow_all(tmp_path, redirects_max: int) -> None:
    asked = _crawl(tmp_path, hops=6, redirects_max=redirects_max)
    assert sum("/robots-hop/" in u for u in asked) == 5   # the sixth hop is not asked for
    assert "https://h.example/private" in asked


@pytest.mark.parametrize(("truncated", "fetched"), [("time", False), ("disconnect", False), ("length", True), (None, True)])
def test_robots_a_body_cut_by_the_network_is_unreachable(tmp_path, truncated: str | None, fetched: bool) -> None:
    asked = _crawl(tmp_path, hops=0, truncated=truncated)
    assert ("https://h.example/" in asked) is fetched
    assert "https://h.example/private" not in asked
