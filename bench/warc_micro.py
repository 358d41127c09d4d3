"""Micro-benchmark: the WARC writer's CPU per archived exchange.

Renders bench-profile pages of the simulated web in-process (no sockets),
gives each an HTTP response head like the simweb server's (200, or 404 for
one page in five) and writes them with `WarcWriter.write_exchange` (request,
response and metadata records, as `Results.archive` does) into a temporary
folder, then closes the writer (fsync off), so the CDXJ index of the file is
in the figure too. Best of `--repeat` passes, `time.process_time`, in
microseconds per exchange; then the raw costs of the body alone for
comparison (deflate at the writer's level, SHA-1, SHA-256, CRC-32) and the
file bytes per exchange:

    python bench/warc_micro.py [--pages 400] [--repeat 5] [--gzip-level 1]

Pure CPU and a temporary folder, bounded by the arguments; prints figures,
asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from extract_steps import bench_pages  # noqa: E402

from courtly.shell import warc  # noqa: E402
from courtly.shell.warc import WarcWriter  # noqa: E402

REQUEST = (
    "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: courtly/1.0 (+https://example.org/bot)\r\n"
    "Accept: text/html\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n\r\n"
)
RESPONSE = (
    "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {length}\r\n"
    "Date: Mon, 30 Nov 2026 16:04:35 GMT\r\nServer: Python/3.11 aiohttp/3.14.5\r\n\r\n"
)

Exchange = tuple[str, bytes, bytes, bytes, dict[str, str]]


def exchanges(count: int) -> list[Exchange]:
    """(url, request head, response head, body, provenance) per bench page."""
    out = []
    for i, (url, body) in enumerate(bench_pages(count)):
        host, _, path = url.partition("//")[2].partition("/")
        status = "404 Not Found" if i % 5 == 4 else "200 OK"
        meta = {"software": warc.SOFTWARE, "fetch-kind": "page", "via": f"http://{host}/",
                "depth": "3", "fetch-reason": "page"}
        out.append((url, REQUEST.format(path="/" + path, host=host).encode(),
                    RESPONSE.format(status=status, length=len(body)).encode(), body, meta))
    return out


def time_writer(items: list[Exchange], repeat: int, level: int) -> tuple[float, float]:
    """Best us per exchange (writes and the closing index) and file bytes per exchange."""
    best = float("inf")
    size = 0.0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as folder:
            writer = WarcWriter(Path(folder), fsync=False, gzip_level=level)
            start = time.process_time()
            for n, (url, req, head, body, meta) in enumerate(items):
                writer.write_exchange(url=url, ip="127.0.0.5", request_head=req, response_head=head,
                                      body=body, fetched_at=1.7e9 + n * 0.01, metadata=meta)
            writer.close()
            best = min(best, (time.process_time() - start) / len(items))
            size = sum(os.path.getsize(p) for p in writer.finished_paths) / len(items)
    return best * 1e6, size


def time_step(items: list[Exchange], repeat: int, step) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for item in items:
            step(item[3])
        best = min(best, (time.process_time() - start) / len(items))
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gzip-level", type=int, default=1)
    args = ap.parse_args()
    items = exchanges(args.pages)
    body_kb = sum(len(i[3]) for i in items) / len(items) / 1000
    print(f"{len(items)} exchanges, body {body_kb:.1f} KB on average, deflate {warc.DEFLATE_BACKEND}")
    us, size = time_writer(items, args.repeat, args.gzip_level)
    print(f"write_exchange + close (CDXJ): {us:7.1f} us per exchange, {size / 1000:.2f} KB of file each")
    deflate = warc._deflate_lib.compressobj(min(args.gzip_level, warc._LEVEL_MAX), warc._deflate_lib.DEFLATED, -15)
    steps = {
        "deflate of the body": lambda b: (deflate.compress(b), deflate.flush(warc._deflate_lib.Z_FULL_FLUSH)),
        "SHA-1 of the body": lambda b: hashlib.sha1(b).digest(),
        "SHA-256 of the body (exact-duplicate digest, not in the writer)": lambda b: hashlib.sha256(b).digest(),
        "CRC-32 of the body": warc._deflate_lib.crc32,
    }
    for name, step in steps.items():
        print(f"  {name}: {time_step(items, args.repeat, step):6.1f} us")


if __name__ == "__main__":
    main()
