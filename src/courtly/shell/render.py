"""The headless browser: Debian's chromium, driven by Playwright, on a closed network.

What it owns: one browser process, a capped pool of isolated contexts, the
time limits of a render, restarts, and the rule that no request leaves the
browser on its own. What a subrequest may do is not decided here: every
request the page makes goes to the `SubrequestGate` the caller passes
(runtime/render.py holds courtly's rules), and its answer is fulfilled into
the page or the request is aborted.

Theory of operation
-------------------
* `ChromiumRenderer.available()` says why rendering cannot run (no
  playwright, no executable) or "" when it can; the browser itself starts at
  the first render. Playwright's own browsers are never used or downloaded:
  the executable is `[render] executable_path`.
* The browser is launched headless with background networking, component
  updates, sync and QUIC off, no first-run, no GPU, `--no-sandbox` only when
  running as root (chromium refuses to start otherwise), a host resolver
  that resolves nothing and a proxy that is a closed port: a request that
  escaped the route (it cannot, but a WebSocket or a browser feature might
  try) has nowhere to go.
* A render takes a slot (`contexts_max`), opens a fresh context (service
  workers blocked, downloads refused, no storage shared between renders),
  routes `**/*` to `_route`: the page's own document is fulfilled from the
  raw response courtly already fetched (the page is never fetched twice), any
  other request is handed to the gate, which returns a `SubResponse` or a
  refusal reason (then the request is aborted). Navigation has its own
  timeout (`navigation_s`); the whole render, settling time and the DOM
  read included, ends at `deadline_s`, by cancellation if need be. A page
  whose script never yields has no DOM to read: the render ends `DEADLINE`
  and its context is closed.
* The browser is restarted after `renders_per_browser_max` renders, when its
  processes' memory (PSS, read from /proc before each render) passes
  `memory_bytes_max`, after a crash,
  or after a context that would not close (a hung browser). A restart waits
  for the renders in flight. `Rendered.outcome` says when a page crashed or
  hung the browser; the caller keeps count (two strikes: a dead letter).

Rules: every wait bounded; nothing fetched by the browser itself; the clock is
the injected one (`clock.now()` for durations).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os

from courtly.core.render import Rendered, RenderOutcome, SubRequest, SubResponse, SubrequestGate

__all__ = ["ChromiumRenderer", "browser_args", "tree_rss"]

log = logging.getLogger("courtly")

CLOSE_S = 5.0      # a context that does not close in this time: the browser is hung
STOP_S = 30.0      # Playwright's driver must stop within this
RELAUNCH_S = 60.0  # after a browser that did not start, renders are refused this long before it is tried again
# headers that describe the wire form of a body; the page is given the decoded one
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection",
                           "keep-alive", "x-crawler-transfer-encoding"})


def browser_args(*, as_root: bool) -> list[str]:
    """Chromium's flags for a closed network (see the module doc)."""
    args = ["--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-quic", "--no-first-run", "--disable-gpu", "--disable-default-apps",
            "--disable-extensions", "--disable-domain-reliability", "--no-pings", "--mute-audio",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-dev-shm-usage", "--disable-breakpad",
            "--disable-crash-reporter"]
    if as_root:
        args.append("--no-sandbox")
    return args


