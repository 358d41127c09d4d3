"""Measure the simulated web's throughput ceiling on this machine.

Starts `courtly simweb --profile bench` as a subprocess (pinned to one core
with taskset when there are >= 2 cores), waits for ready.json, then drives
it with wrk (pinned to another core) over a Lua-scripted mix of hosts and
pages on the busiest shared IP; without wrk, a bounded aiohttp load client
does the same. Prints requests/s with and without the request log.

    python bench/simweb_ceiling.py [--duration-s 10] [--connections 64] [--client wrk|aiohttp]

Bounded: each run lasts --duration-s; the server is stopped by PID (SIGTERM).
Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from courtly.sim.model import SimWeb
from courtly.sim.webconfig import profile_config

TARGETS = 4000


def _targets(seed: int) -> tuple[str, list[tuple[str, str]]]:
    web = SimWeb(profile_config("bench", seed=seed))
    ip = max(web.hosts_by_ip, key=lambda i: len(web.hosts_by_ip[i]))
    r = random.Random(seed)
    names = web.hosts_by_ip[ip]
    out = []
    for _ in range(TARGETS):
        name = r.choice(names)
        lay = web.layout(name)
        out.append((name, lay.path_of(r.randrange(lay.n_pages))))
    return ip, out


def _start_server(out: Path, seed: int, log: bool, cpu: str | None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "courtly.sim.command", "--profile", "bench", "--seed", str(seed),
           "--out", str(out), "--duration-s", "600"]
    if not log:
        cmd.append("--no-log")
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpu, *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):  # 60 s at most
        if (out / "ready.json").exists():
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"simweb exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("simweb never became ready")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _run_wrk(ip: str, port: int, targets: list[tuple[str, str]], duration_s: float, conns: int,
             cpu: str | None) -> float:
    entries = ",".join(f'{{"{h}:{port}","{p}"}}' for h, p in targets)
    lua = (f"local t = {{{entries}}}\nlocal i = 0\n"
           "request = function()\n  i = (i % #t) + 1\n"
           "  return wrk.format('GET', t[i][2], {['Host'] = t[i][1]})\nend\n")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
        script = f.name
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{int(duration_s)}s", "-s", script, f"http://{ip}:{port}/"]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpu, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 60).stdout
    os.unlink(script)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise RuntimeError(f"wrk output not understood:\n{out}")
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if non2xx:
        print(f"  warning: {non2xx.group(1)} non-2xx responses", file=sys.stderr)
    return float(m.group(1))


async def _run_aiohttp(ip: str, port: int, targets: list[tuple[str, str]], duration_s: float, conns: int) -> float:
    import aiohttp

    deadline = time.monotonic() + duration_s
    done = 0

    async def worker(k: int, session: aiohttp.ClientSession) -> None:
        nonlocal done
        i = k
        while time.monotonic() < deadline and done < 10_000_000:
            host, path = targets[i % len(targets)]
            async with session.get(f"http://{ip}:{port}{path}", headers={"Host": f"{host}:{port}"}) as r:
                await r.read()
            done += 1
            i += conns

    started = time.monotonic()
    connector = aiohttp.TCPConnector(limit=conns)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as s:
        await asyncio.gather(*(worker(k, s) for k in range(conns)))
    return done / (time.monotonic() - started)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--client", choices=("wrk", "aiohttp"), default="wrk" if shutil.which("wrk") else "aiohttp")
    args = ap.parse_args()
    ncpu = os.cpu_count() or 1
    server_cpu, client_cpu = ("0", "1") if ncpu >= 2 else (None, None)
    ip, targets = _targets(args.seed)
    print(f"machine: {ncpu} CPU(s); server pinned to {server_cpu}, {args.client} client pinned to {client_cpu}; "
          f"{args.connections} connections, {args.duration_s:g}s per run, {len(targets)} distinct "
          f"(host, page) targets on {ip}")
    results = {}
    for log in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            proc = _start_server(Path(tmp), args.seed, log, server_cpu)
            try:
                port = json.loads((Path(tmp) / "ready.json").read_text())["port"]
                if args.client == "wrk":
                    rps = _run_wrk(ip, port, targets, args.duration_s, args.connections, client_cpu)
                else:
                    rps = asyncio.run(_run_aiohttp(ip, port, targets, args.duration_s, args.connections))
            finally:
                _stop(proc)
        results["with request log" if log else "without request log"] = rps
        print(f"  {'with' if log else 'without'} request log: {rps:,.0f} requests/s")
    print(json.dumps({k: round(v) for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
