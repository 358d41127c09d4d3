"""The monitor's part of the status server: the watch list API, changes, feeds.

    GET    /changes                         the change list and side-by-side diff view (page)
    GET    /api/watches                     the watches, their counts and learned noise
    POST   /api/watches                     add one: {"url", "every_s", "target_s", "webhook", "select",
                                            "exclude", "ignore", "keep", "trigger", "trigger_on", "paused"}
    DELETE /api/watches/{id}                remove one (its changes stay)
    POST   /api/watches/{id}/pause | resume
    GET    /api/changes?limit=&watch=       change events, newest first (with both contents)
    GET    /api/changes/{seq}               one change event
    GET    /api/dead-letters                webhook deliveries that gave up
    GET    /changes.atom                    Atom feed of the crawl's changes
    GET    /watches/{id}/changes.atom       Atom feed of one watch

What it owns: those routes, added to the status server's app
(`StatusServer(..., watch_api=WatchApi(...))`), so they share its guard
(loopback Host names, JSON errors, CSP headers).

The store is one machine's (SqliteWatchStore, synchronous) or a cluster's
(PostgresWatchStore, async: a worker's status server, `courtly worker
--status`): each call's answer is awaited when it is awaitable.

Rules: reads are open like the rest of the status server; every write needs
`Authorization: Bearer <monitor.api_token>` (compared in constant time) and
a JSON body; with no token configured, writes are refused (403). A bad body
or parameter is a 400 with a one-line JSON message. The crawl picks edits up
at its next commit (the store's list version moves).
"""

from __future__ import annotations

import hmac
import inspect
import json
from typing import Any

from aiohttp import web

from courtly.core.urls import UrlError, normalize_url
from courtly.core.watch import Watch, WatchRuleError
from courtly.shell.feed import atom_feed
from courtly.shell.status import load_assets
from courtly.shell.store.sqlite import StoreError

__all__ = ["WatchApi", "BODY_BYTES_MAX"]

BODY_BYTES_MAX = 64 * 1024
_FIELDS = {"url": str, "every_s": (int, float), "target_s": (int, float), "webhook": str, "select": list,
           "exclude": list, "ignore": list, "keep": list, "trigger": str, "trigger_on": str, "paused": bool}


def _json(data, status: int = 200) -> web.Response:  # type: ignore[no-untyped-def]
    return web.Response(text=json.dumps(data, default=str), status=status, content_type="application/json",
                        headers={"Cache-Control": "no-store"})


async def _done(x: Any) -> Any:
    """The store's answer, awaited when the store is async."""
    return await x if inspect.isawaitable(x) else x


