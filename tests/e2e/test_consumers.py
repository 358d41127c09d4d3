"""Two consumers with different quotas, one crawler, judged from the server's side.

Consumer `small` (a quota of few fetches a day) and consumer `big` (no quota)
submit overlapping seeds of the simulated web: `big` with `courtly submit`
before the crawl, `small` with `courtly crawl --consumer small`. The tests
check the server's log (one crawler's manners), each consumer's stream, the
quota and the chargeback against the requests the servers saw.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from crawl_support import check, crawl_args, db_rows, run_courtly, write_config
from courtly.runtime.demo import simweb_process

pytestmark = pytest.mark.slow

SIM_ARGS = ["--profile", "demo", "--hosts", "4", "--ips", "2", "--pages-per-host", "12", "--seed", "5"]
SMALL_QUOTA = 6

CONSUMERS = f"""
[[consumers]]
name = "small"
fetches_per_day = {SMALL_QUOTA}
sink = "sinks/small"
price_per_million = 50.0

[[consumers]]
name = "big"
weight = 2.0
sink = "sinks/big"
price_per_million = 20.0
"""


def _stream(out: Path, name: str) -> list[dict]:
    path = out / "sinks" / name / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _fetched(lines: list[dict]) -> list[dict]:
    return [line for line in lines if "status" in line]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("consumers")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        seeds = [s for s in (web.out / "seeds.txt").read_text().split() if s.startswith("http")]
        assert len(seeds) >= 4, "the web must give a seed per host"
        cfg = write_config(tmp / "c.toml")
        cfg.write_text(cfg.read_text() + CONSUMERS)
        out = tmp / "crawl"
        small_seeds, big_seeds = seeds[:3], seeds[1:]   # seeds[1:3] wanted by both
        sub = run_courtly("submit", "--consumer", "big", "--out", str(out), "--config", str(cfg),
                          "--json", *big_seeds)
        assert sub.returncode == 0, sub.stderr
        args = crawl_args(web, out, cfg)
        i = args.index("--seeds-file")
        del args[i:i + 2]
        done = run_courtly(*args, "--consumer", "small", *small_seeds)
        assert done.returncode == 0, done.stderr
        report = check(web)
        from courtly.sim.reqlog import load_log

        bill = run_courtly("report", "--consumers", "--json", "--out", str(out), "--config", str(cfg))
        assert bill.returncode == 0, bill.stderr
        yield {"out": out, "report": report, "requests": load_log(web.log_file), "seeds": seeds,
               "small_seeds": small_seeds, "big_seeds": big_seeds, "bill": json.loads(bill.stdout)}


def _request_counts(crawled) -> Counter:
    return Counter((r.host, r.path) for r in crawled["requests"])


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.netloc, parts.path + (f"?{parts.query}" if parts.query else "")


def test_the_server_log_shows_one_crawlers_manners(crawled):
    assert crawled["report"].ok, crawled["report"].render()


def test_a_url_both_consumers_asked_for_is_requested_once_and_delivered_to_both(crawled):
    small = {line["url"]: line for line in _fetched(_stream(crawled["out"], "small"))}
    big = {line["url"]: line for line in _fetched(_stream(crawled["out"], "big"))}
    counts = _request_counts(crawled)
    both = set(small) & set(big)
    assert both, "the overlapping seeds reach both streams"
    for url in both:
        assert counts[_key(url)] == 1, url
        assert small[url]["warc_file"] == big[url]["warc_file"]
        assert small[url]["warc_offset"] == big[url]["warc_offset"]
        assert small[url]["shared"] and big[url]["shared"]


def test_each_stream_holds_its_consumers_seeds_and_not_the_others(crawled):
    small = {line["url"] for line in _stream(crawled["out"], "small")}
    big = {line["url"] for line in _stream(crawled["out"], "big")}
    only_small = set(crawled["small_seeds"]) - set(crawled["big_seeds"])
    only_big = set(crawled["big_seeds"]) - set(crawled["small_seeds"])
    assert only_small <= small and not (only_small & big)
    assert only_big <= big and not (only_big & small)


def test_each_stream_line_points_at_a_response_record_for_its_url(crawled):
    from warcio.archiveiterator import ArchiveIterator

    out = crawled["out"]
    for name in ("small", "big"):
        for line in _fetched(_stream(out, name))[:20]:
            with open(out / "warc" / line["warc_file"], "rb") as fh:
                fh.seek(line["warc_offset"])
                record = next(iter(ArchiveIterator(fh)))
            assert record.rec_headers.get_header("WARC-Target-URI") == line["url"]


def test_the_small_quota_holds_and_its_excess_is_decided_quota(crawled):
    small = _stream(crawled["out"], "small")
    charged = [line for line in _fetched(small) if not line.get("detail")]
    assert len(charged) <= SMALL_QUOTA
    denied = [line for line in small if line.get("decision") == "quota"]
    decided = db_rows(crawled["out"], "SELECT count(*) FROM urls WHERE reason = 'quota'")[0][0]
    assert denied, "the small consumer asked for more than its quota"
    assert decided >= 1, "URLs only the small consumer wanted are decided with reason quota"


def test_the_chargeback_adds_up_to_the_requests_the_servers_saw(crawled):
    bill = crawled["bill"]
    assert bill["requests"] == len(crawled["requests"])
    billed = sum(row["charged"] for row in bill["consumers"])
    assert billed + bill["overhead"] == pytest.approx(len(crawled["requests"]))
    robots = sum(1 for r in crawled["requests"] if r.path == "/robots.txt")
    assert bill["overhead"] >= robots
    rows = {row["consumer"]: row for row in bill["consumers"]}
    assert rows["small"]["fetches"] <= SMALL_QUOTA
    assert rows["small"]["denied"] >= 1
    assert rows["big"]["cost"] == pytest.approx(rows["big"]["charged"] * 20.0 / 1e6)
