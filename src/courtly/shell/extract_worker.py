"""The worker side of the extract pool: the child process and the wire.

Owns what runs inside an extract worker process and the messages it
exchanges with `courtly.shell.extract.ExtractPool` (the parent side).

Theory of operation

- `worker_main` is the target of a `multiprocessing` *spawn* process: the
  child imports this module by its path, so it stays small and imports no
  asyncio. It sets RLIMIT_AS to `memory_bytes_max`, has malloc keep freed
  heap (`_keep_freed_heap`), ignores SIGINT (the parent decides when it
  stops), says `READY`, then serves tasks in order over its end of a Unix
  socket pair until EOF.
- Frames are a 4-byte big-endian length (`HEADER`) and a `marshal`-encoded
  tuple: the request is ``(task_id, url, content_type, x_robots_tag, body,
  error_print)``,
  the reply ``("ok", task_id, page_tuple)`` (`encode_page` / `decode_page`).
  No pickle, no per-link objects on the wire.
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

from courtly.core.links import Link, PageLinks, ParsedHtml, extract_links, is_html, parse_html

__all__ = ["EXIT_MEMORY", "HEADER", "READY", "decode_page", "encode_page", "frame", "process_task", "worker_main"]

HEADER = struct.Struct("!I")    # frame length, big-endian
EXIT_MEMORY = 86                # exit status after a MemoryError
READY = ("ready",)              # the first message of a started worker
MALLOC_TRIM_BYTES = 16 << 20    # freed heap a worker keeps (see _keep_freed_heap)
MALLOC_MMAP_BYTES = 4 << 20     # larger blocks are mapped and unmapped on their own
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameters


# -- the wire --------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    """`payload` with its length in front: one message on the socket."""
    return HEADER.pack(len(payload)) + payload


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return bytes(buffer)


def encode_page(page: PageLinks) -> tuple:
    """`page` as plain tuples for `marshal` (the worker's reply)."""
    links = tuple((link.url, link.kind, link.nofollow) for link in page.links)
    return (links, page.canonical, page.noindex, page.nofollow, page.base, page.title, page.error,
            page.prints)


def decode_page(data: tuple) -> PageLinks:
    """The `PageLinks` that `encode_page` encoded (read by the pool)."""
    links, canonical, noindex, nofollow, base, title, error, prints = data
    links = tuple(itertools.starmap(Link, links))  # ~40 % faster than a listcomp
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

    from courtly.core.fingerprint import simhash64
    from courtly.core.maintext import main_text
    from courtly.core.soft404 import error_fingerprint

    text = main_text(body, content_type, parsed=parsed)
    return replace(page, prints=(simhash64(text), error_fingerprint(text, url) if error_print else None))


def process_task(body: bytes, url: str, content_type: str, x_robots_tag: str, error_print: bool,
                 options: tuple[str, int, bool]) -> tuple:
    """One page's reply (`encode_page`): its links and, when `options` say
    ``(user_agent_token, links_max, fingerprints)`` with fingerprints on and
    the page is HTML, its prints. The page is decoded and parsed once for
    both `extract_links` and `main_text` (links first: main_text edits the
    tree); if that shared parse fails, each parses for itself as before."""
    user_agent_token, links_max, fingerprints = options
    prints = fingerprints and is_html(body, content_type)
    parsed = _parse_shared(body, content_type) if prints else None
    page = extract_links(
        body, url, content_type=content_type, x_robots_tag=x_robots_tag,
        user_agent_token=user_agent_token, links_max=links_max, parsed=parsed,
    )
    if prints:
        page = with_prints(page, body, url, content_type, error_print, parsed=parsed)
    return encode_page(page)


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
) -> None:
    """Serve tasks from `sock` until EOF (runs in the worker process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_memory(memory_bytes_max)
    _keep_freed_heap()
    options = (user_agent_token, links_max, test_faults, memory_bytes_max, fingerprints)
    try:
        sock.sendall(frame(marshal.dumps(READY)))
        while _serve_one(sock, 2 * task_s_max + 1, options):
            pass
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away or stopped us before we were ready


def _serve_one(sock: socket.socket, alarm_s: float, options: tuple[str, int, bool, int, bool]) -> bool:
    """Read one task, answer it; False at EOF. Exits on MemoryError."""
    header = _recv_exact(sock, HEADER.size)
    payload = _recv_exact(sock, HEADER.unpack(header)[0]) if header else None
    if payload is None:
        return False
    user_agent_token, links_max, test_faults, memory_bytes_max, fingerprints = options
    signal.setitimer(signal.ITIMER_REAL, alarm_s)  # default action: terminate
    try:
        task_id, url, content_type, x_robots_tag, body, error_print = marshal.loads(payload)
        del payload
        if test_faults:
            _inject_fault(body, memory_bytes_max)
        page = process_task(body, url, content_type, x_robots_tag, error_print,
                            (user_agent_token, links_max, fingerprints))
        reply = marshal.dumps(("ok", task_id, page))
    except MemoryError:
        reply = None
    signal.setitimer(signal.ITIMER_REAL, 0)
    if reply is None:
        try:
            sock.sendall(frame(marshal.dumps(("memory",))))
        finally:
            os._exit(EXIT_MEMORY)
    sock.sendall(frame(reply))
    return True


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
    every page and came back as page faults: ~25 % of the worker's CPU on
    bench pages (570-620 -> 430-450 us per page). No-op without glibc."""
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
