"""The worker side of the extract pool: the child process and the wire.

Owns what runs inside an extract worker process and the messages it
exchanges with `courtly.shell.extract.ExtractPool` (the parent side).

Theory of operation

- `worker_main` is the target of a `multiprocessing` *spawn* process: the
  child imports this module by its path, so it stays small and imports no
  asyncio. It sets RLIMIT_AS to `memory_bytes_max`, has malloc keep freed
  heap (`_keep_freed_heap`), ignores SIGINT (the parent decides when it
  stops), says `READY`, then serves batches of tasks in order over its end
  of a Unix socket pair until EOF: a batch is every complete request frame
  waiting on the socket (`_Inbox`), answered in one reply frame.
- Frames are a 4-byte big-endian length (`HEADER`) and a `marshal`-encoded
  tuple: a request is ``(task_id, url, content_type, x_robots_tag, body,
  error_print)``, a reply ``("ok", ((task_id, page_tuple), ...))`` for the
  tasks of a batch in order (`encode_page` / `decode_page`). A batch that
  runs past `REPLY_AFTER_S` answers what is done before its next task. No
  pickle, no per-link objects on the wire.
- Before each task the worker writes ``[task_id, started_at]``
  (``time.monotonic()``, the clock of the pool's event loop) to `progress`,
  an array shared with the pool; ``task_id`` is -1 between batches. The pool
  reads it to blame a crash or hang on the task that caused it.
- `process_task` does one page: one decode and Lexbor parse
  (`links.parse_html`) serves `extract_links` and then, when the pool
  computes fingerprints, `main_text` (which edits the tree, so it goes last).
- Each task arms a SIGALRM at ``2 * task_s_max + 1`` s with the default
  action, so a hung worker whose parent died still ends. On MemoryError the
  worker sends ``("memory",)`` and exits with status `EXIT_MEMORY`.

Rules: the fault hooks of `_inject_fault` (markers in the body) act only
when the pool was built with ``_test_faults=True``.
"""

from __future__ import annotations

import itertools
import marshal
import os
import re
import signal
import socket
import struct
import time
from typing import NoReturn

from courtly.core.fingerprint import simhash64
from courtly.core.links import Link, PageLinks, ParsedHtml, is_html, link_fields, parse_html
from courtly.core.maintext import main_words
from courtly.core.soft404 import error_fingerprint

__all__ = ["EXIT_MEMORY", "HEADER", "READY", "decode_page", "encode_page", "frame", "process_task", "worker_main"]

HEADER = struct.Struct("!I")    # frame length, big-endian
EXIT_MEMORY = 86                # exit status after a MemoryError
READY = ("ready",)              # the first message of a started worker
RECV_BYTES = 1 << 20           # read the socket this much at a time (a batch of pages)
REPLY_AFTER_S = 0.05            # a batch running longer answers what is done so far
PROGRESS_TYPE = "d"             # ctypes code of the shared ``[task_id, started_at]``
MALLOC_TRIM_BYTES = 16 << 20    # freed heap a worker keeps (see _keep_freed_heap)
MALLOC_MMAP_BYTES = 4 << 20     # larger blocks are mapped and unmapped on their own
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameters


# -- the wire --------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    """`payload` with its length in front: one message on the socket."""
    return HEADER.pack(len(payload)) + payload


def encode_page(page: PageLinks) -> tuple:
    """`page` as plain tuples for `marshal` (the worker's reply)."""
    links = tuple((link.url, link.kind, link.nofollow) for link in page.links)
    return (links, page.canonical, page.noindex, page.nofollow, page.base, page.title, page.error,
            page.prints)


def decode_page(data: tuple) -> PageLinks:
    """The `PageLinks` that `encode_page` encoded (read by the pool)."""
    links, canonical, noindex, nofollow, base, title, error, prints = data
    links = tuple(itertools.starmap(Link, links))  # cheaper than a listcomp (docs/performance.md)
    return PageLinks(links, canonical, noindex, nofollow, base, title, error,
                     tuple(prints) if prints is not None else None)


