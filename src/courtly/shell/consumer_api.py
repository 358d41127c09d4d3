"""The consumers' part of the status server: submitting URLs over HTTP.

    GET  /api/consumers                  each consumer's counters (fetches, shared, denied, billed, cost)
    POST /api/consumers/{name}/submit    {"urls": [...], "priority": 3, "intent": "search"}

What it owns: those routes, added to the status server's app beside the
others (`RouteSet`), so they share its guard (loopback Host names, JSON
errors, CSP headers). A submission is recorded as `courtly submit
--consumer` records it (the injected `submit`: runtime/consumer_report) and
the crawl takes it at its next commit.

Rules: reads are open like the rest of the status server; a submission needs
`Authorization: Bearer <the consumer's token>` (its `[[consumers]] token`,
compared in constant time): one consumer's token never submits for another,
and a consumer with no token cannot submit over HTTP (403). A bad body is a
400 with a one-line JSON message; at most URLS_MAX URLs a call.
"""

from __future__ import annotations

import hmac
import json
from typing import Callable, Mapping

from aiohttp import web

__all__ = ["ConsumerApi", "RouteSet", "URLS_MAX", "BODY_BYTES_MAX"]

URLS_MAX = 10_000
BODY_BYTES_MAX = 4 * 2**20
_FIELDS = {"urls", "priority", "intent"}


def _reply(data, status: int = 200) -> web.Response:  # type: ignore[no-untyped-def]
    return web.json_response(data, status=status, headers={"Cache-Control": "no-store"})


class RouteSet:
    """Several route providers given to the status server as one."""

    def __init__(self, *apis) -> None:  # type: ignore[no-untyped-def]
        self.apis = [a for a in apis if a is not None]

    def add_routes(self, router: web.UrlDispatcher) -> None:
        for api in self.apis:
            api.add_routes(router)


class ConsumerApi:
    def __init__(self, tokens: Mapping[str, str], submit: Callable[[str, list[str], int | None, str], dict],
                 counters: Callable[[], dict]) -> None:
        self.tokens = dict(tokens)
        self.submit = submit          # (consumer, urls, priority, intent) -> summary; ValueError if refused
        self.counters = counters

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/api/consumers", self._list)
        router.add_post("/api/consumers/{name}/submit", self._submit)

    async def _list(self, request: web.Request) -> web.Response:
        return _reply(self.counters())

    async def _submit(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.tokens:
            return _reply({"error": f"unknown consumer {name!r}"}, 404)
        token = self.tokens[name]
        if not token:
            return _reply({"error": f"submissions over HTTP are off for {name}: set its token"}, 403)
        got = request.headers.get("Authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
            return _reply({"error": f"a submission needs Authorization: Bearer <{name}'s token>"}, 401)
        if request.content_type != "application/json":
            return _reply({"error": "send the submission as application/json"}, 415)
        raw = await request.content.read(BODY_BYTES_MAX + 1)
        if len(raw) > BODY_BYTES_MAX:
            return _reply({"error": f"body larger than {BODY_BYTES_MAX} bytes"}, 413)
        try:
            urls, priority, intent = _parse(raw)
            done = self.submit(name, urls, priority, intent)
        except ValueError as e:
            return _reply({"error": str(e)}, 400)
        return _reply(done, 202)


def _parse(raw: bytes) -> tuple[list[str], int | None, str]:
    body = json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_FIELDS))})")
    urls = body.get("urls")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u for u in urls):
        raise ValueError("urls must be a non-empty list of URLs")
    if len(urls) > URLS_MAX:
        raise ValueError(f"at most {URLS_MAX} URLs a call, not {len(urls)}")
    priority = body.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ValueError("priority must be an integer band 0..7")
    intent = body.get("intent", "archive")
    if not isinstance(intent, str):
        raise ValueError("intent must be a string")
    return urls, priority, intent
