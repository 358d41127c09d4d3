"""A crawl folder read back, read-only: hosts, URLs, the fetch timeline, captures.

What it owns: every query that `courtly serve`, `courtly hosts` and
`courtly urls` make of a crawl's ``crawl.db``, on a connection of its own
opened read-only (``mode=ro``, ``PRAGMA query_only``). SQLite in WAL mode lets
such a reader run beside a crawl that is writing: it sees the last committed
transaction and never blocks the writer.

How it works:

- ``host_rows(now)`` aggregates per politeness key: the ``hosts`` table
  (delay, back-off, next fetch, requests), URL counts by state and skip
  reason, page-fetch errors and the last IP from the fetch log, the worst
  robots.txt phase of the key's origins, and the open trap suspicions. A host's
  ``state`` is, first match wins: ``trap`` (an open suspicion: its URLs are
  parked in the lowest band until ``courtly review`` resolves it),
  ``backing off`` (429/503/robots back-off still running), ``waiting`` (URLs
  queued, next request later), ``ready`` (URLs queued, due now), ``done``.
- ``urls(...)`` pages through URL records filtered by state, reason and host
  key, in discovery order; each row carries its last capture (WARC file and
  offset) so a caller can link a replay.
- ``timeline(buckets)`` counts the fetch log per time bucket over the whole
  crawl (pages, robots.txt, errors, bytes, 4xx and 5xx), so a chart opened
  after the crawl shows all of it.
- ``explain(url)`` is `explain_data` (below; `courtly explain` uses it too) on this connection.
- ``url_page``, ``capture_file`` and ``timeline_of`` open a view of their
  own for one call: what `courtly serve` and the live status page (which
  runs them in a thread) both answer `/api/urls`, `/capture` and
  `/api/timeline` with; ``replay_link`` is the link a capture gets.

Rules: nothing here writes; every list is bounded (``LIMIT_MAX`` rows per
call, ``BUCKETS_MAX`` buckets); aggregates over the whole store are full scans
(one ``GROUP BY`` each), so callers that poll keep the result a few seconds
(`courtly serve` does); a missing or foreign ``crawl.db`` raises
`CrawlViewError` naming the folder.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from courtly.core.sitekey import politeness_key
from courtly.core.urls import split_origin
from courtly.shell.store.sqlite import read_linked_from, read_url_fetches, read_url_flags, read_url_record

__all__ = ["CrawlView", "CrawlViewError", "HostRow", "UrlRow", "STATES", "LIMIT_MAX", "BUCKETS_MAX",
           "replay_link", "url_page", "capture_file", "timeline_of"]

STATES = ("queued", "fetched", "skipped", "failed")
LIMIT_MAX = 1000
BUCKETS_MAX = 500
_ROBOTS_ORDER = {"failed": 0, "fetching": 1, "absent": 2, "fresh": 3}


class CrawlViewError(Exception):
    """The folder is not a readable crawl folder."""


@dataclass(frozen=True, slots=True)
class HostRow:
    """One politeness key of the crawl, as the store has it."""

    key: str
    state: str                 # trap | backing off | waiting | ready | done (see module doc)
    delay_s: float | None
    next_fetch_at: float | None
    backoff: str               # why it backs off ("" when it does not)
    backoff_until: float | None
    crawl_delay_s: float | None
    robots: str                # worst robots.txt phase of its origins
    trap: str                  # open suspicion rules, comma-separated
    ip: str                    # address of its last page fetch
    fetches: int               # requests made to the key (robots.txt included)
    fetched: int               # URLs fetched
    queued: int
    failed: int
    errors: int                # page fetches that ended in an error (no response)
    denied: dict[str, int] = field(default_factory=dict)   # skip reason -> URLs

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["denied_total"] = sum(self.denied.values())
        return d


@dataclass(frozen=True, slots=True)
class UrlRow:
    """One URL record with its last capture."""

    url: str
    key: str
    state: str
    reason: str
    detail: str
    depth: int
    discovered_at: float
    fetched_at: float | None
    status: int | None
    warc: str                  # "file:offset" of its last response record, "" if none
    captured_at: float | None  # when that capture was made


class CrawlView:
    """Read-only queries over ``DIR/crawl.db`` (see the module docstring)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        db = self.out / "crawl.db"
        if not db.is_file():
            raise CrawlViewError(f"{self.out} is not a crawl folder (no crawl.db)")
        try:
            self._db = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as e:   # unreadable (permissions)
            raise CrawlViewError(f"cannot open {db}: {e}") from e
        try:
            self._db.execute("PRAGMA query_only = 1")
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._db.execute("SELECT 1 FROM urls LIMIT 1").fetchall()
            self._db.execute("SELECT 1 FROM fetches LIMIT 1").fetchall()
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise CrawlViewError(f"cannot read {db} as a crawl database: {e}") from e
        self.key_mode = self.meta("politeness_key") or "domain"
        # decisions made before a URL was keyed (nofollow, scope, ...) are stored with key '':
        # they are counted under the key of their URL's host
        self._db.create_function("url_key", 1, self._url_key, deterministic=True)

    def _url_key(self, url: str) -> str:
        try:
            return politeness_key(split_origin(url).host, self.key_mode)
        except ValueError:
            return ""

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "CrawlView":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def meta(self, k: str) -> str | None:
        row = self._db.execute("SELECT v FROM meta WHERE k = ?", (k,)).fetchone()
        return row[0] if row else None

    # ---- hosts ---------------------------------------------------------------

    def host_rows(self, now: float) -> list[HostRow]:
        """Every politeness key the crawl knows, in key order."""
        counts: dict[str, dict[str, Any]] = {}
        # two passes, keyed rows and the few without a key, cost ~20 % less than one with a CASE
        for key, state, reason, n in self._db.execute(
                "SELECT key, state, reason, count(*) FROM urls WHERE key != '' GROUP BY key, state, reason"
                " UNION ALL SELECT url_key(url) AS k, state, reason, count(*) FROM urls WHERE key = ''"
                " GROUP BY k, state, reason"):
            c = counts.setdefault(key, {"queued": 0, "fetched": 0, "failed": 0, "denied": {}})
            if state == "skipped":
                c["denied"][reason or "-"] = c["denied"].get(reason or "-", 0) + n
            elif state in c:
                c[state] += n
        log: dict[str, tuple[int, str]] = {}
        for key, errors, _last, ip in self._db.execute(
                "SELECT u.key, sum(f.error != ''), max(f.id), f.ip FROM fetches f JOIN urls u ON u.url = f.url"
                " GROUP BY u.key"):
            log[key] = (int(errors or 0), ip or "")
        states = {k: json.loads(v) for k, v in self._db.execute("SELECT key, state FROM hosts")}
        robots = self._robots_by_key()
        suspects = self.suspects_by_key()
        rows = []
        for key in sorted(set(counts) | set(states)):
            if not key:
                continue   # URLs without a host (malformed, another scheme)
            c = counts.get(key, {"queued": 0, "fetched": 0, "failed": 0, "denied": {}})
            st = states.get(key, {})
            errors, ip = log.get(key, (0, ""))
            until = st.get("backoff_until") or 0.0
            backing = until > now
            rows.append(HostRow(
                key=key, state=_host_state(key in suspects, backing, c["queued"], st.get("next_fetch_at"), now),
                delay_s=st.get("delay_s"), next_fetch_at=st.get("next_fetch_at"),
                backoff=(st.get("backoff_reason") or "back-off") if backing else "",
                backoff_until=until if backing else None, crawl_delay_s=st.get("crawl_delay_s"),
                robots=robots.get(key, ""), trap=suspects.get(key, ""), ip=ip, fetches=int(st.get("fetches", 0)),
                fetched=c["fetched"], queued=c["queued"], failed=c["failed"], errors=errors,
                denied=dict(sorted(c["denied"].items(), key=lambda kv: (-kv[1], kv[0])))))
        return rows

    def _robots_by_key(self) -> dict[str, str]:
        phases: dict[str, list[str]] = {}
        for origin, raw in self._db.execute("SELECT origin, state FROM robots"):
            try:
                key = politeness_key(split_origin(origin).host, self.key_mode)
                phase = str(json.loads(raw).get("phase", ""))
            except (ValueError, AttributeError):
                continue
            phases.setdefault(key, []).append(phase)
        out = {}
        for key, ps in phases.items():
            worst = min(ps, key=lambda p: _ROBOTS_ORDER.get(p, 9))
            out[key] = worst if len(ps) == 1 else f"{worst} ({ps.count(worst)} of {len(ps)})"
        return out

    def suspects(self) -> list[dict]:
        """Open trap suspicions (the review queue), oldest first."""
        import random

        from courtly.core.traps import TrapConfig, TrapGuard

        raw = self.meta("traps")
        if not raw:
            return []
        guard = TrapGuard.restore(json.loads(raw), TrapConfig(), random.Random(0))
        return [{"key": s.key, "rule": s.rule, "scope": s.scope, "evidence": s.evidence, "since": s.since}
                for s in guard.suspects()]

    def suspects_by_key(self) -> dict[str, str]:
        out: dict[str, list[str]] = {}
        for s in self.suspects():
            out.setdefault(s["key"], []).append(s["rule"])
        return {k: ", ".join(sorted(set(v))) for k, v in out.items()}

    # ---- URLs ----------------------------------------------------------------

    def urls(self, *, state: str | None = None, reason: str | None = None, host: str | None = None,
             offset: int = 0, limit: int = 100) -> tuple[int, list[UrlRow]]:
        """(matching URLs, one page of them in discovery order). `host` is a
        politeness key, or a host name whose key is taken."""
        if state is not None and state not in STATES:
            raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
        if not 1 <= limit <= LIMIT_MAX:
            raise ValueError(f"limit must be in 1..{LIMIT_MAX}, not {limit}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        where, args = [], []
        if state:
            where.append("state = ?")
            args.append(state)
        if reason:
            where.append("reason = ?")
            args.append(reason)
        if host:
            key = self.key_of(host)
            if state in (None, "skipped"):
                where.append("(key = ? OR (key = '' AND url_key(url) = ?))")
                args += [key, key]
            else:   # only skip decisions are stored without a key; keyed, the queued URLs are an index range
                where.append("key = ?")
                args.append(key)
        sql_where = (" WHERE " + " AND ".join(where)) if where else ""
        (total,) = self._db.execute(f"SELECT count(*) FROM urls{sql_where}", args).fetchone()
        rows = self._db.execute(
            "SELECT url, key, state, reason, detail, depth, discovered_at, fetched_at, status,"
            " (SELECT warc FROM fetches f WHERE f.url = u.url AND f.warc != '' ORDER BY f.at DESC LIMIT 1),"
            " (SELECT at FROM fetches f WHERE f.url = u.url AND f.warc != '' ORDER BY f.at DESC LIMIT 1)"
            f" FROM urls u{sql_where} ORDER BY discovered_at, url LIMIT ? OFFSET ?",
            [*args, limit, offset]).fetchall()
        return total, [UrlRow(url=r[0], key=r[1], state=r[2], reason=r[3] or "", detail=r[4] or "",
                              depth=r[5], discovered_at=r[6], fetched_at=r[7], status=r[8], warc=r[9] or "",
                              captured_at=r[10]) for r in rows]

    def key_of(self, host: str) -> str:
        """The politeness key of a host name (a key is its own key)."""
        h = host.strip().lower()
        if "://" in h:
            try:
                h = split_origin(h).host
            except ValueError:
                return h
        return politeness_key(h, self.key_mode)

    def reasons(self) -> dict[str, int]:
        """Skip reason -> URLs, most first."""
        return dict(self._db.execute(
            "SELECT reason, count(*) FROM urls WHERE state = 'skipped' AND reason IS NOT NULL"
            " GROUP BY reason ORDER BY 2 DESC, 1").fetchall())

    def states(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT state, count(*) FROM urls GROUP BY state ORDER BY state").fetchall())

    # ---- the fetch log ---------------------------------------------------------

    def timeline(self, buckets: int = 120) -> dict:
        """The whole fetch log in at most `buckets` equal time buckets:
        {start, end, bucket_s, points: [{t, pages, robots, errors, bytes, s4xx, s5xx}]}."""
        buckets = max(1, min(BUCKETS_MAX, buckets))
        first, last = self._db.execute("SELECT min(at), max(at) FROM fetches").fetchone()
        if first is None:
            return {"start": None, "end": None, "bucket_s": None, "points": []}
        bucket_s = max(1.0, (last - first) / buckets)
        points: dict[int, dict] = {}
        for b, kind, n, errors, nbytes, s4, s5 in self._db.execute(
                "SELECT CAST((at - ?) / ? AS INTEGER) AS b, kind, count(*), sum(error != ''), sum(bytes),"
                " sum(status BETWEEN 400 AND 499), sum(status >= 500) FROM fetches GROUP BY b, kind",
                (first, bucket_s)):
            p = points.setdefault(b, {"t": first + b * bucket_s, "pages": 0, "robots": 0, "errors": 0,
                                      "bytes": 0, "s4xx": 0, "s5xx": 0})
            p["robots" if kind == "robots" else "pages"] += n
            p["errors"] += errors or 0
            p["bytes"] += nbytes or 0
            p["s4xx"] += s4 or 0
            p["s5xx"] += s5 or 0
        return {"start": first, "end": last, "bucket_s": bucket_s, "points": [points[b] for b in sorted(points)]}

    def totals(self) -> dict:
        """Fetch-log totals: requests by kind, bytes, errors, responses by status."""
        by_kind = dict(self._db.execute("SELECT kind, count(*) FROM fetches GROUP BY kind").fetchall())
        nbytes, errors, first, last = self._db.execute(
            "SELECT coalesce(sum(bytes), 0), coalesce(sum(error != ''), 0), min(at), max(at) FROM fetches").fetchone()
        statuses = {str(s): n for s, n in self._db.execute(
            "SELECT status, count(*) FROM fetches WHERE kind != 'robots' AND status > 0 GROUP BY status ORDER BY 1")}
        return {"by_kind": by_kind, "bytes": nbytes, "errors": errors, "first_at": first, "last_at": last,
                "statuses": statuses}

    def latency_histogram(self, le: tuple[float, ...]) -> tuple[list[float], list[int], float]:
        """(le, cumulative counts with +Inf last, sum of seconds) of every request's time."""
        bounds = "".join(f"sum(elapsed_s <= {float(b)!r}), " for b in le)
        row = self._db.execute(f"SELECT {bounds}count(*), coalesce(sum(elapsed_s), 0) FROM fetches").fetchone()
        return list(le), [int(n or 0) for n in row[:-1]], float(row[-1])

    def recent_decisions(self, limit: int) -> list[dict]:
        """The last `limit` URLs skipped, newest first (by when they were recorded)."""
        order = "rowid" if self._has_rowid() else "discovered_at"
        rows = self._db.execute(
            f"SELECT url, reason, detail, discovered_at, key FROM urls WHERE state = 'skipped'"
            f" ORDER BY {order} DESC LIMIT ?", (max(1, min(LIMIT_MAX, limit)),)).fetchall()
        return [{"url": u, "reason": r or "", "detail": d or "", "at": at, "key": k} for u, r, d, at, k in rows]

    def _has_rowid(self) -> bool:
        try:
            self._db.execute("SELECT rowid FROM urls LIMIT 1").fetchall()
            return True
        except sqlite3.OperationalError:   # folders from before keep a WITHOUT ROWID table
            return False

    # ---- one URL -----------------------------------------------------------------

    def url_record(self, url: str) -> dict | None:
        return read_url_record(self._db, url)

    def url_fetches(self, url: str) -> list[dict]:
        return read_url_fetches(self._db, url)

    def linked_from(self, url: str, limit: int = 20) -> list[str]:
        return read_linked_from(self._db, url, limit)

    def url_flags(self, url: str) -> list[tuple]:
        return read_url_flags(self._db, url)

    def explain(self, url: str) -> dict:
        return explain_data(self, url)

    def capture(self, url: str, warc: str) -> dict | None:
        """The fetch-log row of `url`'s capture at `warc` ("file:offset"); None
        when the log has no such capture (the only records a caller may open)."""
        cur = self._db.execute("SELECT * FROM fetches WHERE url = ? AND warc = ? LIMIT 1", (url, warc))
        row = cur.fetchone()
        return dict(zip([d[0] for d in cur.description], row)) if row else None


def replay_link(url: str, warc: str, at: float | None, pywb_base: str | None = None) -> str:
    """The link that replays a capture: pywb's page for it, or the status
    server's `/capture` of its record ("" when there is no record)."""
    if not warc:
        return ""
    if pywb_base:
        stamp = datetime.fromtimestamp(at or 0, timezone.utc).strftime("%Y%m%d%H%M%S")
        return f"{pywb_base}/{stamp}/{url}"
    return f"capture?url={quote(url, safe='')}&warc={quote(warc, safe='')}"


def url_page(out: Path, *, state: str | None, reason: str | None, host: str | None, offset: int, limit: int,
             pywb_base: str | None = None) -> tuple[int, list[dict]]:
    """One page of `CrawlView.urls` as dicts, each with its replay link (a
    connection of its own: callers run it in a thread beside a live crawl)."""
    with CrawlView(out) as view:
        total, rows = view.urls(state=state, reason=reason, host=host, offset=offset, limit=limit)
    out_rows = []
    for r in rows:
        d = asdict(r)
        d["replay"] = replay_link(r.url, r.warc, r.captured_at, pywb_base)
        out_rows.append(d)
    return total, out_rows


def capture_file(out: Path, url: str, warc: str) -> tuple[Path, int] | None:
    """(WARC file, offset) of `url`'s capture at `warc` ("file:offset") when the
    fetch log names it, else None; the file a crawl is still writing is used
    as it is (its records are flushed before they are logged)."""
    name, sep, offset = warc.rpartition(":")
    if not sep or not offset.isdigit() or "/" in name or name.startswith("."):
        return None
    with CrawlView(out) as view:
        if view.capture(url, warc) is None:
            return None
    folder = Path(out) / "warc"
    path = folder / name
    if not path.exists() and (folder / (name + ".open")).exists():
        path = folder / (name + ".open")
    return path, int(offset)


def timeline_of(out: Path, buckets: int) -> dict:
    with CrawlView(out) as view:
        return view.timeline(buckets)


def _host_state(suspect: bool, backing: bool, queued: int, next_at: float | None, now: float) -> str:
    if suspect:
        return "trap"
    if backing:
        return "backing off"
    if queued:
        return "waiting" if next_at and next_at > now else "ready"
    return "done"


def explain_data(reader, url: str) -> dict:
    """A URL's history from `reader` (a `SqliteStore` or a read-only
    `CrawlView`): url, normalized, record, fetches, via_chain, links_sample,
    note, flags, found."""
    from courtly.core.urls import UrlError, normalize_url

    try:
        norm = normalize_url(url)
    except UrlError as e:
        norm = url
        note = f"not a crawlable URL ({e.reason}): {e}"
    else:
        note = ""
    rec = reader.url_record(norm) or (reader.url_record(url) if norm != url else None)
    chain = []
    if rec:
        via = rec["via"]
        while via and len(chain) < 20:
            chain.append(via)
            parent = reader.url_record(via)
            via = parent["via"] if parent else ""
    return {"url": url, "normalized": norm, "record": rec,
            "fetches": reader.url_fetches(rec["url"]) if rec else [], "via_chain": chain,
            "links_sample": reader.linked_from(rec["url"]) if rec else [], "note": note,
            "flags": [{"at": a, "flag": f, "detail": d} for a, f, d in (reader.url_flags(rec["url"]) if rec else [])],
            "found": rec is not None}
