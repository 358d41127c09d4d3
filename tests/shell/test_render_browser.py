"""shell/render.py: Debian's chromium on a closed network, driven through Playwright.

Each test renders small pages whose document comes from a raw answer and whose
every other request goes to a gate the test holds. Skips with the reason only
when the browser cannot be found (no playwright, no /usr/bin/chromium).
"""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from clock_support import ManualClock

from courtly.core.render import RenderOutcome, SubRequest, SubResponse
from courtly.shell.clock import SystemClock
from courtly.shell.render import RELAUNCH_S, ChromiumRenderer, browser_args

CHROMIUM = "/usr/bin/chromium"
HTML = (("content-type", "text/html; charset=utf-8"),)
SPA = b'<html><body><div id="root"></div><script src="/app.js"></script></body></html>'
APP = (b"fetch('/api').then(r=>r.json()).then(h=>{for(const x of h){const a=document.createElement('a');"
       b"a.href=x;document.getElementById('root').appendChild(a);}});")


def _renderer(**kw) -> ChromiumRenderer:
    # generous: a busy machine (CI saw a browser take more than 30 s to start)
    kw = {"navigation_s": 10.0, "deadline_s": 20.0, "settle_s": 0.3, "launch_s": 180.0, **kw}
    r = ChromiumRenderer(executable_path=CHROMIUM, clock=SystemClock(), **kw)
    why = r.available()
    if why:
        pytest.skip(why)
    return r


class Gate:
    """Answers /app.js and /api, refuses everything else; remembers what it was asked."""

    def __init__(self, answers: dict[str, bytes] | None = None) -> None:
        self.answers = {"/app.js": APP, "/api": b'["/a", "/b"]', **(answers or {})}
        self.asked: list[SubRequest] = []

    async def __call__(self, req: SubRequest):
        self.asked.append(req)
        path = "/" + req.url.split("/", 3)[3] if req.url.count("/") >= 3 else "/"
        body = self.answers.get(path)
        return "refused" if body is None else SubResponse(200, (("content-type", "text/plain"),), body)


def _render(renderer: ChromiumRenderer, url: str, html: bytes, gate: Gate):
    async def go():
        try:
            return await renderer.render(url, SubResponse(200, HTML, html), gate)
        finally:
            await renderer.close()
    return asyncio.run(go())


def test_browser_flags_close_the_network_and_drop_the_sandbox_only_as_root():
    args = browser_args(as_root=False)
    for flag in ("--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic", "--no-first-run", "--disable-gpu"):
        assert flag in args
    assert "--no-sandbox" not in args and "--no-sandbox" in browser_args(as_root=True)


def test_the_document_comes_from_the_raw_answer_and_subrequests_from_the_gate():
    gate = Gate()
    out = _render(_renderer(), "http://spa.test/", SPA, gate)
    assert out.outcome is RenderOutcome.RENDERED, out.detail
    assert b'<a href="/a"></a><a href="/b"></a>' in out.dom
    assert [r.url for r in gate.asked] == ["http://spa.test/app.js", "http://spa.test/api"]
    assert [r.resource_type for r in gate.asked] == ["script", "fetch"]


def test_a_refused_subrequest_is_aborted_in_the_page():
    gate = Gate({"/api": None})   # type: ignore[dict-item]
    page = SPA.replace(b"</body>", b"<script>fetch('/api').catch(()=>document.title='refused')</script></body>")
    out = _render(_renderer(), "http://spa.test/", page, gate)
    assert out.outcome is RenderOutcome.RENDERED
    assert b"<title>refused</title>" in out.dom and out.refused.count("refused") >= 1


def test_nothing_leaves_the_browser_on_its_own():
    """A WebSocket is not routed through the gate: it must still reach nobody."""
    async def scenario():
        hits = []

        async def on_connect(reader, writer):
            hits.append(1)
            writer.close()

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        page = (f"<html><body><script>try{{new WebSocket('ws://127.0.0.1:{port}/')}}catch(e){{}}"
                f"navigator.sendBeacon && navigator.sendBeacon('http://127.0.0.1:{port}/b');</script>"
                f"<img src='http://127.0.0.1:{port}/i.png'></body></html>").encode()
        gate = Gate()
        renderer = _renderer(settle_s=1.0)
        try:
            out = await renderer.render("http://spa.test/", SubResponse(200, HTML, page), gate)
        finally:
            await renderer.close()
            server.close()
        return out, gate, hits

    out, gate, hits = asyncio.run(scenario())
    assert out.outcome is RenderOutcome.RENDERED
    assert hits == []                               # no connection reached the listener
    assert {r.resource_type for r in gate.asked} >= {"image"}   # routed requests asked the gate