def with_prints(page: PageLinks, body: bytes, url: str, content_type: str,
                error_print: bool = True, *, parsed: ParsedHtml | None = None) -> PageLinks:
    """`page` with the main-text SimHash and soft-404 fingerprint set: the
    budget defence's CPU-heavy half, done here on the worker's core. Without
    `error_print` the soft-404 fingerprint is None (only pages of hosts that
    answered the probe with 200 need it; it costs more than the SimHash).
    `parsed` is the page's `parse_html` result, if any: `main_text` edits it."""
    from dataclasses import replace

    return replace(page, prints=_prints(body, url, content_type, error_print, parsed))


def _prints(body: bytes, url: str, content_type: str, error_print: bool,
            parsed: ParsedHtml | None) -> tuple[int, int | None]:
    text = main_words(body, content_type, parsed=parsed)  # main_text's words, uncollapsed
    return (simhash64(text), error_fingerprint(text, url) if error_print else None)


def process_task(body: bytes, url: str, content_type: str, x_robots_tag: str, error_print: bool,
                 options: tuple[str, int, bool]) -> tuple:
    """One page's reply (`encode_page`): its links and, when `options` say
    ``(user_agent_token, links_max, fingerprints)`` with fingerprints on and
    the page is HTML, its prints. The page is decoded and parsed once for
    both `extract_links` and `main_text` (links first: main_text edits the
    tree); if that shared parse fails, each parses for itself as before.
    The links come as `link_fields` gives them: no Link objects are built."""
    user_agent_token, links_max, fingerprints = options
    prints = fingerprints and is_html(body, content_type)
    parsed = _parse_shared(body, content_type) if prints else None
    fields = link_fields(
        body, url, content_type=content_type, x_robots_tag=x_robots_tag,
        user_agent_token=user_agent_token, links_max=links_max, parsed=parsed,
    )
    return (*fields, _prints(body, url, content_type, error_print, parsed) if prints else None)


def _parse_shared(body: bytes, content_type: str) -> ParsedHtml | None:
    try:
        return parse_html(bytes(body), content_type or "")
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - extract_links parses again and reports it
        return None


# -- the worker process ----------------------------------------------------------------


def worker_main(
    sock: socket.socket,
    memory_bytes_max: int,
    task_s_max: float,
    user_agent_token: str,
    links_max: int,
    test_faults: bool,
    fingerprints: bool = False,
    reply_after_s: float = REPLY_AFTER_S,
    progress=None,  # shared ``[task_id, started_at]`` (`PROGRESS_TYPE`), or None
) -> None:
    """Serve batches of tasks from `sock` until EOF (runs in the worker process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_memory(memory_bytes_max)
    _keep_freed_heap()
    options = (user_agent_token, links_max, test_faults, memory_bytes_max, fingerprints, reply_after_s)
    inbox = _Inbox(sock)
    try:
        sock.sendall(frame(marshal.dumps(READY)))
        while True:
            try:
                tasks = inbox.read()
            except MemoryError:  # decoding a batch (the pool blames its first page)
                _exit_memory(sock)
            if tasks is None:
                break
            _serve_batch(sock, tasks, 2 * task_s_max + 1, options, progress)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away or stopped us before we were ready


class _Inbox:
    """The worker's end of the socket, read a batch at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def read(self) -> list[tuple] | None:
        """Every complete task waiting (decoded), blocking until there is
        one; None at EOF."""
        while True:
            tasks = self._split()
            if tasks:
                return tasks
            chunk = self.sock.recv(RECV_BYTES)
            if not chunk:
                return None
            self.buffer += chunk

    def _split(self) -> list[tuple]:
        buffer, size_of, tasks, start = self.buffer, HEADER.size, [], 0
        with memoryview(buffer) as view:
            while len(buffer) - start >= size_of:
                end = start + size_of + HEADER.unpack_from(buffer, start)[0]
                if len(buffer) < end:
                    break
                tasks.append(marshal.loads(view[start + size_of:end]))
                start = end
        del buffer[:start]
        return tasks


