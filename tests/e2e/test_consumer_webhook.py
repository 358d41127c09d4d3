"""A consumer whose sink is a webhook: `courtly crawl --consumer hook` on the
simulated web, a receiver on loopback; every line of the consumer's stream
reaches the receiver once, in order, by the end of the crawl."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from aiohttp import web

from courtly.runtime.demo import simweb_process
from crawl_support import crawl_args, run_courtly, write_config

pytestmark = pytest.mark.slow

SIM_ARGS = ["--profile", "demo", "--hosts", "3", "--ips", "2", "--pages-per-host", "10", "--seed", "7"]


class Receiver:
    """An aiohttp app on 127.0.0.1 in a thread of its own; keeps each POST's body."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _hook(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        return web.Response(status=204)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]   # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def __enter__(self) -> "Receiver":
        self._thread.start()
        assert self._ready.wait(10), "the receiver did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_every_line_of_a_webhook_consumers_stream_reaches_it_once_in_order(tmp_path):
    with simweb_process(tmp_path / "sim", SIM_ARGS) as sim, Receiver() as rx:
        cfg = write_config(tmp_path / "c.toml")
        cfg.write_text(cfg.read_text() + f'\n[[consumers]]\nname = "hook"\nsink = '
                                          f'"http://127.0.0.1:{rx.port}/hook"\n')
        out = tmp_path / "crawl"
        args = crawl_args(sim, out, cfg)
        i = args.index("--seeds-file")
        del args[i:i + 2]
        seeds = [s for s in (sim.out / "seeds.txt").read_text().split() if s.startswith("http")]
        done = run_courtly(*args, "--consumer", "hook", *seeds)
        assert done.returncode == 0, done.stderr
    stream = out / "consumers" / "hook" / "results.jsonl"
    written = [json.loads(line) for line in stream.read_text().splitlines()]
    received = [line for body in rx.bodies for line in body["lines"]]
    assert len(written) > 5 and any("status" in line for line in written)
    assert received == written
    assert {body["consumer"] for body in rx.bodies} == {"hook"}
    assert int((out / "consumers" / "hook" / "webhook.offset").read_text()) == stream.stat().st_size
