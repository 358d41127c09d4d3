"""`courtly serve`: the status page of a finished or running crawl, from its folder.

What it owns: `FolderSource`, a `courtly.shell.status.StatusSource` read from a
crawl folder through `runtime.crawlview.CrawlView` (read-only: SQLite WAL
readers never block the crawl that may be writing), and `serve()`, which puts
it behind the status server until Ctrl-C or SIGTERM.

How it works: the page, its API and `/metrics` are the live crawl's, with the
views a folder adds (`urls`, `timeline`, `capture`, `info`): the host table
gains state, fetched, denied and errors; the "whole crawl" charts come from
the fetch log's timestamps; every capture gets a replay link. With `--replay`
a pywb server (`courtly.shell.pywb`) is started on the folder's closed WARC
files and the links open the capture in pywb; otherwise they open
`/capture?url=&warc=`, the archived response served from its WARC record.
Figures of a live crawl that the store does not keep (requests in flight,
DNS cache, Bloom filter) are absent from the snapshot, so their tiles show
"–" and `/metrics` leaves them out.

Rules: aggregates over the whole store (host table, snapshot, timeline) are
recomputed at most every max(`refresh_s`, 10 x what they cost) seconds,
whoever asks (`bench/crawlview.py`: the host table of a million URLs takes
seconds); each view is bounded
(`CrawlView` limits); a capture link opens only a record the fetch log names.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any, Callable

from courtly.runtime.crawlview import CrawlView, HostRow, capture_file, replay_link, url_page
from courtly.runtime.observe import LATENCY_BUCKETS_S, page_rows

__all__ = ["FolderSource", "serve", "REFRESH_S"]

REFRESH_S = 2.0
COST_FACTOR = 10.0
_SORT = {
    "key": lambda r: r.key, "ip": lambda r: r.ip or None, "delay_s": lambda r: r.delay_s,
    "backoff": lambda r: r.backoff_until, "robots": lambda r: r.robots or None, "queued": lambda r: r.queued,
    "next_fetch_at": lambda r: r.next_fetch_at, "budget_left": lambda r: None, "trap": lambda r: r.trap or None,
    "fetches": lambda r: r.fetches, "state": lambda r: r.state, "fetched": lambda r: r.fetched,
    "denied_total": lambda r: sum(r.denied.values()), "errors": lambda r: r.errors,
}


class FolderSource:
    """A StatusSource over a crawl folder (see the module docstring)."""

    def __init__(self, out: Path, *, replay_base: str | None = None, refresh_s: float = REFRESH_S,
                 now: Callable[[], float] = time.time) -> None:
        self.out = Path(out)
        self.view = CrawlView(self.out)
        self.replay_base = replay_base
        self._refresh_s = refresh_s
        self._now = now
        self._cache: dict[str, tuple[float, Any]] = {}

    def replay_with(self, base: str) -> None:
        """Link pages to the replay at `base` (pywb, started after the folder was checked)."""
        self.replay_base = base

    def close(self) -> None:
        self.view.close()

    def _cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """`compute()`, kept for max(refresh_s, COST_FACTOR x what it cost): a
        large crawl's scans then take at most 1/COST_FACTOR of the server."""
        hit = self._cache.get(name)
        start = self._now()
        if hit is not None and start < hit[0]:
            return hit[1]
        value = compute()
        cost = max(0.0, self._now() - start)
        self._cache[name] = (start + max(self._refresh_s, COST_FACTOR * cost), value)
        return value

    def _hosts(self) -> list[HostRow]:
        return self._cached("hosts", lambda: self.view.host_rows(self._now()))

    # ---- StatusSource --------------------------------------------------------

    def snapshot(self, now: float) -> dict:
        return {**self._cached("snapshot", self._snapshot), "now": now}

    def _snapshot(self) -> dict:
        v = self.view
        totals, hosts, states = v.totals(), self._hosts(), v.states()
        delays = sorted(r.delay_s for r in hosts if r.delay_s is not None)
        le, counts, total_s = v.latency_histogram(LATENCY_BUCKETS_S)
        started = v.meta("started")
        return {
            "started_at": float(started) if started else totals["first_at"],
            "last_request_at": totals["last_at"],
            "fetches": {"page": totals["by_kind"].get("page", 0), "robots": totals["by_kind"].get("robots", 0)},
            "http_responses": totals["statuses"],
            "bytes_fetched": totals["bytes"],
            "decisions": v.reasons(),
            "errors": totals["errors"],
            "frontier": {"queued_urls": states.get("queued", 0), "leased_urls": 0,
                         "hosts": {"ready": sum(r.state == "ready" for r in hosts),
                                   "waiting": sum(r.state in ("waiting", "backing off") for r in hosts),
                                   "leased": 0}},
            "hosts_backing_off": sum(r.state == "backing off" for r in hosts),
            "host_delay_s": {q: delays[min(len(delays) - 1, int(float(q) * len(delays)))]
                             for q in ("0.5", "0.9", "0.99")} if delays else {},
            "fetch_latency_s": {"le": le, "counts": counts, "sum": total_s, "count": counts[-1]},
            "trap_suspects_open": len(v.suspects()),
            "frontier_disk_bytes": sum(p.stat().st_size for p in self.out.glob("crawl.db*") if p.is_file()),
        }

    def hosts(self, offset: int, limit: int, sort: str, desc: bool, query: str) -> tuple[int, list[dict]]:
        rows = {r.key: r for r in self._hosts()}
        q = query.lower()
        match = (lambda k: q in k or q in rows[k].ip) if q else None
        value = _SORT[sort]
        return page_rows(rows, lambda k: value(rows[k]), lambda k: self._row(rows[k]), offset, limit, desc, match)

    def _row(self, r: HostRow) -> dict:
        d = r.as_dict()
        d.update(budget_left=None, leased=False)
        return d

    def decisions(self, limit: int) -> list[dict]:
        return self.view.recent_decisions(limit)

    def review_queue(self) -> list[dict]:
        return self.view.suspects()

    def explain(self, url: str) -> dict:
        d = self.view.explain(url)
        for f in d["fetches"]:
            f["replay"] = replay_link(f["url"], f["warc"], f["at"], self.replay_base) if f["kind"] == "page" else ""
        return d

    # ---- the views a folder adds -----------------------------------------------

    def info(self) -> dict:
        return {"mode": "folder", "out": str(self.out), "replay": "pywb" if self.replay_base else "record",
                "views": ["urls", "timeline", "capture"]}

    def urls(self, *, state: str | None, reason: str | None, host: str | None, offset: int,
             limit: int) -> tuple[int, list[dict]]:
        return url_page(self.out, state=state, reason=reason, host=host, offset=offset, limit=limit,
                        pywb_base=self.replay_base)

    def timeline(self, buckets: int) -> dict:
        return self._cached(f"timeline-{buckets}", lambda: self.view.timeline(buckets))

    def capture(self, url: str, warc: str) -> tuple[Path, int] | None:
        return capture_file(self.out, url, warc)


