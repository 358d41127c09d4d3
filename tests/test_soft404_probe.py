"""When the crawler probes a host for soft 404s (runtime/budget.probe_before).

A real Crawler with the fakes of tests/test_overflow.py and a fetcher that
records every request in order. The probe asks "what does this host answer
for a path that cannot exist?"; any real 404 on the way answers it too, and
the probe waits for the host's first page so that such an answer can come
first. Hosts:

* none.example: no robots.txt (404), which is not taken as an answer
  (servers often answer robots.txt apart from the site): probed after its
  first page;
* gone.example: robots.txt names a sitemap that is missing: the first page,
  then the sitemap's 404 settles it, never probed;
* plain.example: robots.txt without sitemaps, every page there: probed once,
  after its first page and before its second;
* soft.example: like plain.example, but it answers unknown paths (the probe
  too) with 200 and its error page: probed after its first page, and its
  error page found at a broken link is judged a soft 404.
"""

from __future__ import annotations

import asyncio

from test_overflow import _config, _crawler, fake_result

from courtly.core.soft404 import PROBE_PREFIX

PAGES = 4
ROBOTS = {
    "gone.example": b"User-agent: *\nAllow: /\nSitemap: https://gone.example/sitemap-missing.xml\n",
    "plain.example": b"User-agent: *\nAllow: /\n",
    "soft.example": b"User-agent: *\nAllow: /\n",
}
ERROR_PAGE = b"<html><head><title>Oops</title></head><body><p>Sorry, that page is not here. Try the search box.</p></body></html>"


def _web() -> dict[str, list[str]]:
    web = {}
    for h in ("none.example", "gone.example", "plain.example", "soft.example"):
        pages = [f"https://{h}/p{i}" for i in range(PAGES)]
        web[f"https://{h}/"] = pages
        for p in pages:
            web[p] = [f"https://{h}/"]
    web["https://soft.example/p0"] = ["https://soft.example/", "https://soft.example/broken-link"]
    return web


def _article(url: str) -> bytes:
    words = " ".join(f"{url.rsplit('/', 1)[-1]} article word{i} text{i * 7}" for i in range(60))
    return f"<html><head><title>{url}</title></head><body><article><p>{words}</p></article></body></html>".encode()


def _crawl(tmp_path):
    web = _web()
    cfg = (_config(memory_max=1000, key_memory_max=100)
           .replace("budget", enabled=True)
           .replace("crawl", batch_max=1, fetch_tasks=1))
    c, fetcher = _crawler(tmp_path, web, cfg)
    asked: list[str] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        asked.append(url)
        host, path = url.split("/")[2], "/" + url.split("/", 3)[3]
        ctype = "text/html"
        if path == "/robots.txt":
            status, body, ctype = (200, ROBOTS[host], "text/plain") if host in ROBOTS else (404, b"", "text/plain")
        elif url in web:
            status, body = 200, _article(url)
        elif host == "soft.example":
            status, body = 200, ERROR_PAGE
        else:
            status, body = 404, b"<html>not found</html>"
        return fake_result(url, ip, status, body, {"content-type": ctype})

    fetcher.fetch = fetch
    c.add_seeds(sorted(u for u in web if u.endswith(".example/")))
    asyncio.run(c.run())
    flags = list(c.store._db.execute("SELECT url, flag FROM flags"))
    c.store.close()
    assert c.stats.probes_fetched == sum(PROBE_PREFIX in u for u in asked) == 3   # counted for /metrics
    return asked, flags


def _of(asked: list[str], host: str) -> list[str]:
    return ["probe" if PROBE_PREFIX in u else u.split("/", 3)[3] or "/"
            for u in asked if u.split("/")[2] == host]


def test_a_real_404_settles_the_question_and_the_probe_waits_for_the_first_page(tmp_path):
    asked, flags = _crawl(tmp_path)
    none, gone, plain, soft = (_of(asked, h) for h in
                               ("none.example", "gone.example", "plain.example", "soft.example"))
    assert "probe" not in gone and "sitemap-missing.xml" in gone
    for seq in (none, plain, soft):
        assert seq.count("probe") == 1, seq
        assert seq[:2] == ["robots.txt", "/"] and seq[2] == "probe", seq   # after the first page, before the second
    # every page of every host was still fetched
    assert sum(1 for u in asked if PROBE_PREFIX not in u and not u.endswith("/robots.txt")) >= 4 * (PAGES + 1)
    # the soft host's error page, behind a broken link, is known for what it is
    assert ("https://soft.example/broken-link", "soft404") in flags, flags