def test_service_workers_are_refused():
    page = (b"<html><body><script>navigator.serviceWorker.register('/sw.js').catch(()=>0).then("
            b"()=>navigator.serviceWorker.getRegistrations()).then(r=>document.title='registrations '+r.length)"
            b"</script></body></html>")
    gate = Gate({"/sw.js": b"self.addEventListener('fetch',()=>{})"})
    # localhost is a secure context: a browser that allowed service workers would register this one
    out = _render(_renderer(settle_s=1.0), "http://localhost/", page, gate)
    assert b"<title>registrations 0</title>" in out.dom
    assert "http://localhost/sw.js" not in [r.url for r in gate.asked]


def test_a_script_that_never_ends_is_cut_and_the_browser_renders_the_next_page():
    async def scenario():
        renderer = _renderer(navigation_s=2.0, deadline_s=4.0)
        try:
            looping = await renderer.render("http://loop.test/", SubResponse(200, HTML, b"<script>for(;;){}</script>"),
                                            Gate())
            after = await renderer.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate())
        finally:
            await renderer.close()
        return looping, after

    looping, after = asyncio.run(scenario())
    assert looping.outcome in (RenderOutcome.NAVIGATION, RenderOutcome.DEADLINE)
    assert looping.dom == b""
    assert after.outcome is RenderOutcome.RENDERED and b'href="/a"' in after.dom


def test_the_browser_is_restarted_after_n_renders_and_after_a_crash():
    async def scenario():
        renderer = _renderer(renders_per_browser_max=2)
        try:
            for _ in range(3):
                out = await renderer.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate())
                assert out.outcome is RenderOutcome.RENDERED
            by_count = dict(renderer.restart_reasons)

            class Killer(Gate):
                async def __call__(self, req):
                    await renderer._browser.close()   # the browser dies mid-render
                    return "refused"

            killed = await renderer.render("http://spa.test/", SubResponse(200, HTML, SPA), Killer())
            again = await renderer.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate())
        finally:
            await renderer.close()
        return by_count, killed, again, renderer

    by_count, killed, again, renderer = asyncio.run(scenario())
    assert by_count == {"renders": 1}
    assert killed.outcome is RenderOutcome.CRASHED, killed
    assert again.outcome is RenderOutcome.RENDERED
    assert renderer.restarts == 2 and renderer.restart_reasons.get("crash") == 1


def test_available_says_why_without_a_browser():
    r = ChromiumRenderer(executable_path="/nonexistent/chromium", clock=SystemClock())
    assert "no browser at /nonexistent/chromium" in r.available()


def test_a_browser_that_does_not_start_is_a_render_outcome_and_is_tried_again_after_a_pause(tmp_path):
    if importlib.util.find_spec("playwright") is None:
        pytest.skip("the Python package playwright is not installed")
    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 1\n")
    broken.chmod(0o755)
    clock = ManualClock(1000.0)

    async def scenario():
        r = ChromiumRenderer(executable_path=str(broken), clock=clock, launch_s=60.0)
        outs = []
        try:
            outs.append(await r.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate()))
            clock.t += RELAUNCH_S / 2          # within the pause: refused without a launch
            outs.append(await r.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate()))
            failures_in_pause = r.launch_failures
            clock.t += RELAUNCH_S              # after it: launched (and failing) again
            outs.append(await r.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate()))
        finally:
            await r.close()
        return outs, failures_in_pause, r.launch_failures

    outs, failures_in_pause, failures = asyncio.run(scenario())
    assert [o.outcome for o in outs] == [RenderOutcome.UNAVAILABLE] * 3
    assert outs[0].detail.startswith("the browser did not start: ") and outs[0].dom == b""
    assert "tried again" in outs[1].detail
    assert failures_in_pause == 1 and failures == 2


def test_the_browser_is_restarted_when_its_memory_passes_the_cap():
    async def scenario():
        renderer = _renderer(memory_bytes_max=1)   # any browser is above one byte
        try:
            for _ in range(2):
                out = await renderer.render("http://spa.test/", SubResponse(200, HTML, SPA), Gate())
                assert out.outcome is RenderOutcome.RENDERED
        finally:
            await renderer.close()
        return renderer

    renderer = asyncio.run(scenario())
    assert renderer.restart_reasons == {"memory": 1} and renderer.restarts == 1


def test_a_failing_gate_is_raised_not_taken_for_a_refusal():
    class Broken(Gate):
        async def __call__(self, req):
            raise KeyError("a bug in the rules")

    with pytest.raises(KeyError, match="a bug in the rules"):
        _render(_renderer(), "http://spa.test/", SPA, Broken())
