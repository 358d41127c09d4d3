"""shell/stream_webhook: a consumer's stream forwarded to its webhook, in
order, at least once, resumed from the saved offset; on a manual clock with a
recording POST, and once against a real loopback receiver."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web

from courtly.config import config_from_dict
from courtly.runtime.wiring import consumer_webhooks
from courtly.shell.stream_webhook import StreamForwarder
from courtly.shell.webhook import SIGNATURE_HEADER, signature


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep_until(self, at: float) -> None:
        self.t = max(self.t, at)


class Receiver:
    """A POST that answers `statuses` in turn (then 200) and keeps the bodies."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.bodies: list[dict] = []
        self.headers: list[dict] = []

    async def __call__(self, url: str, body: bytes, timeout_s: float, headers: dict) -> tuple[int, str]:
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.bodies.append(json.loads(body))
            self.headers.append(headers)
        return status, "" if status == 200 else "refused"


def _stream(tmp_path: Path, n: int, start: int = 0) -> Path:
    path = tmp_path / "results.jsonl"
    with path.open("a") as fh:
        for i in range(start, start + n):
            fh.write(json.dumps({"url": f"http://a.test/{i}", "status": 200}) + "\n")
    return path


def _urls(rx: Receiver) -> list[str]:
    return [line["url"] for b in rx.bodies for line in b["lines"]]


def test_lines_go_in_order_in_bounded_posts_and_a_restart_resumes_after_the_last_delivered(tmp_path):
    path = _stream(tmp_path, 5)
    rx = Receiver()
    f = StreamForwarder(Clock(), "search", path, "http://hook.test/", lines_max=2, post=rx)
    assert asyncio.run(f.send_once()) == 2 and asyncio.run(f.send_once()) == 2
    assert [len(b["lines"]) for b in rx.bodies] == [2, 2] and rx.bodies[0]["consumer"] == "search"
    _stream(tmp_path, 2, start=5)
    again = StreamForwarder(Clock(), "search", path, "http://hook.test/", lines_max=10, post=rx)   # a restart
    assert asyncio.run(again.send_once()) == 3 and asyncio.run(again.send_once()) == 0
    assert _urls(rx) == [f"http://a.test/{i}" for i in range(7)]     # each once, in order


def test_a_line_being_written_waits_until_it_is_whole(tmp_path):
    path = _stream(tmp_path, 1)
    with path.open("a") as fh:
        fh.write('{"url": "http://a.test/half"')
    rx = Receiver()
    f = StreamForwarder(Clock(), "s", path, "http://hook.test/", post=rx)
    assert asyncio.run(f.send_once()) == 1 and asyncio.run(f.send_once()) == 0
    with path.open("a") as fh:
        fh.write("}\n")
    assert asyncio.run(f.send_once()) == 1 and _urls(rx)[-1] == "http://a.test/half"


def test_a_failing_webhook_is_retried_with_doubling_back_off_and_nothing_is_skipped(tmp_path):
    path = _stream(tmp_path, 3)
    rx = Receiver(500, 503, 0)
    clock = Clock()
    f = StreamForwarder(clock, "s", path, "http://hook.test/", backoff_s=1.0, post=rx)

    async def until_delivered() -> list[float]:
        waits = []
        while not await f.send_once():
            waits.append(f._wait_s())
            await clock.sleep_until(clock.now() + f._wait_s())
        return waits

    assert asyncio.run(until_delivered()) == [1.0, 2.0, 4.0]
    assert _urls(rx) == [f"http://a.test/{i}" for i in range(3)] and f.failures == 0 and clock.t == 7.0


def test_a_secret_signs_each_post(tmp_path):
    rx = Receiver()
    f = StreamForwarder(Clock(), "s", _stream(tmp_path, 1), "http://hook.test/", post=rx, secret="k")
    asyncio.run(f.send_once())
    body = json.dumps(rx.bodies[0], separators=(",", ":")).encode()
    assert rx.headers[0] == {SIGNATURE_HEADER: signature("k", body)}


def test_only_consumers_with_a_url_sink_get_a_forwarder(tmp_path):
    cfg = config_from_dict({"consumers": [{"name": "a", "sink": "http://127.0.0.1:9/hook"}, {"name": "b"},
                                          {"name": "c", "sink": "out-c"}]})
    (hook,) = consumer_webhooks(cfg, tmp_path, Clock())
    assert (hook.name, hook.url, hook.stream) == ("a", "http://127.0.0.1:9/hook",
                                                  tmp_path / "consumers" / "a" / "results.jsonl")


def test_a_real_loopback_receiver_gets_the_lines(tmp_path):
    got: list[dict] = []

    async def main() -> int:
        async def hook(request: web.Request) -> web.Response:
            got.append(await request.json())
            return web.Response(status=204)

        app = web.Application()
        app.router.add_post("/hook", hook)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]   # type: ignore[union-attr]
        try:
            f = StreamForwarder(Clock(), "s", _stream(tmp_path, 2), f"http://127.0.0.1:{port}/hook", timeout_s=10)
            return await f.send_once()
        finally:
            await runner.cleanup()

    assert asyncio.run(main()) == 2
    assert [line["url"] for line in got[0]["lines"]] == ["http://a.test/0", "http://a.test/1"]