def serve(out: Path, listen: tuple[str, int] | None, *, replay: bool = False,
          say: Callable[[str], None] = print) -> int:
    """Serve the folder's status page until SIGINT or SIGTERM; returns the exit status."""
    from courtly.runtime.wiring import run_async

    return run_async(_serve(Path(out), listen or ("127.0.0.1", 8089), replay, say))


async def _serve(out: Path, listen: tuple[str, int], replay: bool, say: Callable[[str], None]) -> int:
    import contextlib

    from courtly.shell.pywb import PywbReplay
    from courtly.shell.status import StatusServer

    source = FolderSource(out)   # raises CrawlViewError before anything starts
    with contextlib.ExitStack() as stack:
        if replay:
            pywb = stack.enter_context(PywbReplay(out / "warc", host=listen[0]))
            source.replay_with(pywb.collection_url)
            say(f"pywb replays {pywb.files} WARC file(s) at {pywb.collection_url}/")
        server = StatusServer(source, listen[0], listen[1])
        try:
            await server.start()
        except OSError as e:
            from courtly.runtime.wiring import UsageError

            raise UsageError(f"--listen {listen[0]}:{listen[1]}: {e.strerror or 'cannot listen there'}") from e
        say(f"serving {out} at {server.url} (read-only; Ctrl-C stops)")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await server.stop()
            source.close()
    return 0
