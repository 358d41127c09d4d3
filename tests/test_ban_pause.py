"""A host whose answers turn into a challenge page, or into 403s, is paused
within a few dozen requests, listed by `courtly stats`, and its URLs stay
queued (issue 17). A real Crawler and SqliteStore with the fakes of
tests/test_overflow.py; the fake server counts what it is asked."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from test_overflow import _config, _crawler, fake_result

from courtly.core.health import Health
from courtly.runtime.report import stats

PAGES = 60
WEB = {"https://ban.example/": [f"https://ban.example/p{i}" for i in range(PAGES)],
       **{f"https://ban.example/p{i}": [] for i in range(PAGES)}}
CHALLENGE = b"<html><title>Checking your browser</title>" + b"c" * 800 + b"</html>"


@pytest.mark.parametrize("turns_into", ["challenge", "403"])
def test_a_host_turning_into_a_ban_is_paused_within_a_few_dozen_requests_and_listed(tmp_path, turns_into):
    cfg = _config(memory_max=1000, key_memory_max=100).replace(
        "politeness", delay_s=0.0, probe_s_min=3600.0, probe_s_max=7200.0, ip_rate=10_000.0)
    c, fetcher = _crawler(tmp_path, WEB, cfg)
    asked: list[str] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        if url.endswith("/robots.txt"):
            return fake_result(url, ip, 404)
        asked.append(url)
        if len(asked) <= 5:
            return fake_result(url, ip, 200, b"<html>%s " % url.encode() + b"y" * 300 + b"</html>")
        if turns_into == "403":
            return fake_result(url, ip, 403, b"Forbidden")
        return fake_result(url, ip, 200, CHALLENGE)

    fetcher.fetch = fetch
    c.add_seeds(["https://ban.example/"])

    async def go() -> None:
        crawl = asyncio.create_task(c.run())
        while c.politeness.health("ban.example") is not Health.PAUSED and not crawl.done():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)   # the probe is an hour away: nothing more may be sent meanwhile
        c.stop()
        await crawl

    asyncio.run(asyncio.wait_for(go(), 30.0))
    c.store.close()
    assert c.politeness.health("ban.example") is Health.PAUSED
    assert len(asked) - 5 == 10                      # paused on the 10th such answer, nothing after
    text = stats(tmp_path)
    line = next(line for line in text.splitlines() if "ban.example" in line)
    assert "paused since" in line and ("challenge page" if turns_into == "challenge" else "403 wave") in line
    db = sqlite3.connect(str(tmp_path / "crawl.db"))
    queued = db.execute("SELECT count(*) FROM urls WHERE state = 'queued'").fetchone()[0]
    attempts = db.execute("SELECT max(attempts) FROM urls WHERE state = 'queued'").fetchone()[0]
    db.close()
    # 5 pages and the 9 answers before the pause are taken as answered; the pausing one stays queued
    assert queued == PAGES + 1 - 5 - 9 and attempts == 0
