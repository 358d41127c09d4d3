"""The progress line: progress against --max-pages / --duration-s with an
ETA, and in a tail the slowest keys with their delay and why. Virtual time:
the crawler's clock is a plain value here."""

from __future__ import annotations

import random
from types import SimpleNamespace

from courtly.config import Config
from courtly.core.frontier import Frontier
from courtly.core.politeness import KeyState, Politeness, PolitenessConfig
from courtly.core.types import UrlItem
from courtly.runtime.crawler import CrawlStats
from courtly.runtime.progress import SlowKey, eta_text, goal_text, progress_line, tail_keys, why_delay

NOW = 10_000.0


def test_eta_is_written_in_seconds_minutes_or_hours():
    assert [eta_text(s) for s in (0, 45, 310, 7380)] == ["0s", "45s", "5m10s", "2h03m"]


def test_max_pages_shows_pages_done_of_the_limit_and_the_eta_at_the_rate():
    assert goal_text(fetched=120, max_pages=300, elapsed_s=12, duration_s=0, rate=10.0) == \
        "page 120/300 (40%), ETA 18s"


def test_duration_shows_time_spent_of_the_limit_and_the_time_left():
    assert goal_text(fetched=5, max_pages=0, elapsed_s=720, duration_s=3600, rate=1.0) == \
        "12m00s of 1h00m, ETA 48m00s"


def test_with_both_limits_the_eta_is_the_nearer_end():
    assert goal_text(fetched=100, max_pages=200, elapsed_s=60, duration_s=120, rate=1.0) == \
        "page 100/200 (50%), 1m00s of 2m00s, ETA 1m00s"


def test_without_a_limit_there_is_no_goal_and_a_stalled_crawl_has_no_eta():
    assert goal_text(fetched=100, max_pages=0, elapsed_s=60, duration_s=0, rate=5.0) == ""
    assert goal_text(fetched=0, max_pages=50, elapsed_s=60, duration_s=0, rate=0.0) == "page 0/50 (0%), ETA -"


def _why(**state) -> str:
    st = KeyState(key="k", **{"delay_s": 1.0, **state})
    return why_delay(st, delay_s_min=1.0, crawl_delay_s_max=30.0, response_factor=10.0, now=NOW)


def test_the_delay_is_explained_by_its_cause():
    assert _why(delay_s=8.0, backoff_until=NOW + 60, backoff_reason="503 Retry-After 60") == \
        "back-off after 503 Retry-After 60"
    assert _why(delay_s=20.0, crawl_delay_s=20.0, last_response_s=0.1) == "robots.txt Crawl-delay 20 s"
    assert _why(delay_s=90.0, crawl_delay_s=120.0) == "robots.txt Crawl-delay 30 s"   # capped
    assert _why(delay_s=12.0, last_response_s=1.5) == "slow responses (last 1.50 s, x10)"
    assert _why(delay_s=4.0, last_response_s=0.05) == "coming down after slow responses or a back-off"
    assert _why(delay_s=1.0, last_response_s=0.05) == "the crawl's delay"


def _crawler(active: dict[str, int], done: int, *, max_pages: int = 0, fetched: int = 0):
    """Keys with queued URLs (`active`: key -> URLs) and `done` keys with none."""
    pol = Politeness(PolitenessConfig())
    fr = Frontier(random.Random(1))
    for key, n in active.items():
        for i in range(n):
            fr.add(UrlItem(url=f"http://{key}/{i}", key=key), 0.0)
    for i in range(done):
        pol.key(f"done{i}.test").fetches = 3
    stats = CrawlStats(started_at=NOW - 100, fetched=fetched)
    return SimpleNamespace(frontier=fr, politeness=pol, overflow=[], stats=stats,
                           clock=SimpleNamespace(now=lambda: NOW),
                           cfg=Config().replace("crawl", max_pages=max_pages))


def _slow(c, key: str, **state) -> None:
    st = c.politeness.key(key)
    for k, v in state.items():
        setattr(st, k, v)


def test_a_tail_names_the_slowest_keys_with_their_delay_and_why():
    c = _crawler({"slow.test": 4, "drip.test": 2, "fast.test": 1}, done=30)
    _slow(c, "slow.test", delay_s=30.0, crawl_delay_s=30.0)
    _slow(c, "drip.test", delay_s=45.0, last_response_s=4.5)
    _slow(c, "fast.test", delay_s=1.0)
    assert tail_keys(c, NOW) == [
        SlowKey("drip.test", 45.0, "slow responses (last 4.50 s, x10)", 2),
        SlowKey("slow.test", 30.0, "robots.txt Crawl-delay 30 s", 4),
        SlowKey("fast.test", 1.0, "the crawl's delay", 1),
    ]
    line = progress_line(c)
    assert line.endswith("| tail, waiting on: drip.test (2 queued, delay 45.0 s: slow responses (last 4.50 s, "
                         "x10)); slow.test (4 queued, delay 30.0 s: robots.txt Crawl-delay 30 s); fast.test "
                         "(1 queued, delay 1.0 s: the crawl's delay)"), line


def test_a_crawl_with_work_on_many_keys_is_not_a_tail():
    many = _crawler({f"k{i}.test": 1 for i in range(20)}, done=100)
    assert tail_keys(many, NOW) == []
    share = _crawler({"a.test": 1, "b.test": 1}, done=2)     # half the keys still busy
    assert tail_keys(share, NOW) == []
    assert "tail" not in progress_line(many)


def test_the_line_starts_with_the_goal_and_its_eta():
    c = _crawler({f"k{i}.test": 1 for i in range(20)}, done=0, max_pages=400, fetched=100)
    assert progress_line(c, rate=5.0).startswith("page 100/400 (25%), ETA 1m00s  fetched 100 (1.0/s)")
    assert progress_line(c).startswith("page 100/400 (25%), ETA 5m00s  fetched 100")   # the run's own rate


def test_the_eta_rate_is_the_last_minute_s_not_the_whole_run_s():
    from courtly.runtime.progress import _Rate

    rate = _Rate()
    assert rate.note(0.0, 0) is None               # too short a window: the caller uses the run's rate
    for t in range(1, 200):
        got = rate.note(float(t), 10 * t if t <= 100 else 1000 + (t - 100))   # 10/s, then 1/s
    assert got == 1.0