class WatchApi:
    def __init__(self, store, token: str, now) -> None:  # type: ignore[no-untyped-def]
        self.store = store
        self.token = token
        self.now = now
        self._page = load_assets()["changes.html"]

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/changes", self._changes_page)
        router.add_get("/api/watches", self._list)
        router.add_post("/api/watches", self._add)
        router.add_delete("/api/watches/{id:\\d+}", self._remove)
        router.add_post("/api/watches/{id:\\d+}/{action:pause|resume}", self._pause)
        router.add_get("/api/changes", self._changes)
        router.add_get("/api/changes/{seq:\\d+}", self._change)
        router.add_get("/api/dead-letters", self._dead)
        router.add_get("/changes.atom", self._feed)
        router.add_get("/watches/{id:\\d+}/changes.atom", self._feed)

    # ---- writes --------------------------------------------------------------------

    def _authorise(self, request: web.Request) -> web.Response | None:
        if not self.token:
            return _json({"error": "watch list writes are off: set monitor.api_token"}, 403)
        got = request.headers.get("Authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode()):
            return _json({"error": "a write needs Authorization: Bearer <monitor.api_token>"}, 401)
        return None

    async def _add(self, request: web.Request) -> web.Response:
        denied = self._authorise(request)
        if denied:
            return denied
        if request.content_type != "application/json":
            return _json({"error": "send the watch as application/json"}, 415)
        raw = await request.content.read(BODY_BYTES_MAX + 1)
        if len(raw) > BODY_BYTES_MAX:
            return _json({"error": f"body larger than {BODY_BYTES_MAX} bytes"}, 413)
        try:
            body = json.loads(raw)
            w = self._watch(body)
            w = await _done(self.store.add(w))
        except (ValueError, WatchRuleError, UrlError) as e:
            return _json({"error": str(e)}, 400)
        except StoreError as e:
            return _json({"error": str(e)}, 409)
        return _json(w.to_json(), 201)

    def _watch(self, body) -> Watch:  # type: ignore[no-untyped-def]
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        unknown = sorted(set(body) - set(_FIELDS))
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r} (known: {', '.join(_FIELDS)})")
        for k, tp in _FIELDS.items():
            if k in body and (not isinstance(body[k], tp) or (tp is not bool and isinstance(body[k], bool))):
                raise ValueError(f"{k} has the wrong type")
        if "url" not in body:
            raise ValueError("url is required")
        lists = {k: tuple(str(x) for x in body.get(k, ())) for k in ("select", "exclude", "ignore", "keep")}
        rest = {k: body[k] for k in ("every_s", "target_s", "webhook", "trigger", "trigger_on", "paused") if k in body}
        return Watch(url=normalize_url(body["url"]), added_at=self.now(), **lists, **rest).check()

    async def _remove(self, request: web.Request) -> web.Response:
        denied = self._authorise(request)
        if denied:
            return denied
        try:
            w = await _done(self.store.remove(request.match_info["id"]))
        except StoreError as e:
            return _json({"error": str(e)}, 404)
        return _json({**w.to_json(), "removed": True})

    async def _pause(self, request: web.Request) -> web.Response:
        denied = self._authorise(request)
        if denied:
            return denied
        try:
            w = await _done(self.store.set_paused(request.match_info["id"], request.match_info["action"] == "pause"))
        except StoreError as e:
            return _json({"error": str(e)}, 404)
        return _json(w.to_json())

    # ---- reads ---------------------------------------------------------------------

    async def _changes_page(self, request: web.Request) -> web.Response:
        return web.Response(body=self._page[0], content_type=self._page[1], headers={"Cache-Control": "no-cache"})

    async def _list(self, request: web.Request) -> web.Response:
        return _json({"rows": await _done(self.store.rows())})

    async def _changes(self, request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", "100"))
            watch = request.query.get("watch")
            watch_id = int(watch) if watch else None
        except ValueError:
            return _json({"error": "limit and watch must be integers"}, 400)
        if not 1 <= limit <= 1000:
            return _json({"error": "limit must be in 1..1000"}, 400)
        rows = await _done(self.store.changes(limit=limit, watch_id=watch_id))
        return _json({"rows": [{**r.to_json(), "before": r.before, "after": r.after} for r in rows]})

    async def _change(self, request: web.Request) -> web.Response:
        r = await _done(self.store.change(int(request.match_info["seq"])))
        if r is None:
            return _json({"error": "no such change"}, 404)
        return _json({**r.to_json(), "before": r.before, "after": r.after})

    async def _dead(self, request: web.Request) -> web.Response:
        return _json({"rows": [r.to_json() for r in await _done(self.store.dead_letters())]})

    async def _feed(self, request: web.Request) -> web.Response:
        wid = request.match_info.get("id")
        watch_id = int(wid) if wid else None
        rows = await _done(self.store.changes(limit=100, watch_id=watch_id))
        base = f"{request.scheme}://{request.host}"
        feed_id = f"{base}/changes" + (f"/watch/{watch_id}" if watch_id is not None else "")
        title = "courtly: changes" + (f" of watch {watch_id}" if watch_id is not None else "")
        body = atom_feed(rows, feed_id=feed_id, title=title, self_url=f"{base}{request.path}", updated_at=self.now())
        return web.Response(body=body, content_type="application/atom+xml", headers={"Cache-Control": "no-store"})
