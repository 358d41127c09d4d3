"""From one request to one `Reply`: the behaviour of the simulated web.

`route(web, state, req, now)` is synchronous and does no I/O: it decides the
status, headers and body (or the stream to play) from the model, the request
and the instant `now`. The only mutable input is `RouteState`, the per-host
request counters that the "first N requests are throttled" behaviours need.
Order of decisions: SSRF bait listener -> unknown host -> robots.txt (never
throttled) -> throttling -> the host's URL space (pages answer conditional
requests with 304 when the validators match).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Mapping

from courtly.sim import hostile, spa
from courtly.sim.layout import Resource
from courtly.sim.model import BAIT_IP, HostSpec, SimWeb
from courtly.sim.page import (http_date, page_version, render_feed, render_not_found, render_page,
                              render_pdf, render_sitemap, render_soft404, render_trap)
from courtly.sim.robotsfile import robots_body, robots_hops
from courtly.sim.watchpage import watch_reply

__all__ = ["Request", "Reply", "RouteState", "route"]

_HTML = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    host: str  # Host header as sent (may carry the port)
    target: str  # path plus query
    local_ip: str
    headers: Mapping[str, str]
    port: int


@dataclass(slots=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    delay_s: float = 0.0
    tag: str | None = None
    stream: str | None = None
    bomb: str | None = None
    retry_after_at: float | None = None


@dataclass(slots=True)
class RouteState:
    """Mutable counters; one per server."""

    started_at: float
    requests_by_host: dict[str, int] = field(default_factory=dict)


def route(web: SimWeb, state: RouteState, req: Request, now: float) -> Reply:
    if req.local_ip == BAIT_IP or web.is_bait(req.host):
        return Reply(404, [("Content-Type", _HTML)], render_not_found(req.target), tag="ssrf_bait")
    spec = web.host_of(req.host)
    if spec is None:
        wild = web.wild.answer(req.host.rsplit(":", 1)[0].lower(), req.target, req.port) if web.wild.sites else None
        if wild is not None:   # a sim/wildtrap site (sim/wildweb)
            status, body, tag = wild
            return Reply(status, [("Content-Type", _HTML)], body, tag=tag)
        return Reply(404, [("Content-Type", _HTML)], render_not_found(req.target), tag="unknown_host")
    if req.method not in ("GET", "HEAD"):
        return Reply(405, [("Allow", "GET, HEAD")], b"", delay_s=spec.latency_s)
    if req.target == "/robots.txt":
        reply = _robots(web, spec, req.port)
    else:
        reply = _throttle(web, spec, state, now) or _serve(web, spec, state, req, now)
    reply.delay_s = max(reply.delay_s, spec.latency_s)
    if spec.latency_s and reply.tag is None:
        reply.tag = "slow"
    return reply


def _robots(web: SimWeb, spec: HostSpec, port: int) -> Reply:
    v = spec.robots
    plain = [("Content-Type", "text/plain; charset=utf-8")]
    if v == "missing_404":
        return Reply(404, plain, b"not found\n", tag="robots_404")
    if v == "forbidden_403":
        return Reply(403, plain, b"forbidden\n", tag="robots_403")
    if v == "error_500":
        return Reply(500, plain, b"internal error\n", tag="robots_500")
    if v == "timeout":
        return Reply(200, plain, b"User-agent: *\nDisallow:\n", delay_s=web.config.robots_hang_s,
                     tag="robots_timeout")
    hops = robots_hops(web, spec)
    if hops:
        host, path = hops[0]
        return Reply(301, [("Location", f"http://{host}:{port}{path}")], b"", tag="robots_redirect")
    return Reply(200, plain, robots_body(web, spec, port), tag=None if v in ("rules", "allow_all") else f"robots_{v}")


def _throttle(web: SimWeb, spec: HostSpec, state: RouteState, now: float) -> Reply | None:
    cfg = web.config
    count = state.requests_by_host.get(spec.name, 0)
    state.requests_by_host[spec.name] = count + 1
    body = b"<html><body>slow down</body></html>"
    if spec.has("throttle_429") and count < cfg.throttle_requests:
        return Reply(429, [("Content-Type", _HTML), ("Retry-After", str(cfg.retry_after_s))], body,
                     tag="throttle_429", retry_after_at=now + cfg.retry_after_s)
    if spec.has("throttle_503_bare") and count < cfg.throttle_requests:
        return Reply(503, [("Content-Type", _HTML)], body, tag="throttle_503_bare")
    if spec.has("throttle_503_date") and now - state.started_at < cfg.throttle_window_s:
        at = math.ceil(now + cfg.retry_after_s)
        return Reply(503, [("Content-Type", _HTML), ("Retry-After", http_date(at))], body,
                     tag="throttle_503_date", retry_after_at=float(at))
    return None


def _serve(web: SimWeb, spec: HostSpec, state: RouteState, req: Request, now: float) -> Reply:
    if spec.has("spa") and (found := spa.serve(web, spec, req.target, req.port)) is not None:
        status, ctype, body, tag = found
        return Reply(status, [("Content-Type", ctype)], body, tag=tag)
    lay = web.layout(spec.name)
    res = lay.resolve(req.target)
    t_s = now - state.started_at
    kind = res.kind
    if kind in ("page", "extra"):
        return _page(lay, res, req, t_s, state.started_at)
    if kind == "redirect":
        if res.location_host:
            loc = f"http://{res.location_host}:{req.port}{res.location}"
        else:
            loc = res.location.format(port=req.port)
        return Reply(res.status, [("Location", loc), ("Content-Type", _HTML)], b"", tag=res.tag)
    if kind == "robots_body":
        body = robots_body(web, web.hosts[res.page], req.port)
        return Reply(200, [("Content-Type", "text/plain; charset=utf-8")], body, tag=res.tag)
    if kind == "trap":
        path, _, query = req.target.partition("?")
        return Reply(200, [("Content-Type", _HTML)], render_trap(lay, path, query), tag=res.tag)
    if kind == "hostile":
        p = hostile.plan(res.variant, req.headers.get("Accept-Encoding"))
        return Reply(200, list(p.headers), p.body, tag=res.tag, stream=p.stream, bomb=p.bomb)
    if kind == "pdf":
        return Reply(200, [("Content-Type", "application/pdf")], render_pdf(lay, res.page))
    if kind == "sitemap":
        body = render_sitemap(lay, res.variant, req.port, t_s, state.started_at)
        ctype = "application/gzip" if res.variant.endswith(".gz") else "application/xml"
        return Reply(200, [("Content-Type", ctype)], body, tag="sitemap")
    if kind == "feed":
        ctype = "application/rss+xml" if res.variant == "rss" else "application/atom+xml"
        return Reply(200, [("Content-Type", ctype)], render_feed(lay, res.variant, req.port, t_s, state.started_at),
                     tag="feed")
    if kind == "watch":
        reply = watch_reply(web.config, spec.index, res.variant, t_s, state.started_at,
                            state.requests_by_host.get(spec.name, 0), req.headers)
        if reply is not None:
            return Reply(reply[0], reply[1], reply[2], tag=res.tag)
    if kind == "soft404":
        return Reply(200, [("Content-Type", _HTML)], render_soft404(lay, req.target), tag="soft404")
    return Reply(res.status, [("Content-Type", _HTML)], render_not_found(req.target))


def _page(lay, res: Resource, req: Request, t_s: float, started_at: float) -> Reply:  # type: ignore[no-untyped-def]
    v = page_version(lay, res.page, res.variant, t_s, started_at)
    validators = [("ETag", v.etag), ("Last-Modified", http_date(v.last_modified_at))]
    tag = None
    if res.variant.startswith("near_") or res.variant == "dup":
        tag = "duplicate_exact" if res.variant == "dup" else "duplicate_near"
    if _not_modified(req.headers, v.etag, v.last_modified_at):
        return Reply(304, validators, b"", tag=tag)
    body = render_page(lay, res.page, res.variant, v.epoch, req.port)
    return Reply(200, [("Content-Type", _HTML), *validators], body, tag=tag)


def _not_modified(headers: Mapping[str, str], etag: str, last_modified_at: int) -> bool:
    inm = headers.get("If-None-Match")
    if inm is not None:
        tags = [t.strip() for t in inm.split(",")]
        return "*" in tags or etag in tags or f"W/{etag}" in tags
    ims = headers.get("If-Modified-Since")
    if ims is not None:
        try:
            since = parsedate_to_datetime(ims).timestamp()
        except (TypeError, ValueError, IndexError):
            return False
        return last_modified_at <= since
    return False