def _serve_batch(sock: socket.socket, tasks: list[tuple], alarm_s: float,
                 options: tuple[str, int, bool, int, bool, float], progress) -> None:
    """Answer `tasks` in order, in one reply frame (or several, when the
    batch runs past `reply_after_s`, REPLY_AFTER_S by default). Before each task its id and start go
    to `progress`, so the pool knows which task a crash or hang is due to.
    Exits on MemoryError."""
    user_agent_token, links_max, test_faults, memory_bytes_max, fingerprints, reply_after_s = options
    task_options = (user_agent_token, links_max, fingerprints)
    done: list[tuple] = []
    reply_at = time.monotonic() + reply_after_s
    try:
        for task_id, url, content_type, x_robots_tag, body, error_print in tasks:
            now = time.monotonic()
            if done and now >= reply_at:  # a slow batch: answer what is done so far
                sock.sendall(frame(marshal.dumps(("ok", tuple(done)))))
                done, reply_at = [], now + reply_after_s
            if progress is not None:
                progress[1] = now          # the start first: the pool reads the id first
                progress[0] = task_id
            signal.setitimer(signal.ITIMER_REAL, alarm_s)  # default action: terminate
            if test_faults:
                _inject_fault(body, memory_bytes_max)
            done.append((task_id, process_task(body, url, content_type, x_robots_tag, error_print,
                                               task_options)))
        reply = marshal.dumps(("ok", tuple(done)))
    except MemoryError:
        reply = None
    signal.setitimer(signal.ITIMER_REAL, 0)
    if reply is None:
        _exit_memory(sock)
    if progress is not None:
        progress[0] = -1  # between batches: a death now is no task's fault
    sock.sendall(frame(reply))


def _exit_memory(sock: socket.socket) -> NoReturn:
    """Say ``("memory",)`` and exit with `EXIT_MEMORY`."""
    try:
        sock.sendall(frame(marshal.dumps(("memory",))))
    finally:
        os._exit(EXIT_MEMORY)


def _limit_memory(memory_bytes_max: int) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_bytes_max if hard == resource.RLIM_INFINITY else min(hard, memory_bytes_max)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _keep_freed_heap() -> None:
    """Tell glibc's malloc to keep up to `MALLOC_TRIM_BYTES` of freed heap
    (default 128 KiB) and to serve blocks below `MALLOC_MMAP_BYTES` from it.
    Each page allocates and frees a few MB (the Lexbor tree, texts, word
    buffers); with the defaults the heap top went back to the kernel after
    every page and came back as page faults, a large share of the worker's
    CPU (docs/performance.md, "Figures moved out of the code"). No-op
    without glibc."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return
    mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_BYTES)
    mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_BYTES)


# -- test faults ----------------------------------------------------------------------

_FAULT = re.compile(rb"courtly-fault:([a-z-]+)(?::([^\s<>\"']+))?")


def _inject_fault(body: bytes, memory_bytes_max: int) -> None:
    """Test-only misbehaviour, named by a marker in the body."""
    match = _FAULT.search(body[:4096])
    if not match:
        return
    fault, arg = match.group(1), match.group(2)
    if fault == b"once" and arg:  # fail on the first attempt only (a flag file)
        path = os.fsdecode(arg)
        if os.path.exists(path):
            return
        open(path, "w").close()
        os._exit(13)
    if fault == b"sleep" and arg:
        time.sleep(float(arg))
    if fault == b"hang":
        while True:
            time.sleep(1)
    if fault == b"exit":
        os._exit(13)
    if fault == b"segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == b"alloc":
        bytearray(memory_bytes_max + 1)
