"""A lease task does not sleep through a host's politeness delay.

With a delay, the task that holds a host gives it back to the frontier (the
rest of its batch too) when the host's next turn is further off than
LEASE_HOLD_S, and takes whatever host is ready. Before, it slept on one of
the `fetch_tasks` slots, so a crawl could not pass fetch_tasks / delay pages
per second however many hosts were ready.

A real Crawler with the fakes of tests/test_overflow.py, one fetch task.
"""

from __future__ import annotations

import asyncio

from test_overflow import _config, _crawler

HOSTS = ("a.example", "b.example", "c.example")
PAGES = 3
DELAY_S = 0.15


def _small_web() -> dict[str, list[str]]:
    web = {}
    for h in HOSTS:
        pages = [f"https://{h}/p{i}" for i in range(PAGES)]
        web[f"https://{h}/"] = pages
        for p in pages:
            web[p] = [f"https://{h}/"]
    return web


def _crawl(tmp_path, fetch_tasks: int):
    web = _small_web()
    cfg = (_config(memory_max=1000, key_memory_max=100)
           .replace("politeness", delay_s=DELAY_S, response_factor=0.0)
           .replace("crawl", batch_max=20, fetch_tasks=fetch_tasks))
    c, fetcher = _crawler(tmp_path, web, cfg)
    times: list[tuple[str, float]] = []
    fetch = fetcher.fetch

    async def timed_fetch(url: str, *, ip: str, headers: dict):
        times.append((url, c.clock.now()))
        return await fetch(url, ip=ip, headers=headers)

    fetcher.fetch = timed_fetch
    # every URL queued from the start: each host's first lease is a batch of them
    c.add_seeds(sorted(web))
    asyncio.run(c.run())
    c.store.close()
    return web, fetcher, times


def _host(url: str) -> str:
    return url.split("/")[2]


def test_one_fetch_task_serves_other_hosts_while_a_host_waits_for_its_turn(tmp_path):
    web, fetcher, times = _crawl(tmp_path, fetch_tasks=1)
    assert sorted(fetcher.pages) == sorted(web)          # every page, once
    hosts_in_order = [_host(u) for u, _ in times]
    last_of_first = max(i for i, h in enumerate(hosts_in_order) if h == hosts_in_order[0])
    others_before = {h for h in hosts_in_order[:last_of_first] if h != hosts_in_order[0]}
    # the one task went on to the other hosts before the first host was done
    assert others_before == set(HOSTS) - {hosts_in_order[0]}


def test_the_delay_still_holds_between_requests_to_one_host(tmp_path):
    _, _, times = _crawl(tmp_path, fetch_tasks=1)
    by_host: dict[str, list[float]] = {}
    for url, at in times:
        by_host.setdefault(_host(url), []).append(at)
    for host, ats in by_host.items():
        assert len(ats) == PAGES + 2                       # robots.txt, home page, pages
        gaps = [b - a for a, b in zip(ats, ats[1:])]
        # a lower bound on the crawler's own clock: politeness, not speed
        assert min(gaps) >= DELAY_S, (host, gaps)
