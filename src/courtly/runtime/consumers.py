"""Consumers in a running crawl: submissions in, one stream of results out each.

What it owns: the crawler's side of `[[consumers]]` (README: Consumers). One
crawler, one politeness state per key and per IP, one WARC store; several
named consumers ask it for URLs and each gets its own results.

* Submissions (`courtly submit --consumer`, `courtly crawl --consumer`) are
  rows in the crawl folder's store (shell/store/consumers_sqlite); `poll`
  takes the new ones at load and at every group commit, as purges are taken.
  A URL not seen yet is admitted like a seed in the consumer's priority band;
  one already queued gains a consumer (the request is made once, delivered to
  each); one already fetched is delivered at once from its WARC record
  (shared, billed nothing more); one a quota turned away is queued again.
* A URL's consumers are those that submitted it, else those of the page it was
  found on (a consumer's crawl is what discovered it).
* Before a request (`before_fetch`) each consumer of the URL is checked
  against its quota (core/consumers.Ledger); those within it are charged. If
  none is, the URL is decided with reason `quota` (a Decision, never a silent
  drop); a consumer turned away from a URL others take gets a `denied` line.
  An over-quota consumer waits: at the first commit of each new UTC day
  (`_new_day`) every URL a quota turned away is queued again (read back into
  the frontier through runtime/overflow, bounded) and checked again against
  the new day's quota. A crawl resumed on a later day than its last quota
  denial does the same at load.
* A key's batch is put in weighted-fair order across its consumers (`order`);
  with consumers a lease takes at least FAIR_WINDOW URLs (`lease_size`), so
  even a key whose delay gives one URL a lease has a choice of whose is next.
* At each commit (after the WARC flush and the store batch) the batch's page
  requests become result lines in each consumer's `results.jsonl` in its sink
  folder (a webhook sink: consumers/NAME, forwarded by shell/stream_webhook),
  and rows in `consumer_results` (the chargeback); new purges become a
  `purge` line in every stream.

Rules: `now` from the crawler's clock; streams are written at least once
(lines first, then the store's cursor); every URL dropped has a decision.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from courtly.core.consumers import DAY_S, FairTurns, Ledger, Quota, ResultRow, day_of
from courtly.core.fingerprint import warc_payload_digest
from courtly.core.types import UrlItem
from courtly.core.urls import UrlError, host_of_normalized, politeness_key

if TYPE_CHECKING:
    from courtly.runtime.roles import ConsumersHost

__all__ = ["Consumers", "PAGE_KINDS", "stream_path"]

log = logging.getLogger("courtly")

PAGE_KINDS = frozenset({"page", "recrawl"})   # fetch-log kinds made for a URL someone asked for
FAIR_WINDOW = 8              # URLs of a key looked at to give its next turn fairly
OWNED_URLS_MAX = 5_000_000
TAKEN_MAX = 100_000          # requests charged and not yet seen in a commit   # URLs whose consumers are remembered; past it, the oldest are forgotten


def stream_path(sink: str, out: Path, name: str = "") -> Path:
    """A consumer's results file: `results.jsonl` in its sink folder (relative:
    to the crawl folder); a webhook sink keeps its stream in consumers/NAME
    (shell/stream_webhook forwards it)."""
    if sink.startswith(("http://", "https://")):
        sink = f"consumers/{name}"
    folder = Path(sink)
    return (folder if folder.is_absolute() else out / folder) / "results.jsonl"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Consumers:
    def __init__(self, crawler: "ConsumersHost") -> None:
        self.c = crawler
        cfg = crawler.cfg
        self.enabled = False
        self.store = None   # shell/store/consumers_sqlite.SqliteConsumerStore, set by `attach`
        self.ledger = Ledger(Quota(k.name, k.fetches_per_day, k.host_share, k.weight) for k in cfg.consumers)
        self.turns = FairTurns({k.name: k.weight for k in cfg.consumers})
        self.owned: dict[str, tuple[str, ...]] = {}    # URL -> its consumers
        self._taken: dict[str, tuple[tuple[str, ...], float]] = {}   # URL -> (charged consumers, share)
        self._digests: dict[str, str] = {}             # URL -> payload digest of its last answer
        self._rows: list[ResultRow] = []               # denials and late deliveries for the next commit
        self._streams: dict[str, Path] = {}
        self._cursors = {"submissions": 0, "purges": 0}
        self._day = -1                                 # the UTC day of the last poll
        self.requeued = 0                              # URLs queued again at a new day (quota waits)
        # per consumer, for the metrics (shell/metrics: courtly_consumer_*)
        self.counters = {k.name: {"fetches": 0, "bytes": 0, "shared": 0, "denied": 0, "charged": 0.0}
                         for k in cfg.consumers}

    # ---- wiring ---------------------------------------------------------------

    def attach(self, store, out: Path, now: float) -> None:
        """Start serving consumers: streams opened, quotas of today restored."""
        self.enabled = True
        self.store = store
        for k in self.c.cfg.consumers:
            path = stream_path(k.sink or f"consumers/{k.name}", out, k.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._streams[k.name] = path
        for name in self._cursors:
            self._cursors[name] = store.cursor(name)
        for consumer, key, at in store.fetched_since(day_of(now) * DAY_S):
            self.ledger.restore(consumer, key, at, now)
        for name, t in store.totals().items():
            if name in self.counters:
                self.counters[name].update({k: t[k] for k in self.counters[name]})
        self._replay_owners()

    def _replay_owners(self) -> None:
        """The consumers of the pages delivered and the URLs submitted before (a
        resumed crawl): the links still queued from those pages stay theirs."""
        for consumer, url in self.store.iter_delivered():
            self._own(url, (consumer,))
        after = 0
        while True:
            subs = self.store.submissions(after)
            if not subs:
                return
            for s in subs:
                url = self._normalized(s.url)
                if url:
                    self._own(url, (s.consumer,))
            after = subs[-1].id
            if after >= self._cursors["submissions"]:
                return

    def _normalized(self, raw: str) -> str:
        try:
            return self.c.admission.normalize(raw)
        except UrlError:
            return ""

    def _own(self, url: str, consumers: Iterable[str]) -> tuple[str, ...]:
        mine = tuple(sorted(set(self.owned.get(url, ())) | set(consumers)))
        self.owned[url] = mine
        if len(self.owned) > OWNED_URLS_MAX:
            del self.owned[next(iter(self.owned))]
        return mine

    # ---- submissions --------------------------------------------------------------

    def poll(self, now: float) -> None:
        """Take new submissions and purges (at load and at every commit)."""
        if not self.enabled:
            return
        self._new_day(now)
        subs = self.store.submissions(self._cursors["submissions"])
        for s in subs:
            self._take(s.consumer, s.url, s.priority, now)
        if subs:
            self._cursors["submissions"] = subs[-1].id
        purges = self.c.store.purges(self._cursors["purges"])
        for pid, scope, value, reason, at, _applied in purges:
            line = {"purge": {"id": pid, "scope": scope, "value": value, "reason": reason},
                    "recorded_at": _iso(at)}
            for name in self._streams:
                self._write(name, [line])
        if purges:
            self._cursors["purges"] = purges[-1][0]
        if subs or purges or self._rows:
            self._flush_rows()

    def _new_day(self, now: float) -> None:
        """At a new UTC day the quotas start again: the URLs they turned away
        are queued again (see the module doc)."""
        day = day_of(now)
        if day == self._day:
            return
        first, self._day = self._day < 0, day
        if first:
            last = self.store.last_denied_at()
            if last is None or day_of(last) == day:
                return     # none, or denied today: they wait for the next day
        for key, n in self.store.requeue_all_quota().items():
            self.c.overflow.note(key, n)
            self.requeued += n
        if self.requeued:
            log.info("a new UTC day: %d URL(s) a quota turned away are queued again", self.requeued,
                     extra={"event": "quota_requeued", "urls": self.requeued})

    def _take(self, consumer: str, raw: str, priority: int, now: float) -> None:
        c = self.c
        url = self._normalized(raw)
        if not url:
            c.admission.admit(raw, via=None, band=priority, depth=0, now=now)   # decided MALFORMED etc.
            return
        record = c.store.url_record(url) if url in c.seen else None
        if record is None:   # new (or admitted in the batch not written yet: then it only gains the consumer)
            self._own(url, (consumer,))
            if c.cfg.crawl.scope != "any":
                c.admission.set_seeds([url])   # a submission is a seed of the crawl's scope
            c.admission.admit(url, via=None, band=priority, depth=0, now=now)
            return
        if record["state"] == "fetched":
            self._deliver_earlier(consumer, url, record["key"])
        elif record["reason"] == "quota" and self.store.requeue_quota(url):
            # turned away by a quota before: asked again, it is queued again (and checked again)
            self._own(url, (consumer,))
            c.queue(UrlItem(url=url, key=record["key"], band=priority, depth=record["depth"],
                             via=record["via"]), now)
        elif record["state"] in ("skipped", "failed"):
            self._rows.append(self._row(consumer, url, record["key"], now, "decision", 0, 0, "", "", 0, 0.0,
                                        f"{record['reason']}: {record['detail'] or ''}"))
        else:   # queued: delivered to each of its consumers when fetched
            self._own(url, (consumer,))

    def _deliver_earlier(self, consumer: str, url: str, key: str) -> None:
        """A URL fetched before: its last capture, delivered now (no new request)."""
        pages = [f for f in self.c.store.url_fetches(url) if f["kind"] in PAGE_KINDS and f["warc"]]
        if not pages:
            return
        f = pages[-1]
        digests = [r.digest for r in self.store.delivered(url) if r.digest]
        self._rows.append(self._row(consumer, url, key, f["at"], "fetch", f["status"], f["bytes"], f["warc"],
                                    digests[-1] if digests else "", 1, 0.0, "delivered from an earlier fetch"))

    # ---- the fetch path -------------------------------------------------------------

    def owners(self, item: UrlItem) -> tuple[str, ...]:
        mine = self.owned.get(item.url)
        if mine is None and item.via:
            mine = self.owned.get(item.via)   # found on a consumer's page: that consumer's too
            if mine:
                self.owned[item.url] = mine
        return mine or ()

    def lease_size(self, n: int) -> int:
        """With consumers, a lease takes at least FAIR_WINDOW URLs so `order` has
        a choice; those its turn does not reach go back to the front of their band."""
        return max(n, FAIR_WINDOW) if self.enabled else n

    def order(self, key: str, items: list[UrlItem]) -> list[UrlItem]:
        """A key's batch in weighted-fair order across its consumers."""
        if not self.enabled or len(items) < 2:
            return items
        return self.turns.order(key, items, self.owners)

    def before_fetch(self, item: UrlItem, now: float) -> str:
        """Charge the URL's consumers within quota; "" to go on, else the detail
        of a `quota` decision (none of them may have it)."""
        if not self.enabled:
            return ""
        owners = self.owners(item)
        if not owners:
            return ""
        delay = self.c.politeness.key(item.key).delay_s
        takers, denials = [], []
        for name in owners:
            why = self.ledger.denial(name, item.key, delay, now)
            (denials if why else takers).append((name, why))
        for name, why in denials:
            self.counters[name]["denied"] += 1
            if takers:   # the request is made for the others: this one is told it was left out
                self._rows.append(self._row(name, item.url, item.key, now, "denied", 0, 0, "", "", 0, 0.0, why))
        if not takers:
            for name, why in denials:
                self._rows.append(self._row(name, item.url, item.key, now, "denied", 0, 0, "", "", 0, 0.0, why))
            return "; ".join(why for _name, why in denials)
        names = tuple(name for name, _why in takers)
        share = self.ledger.charge(names, item.key, now)
        self.turns.served_turn(item.key, names)
        self._taken[item.url] = (names, share)
        if len(self._taken) > TAKEN_MAX:   # the oldest never reached a commit (its lease was lost)
            oldest = next(iter(self._taken))
            del self._taken[oldest]
            self._digests.pop(oldest, None)
        return ""

    def answered(self, url: str, result) -> None:
        """Keep the payload digest of an answer made for consumers (their stream names it)."""
        if url in self._taken and result is not None and result.status and result.body is not None:
            self._digests[url] = warc_payload_digest(result.body)

    # ---- commit -----------------------------------------------------------------

    def committed(self, batch) -> None:
        """The batch's page requests and decisions (written: WARC flushed, store
        applied) to the streams of the consumers whose URLs they are."""
        if not self.enabled:
            return
        for url, key, via, at, _state, reason, detail, _depth in batch.decisions:
            if reason == "quota":
                continue   # its consumers have their `denied` lines already
            for name in self.owned.get(url) or self.owned.get(via) or ():
                self._rows.append(self._row(name, url, key, at, "decision", 0, 0, "", "", 0, 0.0,
                                            f"{reason}: {detail}"))
        fetches = batch.fetches
        for url, kind, at, status, nbytes, _elapsed, _ip, warc, error in fetches:
            if kind not in PAGE_KINDS:
                continue
            taken = self._taken.get(url)
            if taken is None:
                continue
            names, share = taken
            key = politeness_key(host_of_normalized(url), self.c.cfg.crawl.politeness_key)
            for name in names:
                self._rows.append(self._row(name, url, key, at, "fetch", status, nbytes, warc,
                                            self._digests.get(url, ""), int(len(names) > 1), share, error))
        for url, _kind, *_rest in fetches:
            if self._taken.pop(url, None) is not None:
                self._digests.pop(url, None)
        self._flush_rows()

    def _row(self, consumer, url, key, at, kind, status, nbytes, warc, digest, shared, charge, detail):
        return ResultRow(consumer, url, key, at, kind, status, nbytes, warc, digest, shared, charge, detail)

    def _flush_rows(self) -> None:
        rows, self._rows = self._rows, []
        by_consumer: dict[str, list[dict]] = {}
        for r in rows:
            by_consumer.setdefault(r.consumer, []).append(_line(r))
            if r.kind == "fetch":
                n = self.counters.setdefault(r.consumer, {"fetches": 0, "bytes": 0, "shared": 0, "denied": 0,
                                                          "charged": 0.0})
                n["fetches"] += 1
                n["bytes"] += r.bytes
                n["shared"] += r.shared
                n["charged"] += r.charge
        for name, lines in by_consumer.items():
            self._write(name, lines)
        self.store.add_results(rows, self._cursors)

    def _write(self, name: str, lines: list[dict]) -> None:
        path = self._streams.get(name)
        if path is None:
            return   # a consumer no longer declared: its rows stay in the store
        with path.open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)

    def metrics(self) -> dict:
        """{measure: {consumer: value}} for shell/metrics (courtly_consumer_*)."""
        out: dict[str, dict] = {m: {} for m in ("fetches", "bytes", "shared", "denied", "charged",
                                                "quota_used", "cost")}
        for k in self.c.cfg.consumers:
            n = self.counters[k.name]
            for m in ("fetches", "bytes", "shared", "denied", "charged"):
                out[m][k.name] = n[m]
            if k.fetches_per_day:
                out["quota_used"][k.name] = self.ledger.used.get(k.name, 0) / k.fetches_per_day
            out["cost"][k.name] = n["charged"] * k.price_per_million / 1e6
        return out


def _line(r: ResultRow) -> dict:
    if r.kind == "fetch":
        file, _, offset = r.warc.rpartition(":")
        line = {"url": r.url, "status": r.status, "warc_file": file, "warc_offset": int(offset) if offset else None,
                "payload_digest": r.digest, "bytes": r.bytes, "fetched_at": _iso(r.at), "shared": bool(r.shared)}
        if r.detail:
            line["detail"] = r.detail
        return line
    return {"url": r.url, "decision": "quota" if r.kind == "denied" else r.detail.split(":", 1)[0],
            "detail": r.detail, "at": _iso(r.at)}
