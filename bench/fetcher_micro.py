"""Micro-benchmark: CPU per request of the fetcher alone against a loopback server.

    python bench/fetcher_micro.py                    # 4,000 GETs, 16 in flight, keep-alive
    python bench/fetcher_micro.py --close            # the server closes after each answer
    PYTHONPATH=/path/to/other/src python bench/fetcher_micro.py   # another version's fetcher

The server (a uvloop `Protocol` answering every request with one fixed
response, a 28 KB page by default) runs in its own process pinned to CPU 0
when `taskset` exists; the client runs here, pinned to CPU 1. Each of the
`--hosts` names is pinned to 127.0.0.1 with `ip=`, so each has its own pool
key. Printed: requests/s and the client's CPU microseconds (user+sys of this
process, `time.process_time`) per request, best of `--rounds`, after a
warm-up round; then the CPU of `_split_url` alone on distinct URLs of the
crawler's form. The fetcher class is whichever `courtly.shell.fetcher`
provides (`Http1Fetcher`, or the older `AiohttpFetcher`). A benchmark: it
prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time

SERVER = r"""
import asyncio, sys, uvloop
body = b"<html>" + b"x" * (int(sys.argv[1]) - 13) + b"</html>"
close = sys.argv[2] == "1"
resp = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n%s\r\n" % (
    len(body), b"Connection: close\r\n" if close else b"")) + body

class P(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf = t, b""
    def data_received(self, d):
        self.buf += d
        while b"\r\n\r\n" in self.buf:
            _, _, self.buf = self.buf.partition(b"\r\n\r\n")
            self.t.write(resp)
            if close:
                self.t.close()
                return

async def main():
    server = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin

uvloop.run(main())
"""


async def measure(port: int, hosts: int, concurrency: int, requests: int, rounds: int) -> list[tuple[float, float]]:
    from courtly.core.netpolicy import NetPolicy
    from courtly.shell import fetcher as module
    from courtly.shell.resolver import SafeResolver

    cls = getattr(module, "Http1Fetcher", None) or module.AiohttpFetcher
    print(f"fetcher: {cls.__name__} from {module.__file__}")
    f = cls(SafeResolver(NetPolicy.allowing(["127.0.0.0/8"])), user_agent="courtly-bench/0.1",
            connections_per_host_max=4)
    urls = [f"http://h{i}.bench.test:{port}/page/{i}" for i in range(hosts)]

    async def lane(k: int, n: int) -> None:
        for j in range(n):
            r = await f.fetch(urls[(k + j) % hosts], ip="127.0.0.1")
            if r.status != 200 or r.error:
                raise SystemExit(f"bad fetch: {r.status} {r.error} {r.error_detail}")

    figures = []
    async with f:
        for round_ in range(rounds + 1):
            per_lane = requests // concurrency
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(lane(k, per_lane) for k in range(concurrency)))
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            if round_:  # round 0 warms up
                figures.append((per_lane * concurrency / wall, cpu / (per_lane * concurrency) * 1e6))
    return figures


def split_url_us(n: int = 50_000) -> float | None:
    """CPU microseconds of the fetcher's `_split_url` per distinct URL of the
    form the crawler sends (None when the fetcher has no `_split_url`)."""
    from courtly.shell import fetcher as module

    split = getattr(module, "_split_url", None)
    if split is None:
        return None
    urls = [f"http://site{i % 1000:04d}.bench.test:8080/guides/page-{i}.html?p={i % 7}" for i in range(n)]
    best = float("inf")
    for _ in range(5):
        c0 = time.process_time()
        for u in urls:
            split(u)
        best = min(best, time.process_time() - c0)
    return best / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--body-bytes", type=int, default=28_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--close", action="store_true", help="a new connection per request")
    args = ap.parse_args()
    if not (1 <= args.requests <= 1_000_000 and 1 <= args.concurrency <= 1000 and 1 <= args.rounds <= 20):
        ap.error("--requests 1..1e6, --concurrency 1..1000, --rounds 1..20")

    taskset = shutil.which("taskset") if (os.cpu_count() or 1) >= 2 else None
    cmd = [sys.executable, "-c", SERVER, str(args.body_bytes), "1" if args.close else "0"]
    server = subprocess.Popen(([taskset, "-c", "0"] if taskset else []) + cmd, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        if taskset:
            os.sched_setaffinity(0, {1})
        import uvloop

        figures = uvloop.run(asyncio.wait_for(
            measure(port, args.hosts, args.concurrency, args.requests, args.rounds), 600))
    finally:
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    split_us = split_url_us()
    if split_us is not None:
        print(f"_split_url of a distinct URL in the common spelling: {split_us:.2f} us (best of 5)")
    mode = "new connection per request" if args.close else "keep-alive"
    for rate, us in figures:
        print(f"  {rate:8.0f} requests/s  {us:6.1f} us CPU per request")
    rate, us = min(figures, key=lambda x: x[1])
    print(f"best of {args.rounds} ({mode}, {args.concurrency} in flight, {args.body_bytes} B bodies): "
          f"{rate:.0f} requests/s, {us:.1f} us CPU per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
