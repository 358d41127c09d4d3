"""Link extraction in a sandboxed pool of worker processes: the pool.

Hostile HTML can crash, hang or balloon a parser, so `extract_links` runs in
separate processes with limits, and a page that kills its worker costs one
dead-letter record, not the crawl. This module owns the parent side (the
pool, its queue, timeouts, retries and recycling); the child process and the
message protocol are in `courtly.shell.extract_worker`.

Theory of operation

- Workers are `multiprocessing` *spawn* processes (a fresh interpreter, never
  a fork of the asyncio parent) running `extract_worker.worker_main`. Each one
  sets RLIMIT_AS to `memory_bytes_max`, ignores SIGINT (the parent decides
  when it stops), then serves tasks in order over its own Unix socket pair,
  in length-prefixed `marshal` frames (no pickle, no per-link objects).
- Batches: the pages submitted in one event-loop turn are sent at the end of
  that turn (`_flush`), each worker's share in one write; the worker reads
  all the frames waiting, runs them in order and answers them in one reply
  frame (early when the batch runs past `extract_worker.REPLY_AFTER_S`). So
  the socket calls and the wake-ups of two processes that share a core are
  per batch, not per page; a lone page still goes at once (nothing waits
  for a batch to fill).
- Up to `pipeline_depth` tasks are in flight per worker, so a worker never
  idles for a round trip. Before each task the worker writes its id and
  start time to a small shared array (`progress`), so the pool knows which
  task of a batch is running. The timer (`_on_timer`) kills the worker by
  PID when that task has run `task_s_max`, or when the worker has started
  none of its tasks for that long. The worker also arms a SIGALRM at
  ``2 * task_s_max + 1`` s with the default action, so a hung worker whose
  parent died still ends.
- When a worker dies (timeout kill, segfault, MemoryError, os._exit) the
  task it was running is to blame (the head, when its progress names none):
  its attempt count goes up and it is retried on a *fresh* worker (one that
  has run nothing yet); the other tasks of its batch (done but unanswered, or
  never started) go back to the front of the queue unblamed. After
  `ATTEMPTS_MAX` (2) failures the result is `ExtractFailed(url, reason,
  attempts)` and the pool goes on.
- A worker is recycled after `tasks_per_child` tasks: it takes no more work,
  its replacement starts at once, and it is closed when its last task ends.
- Backpressure: at most `queue_max` tasks are pending (queued or in flight);
  `submit` waits for a slot.
- A worker that dies before it is ready is a start failure; after
  `START_FAILURES_MAX` in a row the pool is broken and `submit` raises.

Why pipelining and batches: a frame and a wake-up each way per page cost
the pool's side (submit, framing, asyncio, decoding into Link objects) about
twice the CPU that batches do. The figures (throughput by workers and pipeline
depth, start-up time, CPU per page of each side) are in docs/performance.md,
"Figures moved out of the code" (`bench/extract_steps.py`).

Rules: spawn re-imports the parent's ``__main__``, so a script using the
pool needs the ``if __name__ == "__main__":`` guard. The fault hooks in
`extract_worker._inject_fault` act only in a pool built with
``_test_faults=True``.
"""

from __future__ import annotations

import asyncio
import itertools
import marshal
import multiprocessing
import os
import signal
import socket
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Coroutine

from courtly.core.links import ExtractFailed, PageLinks
from courtly.shell.extract_worker import (EXIT_MEMORY, HEADER, PROGRESS_TYPE, READY, REPLY_AFTER_S, decode_page,
                                          worker_main)

__all__ = ["ExtractPool", "ExtractFailed", "ExtractPoolStats"]

ATTEMPTS_MAX = 2            # a page may kill or hang this many workers
START_FAILURES_MAX = 3      # consecutive workers dying before ready: broken
STOP_GRACE_S = 2.0          # after EOF or a kill, wait this long before SIGKILL
SEND_BUFFER_BYTES = 1 << 20  # socket send buffer towards a worker: a batch of pages in one write


