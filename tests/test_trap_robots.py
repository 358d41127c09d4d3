"""A URL the trap guard denies costs no request at all, not even the
robots.txt of its origin: a link farm mints a new host name per link, and a
robots.txt fetched for each of them was the farm's cost after it was fenced
(134 robots.txt requests for 26 farm pages on `simweb --wild all`).

A real Crawler with the fakes of tests/test_overflow.py; the trap guard's
verdict is replaced by one that fences the farm's host names.
"""

from __future__ import annotations

import asyncio

from test_overflow import _config, _crawler, fake_result

from courtly.core.trap_state import Verdict
from courtly.core.types import Reason

FARM = [f"https://x{i}.farm.example/a/{i}" for i in range(6)]


def test_a_url_the_trap_guard_denies_costs_no_robots_txt(tmp_path) -> None:
    web = {"https://farm.example/": FARM, **{u: [] for u in FARM}}
    c, fetcher = _crawler(tmp_path, web, _config(memory_max=100, key_memory_max=10))
    asked: list[str] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        asked.append(url)
        if url.endswith("/robots.txt"):
            return fake_result(url, ip, 404, b"", {"content-type": "text/plain"}, None)
        return fake_result(url, ip, 200, b"<html>x</html>", {"content-type": "text/html"}, None)

    def before_fetch(key: str, url: str, now: float) -> Verdict:
        fenced = ".farm.example" in url.split("/")[2]
        return Verdict(False, reason=Reason.TRAP, rule="yield", detail="farm") if fenced else Verdict(True)

    fetcher.fetch = fetch
    c.budget.before_fetch = before_fetch
    c.add_seeds(["https://farm.example/"])
    asyncio.run(c.run())
    decided = {row[0]: row[1] for row in c.store._db.execute("SELECT url, reason FROM urls")}
    c.store.close()
    assert asked == ["https://farm.example/robots.txt", "https://farm.example/"]
    assert all(decided.get(u) == Reason.TRAP.value for u in FARM), decided
