"""The status server: Prometheus `/metrics` and a live status page, one aiohttp app.

What it owns: the HTTP surface and the read-only `StatusSource` interface it
is built against. It never touches the crawler; `courtly.runtime.observe`
adapts a live `Crawler` to `StatusSource`, and tests use fakes.

    GET /                      the status page (static files from package data)
    GET /assets/<name>         its scripts and styles (no external URL anywhere)
    GET /metrics               Prometheus text exposition, computed on scrape
    GET /api/snapshot          the counters and gauges as JSON (the page polls it)
    GET /api/hosts?offset=&limit=&sort=&desc=&q=   one page of the host table
    GET /api/decisions?limit=  recent decisions, newest first
    GET /api/review            the review queue (open trap suspicions)
    GET /api/explain?url=      one URL's history
    ... and, in a monitor crawl, the watch list API, changes and feeds (shell/watch_api)
    GET /api/info              what the source is: {"mode": "live"} or a folder's {"mode", "out", "replay"}

A source that reads the crawl folder (`courtly serve`, and a live crawl's
observer) adds these, and the page shows them (404 otherwise); each may
answer with an awaitable:

    GET /api/urls?state=&reason=&host=&offset=&limit=   one page of URL records
    GET /api/timeline?buckets=  the whole crawl's fetch log per time bucket
    GET /capture?url=&warc=     the archived response of one capture, content-decoded,
                                sandboxed (CSP sandbox: no script runs, nothing loads)

Rules: binds to loopback unless told otherwise (there is no authentication),
and then answers only requests whose Host names a loopback address (DNS
rebinding); every parameter is checked and a bad one gets 400 with a JSON
message, never a traceback; a failing source gets 500 with a JSON message;
the source is called on the event loop (it reads the crawler's state), except
that `explain` may return an awaitable (the adapter runs its database reads
in a thread); sorting, searching and paging of hosts happen in the source,
so the page stays fast with 100,000 hosts.
"""

from __future__ import annotations

import inspect
import ipaddress
import json
import logging
import math
from importlib import resources
from typing import Any, Awaitable, Callable, Protocol

from aiohttp import web

from courtly.shell import metrics

__all__ = ["StatusSource", "StatusServer", "BadRequest", "HOST_COLUMNS", "HOST_EXTRA_COLUMNS", "HOST_SORTS",
           "HOSTS_LIMIT_MAX", "DECISIONS_LIMIT_MAX"]

log = logging.getLogger("courtly.status")

# One row of the host table. Sortable by every column.
HOST_COLUMNS: tuple[str, ...] = (
    "key",            # politeness key (registered domain or host)
    "ip",             # last resolved IP used for the key ("" before any request)
    "delay_s",        # current delay between two requests to the key
    "backoff",        # why the key is backing off ("" when it is not); backoff_until beside it
    "robots",         # robots.txt phase of the key's origins (worst first)
    "queued",         # URLs queued for the key
    "next_fetch_at",  # earliest instant of the key's next request (unix seconds)
    "budget_left",    # new URLs the key may still admit today (None: no per-key budget)
    "trap",           # open trap suspicion rules ("" when none)
    "fetches",        # requests made to the key
)
# Columns a folder source adds to each row (and sorts by); a live row may lack them.
HOST_EXTRA_COLUMNS: tuple[str, ...] = ("state", "fetched", "denied_total", "errors")
HOST_SORTS = frozenset(HOST_COLUMNS + HOST_EXTRA_COLUMNS)
URLS_LIMIT_MAX = 500
TIMELINE_BUCKETS_MAX = 500
CAPTURE_BYTES_MAX = 50 * 2**20
HOSTS_LIMIT_MAX = 500
DECISIONS_LIMIT_MAX = 1000
QUERY_LEN_MAX = 200
URL_LEN_MAX = 4096
OFFSET_MAX = 10**9

ASSETS_PACKAGE = "courtly.shell"
ASSETS_DIR = "status_assets"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class StatusSource(Protocol):
    """What the status server reads. Read-only; every method is cheap or paged."""

    def snapshot(self, now: float) -> dict:
        """Counters and gauges (schema: docs/observability.md)."""

    def hosts(self, offset: int, limit: int, sort: str, desc: bool, query: str) -> tuple[int, list[dict]]:
        """(hosts matching `query`, rows offset..offset+limit sorted by `sort`).
        Rows have the keys of HOST_COLUMNS (plus backoff_until, leased)."""

    def decisions(self, limit: int) -> list[dict]:
        """The most recent decisions, newest first: url, reason, detail, at (+ key)."""

    def review_queue(self) -> list[dict]:
        """Open trap suspicions, oldest first: key, rule, scope, evidence, since."""

    def explain(self, url: str) -> dict | Awaitable[dict]:
        """A URL's history: record, fetches, via_chain, note, found."""


class BadRequest(ValueError):
    """A query parameter is missing or invalid (400)."""


# ---- parameters -----------------------------------------------------------------


def _int(q, name: str, default: int, lo: int, hi: int) -> int:
    raw = q.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw, 10)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {raw[:40]!r}") from None
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be in {lo}..{hi}, not {v}")
    return v