class ChromiumRenderer:
    def __init__(self, *, executable_path: str, clock, contexts_max: int = 2, navigation_s: float = 10.0,
                 deadline_s: float = 20.0, settle_s: float = 1.0, renders_per_browser_max: int = 200,
                 memory_bytes_max: int = 2**30, user_agent: str = "courtly", launch_s: float = 60.0) -> None:
        self.executable_path = executable_path
        self.clock = clock
        self.launch_s = launch_s
        self.navigation_s = navigation_s
        self.deadline_s = deadline_s
        self.settle_s = settle_s
        self.renders_per_browser_max = renders_per_browser_max
        self.memory_bytes_max = memory_bytes_max
        self.user_agent = user_agent
        self._slots = asyncio.Semaphore(contexts_max)
        self._playwright = None
        self._browser = None
        self._renders = 0            # by the current browser
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._retire = False         # restart when the renders in flight end
        self._start_lock = asyncio.Lock()
        self.restarts = 0
        self.restart_reasons: dict[str, int] = {}
        self.launch_failures = 0
        self._launch_failed: tuple[float, str] | None = None   # (when, why) of the last start that failed

    @classmethod
    def from_config(cls, render, *, clock, user_agent: str) -> "ChromiumRenderer":
        """From the `[render]` section (config.RenderSection)."""
        return cls(executable_path=render.executable_path, clock=clock, contexts_max=render.contexts_max,
                   launch_s=render.launch_s,
                   navigation_s=render.navigation_s, deadline_s=render.deadline_s, settle_s=render.settle_s,
                   renders_per_browser_max=render.renders_per_browser_max,
                   memory_bytes_max=render.memory_bytes_max, user_agent=user_agent)

    def available(self) -> str:
        """'' when a render can start, else one line saying why not."""
        if importlib.util.find_spec("playwright") is None:
            return "the Python package playwright is not installed (pip install 'courtly[render]')"
        if not os.access(self.executable_path, os.X_OK):
            return f"no browser at {self.executable_path} (apt-get install chromium, or set render.executable_path)"
        return ""

    async def close(self) -> None:
        await self._stop_browser()
        if self._playwright is not None:
            pw, self._playwright = self._playwright, None
            await asyncio.wait_for(pw.stop(), STOP_S)

    # ---- one render ---------------------------------------------------------------

    async def render(self, url: str, document: SubResponse, gate: SubrequestGate) -> Rendered:
        """Render `url`, whose raw answer is `document`; every other request goes to `gate`."""
        async with self._slots:
            try:
                browser = await self._browser_for_render()
            except _NotStarted as e:
                return Rendered(url, RenderOutcome.UNAVAILABLE, detail=str(e))
            self._in_flight += 1
            self._idle.clear()
            started = self.clock.now()
            state = _RenderState(url, document, gate, started, started + self.deadline_s)
            context = None
            try:
                context = await browser.new_context(service_workers="block", accept_downloads=False,
                                                    user_agent=self.user_agent, bypass_csp=False)
                result = await asyncio.wait_for(self._run(context, state), self.deadline_s)
            except asyncio.TimeoutError:
                result = (RenderOutcome.DEADLINE, b"", f"not done within {self.deadline_s:g} s")
            except Exception as e:    # the browser's errors have no stable types
                crashed = "crash" in str(e).lower() or "closed" in str(e).lower()
                result = (RenderOutcome.CRASHED if crashed else RenderOutcome.FAILED, b"", _line(e))
            finally:
                if context is not None and not await self._close_context(context):
                    if browser.is_connected():
                        result = (RenderOutcome.HUNG, b"", "its context would not close")
                        self._retire_browser("hung")
                    else:
                        result = (RenderOutcome.CRASHED, b"", "the browser went away")
                self._renders += 1
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle.set()
            if state.error is not None:
                raise state.error   # a bug in the caller's rules: never hidden as a refusal
            outcome, dom, detail = result
            if outcome is RenderOutcome.CRASHED:
                self._retire_browser("crash")
            return Rendered(url, outcome, dom, self.clock.now() - started, detail,
                            state.handed, tuple(state.refused))

    async def _run(self, context, state: "_RenderState") -> tuple[RenderOutcome, bytes, str]:
        await context.route("**/*", state.route)
        page = await context.new_page()
        crashed = asyncio.get_running_loop().create_future()
        page.on("crash", lambda _p: crashed.done() or crashed.set_result(None))
        nav = asyncio.ensure_future(page.goto(state.url, wait_until="load", timeout=self.navigation_s * 1000))
        await asyncio.wait((nav, crashed), return_when=asyncio.FIRST_COMPLETED)
        if crashed.done():
            nav.cancel()
            return RenderOutcome.CRASHED, b"", "the page crashed"
        try:
            nav.result()
        except Exception as e:
            if type(e).__name__ == "TimeoutError":   # Playwright's, not asyncio's
                return RenderOutcome.NAVIGATION, b"", _line(e)
            raise
        # settle: timers get settle_s, fetches until the network is idle, both
        # within the deadline less a second left for reading the DOM
        left_s = max(0.1, self.deadline_s - (self.clock.now() - state.started_at) - 1.0)
        idle = asyncio.ensure_future(page.wait_for_load_state("networkidle", timeout=left_s * 1000))
        settle = asyncio.ensure_future(asyncio.gather(idle, asyncio.sleep(min(self.settle_s, left_s)),
                                                      return_exceptions=True))
        await asyncio.wait((settle, crashed), timeout=left_s, return_when=asyncio.FIRST_COMPLETED)
        settle.cancel()
        idle.cancel()
        await asyncio.gather(settle, idle, return_exceptions=True)
        if crashed.done():
            return RenderOutcome.CRASHED, b"", "the page crashed"
        html = await page.content()
        return RenderOutcome.RENDERED, html.encode("utf-8", "surrogatepass"), ""

    async def _close_context(self, context) -> bool:
        try:
            await asyncio.wait_for(context.close(), CLOSE_S)
            return True
        except Exception:    # a timeout or a dead browser: either way, restart it
            return False

    # ---- the browser -----------------------------------------------------------------

    def _retire_browser(self, why: str) -> None:
        if not self._retire:
            self._retire = True
            self.restart_reasons[why] = self.restart_reasons.get(why, 0) + 1

    async def _browser_for_render(self):
        async with self._start_lock:
            if self._browser is not None and not self._retire:
                if self._renders >= self.renders_per_browser_max:
                    self._retire_browser("renders")
                elif not self._browser.is_connected():
                    self._retire_browser("crash")
                elif self._renders and tree_rss() > self.memory_bytes_max:   # ~1 ms of /proc reads
                    self._retire_browser("memory")
            if self._retire and self._browser is not None:
                await self._idle.wait()      # the renders in flight end first (each within its deadline)
                await self._stop_browser()
                self.restarts += 1
            if self._browser is None:
                await self._start_or_refuse()
            return self._browser

    async def _start_or_refuse(self) -> None:
        """Start the browser, or raise _NotStarted: now, or within RELAUNCH_S of a start that failed
        (a browser that cannot start is not retried for every page)."""
        now = self.clock.now()
        if self._launch_failed is not None:
            at, why = self._launch_failed
            if now - at < RELAUNCH_S:
                raise _NotStarted(f"the browser did not start {now - at:.0f} s ago ({why}); "
                                  f"it is tried again {RELAUNCH_S:g} s after that")
        try:
            await self._start_browser()
        except Exception as e:    # Playwright's launch errors have no stable types
            self.launch_failures += 1
            self._launch_failed = (self.clock.now(), _line(e))
            log.warning("render: the browser did not start: %s", _line(e))
            raise _NotStarted(f"the browser did not start: {_line(e)}") from e
        self._launch_failed = None

    async def _start_browser(self) -> None:
        if self._playwright is None:
            from playwright.async_api import async_playwright   # the [render] extra

            self._playwright = await asyncio.wait_for(async_playwright().start(), self.launch_s)
        self._browser = await self._playwright.chromium.launch(
            executable_path=self.executable_path, headless=True, args=browser_args(as_root=os.geteuid() == 0),
            chromium_sandbox=False, proxy={"server": "http://127.0.0.1:9"}, timeout=self.launch_s * 1000,
            handle_sigint=False, handle_sigterm=False, handle_sighup=False)
        self._renders = 0
        self._retire = False

    async def _stop_browser(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None:
            try:
                await asyncio.wait_for(browser.close(), CLOSE_S)
            except Exception:
                log.warning("render: the browser did not close in %s s; it is left to Playwright", CLOSE_S)


class _NotStarted(Exception):
    """The browser could not be started; the message says why (a render's detail)."""


class _RenderState:
    """One render's routing: the document from the raw answer, the rest through the gate."""

    def __init__(self, url: str, document: SubResponse, gate: SubrequestGate, started_at: float,
                 deadline_at: float) -> None:
        self.url = url
        self.started_at = started_at
        self.deadline_at = deadline_at
        self.document = document
        self.gate = gate
        self.document_served = False
        self.handed = 0
        self.refused: list[str] = []
        self.error: Exception | None = None   # the gate's own failure: a bug, raised by `render`

    async def route(self, route) -> None:
        request = route.request
        try:
            if not self.document_served and request.is_navigation_request() and request.url == self.url \
                    and request.frame.parent_frame is None:
                self.document_served = True
                await _fulfill(route, self.document)
                return
            self.handed += 1
            try:
                answer = await self.gate(SubRequest(request.url, request.method, request.resource_type,
                                                    request.headers, self.url, self.deadline_at))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.error = self.error or e
                answer = "error"
            if isinstance(answer, str):
                self.refused.append(answer)
                await route.abort("blockedbyclient")
            else:
                await _fulfill(route, answer)
        except Exception as e:   # the page went away meanwhile; nothing to answer
            log.debug("render: route of %s ended: %s", request.url, _line(e))


async def _fulfill(route, answer: SubResponse) -> None:
    headers = {k: v for k, v in answer.headers if k.lower() not in _WIRE_HEADERS}
    await route.fulfill(status=answer.status or 502, headers=headers, body=answer.body)


def tree_rss(root: int | None = None, comm_prefix: bytes = b"chrom") -> int:
    """Memory of the browser processes among this process's descendants (named
    `comm_prefix`...: not the Playwright driver, not the extraction workers),
    from /proc: proportional set size (shared pages split between the processes
    that share them; chromium's share a lot), resident size where smaps_rollup
    cannot be read."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return 0
    for pid in entries[:100_000]:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parents[pid] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    total = 0
    for pid in parents:
        p, hops = parents.get(pid), 0
        while p and p != root and hops < 64:
            p, hops = parents.get(p), hops + 1
        if p == root and pid != root and _comm(pid).startswith(comm_prefix):
            total += _memory_of(pid)
    return total


def _comm(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().strip()
    except OSError:
        return b""


def _memory_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]