@dataclass(frozen=True, slots=True)
class ExtractPoolStats:
    """Counters since the pool started."""

    done: int = 0             # results returned (PageLinks)
    failed: int = 0           # ExtractFailed returned
    retried: int = 0          # tasks re-run on a fresh worker
    workers_started: int = 0
    workers_lost: int = 0     # died or were killed while working
    batches: int = 0          # writes of tasks to a worker (one or more tasks each)
    replies: int = 0          # answers from workers (one or more results each)


@dataclass(eq=False, slots=True)
class _Task:
    task_id: int
    url: str
    payload: bytes            # the marshalled request (framed when sent)
    future: asyncio.Future[PageLinks | ExtractFailed]
    reasons: list[str] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Worker:
    process: multiprocessing.process.BaseProcess
    pid: int
    transport: asyncio.Transport | None = None
    inflight: deque[_Task] = field(default_factory=deque)
    ready: bool = False
    retiring: bool = False     # takes no new work; closed when idle
    lost: bool = False         # its connection is gone
    sent: int = 0
    progress: object = None     # shared [task_id, started_at] the worker writes
    timer: asyncio.TimerHandle | None = None
    idle_since: float | None = None  # tasks in flight but none of them started
    culprit: _Task | None = None     # the task a timeout kill is for
    kill_reason: str | None = None
    exited: asyncio.Future[int | None] | None = None   # the exit status, once reaped


