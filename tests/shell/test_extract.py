"""Tests for courtly.shell.extract: the sandboxed extraction pool.

Faults are injected with markers in the page body that workers honour only
in a pool built with ``_test_faults=True``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os

import pytest

from courtly.core.links import ExtractFailed, PageLinks, extract_links
from courtly.shell.extract import ExtractPool

pytestmark = pytest.mark.timeout(120)

NORMAL = [
    (b"<html><head><title>One</title><link rel=canonical href=/c></head>"
     b"<body><a href=a>a</a><a rel=nofollow href='//x.example/y'>y</a></body></html>",
     "http://example.com/dir/", "text/html", ""),
    ("<meta charset=windows-1251><title>Привет</title><a href=/п>".encode("cp1251"),
     "https://example.org/", "", "courtly: noindex"),
    (b"<base href=/b/><meta name=robots content=none><a href=x><area href=y>",
     "http://h.example/", "text/html; charset=utf-8", ""),
    (b"%PDF-1.4 not html", "http://h.example/doc.pdf", "application/pdf", "noindex"),
    (bytes(range(256)) * 40, "http://h.example/bin", "text/html", ""),
    (b"".join(b"<p>row %d <a href='/item/%d'>item</a></p>" % (i, i) for i in range(2000)),
     "http://big.example/list", "text/html", ""),
    (b"<div>" * 20_000 + b"<a href=/deep>", "http://deep.example/", "text/html", ""),
]


def in_process(body: bytes, url: str, content_type: str, x_robots_tag: str) -> PageLinks:
    return extract_links(body, url, content_type=content_type, x_robots_tag=x_robots_tag)


def fault(name: str) -> bytes:
    return b"<html><body>courtly-fault:" + name.encode() + b"<a href=/never></body></html>"


def run(coro):
    return asyncio.run(coro)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_results_equal_the_in_process_function():
    async def main():
        async with ExtractPool(2) as pool:
            return await asyncio.gather(*(pool.submit(*page) for page in NORMAL * 3))

    results = run(main())
    assert results == [in_process(*page) for page in NORMAL * 3]


@pytest.mark.parametrize(
    "name, reason",
    [("hang", "timed out after 1 s"), ("exit", "worker exited with status 13"),
     ("segv", "worker killed by SIGSEGV")],
)
def test_task_that_hangs_or_crashes_fails_after_two_attempts_while_others_succeed(name, reason):
    async def main():
        async with ExtractPool(1, task_s_max=1.0, pipeline_depth=2, _test_faults=True) as pool:
            bad = pool.submit(fault(name), "http://bad.example/", "text/html", "")
            good = [pool.submit(*page) for page in NORMAL]
            results = await asyncio.gather(bad, *good)
            return results, pool.stats()

    (bad, *good), stats = run(main())
    assert isinstance(bad, ExtractFailed)
    assert bad.url == "http://bad.example/" and bad.attempts == 2
    assert bad.reason == f"{reason}; {reason}"
    assert good == [in_process(*page) for page in NORMAL]  # pipelined pages were not blamed
    assert stats.failed == 1 and stats.retried == 1 and stats.workers_lost == 2


def test_memory_limit_is_enforced_and_yields_extract_failed():
    async def main():
        async with ExtractPool(1, memory_bytes_max=256 * 2**20, _test_faults=True) as pool:
            failed = await pool.submit(fault("alloc"), "http://mem.example/", "text/html", "")
            after = await pool.submit(*NORMAL[0])
            return failed, after

    failed, after = run(main())
    assert failed == ExtractFailed(
        "http://mem.example/",
        f"memory limit of {256 * 2**20} bytes exceeded; memory limit of {256 * 2**20} bytes exceeded",
        2,
    )
    assert after == in_process(*NORMAL[0])


def test_a_page_that_fails_once_succeeds_on_a_fresh_worker(tmp_path):
    flag = tmp_path / "crashed-once"
    body = b"<html>courtly-fault:once:" + str(flag).encode() + b" <a href=/ok>"

    async def main():
        async with ExtractPool(1, _test_faults=True) as pool:
            return await pool.submit(body, "http://once.example/", "text/html", ""), pool.stats()

    page, stats = run(main())
    assert flag.exists()
    assert page == in_process(body, "http://once.example/", "text/html", "")
    assert stats.retried == 1 and stats.failed == 0 and stats.workers_lost == 1


def test_fault_markers_are_ignored_without_the_test_flag():
    async def main():
        async with ExtractPool(1, task_s_max=2.0) as pool:
            return await pool.submit(fault("exit"), "http://h.example/", "text/html", "")

    page = run(main())
    assert page == in_process(fault("exit"), "http://h.example/", "text/html", "")


def test_workers_are_recycled_after_tasks_per_child_and_close_leaves_no_children():
    async def main():
        seen: set[int] = set()
        async with ExtractPool(2, tasks_per_child=3) as pool:
            for _ in range(4):
                results = await asyncio.gather(*(pool.submit(*page) for page in NORMAL[:4]))
                assert results == [in_process(*page) for page in NORMAL[:4]]
                seen.update(pool.pids())
            stats = pool.stats()
        return seen, stats, pool.pids()

    seen, stats, left = run(main())
    assert stats.workers_started >= 16 // 3 and stats.workers_lost == 0
    assert left == []
    assert len(seen) >= 3
    assert not [pid for pid in seen if alive(pid)]
    assert multiprocessing.active_children() == []


def test_close_after_faults_leaves_no_children():
    async def main():
        pool = ExtractPool(2, task_s_max=1.0, _test_faults=True)
        await pool.start()
        pids = set(pool.pids())
        tasks = [asyncio.ensure_future(pool.submit(fault("hang"), "http://h/", "text/html", ""))]
        await asyncio.sleep(0.5)
        pids.update(pool.pids())
        await pool.close(drain=False)
        with pytest.raises(RuntimeError):
            await tasks[0]
        return pids, pool.pids()

    pids, left = run(main())
    assert left == [] and pids
    assert not [pid for pid in pids if alive(pid)]


def test_submit_waits_when_queue_max_tasks_are_pending():
    async def main():
        async with ExtractPool(1, queue_max=2, _test_faults=True) as pool:
            peak = 0

            async def one(i: int):
                nonlocal peak
                result = await pool.submit(fault("sleep:0.2"), f"http://h/{i}", "text/html", "")
                peak = max(peak, pool.pending)
                return result

            waiters = [asyncio.ensure_future(one(i)) for i in range(5)]
            await asyncio.sleep(0.05)
            assert pool.pending == 2
            results = await asyncio.gather(*waiters)
            return results, peak

    results, peak = run(main())
    assert all(isinstance(r, PageLinks) for r in results)
    assert peak <= 2


def test_cancelled_submit_leaves_the_pool_working():
    async def main():
        async with ExtractPool(1, _test_faults=True) as pool:
            slow = asyncio.ensure_future(pool.submit(fault("sleep:0.5"), "http://h/", "text/html", ""))
            await asyncio.sleep(0.1)
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow
            return await pool.submit(*NORMAL[0]), pool.pending

    page, pending = run(main())
    assert page == in_process(*NORMAL[0]) and pending == 0


def test_closed_pool_refuses_work():
    async def main():
        pool = ExtractPool(1)
        await pool.close()
        with pytest.raises(RuntimeError):
            await pool.submit(*NORMAL[0])

    run(main())


@pytest.mark.parametrize("kwargs", [{"workers": 0}, {"task_s_max": 0}, {"queue_max": 0},
                                    {"memory_bytes_max": 2**20}, {"tasks_per_child": 0}])
def test_limits_are_checked(kwargs):
    with pytest.raises(ValueError):
        ExtractPool(**kwargs)


def test_pool_computes_the_budget_fingerprints_beside_the_links():
    from courtly.core.fingerprint import simhash64
    from courtly.core.maintext import main_text
    from courtly.core.soft404 import error_fingerprint

    body = (b"<html><head><title>t</title></head><body><nav>menu home about</nav><main>"
            + b" ".join(b"<p>paragraph %d has several plain words in it</p>" % i for i in range(40))
            + b"<a href='/x'>x</a></main></body></html>")
    url = "http://a.test/page"

    async def go():
        async with ExtractPool(1, fingerprints=True) as pool:
            return (await pool.submit(body, url, "text/html", ""),
                    await pool.submit(body, url, "text/html", "", error_print=False))

    page, honest_host_page = asyncio.run(go())
    text = main_text(body, "text/html")
    assert page.prints == (simhash64(text), error_fingerprint(text, url))
    assert page.prints[0] != 0
    assert [l.url for l in page.links] == ["http://a.test/x"]
    # a page of a host that is not soft: the soft-404 half is left out
    assert honest_host_page.prints == (simhash64(text), None)
    assert honest_host_page.links == page.links


def test_a_worker_ready_before_its_connection_await_resumes_gets_work_on_its_transport():
    """The READY frame can be read in the loop turn the connection is made,
    before `create_unix_connection` returns: the worker's transport must be
    known by then, or dispatching to it fails (seen at start-up under load)."""
    import marshal

    from courtly.shell import extract as extract_mod
    from courtly.shell.extract_worker import HEADER, READY

    class _Transport:
        def __init__(self) -> None:
            self.written: list[bytes] = []

        def writelines(self, frames) -> None:
            self.written.extend(frames)

        def close(self) -> None:
            pass

    async def scenario() -> list[bytes]:
        pool = ExtractPool(1, task_s_max=30.0)
        worker = extract_mod._Worker(process=None, pid=0)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        task = extract_mod._Task(1, "http://a.test/", marshal.dumps((1, "http://a.test/")), loop.create_future())
        pool._queue.append(task)
        pool._workers.append(worker)
        protocol = extract_mod._WorkerProtocol(pool, worker)
        transport = _Transport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        ready = marshal.dumps(READY)
        protocol.data_received(HEADER.pack(len(ready)) + ready)
        if worker.timer is not None:
            worker.timer.cancel()
        return transport.written

    written = asyncio.run(scenario())
    assert written and written[-1] == marshal.dumps((1, "http://a.test/"))
