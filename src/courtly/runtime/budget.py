"""Budget defence in the running crawl: traps, exact and near duplicates, soft-404s.

What it owns: the core's `TrapGuard`, `ExactDupIndex`, `NearDupIndex` and
`Soft404Book` for one crawl, their persistence in the store, and the
counters `courtly stats` shows. The crawler asks it four questions:

* `admit(key, url, depth, now)`: may a newly discovered URL enter the frontier,
  and at which band (a trap suspect's URLs drop to the lowest band)?
* `before_fetch(key, url, now)`: has a suspicion opened since it was queued?
* `first_capture(url, digest, at)`: was this payload stored before? (then the
  WARC gets a revisit record instead of a second copy). `digest` is the
  WARC-Payload-Digest the writer records (``sha1:`` + base32): computed once
  per page, it is both the exact-duplicate key and the record's digest, and
  a revisit refers to exactly what it names.
* `page(...)`: is this page a near-duplicate of one already seen on its host,
  or its host's soft-404 error page? Near-duplicates are marked, not deleted;
  links found on them (and on soft-404s) are deprioritised.

Near-duplicates are judged on the page's main text (boilerplate removed), so
a changed ad, timestamp or navigation does not hide a copy.

With `[budget] enabled = false` every question answers "allow" (the
before/after benchmark uses that), except the plain depth cap.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from courtly.core.fingerprint import (
    ExactDupIndex,
    FirstCapture,
    NearDupIndex,
    from_signed64,
    simhash64,
    to_signed64,
)
from courtly.core.hints import named_like_hints
from courtly.core.maintext import main_text
from courtly.core.soft404 import Soft404Book, error_fingerprint
from courtly.core.traps import ALLOW, AllowEntry, TrapConfig, TrapGuard, Verdict
from courtly.core.types import Reason
from courtly.core.urlyield import Outcome

__all__ = ["BudgetDefence", "PageJudgement", "LOW_BAND"]

LOW_BAND = 6   # links found only on near-duplicates and soft-404 pages


@dataclass(frozen=True, slots=True)
class PageJudgement:
    near_dup_of: str | None = None   # canonical page of its cluster, when a near-duplicate
    soft404: bool = False

    @property
    def low_value(self) -> bool:
        return self.near_dup_of is not None or self.soft404


class BudgetDefence:
    def __init__(self, cfg, rng) -> None:
        b = cfg.budget
        self.enabled = b.enabled
        self.probe_soft404 = b.enabled and b.soft404_probe
        self.depth_max = cfg.crawl.depth_max
        self.rng = rng
        self.trap_config = TrapConfig(
            daily_new_urls_max=b.daily_new_urls_max,
            depth_max=cfg.crawl.depth_max,
            url_length_max=cfg.urls.length_max,
            allowlist=tuple(AllowEntry(a.key, a.new_urls_per_day, a.owner, a.expires_at()) for a in b.allow),
            # the least recently used host beyond it starts over (suspects are kept): runtime/keymemory.py
            hosts_max=cfg.frontier.key_states_max,
        )
        self.traps = TrapGuard(self.trap_config, rng)
        self.exact = ExactDupIndex()
        self.near = NearDupIndex(b.near_dup_distance)
        self.soft404 = Soft404Book(origins_max=cfg.frontier.key_states_max)   # an evicted origin is probed again
        self.counts: Counter[str] = Counter()

    # ---- persistence ----------------------------------------------------------

    def load(self, store) -> None:
        traps = store.get_meta("traps")
        if traps:
            self.traps = TrapGuard.restore(json.loads(traps), self.trap_config, self.rng)
        soft = store.get_meta("soft404")
        if soft:
            self.soft404 = Soft404Book.restore(json.loads(soft))
        for digest, url, at, record_id in store.iter_digests():
            self.exact.add(digest, url, at, record_id)
        for doc_id, fp, scope in store.iter_simhashes():
            self.near.add(doc_id, from_signed64(fp), scope)

    def restore_traps(self, data: dict) -> None:
        """A trap guard from `TrapGuard.snapshot` data (a worker starting: the
        allowlist rows; each partition's hosts come when it is adopted)."""
        self.traps = TrapGuard.restore(data, self.trap_config, self.rng)

    def save(self, batch) -> None:
        """Snapshot the guard and the soft-404 book into `batch` (called at commits)."""
        if self.enabled:
            batch.meta["traps"] = self.traps.snapshot_json()   # re-encodes only the hosts touched
            batch.meta["soft404"] = json.dumps(self.soft404.snapshot())

    def save_rows(self, batch) -> None:
        """The guard's and the book's rows changed since the last save, and the
        allowlist, into `batch` (a worker's: its store keeps them as rows)."""
        if self.enabled:
            batch.defence["traps"] = {**batch.defence.get("traps", {}), **self.traps.changed_rows()}
            batch.defence["soft404"] = {**batch.defence.get("soft404", {}), **self.soft404.changed_rows()}
            batch.meta["traps_allow"] = self.traps.allow_json()

    # ---- questions --------------------------------------------------------------

    def admit(self, key: str, url: str, depth: int, now: float, *, seed: bool = False) -> Verdict:
        if not self.enabled:
            if depth > self.depth_max:
                return Verdict(False, reason=Reason.DEPTH, rule="depth",
                               detail=f"depth {depth} > {self.depth_max}")
            return ALLOW
        if seed:
            self.traps.note_discovered(key, url, now)
            return ALLOW
        v = self.traps.check_new_url(key, url, depth, now)
        if not v.allowed and v.reason is Reason.BUDGET:
            self.counts["budget_denied"] += 1
        return v

    def before_fetch(self, key: str, url: str, now: float) -> Verdict:
        return self.traps.check_queued(key, url, now) if self.enabled else ALLOW

    def first_capture(self, url: str, digest: str, at: float, batch, key: str | None = None) -> FirstCapture | None:
        """The earlier capture of the payload whose WARC-Payload-Digest is
        `digest`, or None (then it is remembered). With `key`, a duplicate
        counts as a fetch that yielded nothing (the trap guard's yield rule)."""
        if not self.enabled or not digest:
            return None
        first = self.exact.add(digest, url, at)
        if first is None:
            batch.digests.append((digest, url, at, ""))
        else:
            self.counts["exact_dup"] += 1
            batch.flags.append((url, at, "exact_dup", first.url))
            if key is not None:
                self.traps.note_fetch(key, url, False, at, outcome=Outcome.EXACT_DUP)
        return first

    def page(self, *, url: str, key: str, host: str, origin: str, content: bytes, content_type: str,
             canonical: str | None, now: float, batch,
             prints: tuple[int, int | None] | None = None, refetch: bool = False) -> PageJudgement:
        """Judge a fetched HTML page. `prints` = (main-text SimHash, soft-404
        fingerprint) when the extraction worker computed them; else here. The
        soft-404 half may be None when the host was not soft at submission
        (`wants_error_print`); it is computed here if the host is soft now.
        `refetch`: a recrawl, left out of the trap guard's yield rule."""
        if not self.enabled:
            return PageJudgement()
        if prints is None:
            text = main_text(content, content_type)
            prints = (simhash64(text), error_fingerprint(text, url))
        fp, error_fp = prints
        soft = self.soft404.is_soft(origin)
        if soft and error_fp is None:   # it turned soft while the page was in the worker
            error_fp = error_fingerprint(main_text(content, content_type), url)
        if soft and self.soft404.is_soft404(origin, error_fp):
            self.counts["soft404"] += 1
            batch.flags.append((url, now, "soft404", origin))
            self.traps.note_fetch(key, url, False, now, outcome=Outcome.SOFT404, refetch=refetch)
            return PageJudgement(soft404=True)
        if fp == 0:   # no main text: nothing to compare
            self.traps.note_fetch(key, url, False, now, outcome=Outcome.EMPTY, refetch=refetch)
            return PageJudgement()
        near_dup = bool(self.near.find(fp, scope=host, limit=1))
        canonical_doc = self.near.add(url, fp, host)
        batch.simhashes.append((url, to_signed64(fp), host))
        if canonical and canonical != url and self.near.canonical_of(canonical) is not None:
            if self.near.prefer_canonical(url, canonical):
                canonical_doc = canonical
        self.traps.note_fetch(key, url, near_dup, now, fp=fp, refetch=refetch)
        if near_dup:
            self.counts["near_dup"] += 1
            batch.flags.append((url, now, "near_dup", canonical_doc))
            batch.flags.append((url, now, "rel_canonical", canonical or ""))   # for courtly dups
            return PageJudgement(near_dup_of=canonical_doc)
        return PageJudgement()

    # ---- soft-404 probes ---------------------------------------------------------

    def wants_error_print(self, origin: str) -> bool:
        """Does a page of `origin` need its soft-404 fingerprint? Only when the
        host answered the probe with 200 (the fingerprint costs more CPU than
        the SimHash, and most hosts are honest)."""
        return self.enabled and self.soft404.is_soft(origin)

    def probe_before(self, origin: str, url: str, now: float) -> bool:
        """Must `origin` be probed before `url` is fetched? Only while no
        answer has settled its soft-404 question, only before a URL that will
        be judged (a sitemap or feed, by its name, is not), and not before the
        origin's first page (`Soft404Book.defer_probe`: a 404 on the way may
        settle it for free)."""
        if not (self.probe_soft404 and self.soft404.needs_probe(origin, now)) or named_like_hints(url):
            return False
        return not self.soft404.defer_probe(origin)

    def note_not_found(self, origin: str, now: float) -> None:
        """`origin` answered a request with 404 or 410 (`Soft404Book.note_not_found`)."""
        if self.probe_soft404:
            self.soft404.note_not_found(origin, now)

    def probe_url(self, origin: str) -> str:
        return self.soft404.probe_url(origin, self.rng)

    def record_probe(self, origin: str, url: str, status: int, content: bytes, content_type: str,
                     now: float) -> None:
        fp = error_fingerprint(main_text(content, content_type), url) if status == 200 and content else None
        self.soft404.record_probe(origin, status, fp, now)

    def suspects(self):
        return self.traps.suspects() if self.enabled else []