class _WorkerProtocol(asyncio.Protocol):
    """Splits a worker's byte stream into frames for the pool."""

    def __init__(self, pool: ExtractPool, worker: _Worker) -> None:
        self.pool = pool
        self.worker = worker
        self.buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Here, not after `create_unix_connection` returns: the worker's READY
        # may be read (and work dispatched to it) before that await resumes.
        self.worker.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= HEADER.size:
            size = HEADER.unpack_from(self.buffer)[0]
            end = HEADER.size + size
            if len(self.buffer) < end:
                return
            payload = bytes(self.buffer[HEADER.size:end])
            del self.buffer[:end]
            self.pool._on_frame(self.worker, payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool._on_lost(self.worker)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"


class ExtractPool:
    """Runs `extract_links` in sandboxed worker processes (module docstring)."""

    def __init__(
        self,
        workers: int = 1,
        *,
        task_s_max: float = 10.0,
        memory_bytes_max: int = 512 * 2**20,
        tasks_per_child: int = 1000,
        queue_max: int = 256,
        pipeline_depth: int = 2,
        user_agent_token: str = "courtly",
        links_max: int = 5000,
        fingerprints: bool = False,   # also compute PageLinks.prints (main-text SimHash)
        _test_faults: bool = False,
        _reply_after_s: float = REPLY_AFTER_S,   # tests: a wall-time bound they can set beyond a loaded machine's reach
    ) -> None:
        if workers < 1 or tasks_per_child < 1 or queue_max < 1 or pipeline_depth < 1:
            raise ValueError("workers, tasks_per_child, queue_max, pipeline_depth must be >= 1")
        if task_s_max <= 0 or memory_bytes_max < 64 * 2**20:
            raise ValueError("task_s_max must be > 0 and memory_bytes_max >= 64 MiB")
        self.workers = workers
        self.task_s_max = task_s_max
        self.memory_bytes_max = memory_bytes_max
        self.tasks_per_child = tasks_per_child
        self.queue_max = queue_max
        self.pipeline_depth = pipeline_depth
        self._worker_args = (memory_bytes_max, task_s_max, user_agent_token, links_max, _test_faults,
                             fingerprints, _reply_after_s)
        self._context = multiprocessing.get_context("spawn")
        self._slots = asyncio.Semaphore(queue_max)
        self._queue: deque[_Task] = deque()
        self._retries: deque[_Task] = deque()   # run only on fresh workers
        self._workers: list[_Worker] = []
        self._ids = itertools.count()
        self._pending = 0
        self._flush_due = False   # a dispatch is scheduled for the end of this loop turn
        self._drained = asyncio.Event()   # set while nothing is pending (made anew by start)
        self._background: set[asyncio.Future[None]] = set()
        self._start_failures = 0
        self._started = self._closing = self._closed = False
        self._broken: str | None = None
        self._stats = {name: 0 for name in ExtractPoolStats.__slots__}

    # -- public API --------------------------------------------------------------------

    async def __aenter__(self) -> ExtractPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the workers (submit does this on first use)."""
        if self._started:
            return
        self._started = True
        self._drained = asyncio.Event()
        self._drained.set()
        self._ensure_workers()

    async def submit(
        self, body: bytes, url: str, content_type: str = "", x_robots_tag: str = "",
        *, error_print: bool = True,
    ) -> PageLinks | ExtractFailed:
        """Extract one page; waits for a slot when `queue_max` are pending.
        With `fingerprints`, `error_print=False` leaves the soft-404 half of
        `PageLinks.prints` None (the caller knows the host is not soft).

        Raises RuntimeError when the pool is closed or broken.
        """
        self._check_open()
        await self.start()
        async with self._slots:
            self._check_open()
            loop = asyncio.get_running_loop()
            task_id = next(self._ids)
            payload = marshal.dumps((task_id, url, content_type, x_robots_tag, bytes(body), error_print))
            task = _Task(task_id, url, payload, loop.create_future())
            self._pending += 1
            self._drained.clear()
            self._queue.append(task)
            if not self._flush_due:  # one batch for every page submitted in this turn
                self._flush_due = True
                loop.call_soon(self._flush)
            try:
                return await task.future
            finally:
                self._pending -= 1
                if not task.future.done():  # the caller was cancelled
                    task.future.cancel()
                if self._pending == 0:
                    self._drained.set()

    async def close(self, *, drain: bool = True) -> None:
        """Stop the workers; with `drain`, let pending tasks finish first.

        Every worker process has exited (or been SIGKILLed and reaped) when
        this returns.
        """
        if self._closed:
            return
        self._closing = True
        if self._started:
            if drain and not self._broken:
                await self._drained.wait()
            busy = [w for w in self._workers if w.inflight]
            self._fail_all("extract pool closed")
            workers = list(self._workers)
            for worker in workers:
                self._stop(worker)
            for worker in busy:  # their results are no longer wanted
                self._kill(worker)
            await asyncio.gather(*(w.exited for w in workers if w.exited is not None), return_exceptions=True)
            while self._background:
                await asyncio.gather(*list(self._background), return_exceptions=True)
        self._closed = True

    @property
    def pending(self) -> int:
        """Tasks submitted and not yet answered (at most `queue_max`)."""
        return self._pending

    def pids(self) -> list[int]:
        """PIDs of the worker processes not yet reaped."""
        return [w.pid for w in self._workers]

    def stats(self) -> ExtractPoolStats:
        return ExtractPoolStats(**self._stats)

    # -- workers -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._broken:
            raise RuntimeError(self._broken)
        if self._closing:
            raise RuntimeError("extract pool closed")

    def _background_task(self, coro: Coroutine[Any, Any, None]) -> None:
        future = asyncio.ensure_future(coro)
        self._background.add(future)
        future.add_done_callback(self._background.discard)

    def _ensure_workers(self) -> None:
        """Keep `workers` active workers, one of them fresh when retries wait."""
        if self._closing or self._broken:
            return
        active = [w for w in self._workers if not w.retiring and not w.lost]
        try:
            while len(active) < self.workers:
                active.append(self._spawn())
            if self._retries and not any(w.sent == 0 for w in active):
                self._retire(active[0])
                self._spawn()
        except OSError as exc:  # no processes or descriptors left: nothing will recover
            self._broken = f"cannot start an extract worker: {exc}"
            self._fail_all(self._broken)

    def _spawn(self) -> _Worker:
        parent_sock, child_sock = socket.socketpair()
        parent_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        progress = self._context.RawArray(PROGRESS_TYPE, [-1.0, 0.0])
        process = self._context.Process(
            target=worker_main, args=(child_sock, *self._worker_args, progress),
            name="courtly-extract", daemon=True,
        )
        try:
            process.start()
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()
        assert process.pid is not None  # set by start()
        worker = _Worker(process, process.pid, progress=progress)
        worker.exited = asyncio.get_running_loop().create_future()
        self._workers.append(worker)
        self._stats["workers_started"] += 1
        self._background_task(self._connect(worker, parent_sock))
        return worker

    async def _connect(self, worker: _Worker, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_unix_connection(
                lambda: _WorkerProtocol(self, worker), sock=sock
            )
        except OSError:
            sock.close()
            self._kill(worker)
            self._on_lost(worker)
            return
        worker.transport = transport
        if worker.retiring:
            transport.close()

    def _retire(self, worker: _Worker) -> None:
        worker.retiring = True
        if not worker.inflight:
            self._stop(worker)

    def _stop(self, worker: _Worker) -> None:
        """Ask a worker to exit (EOF); the reaper SIGKILLs it if it lingers."""
        worker.retiring = True
        if worker.transport is not None:  # else _connect closes it when it exists
            worker.transport.close()

    def _kill(self, worker: _Worker) -> None:
        if worker.process.exitcode is None:  # not reaped: the PID is still ours
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _on_lost(self, worker: _Worker) -> None:
        if worker.lost:
            return
        worker.lost = True
        if worker.timer is not None:
            worker.timer.cancel()
        self._background_task(self._reap(worker))

    async def _reap(self, worker: _Worker) -> None:
        code = await self._wait_exit(worker)
        self._workers.remove(worker)
        if worker.exited is not None and not worker.exited.done():
            worker.exited.set_result(code)
        reason = worker.kill_reason or (
            f"memory limit of {self.memory_bytes_max} bytes exceeded"
            if code == EXIT_MEMORY else _describe_exit(code)
        )
        if not worker.ready and not self._closing:
            self._on_start_failure(reason)
        elif worker.inflight:
            self._stats["workers_lost"] += 1
            culprit = worker.culprit or self._running(worker)[0] or worker.inflight[0]
            worker.inflight.remove(culprit)
            self._blame(culprit, reason)
            self._queue.extendleft(reversed(worker.inflight))  # never started, or done unanswered
            worker.inflight.clear()
        self._ensure_workers()
        self._dispatch()

    async def _wait_exit(self, worker: _Worker) -> int | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_GRACE_S
        killed = False
        while worker.process.exitcode is None:
            if loop.time() >= deadline:
                if killed:
                    return None
                self._kill(worker)
                killed = True
                deadline = loop.time() + STOP_GRACE_S
            await asyncio.sleep(0.005)
        return worker.process.exitcode

    def _on_start_failure(self, reason: str) -> None:
        self._start_failures += 1
        if self._start_failures >= START_FAILURES_MAX:
            self._broken = f"extract workers fail to start: {reason}"
            self._fail_all(self._broken)

    def _fail_all(self, reason: str) -> None:
        tasks = list(self._queue) + list(self._retries)
        for worker in self._workers:
            tasks.extend(worker.inflight)
            worker.inflight.clear()
        self._queue.clear()
        self._retries.clear()
        for task in tasks:
            if not task.future.done():
                task.future.set_exception(RuntimeError(reason))
        if self._broken:
            for worker in list(self._workers):
                self._stop(worker)
                self._kill(worker)

    def _blame(self, task: _Task, reason: str) -> None:
        task.reasons.append(reason)
        if task.future.done():
            return
        if len(task.reasons) >= ATTEMPTS_MAX:
            self._stats["failed"] += 1
            failed = ExtractFailed(task.url, "; ".join(task.reasons), len(task.reasons))
            task.future.set_result(failed)
        else:
            self._stats["retried"] += 1
            self._retries.append(task)

    # -- tasks ----------------------------------------------------------------------------

    def _flush(self) -> None:
        self._flush_due = False
        self._dispatch()

    def _dispatch(self) -> None:
        """Fill ready workers level by level up to `pipeline_depth`; each
        worker gets what it takes in one write (a batch)."""
        workers = [w for w in self._workers if w.ready and not w.retiring and not w.lost]
        batches: dict[_Worker, list[bytes]] = {}
        for level in range(self.pipeline_depth):
            for worker in workers:
                if len(worker.inflight) > level or worker.retiring:
                    continue
                task = self._next_task(worker)
                if task is None:
                    if not self._retries:
                        break
                    continue
                self._take(worker, task, batches)
            else:
                continue
            break
        for worker, frames in batches.items():
            self._stats["batches"] += 1
            worker.transport.writelines(frames)  # type: ignore[union-attr]
            if worker.timer is None:
                self._arm(worker, self.task_s_max)

    def _next_task(self, worker: _Worker) -> _Task | None:
        if worker.sent == 0:
            while self._retries:
                task = self._retries.popleft()
                if not task.future.done():
                    return task
        while self._queue:
            task = self._queue.popleft()
            if not task.future.done():
                return task
        return None

    def _take(self, worker: _Worker, task: _Task, batches: dict[_Worker, list[bytes]]) -> None:
        worker.inflight.append(task)
        worker.sent += 1
        batches.setdefault(worker, []).extend((HEADER.pack(len(task.payload)), task.payload))
        if worker.sent >= self.tasks_per_child:
            worker.retiring = True
            self._ensure_workers()

    def _running(self, worker: _Worker) -> tuple[_Task | None, float]:
        """The in-flight task the worker is running and when it started (by
        the worker's `progress`), or (None, 0) when it runs none of them."""
        task_id = worker.progress[0]  # type: ignore[index]  # the id first: see _serve_batch
        started_at = worker.progress[1]  # type: ignore[index]
        for task in worker.inflight:
            if task.task_id == task_id:
                return task, started_at
        return None, 0.0

    def _arm(self, worker: _Worker, delay_s: float) -> None:
        worker.timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer, worker)

    def _on_timer(self, worker: _Worker) -> None:
        """Kill the worker when the task it runs has run `task_s_max`, or
        when it has started none of its tasks for that long (the head's fault)."""
        worker.timer = None
        if worker.lost or not worker.inflight:
            return
        now = asyncio.get_running_loop().time()
        task, started_at = self._running(worker)
        if task is not None:
            worker.idle_since = None
            if now < started_at + self.task_s_max:
                self._arm(worker, started_at + self.task_s_max - now)
                return
        elif worker.idle_since is None or now < worker.idle_since + self.task_s_max:
            worker.idle_since = worker.idle_since or now
            self._arm(worker, worker.idle_since + self.task_s_max - now)
            return
        worker.culprit = task or worker.inflight[0]
        worker.kill_reason = f"timed out after {self.task_s_max:g} s"
        self._kill(worker)

    def _on_frame(self, worker: _Worker, payload: bytes) -> None:
        message = marshal.loads(payload)
        if message[0] == "ok":
            self._stats["replies"] += 1
            inflight = worker.inflight
            for task_id, page in message[1]:
                if not inflight or inflight[0].task_id != task_id:
                    worker.kill_reason = "worker protocol error"
                    self._kill(worker)
                    return
                task = inflight.popleft()
                if not task.future.done():
                    self._stats["done"] += 1
                    task.future.set_result(decode_page(page))
            worker.idle_since = None
            if worker.retiring and not inflight:
                self._stop(worker)
            self._dispatch()
        elif message == READY:
            worker.ready = True
            self._start_failures = 0
            self._dispatch()
        elif message[0] == "memory":
            worker.kill_reason = f"memory limit of {self.memory_bytes_max} bytes exceeded"
