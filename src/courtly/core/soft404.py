"""Soft 404s: hosts that answer "not found" with 200 and an error page.

What it owns: per origin, what the host answers for a path that cannot
exist, learnt from probes, and the test "is this 200 page that error page?".

How it works

* `needs_probe(origin)` is true until a probe gave a conclusive answer
  (or after `probe_ttl_s` when `now` is given). `probe_url(origin, rng)`
  is ``<origin>/courtly-404-probe-<16 hex>`` from the injected generator:
  a path no site has. The caller fetches it like any page (politely, through
  the frontier), follows redirects, and calls `record_probe(origin, status,
  fp)` with the *final* status and, for a 200, the `error_fingerprint` of its
  main text.
* 404 or 410: the host is honest; `is_soft404` is always false for it.
  200: the host is soft; the fingerprint joins the origin's error signatures
  (at most `signatures_max`, newest kept). Any other status (3xx left over,
  401/403, 5xx, network error as status 0): inconclusive, probe again, at
  most `attempts_max` times, then give up (treated as honest).
* `is_soft404(origin, fp)`: the host is soft and `fp` is within
  `distance_max` bits of one of its signatures.
* Other answers settle the question too, at no extra request:
  `note_not_found(origin)` takes a real 404 or 410 the origin gave for an
  ordinary URL (a broken link, a sitemap it names that is gone): the host
  answers "not found" honestly, which is all the probe asks. Not robots.txt:
  servers and CDNs often answer it apart from the site (a static 404 in
  front of a CMS that soft-404s everything else). And the probe waits for
  the origin's first page: `defer_probe(origin)` lets one page of an
  unsettled origin go first (that page is not judged as a soft 404), so a
  host that 404s something on the way is never probed; the others get
  their probe before their second page.
* `error_fingerprint(text, url)`: error pages echo the requested path ("Sorry,
  /news/missing-13.html does not exist"), which on a 20-word page moves the
  SimHash by ~18 bits. So the tokens of the requested URL are removed from
  the text first, and the SimHash is taken over word pairs. Use it for the
  probe's answer and for the candidate page alike; only pages of soft hosts
  (`is_soft(origin)`) need it.

Threshold: `distance_max` = 6. Two renderings of the same error template
differ by 0-3 bits once the path is removed (the sim's template: 0); an
unrelated page is ~32 bits away (binomial, sd 4), so 6 leaves > 6 sd of room.

Rules: pure; the generator is an argument; state is a JSON value
(`snapshot()` / `Soft404Book.restore()`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from courtly.core.fingerprint import TEXT_CHARS_MAX, hamming, simhash64

__all__ = ["Soft404Book", "error_fingerprint", "PROBE_PREFIX"]

PROBE_PREFIX = "/courtly-404-probe-"
_URL_TOKEN = re.compile(r"\w+")
_HONEST, _SOFT, _UNKNOWN, _GAVE_UP = "honest", "soft", "unknown", "gave_up"


def error_fingerprint(text: str, url: str) -> int:
    """SimHash (word pairs) of `text` without the tokens of `url`."""
    drop = set(_URL_TOKEN.findall(url.lower()))
    if len(text) <= TEXT_CHARS_MAX:
        # the same value, without joining the words and splitting them again:
        # str.lower() of a lowercased character is itself (every code point, by
        # test_speedups_worker.py::test_lowercasing_twice_is_lowercasing_once_for_every_code_point),
        # so lowercasing twice is once (test_speedups.py::test_error_fingerprint_fast_path_keeps_its_definition)
        return simhash64(text, shingle=2, drop=drop)
    kept = [t for t in _URL_TOKEN.findall(text.lower()) if t not in drop]
    return simhash64(" ".join(kept), shingle=2)


@dataclass(slots=True)
class _Host:
    state: str = _UNKNOWN
    attempts: int = 0
    probed_at: float = 0.0
    signatures: list[int] = field(default_factory=list)
    deferred: bool = False   # a page went before the probe (defer_probe)


class Soft404Book:
    """Per-origin soft-404 knowledge (see module docstring)."""

    def __init__(
        self,
        *,
        distance_max: int = 6,
        signatures_max: int = 4,
        attempts_max: int = 3,
        probe_ttl_s: float = 30 * 86_400.0,
        origins_max: int = 1_000_000,
    ) -> None:
        if not 0 <= distance_max <= 16:
            raise ValueError("distance_max must be 0..16")
        if signatures_max < 1 or attempts_max < 1 or probe_ttl_s <= 0 or origins_max < 1:
            raise ValueError("signatures_max, attempts_max, probe_ttl_s and origins_max must be positive")
        self.distance_max = distance_max
        self.signatures_max = signatures_max
        self.attempts_max = attempts_max
        self.probe_ttl_s = probe_ttl_s
        self.origins_max = origins_max
        self._hosts: dict[str, _Host] = {}
        self._changed: set[str] = set()     # origins changed here since the last `changed_rows`

    def probe_url(self, origin: str, rng: random.Random) -> str:
        """A URL on `origin` (``scheme://host[:port]``) that cannot exist."""
        return f"{origin.rstrip('/')}{PROBE_PREFIX}{rng.getrandbits(64):016x}"

    def needs_probe(self, origin: str, now: float | None = None) -> bool:
        """True when `origin` has no conclusive probe yet (or, with `now`,
        its last one is older than `probe_ttl_s`)."""
        host = self._hosts.get(origin)
        if host is None or host.state == _UNKNOWN:
            return True
        if host.state == _GAVE_UP:
            return False
        return now is not None and now - host.probed_at >= self.probe_ttl_s

    def defer_probe(self, origin: str) -> bool:
        """True once for an origin no answer has settled yet (no entry, or
        state unknown): its first page may be fetched before the probe. An
        origin whose answer expired (`probe_ttl_s`) is probed first."""
        host = self._entry(origin)
        if host.state != _UNKNOWN or host.deferred:
            return False
        host.deferred = True
        return True

    def note_not_found(self, origin: str, now: float = 0.0) -> None:
        """`origin` answered a request with a real 404 or 410: settled as
        honest unless a probe found it soft (a site may 404 some paths and
        serve its error page with 200 on others: the probe's 200 stands)."""
        host = self._entry(origin)
        if host.state != _SOFT:
            host.state, host.attempts, host.probed_at = _HONEST, 0, now

    def _entry(self, origin: str) -> _Host:
        self._changed.add(origin)   # every change goes through here (a read that changes nothing too)
        host = self._hosts.get(origin)
        if host is None:
            if len(self._hosts) >= self.origins_max:
                oldest = next(iter(self._hosts))       # it will be probed again
                del self._hosts[oldest]
                self._changed.discard(oldest)          # bounded by the origins held
            host = self._hosts[origin] = _Host()
        return host

    def record_probe(self, origin: str, status: int, fp: int | None, now: float = 0.0) -> None:
        """The probe of `origin` ended with final `status` (0: no answer);
        `fp` is the `error_fingerprint` of its body when status is 200."""
        host = self._entry(origin)
        if status in (404, 410):
            host.state, host.attempts, host.probed_at = _HONEST, 0, now
            host.signatures.clear()
        elif status == 200 and fp is not None:
            host.state, host.attempts, host.probed_at = _SOFT, 0, now
            host.signatures.append(fp)
            del host.signatures[: -self.signatures_max]
        elif host.state == _UNKNOWN:
            host.attempts += 1
            if host.attempts >= self.attempts_max:
                host.state, host.probed_at = _GAVE_UP, now

    def is_soft(self, origin: str) -> bool:
        """`origin` answered a probe with 200."""
        host = self._hosts.get(origin)
        return host is not None and host.state == _SOFT

    def is_soft404(self, origin: str, fp: int) -> bool:
        """A 200 page of `origin` with this `error_fingerprint` is its error page."""
        host = self._hosts.get(origin)
        if host is None or host.state != _SOFT:
            return False
        return any(hamming(fp, sig) <= self.distance_max for sig in host.signatures)

    # -- persistence

    def snapshot(self) -> dict[str, Any]:
        return {"version": 2, "hosts": {origin: _row(h) for origin, h in self._hosts.items()}}

    def changed_rows(self) -> dict[str, str]:
        """origin -> its JSON (a row of `snapshot()["hosts"]`), for the origins
        changed here since the last call (a worker's save into shared rows)."""
        rows = {o: json.dumps(_row(self._hosts[o])) for o in self._changed if o in self._hosts}
        self._changed.clear()
        return rows

    @classmethod
    def restore(cls, data: dict[str, Any], **settings: Any) -> Soft404Book:
        book = cls(**settings)
        book.adopt(data)
        return book

    def adopt(self, data: dict[str, Any]) -> int:
        """Take the origins of a snapshot (those of a partition taken over,
        read from a shared store) that this book does not hold; what it holds
        is newer and stays (at most `origins_max`, oldest out). Returns how
        many origins were taken."""
        version = data.get("version")
        if version not in (1, 2):   # version 1: before defer_probe (no flag: not deferred)
            raise ValueError("unknown Soft404Book snapshot version")
        taken = 0
        for origin, (state, attempts, probed_at, sigs, *rest) in data["hosts"].items():
            if state not in (_HONEST, _SOFT, _UNKNOWN, _GAVE_UP):
                raise ValueError(f"bad soft-404 state {state!r}")
            if origin not in self._hosts:
                if len(self._hosts) >= self.origins_max:   # oldest entry out, as `_entry` does
                    oldest = next(iter(self._hosts))
                    del self._hosts[oldest]
                    self._changed.discard(oldest)
                self._hosts[origin] = _Host(state, int(attempts), float(probed_at), [int(s, 16) for s in sigs],
                                            bool(rest[0]) if rest else False)
                taken += 1
        return taken

    def forget(self, origins: Callable[[str], bool]) -> int:
        """Drop the origins `origins` selects (a partition another worker now
        holds); returns how many."""
        gone = [o for o in self._hosts if origins(o)]
        for origin in gone:
            del self._hosts[origin]
            self._changed.discard(origin)
        return len(gone)


def _row(h: _Host) -> list[Any]:
    """One origin's snapshot row."""
    return [h.state, h.attempts, h.probed_at, [f"{s:016x}" for s in h.signatures], h.deferred]