def _bool(q, name: str, default: bool) -> bool:
    raw = q.get(name)
    if raw is None or raw == "":
        return default
    v = raw.lower()
    if v in ("1", "true", "yes"):
        return True
    if v in ("0", "false", "no"):
        return False
    raise BadRequest(f"{name} must be 0 or 1, not {raw[:40]!r}")


def host_params(q) -> dict:
    """offset, limit, sort, desc, query from a query mapping; raises BadRequest."""
    sort = q.get("sort") or "key"
    if sort not in HOST_SORTS:
        raise BadRequest(f"sort must be one of {', '.join(HOST_COLUMNS + HOST_EXTRA_COLUMNS)}, not {sort[:40]!r}")
    query = q.get("q", "")
    if len(query) > QUERY_LEN_MAX:
        raise BadRequest(f"q is longer than {QUERY_LEN_MAX} characters")
    return {
        "offset": _int(q, "offset", 0, 0, OFFSET_MAX),
        "limit": _int(q, "limit", 50, 1, HOSTS_LIMIT_MAX),
        "sort": sort,
        "desc": _bool(q, "desc", False),
        "query": query.strip(),
    }


def _clean(v: Any) -> Any:
    """JSON-safe: non-finite floats become null (JavaScript's JSON.parse refuses NaN)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def _json(data: Any, status: int = 200) -> web.Response:
    body = json.dumps(_clean(data), default=str, separators=(",", ":"))
    return web.Response(text=body, status=status, content_type="application/json",
                        headers={"Cache-Control": "no-store"})


def _is_loopback(host: str) -> bool:
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host name of a Host header ('127.0.0.1:8080', '[::1]:80', 'localhost')."""
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def load_assets() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, content type) of every file in the package's status_assets."""
    out = {}
    root = resources.files(ASSETS_PACKAGE).joinpath(ASSETS_DIR)
    for entry in root.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in _TYPES:
            out[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    if "index.html" not in out:
        raise RuntimeError(f"status page assets missing from {ASSETS_PACKAGE}/{ASSETS_DIR}")
    return out


# ---- the server -----------------------------------------------------------------


class StatusServer:
    """Serves `source` on host:port (port 0 picks a free one)."""

    def __init__(self, source: StatusSource, host: str = "127.0.0.1", port: int = 0, *,
                 now: Callable[[], float] | None = None, watch_api=None) -> None:
        if now is None:
            from courtly.shell.clock import SystemClock

            now = SystemClock().now
        self.source = source
        self.watch_api = watch_api   # shell/watch_api: the monitor's routes, when it runs
        self.host = host
        self.port = port
        self._now = now
        self._loopback_only = _is_loopback(host)
        self._assets = load_assets()
        self._registry = metrics.new_registry(lambda: self.source.snapshot(self._now()))
        self._runner: web.AppRunner | None = None
        if not self._loopback_only:
            log.warning("status server on %s: not loopback, and it has no authentication", host)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/assets/{name}", self._asset)
        app.router.add_get("/favicon.ico", self._favicon)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/snapshot", self._snapshot)
        app.router.add_get("/api/hosts", self._hosts)
        app.router.add_get("/api/decisions", self._decisions)
        app.router.add_get("/api/review", self._review)
        app.router.add_get("/api/explain", self._explain)
        if self.watch_api is not None:
            self.watch_api.add_routes(app.router)
        app.router.add_get("/api/info", self._info)
        app.router.add_get("/api/urls", self._urls)
        app.router.add_get("/api/timeline", self._timeline)
        app.router.add_get("/capture", self._capture)
        return app

    async def start(self) -> int:
        """Bind and serve; returns the bound port."""
        if self._runner is not None:
            raise RuntimeError("status server already started")
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ---- middleware --------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        api = request.path.startswith("/api/")
        if self._loopback_only and not _is_loopback(_host_of(request.headers.get("Host", ""))):
            return _json({"error": "this server answers loopback host names only"}, 403) if api \
                else web.Response(status=403, text="loopback host names only")
        try:
            resp = await handler(request)
        except BadRequest as e:
            resp = _json({"error": str(e)}, 400)
        except web.HTTPException as e:
            if not api:
                raise
            resp = _json({"error": e.reason}, e.status)
        except Exception as e:  # the source failed: say so, keep serving
            log.exception("status: %s failed", request.path)
            resp = _json({"error": f"{type(e).__name__}: {e}"[:500]}, 500) if api \
                else web.Response(status=500, text=f"{type(e).__name__}: {e}"[:500])
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Content-Security-Policy", _CSP)
        resp.headers.setdefault("Referrer-Policy", "no-referrer")
        return resp

    # ---- pages ---------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.Response:
        body, ctype = self._assets["index.html"]
        return web.Response(body=body, content_type=ctype, headers={"Cache-Control": "no-cache"})

    async def _asset(self, request: web.Request) -> web.Response:
        item = self._assets.get(request.match_info["name"])
        if item is None:
            raise web.HTTPNotFound()
        return web.Response(body=item[0], content_type=item[1], headers={"Cache-Control": "no-cache"})

    async def _favicon(self, request: web.Request) -> web.Response:
        body, ctype = self._assets["favicon.svg"]
        return web.Response(body=body, content_type=ctype)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(self._registry),
                            headers={"Content-Type": metrics.CONTENT_TYPE, "Cache-Control": "no-store"})

    # ---- JSON API ------------------------------------------------------------------

    async def _snapshot(self, request: web.Request) -> web.Response:
        return _json(self.source.snapshot(self._now()))

    async def _hosts(self, request: web.Request) -> web.Response:
        p = host_params(request.query)
        total, rows = self.source.hosts(p["offset"], p["limit"], p["sort"], p["desc"], p["query"])
        return _json({"total": total, "offset": p["offset"], "limit": p["limit"], "sort": p["sort"],
                      "desc": p["desc"], "q": p["query"], "now": self._now(), "rows": rows})

    async def _decisions(self, request: web.Request) -> web.Response:
        limit = _int(request.query, "limit", 100, 1, DECISIONS_LIMIT_MAX)
        return _json({"rows": self.source.decisions(limit)})

    async def _review(self, request: web.Request) -> web.Response:
        return _json({"rows": self.source.review_queue()})

    async def _explain(self, request: web.Request) -> web.Response:
        url = request.query.get("url", "").strip()
        if not url:
            raise BadRequest("url is required")
        if len(url) > URL_LEN_MAX:
            raise BadRequest(f"url is longer than {URL_LEN_MAX} characters")
        result = self.source.explain(url)
        if inspect.isawaitable(result):
            result = await result
        return _json(result)

    # ---- the views of a folder source ------------------------------------------------

    def _view(self, name: str):
        fn = getattr(self.source, name, None)
        if fn is None:
            raise web.HTTPNotFound(reason=f"this source has no {name} view (courtly serve has)")
        return fn

    async def _info(self, request: web.Request) -> web.Response:
        info = getattr(self.source, "info", None)
        return _json(info() if info else {"mode": "live"})

    async def _urls(self, request: web.Request) -> web.Response:
        q = request.query
        args = {name: _text(q, name) or None for name in ("state", "reason", "host")}
        offset = _int(q, "offset", 0, 0, OFFSET_MAX)
        limit = _int(q, "limit", 50, 1, URLS_LIMIT_MAX)
        try:
            total, rows = await _maybe(self._view("urls")(offset=offset, limit=limit, **args))
        except ValueError as e:
            raise BadRequest(str(e)) from None
        return _json({"total": total, "offset": offset, "limit": limit, **args, "rows": rows})

    async def _timeline(self, request: web.Request) -> web.Response:
        buckets = _int(request.query, "buckets", 120, 1, TIMELINE_BUCKETS_MAX)
        return _json(await _maybe(self._view("timeline")(buckets)))

    async def _capture(self, request: web.Request) -> web.Response:
        import asyncio

        from courtly.shell.decode import decode_body
        from courtly.shell.warc_index import read_record

        url, warc = _text(request.query, "url", URL_LEN_MAX), _text(request.query, "warc")
        if not url or not warc:
            raise BadRequest("url and warc are required")
        found = await _maybe(self._view("capture")(url, warc))
        rec = await asyncio.to_thread(read_record, *found) if found else None
        if rec is None or rec.warc_headers.get("WARC-Target-URI") != url:
            return web.Response(status=404, text="no such capture in this crawl's fetch log and WARC files")
        headers = [(k.lower(), v) for k, v in rec.http_headers]
        codings = ", ".join(v for k, v in headers if k == "content-encoding")
        body = rec.payload
        if rec.rec_type == "response":
            decoded = decode_body(body, codings or None, decoded_bytes_max=CAPTURE_BYTES_MAX, ratio_max=1000.0)
            body = body if decoded.error else decoded.content
        else:   # a revisit: the payload is in the record it refers to
            body = (f"revisit of {rec.warc_headers.get('WARC-Refers-To-Target-URI', '')} "
                    f"({rec.warc_headers.get('WARC-Refers-To-Date', '')}), identical payload").encode()
            headers = [("content-type", "text/plain; charset=utf-8")]
        ctype = next((v for k, v in headers if k == "content-type"), "application/octet-stream")
        return web.Response(body=body, headers={
            "Content-Type": ctype, "Cache-Control": "no-store",
            "Content-Security-Policy": "sandbox; default-src 'none'; style-src 'unsafe-inline'",
            "Courtly-Archived-Status": str(rec.http_status or ""),
            "Courtly-Archived-Date": rec.warc_headers.get("WARC-Date", "")})


async def _maybe(result):
    """A source's answer, awaited when it is awaitable (a store read in a thread)."""
    return await result if inspect.isawaitable(result) else result


def _text(q, name: str, len_max: int = QUERY_LEN_MAX) -> str:
    raw = q.get(name, "").strip()
    if len(raw) > len_max:
        raise BadRequest(f"{name} is longer than {len_max} characters")
    return raw
