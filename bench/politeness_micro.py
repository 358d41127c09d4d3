"""Micro-benchmark: the CPU of one answer's politeness bookkeeping.

Times, with `time.process_time`, best of `--repeat` passes of `--answers`
answers spread over `--keys` keys on `--ips` IPs (mostly 200, a few 5xx and
429, response times log-normal around 0.2 s):

    python bench/politeness_micro.py [--answers 200000] [--keys 2000] [--ips 64] [--repeat 5]

* `Politeness.started` + `finished` per answer (with `ip=`, so the per-IP
  slowness rule runs where the tree has it);
* `BanWatch.answered` per answer on a 20 KiB body (trees that have it).

Runs against whichever `courtly` is importable (set PYTHONPATH to compare two
trees). Pure CPU, bounded by the arguments; prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import inspect
import random
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--ips", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    from courtly.core.politeness import Politeness, PolitenessConfig

    rng = random.Random(1)
    plan = [(f"k{rng.randrange(a.keys)}", rng.choices((200, 200, 200, 200, 200, 200, 200, 200, 500, 429))[0],
             rng.lognormvariate(-1.6, 0.5)) for _ in range(a.answers)]
    ips = {f"k{i}": f"10.0.{i % a.ips // 256}.{i % a.ips % 256}" for i in range(a.keys)}
    with_ip = "ip" in inspect.signature(Politeness.finished).parameters
    best = float("inf")
    for _ in range(a.repeat):
        p = Politeness(PolitenessConfig(delay_s=0.0))
        now = 0.0
        t0 = time.process_time()
        for key, status, response_s in plan:
            now += 0.001
            p.started(key, max(now, p.ready_at(key, now)))
            if with_ip:
                p.finished(key, now, response_s=response_s, status=status, ip=ips[key])
            else:
                p.finished(key, now, response_s=response_s, status=status)
        best = min(best, time.process_time() - t0)
    print(f"politeness ready_at+started+finished: {best / a.answers * 1e6:.2f} us per answer "
          f"({a.answers} answers, {a.keys} keys, per-IP rule {'on' if with_ip else 'absent'})")
    try:
        from courtly.core.ban import BanWatch
    except ImportError:
        print("BanWatch: absent in this tree")
        return
    body = bytes(rng.randrange(256) for _ in range(20 * 1024))
    best = float("inf")
    for _ in range(a.repeat):
        w = BanWatch()
        t0 = time.process_time()
        for i, (key, status, _) in enumerate(plan):
            w.answered(key, f"u{i}", status, body)
        best = min(best, time.process_time() - t0)
    print(f"BanWatch.answered (20 KiB body): {best / a.answers * 1e6:.2f} us per answer")


if __name__ == "__main__":
    main()
