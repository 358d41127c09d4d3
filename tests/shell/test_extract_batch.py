"""Tests for the batched wire of courtly.shell.extract: pages submitted in one
event-loop turn go to a worker in one write, the worker answers a batch at a
time, and a page that kills or hangs its worker inside a batch is blamed
alone (the worker's progress says which one it was running).
"""

from __future__ import annotations

import asyncio

import pytest

from courtly.core.links import ExtractFailed, PageLinks, extract_links
from courtly.shell.extract import ExtractPool, ExtractPoolStats

pytestmark = pytest.mark.timeout(120)

SMALL = [
    (b"<html><title>p%d</title><a href=/a%d>a</a><a href='//x.example/%d'>x</a></html>" % (i, i, i),
     f"http://h{i}.example/", "text/html", "")
    for i in range(8)
]


def in_process(body: bytes, url: str, content_type: str, x_robots_tag: str) -> PageLinks:
    return extract_links(body, url, content_type=content_type, x_robots_tag=x_robots_tag)


def fault(name: str) -> bytes:
    return b"<html><body>courtly-fault:" + name.encode() + b"<a href=/never></body></html>"


def run_batch(pages: list[tuple], **pool_kwargs) -> tuple[list, ExtractPoolStats, ExtractPoolStats]:
    """Submit `pages` in one event-loop turn to a pool whose worker is ready
    (so a batch is not just what piled up during start-up): the results and
    the pool's stats before and after."""
    async def main():
        async with ExtractPool(1, **pool_kwargs) as pool:
            await pool.submit(*SMALL[0])
            before = pool.stats()
            results = await asyncio.gather(*(pool.submit(*page) for page in pages))
            return results, before, pool.stats()

    return asyncio.run(main())


# a batch answers early past a wall-time bound (extract_worker.REPLY_AFTER_S); the tests that count
# one reply set it beyond what a loaded machine takes (CI: 8 pages of 60 KB took more than 50 ms)
ONE_REPLY = {"_reply_after_s": 60.0}


def test_pages_submitted_in_one_turn_travel_in_one_batch_and_one_reply():
    results, before, after = run_batch(SMALL, pipeline_depth=8, **ONE_REPLY)
    assert results == [in_process(*page) for page in SMALL]
    assert after.batches - before.batches == 1
    assert after.replies - before.replies == 1


def test_a_batch_is_at_most_the_pipeline_depth():
    results, before, after = run_batch(SMALL, pipeline_depth=3)
    assert results == [in_process(*page) for page in SMALL]
    assert after.batches - before.batches == 3   # 3 + 3 + 2 pages
    assert after.done - before.done == 8


@pytest.mark.parametrize("name, reason", [("exit", "worker exited with status 13"),
                                          ("segv", "worker killed by SIGSEGV"),
                                          ("hang", "timed out after 1 s")])
def test_a_bomb_inside_a_batch_is_blamed_alone_and_its_batch_mates_are_retried(name, reason):
    pages = SMALL[:3] + [(fault(name), "http://bad.example/", "text/html", "")] + SMALL[3:]
    results, before, after = run_batch(pages, task_s_max=1.0, pipeline_depth=8, _test_faults=True)
    bad = results[3]
    assert isinstance(bad, ExtractFailed) and bad.attempts == 2
    assert bad.reason == f"{reason}; {reason}"
    good = results[:3] + results[4:]
    assert good == [in_process(*page) for page in SMALL]   # done before it, or never started: not blamed
    assert after.failed == 1 and after.retried == 1 and after.workers_lost == 2


def test_a_batch_longer_than_task_s_max_is_not_a_timeout():
    """The clock is per page: eight pages of 0.4 s in one batch take 3.2 s
    against a 1 s limit and none of them is killed."""
    pages = [(fault("sleep:0.4") + b"%d" % i, f"http://s{i}.example/", "text/html", "") for i in range(8)]
    results, _, after = run_batch(pages, task_s_max=1.0, pipeline_depth=8, _test_faults=True)
    assert results == [in_process(*page) for page in pages]
    assert after.workers_lost == 0 and after.failed == 0


def test_after_a_slow_page_the_worker_answers_what_is_done_before_going_on():
    """Past REPLY_AFTER_S the worker sends what is done before its next page."""
    pages = [(fault("sleep:0.2"), "http://slow.example/", "text/html", ""), SMALL[1], SMALL[2]]
    # the slow page's 0.2 s passes the bound surely; the two small pages after it stay within it
    results, before, after = run_batch(pages, pipeline_depth=8, _test_faults=True, _reply_after_s=0.15)
    assert results == [in_process(*page) for page in pages]
    assert after.batches - before.batches == 1
    assert after.replies - before.replies == 2   # the slow page alone, then the two others


def test_a_lone_page_is_sent_at_once():
    """One page submitted alone is answered without waiting for others."""
    results, before, after = run_batch([SMALL[1]], pipeline_depth=8, **ONE_REPLY)
    assert results == [in_process(*SMALL[1])]
    assert after.batches - before.batches == 1 and after.replies - before.replies == 1


def test_a_batch_of_large_pages_goes_in_one_write_and_comes_back_in_one_reply():
    """Eight pages of ~60 KB (more than a default socket buffer holds) still
    reach the worker as one batch."""
    pages = [(b"<html><title>big</title><a href=/b%d>b</a><p>" % i + b"word " * 12_000 + b"</p></html>",
              f"http://big{i}.example/", "text/html", "") for i in range(8)]
    results, before, after = run_batch(pages, pipeline_depth=8, **ONE_REPLY)
    assert results == [in_process(*page) for page in pages]
    assert after.batches - before.batches == 1
    assert after.replies - before.replies == 1
