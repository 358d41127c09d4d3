"""The URL-seen Bloom filter's fill alarm is raised: a warning, `alarm` for
the metrics, and a rebuild from the store at a larger capacity (or, at
`seen.bloom_capacity_max`, a warning saying what to raise).

A real Crawler and SqliteStore in this process (tests/inproc_support.py); no requests.
"""

from __future__ import annotations

import logging

import pytest
from inproc_support import crawler

from courtly.config import ConfigError, config_from_dict
from courtly.core.seen import SeenFilter
from courtly.runtime.crawler import Crawler

SEEDS = [f"https://h{i}.example/p" for i in range(300)]


def _crawler(tmp_path, **seen) -> Crawler:
    return crawler(tmp_path, config_from_dict({"seen": seen}))


def _alarms(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", "") == "bloom_alarm"]


def test_a_filter_filled_past_its_alarm_says_so_for_the_metrics():
    f = SeenFilter(100, 0.01)
    f.update(f"u{i}" for i in range(50))
    assert not f.alarm and f.fill_ratio < 0.5
    f.update(f"u{i}" for i in range(50, 200))
    assert f.alarm and f.past_capacity and f.fill_ratio > 0.5


def test_past_its_fill_alarm_the_filter_is_rebuilt_from_the_store_larger_and_keeps_every_url(tmp_path, caplog):
    c = _crawler(tmp_path, bloom_capacity=100, bloom_error_rate=0.01)
    with caplog.at_level(logging.INFO, logger="courtly"):
        c.add_seeds(SEEDS)
        assert c.seen.alarm
        c.commit()
    (rec,) = _alarms(caplog)
    assert rec.levelname == "WARNING" and rec.resized and "rebuilt from the store with capacity" in rec.getMessage()
    assert c.seen.capacity >= 200 and not c.seen.alarm
    assert all(u in c.seen for u in SEEDS)                 # a negative cache may never lose a URL
    assert c.bloom_watch.resizes == 1
    c.commit()                                             # below the alarm again: nothing more
    assert len(_alarms(caplog)) == 1


def test_at_its_maximum_capacity_the_alarm_is_one_clear_warning_and_no_resize(tmp_path, caplog):
    c = _crawler(tmp_path, bloom_capacity=100, bloom_error_rate=0.01, bloom_capacity_max=100)
    with caplog.at_level(logging.INFO, logger="courtly"):
        c.add_seeds(SEEDS)
        c.commit()
        c.add_seeds([f"https://x{i}.example/" for i in range(10)])
        c.commit()
    (rec,) = _alarms(caplog)
    assert not rec.resized and "raise seen.bloom_capacity_max" in rec.getMessage()
    assert c.seen.capacity == 100 and c.seen.alarm


def test_a_maximum_below_the_capacity_is_refused():
    with pytest.raises(ConfigError, match="bloom_capacity_max"):
        config_from_dict({"seen": {"bloom_capacity": 10, "bloom_capacity_max": 5}})
