"""Bans and challenge pages: when a key's answers say "go away".

Theory of operation
-------------------
`BanWatch` looks at every answer of a key and says when the key is banning
us, by one of two rules (the key is then paused: core/health.py, state
`paused`):

- **403 wave**: `run_403` answers in a row are 403 Forbidden;
- **challenge page**: `run_same_body` answers in a row, each for a different
  URL, are 200 or 403 with the same body fingerprint (a block or JavaScript
  challenge page served instead of every page; found the way a soft-404 is,
  by one body standing for many URLs). Empty and tiny bodies
  (< `body_bytes_min`) do not count: many URLs may rightly answer nothing.
  A 200 body counts only if the key's answers *turned into* it: a body among
  the key's first `early_bodies` distinct 200 bodies is the site itself, not
  a block (a single-page app serves one shell for every URL from the start).

Any other answer ends both runs. While the key is paused, one answer of the
same kind (a 403, or the recorded challenge body) is enough to keep it
paused; any other answer from its probe ends the pause.

Rules: pure; the caller passes the body's fingerprint (`body_fingerprint`);
memory is O(1) per key, and idle keys beyond a bound are forgotten
(`evict_idle`): a run not yet a ban starts over, as after a restart (the
key's health, which holds its delay and any pause, is the politeness
state's and is saved); a paused key is kept.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Iterable

from courtly.core.keymemory import SCAN_MAX, sweep

__all__ = ["BanConfig", "BanWatch", "body_fingerprint", "BAN_403", "BAN_CHALLENGE"]

BAN_403 = "403 wave"
BAN_CHALLENGE = "challenge page"
_EDGE_BYTES = 2048


@dataclass(frozen=True, slots=True)
class BanConfig:
    run_403: int = 10           # 403s in a row that pause the key
    run_same_body: int = 10     # different URLs in a row with one body that pause the key
    body_bytes_min: int = 64    # shorter bodies are not fingerprinted
    early_bodies: int = 2       # the key's first distinct 200 bodies: the site's own, never a challenge

    def __post_init__(self) -> None:
        if self.run_403 < 2 or self.run_same_body < 2 or self.body_bytes_min < 0 or self.early_bodies < 0:
            raise ValueError("run_403 and run_same_body must be >= 2, body_bytes_min and early_bodies >= 0")


def body_fingerprint(body: bytes) -> str:
    """A cheap fingerprint, in memory only: the length and CRC-32s of the first
    and last 2 KiB (a challenge page is the same bytes every time; a real page
    differs near one end; a false match would have to repeat run_same_body
    times in a row). Constant cost on any body, where a digest of it all grows with it."""
    return f"{len(body):x}:{zlib.crc32(body[:_EDGE_BYTES]):08x}:{zlib.crc32(body[-_EDGE_BYTES:]):08x}"


@dataclass(slots=True)
class _Run:
    forbidden: int = 0          # 403s in a row
    body: str = ""              # the fingerprint of the current same-body run
    last_url: str = ""
    same: int = 0               # different URLs in a row with `body`
    paused_on: str = ""         # BAN_403 / BAN_CHALLENGE while paused
    challenge: str = ""         # the challenge body's fingerprint, while paused on one
    early: tuple[str, ...] = () # the key's first distinct 200 bodies (at most early_bodies)


class BanWatch:
    def __init__(self, config: BanConfig | None = None) -> None:
        self.config = config or BanConfig()
        self._keys: dict[str, _Run] = {}

    def answered(self, key: str, url: str, status: int, body: bytes) -> str:
        """Note an answer; the ban it shows ("" for none). While the key is
        paused, a single answer of the same kind shows it again."""
        c = self.config
        r = self._keys.get(key)
        if r is None:
            r = self._keys[key] = _Run()
        fp = body_fingerprint(body) if status in (200, 403) and len(body) >= c.body_bytes_min else ""
        if r.paused_on:
            still = (status == 403 and r.paused_on == BAN_403) or (fp != "" and fp == r.challenge)
            if still:
                return r.paused_on
            self._keys[key] = _Run(early=r.early)   # the pause is over; both runs start again
            return ""
        r.forbidden = r.forbidden + 1 if status == 403 else 0
        if fp and status == 200:
            if fp in r.early:
                fp = ""   # the site's own shell or template, served from the start
            elif len(r.early) < c.early_bodies:
                r.early += (fp,)
                fp = ""
        if fp and fp == r.body:
            if url != r.last_url:
                r.same += 1
        else:
            r.body, r.same = fp, (1 if fp else 0)
        r.last_url = url
        if r.same >= c.run_same_body:
            r.paused_on, r.challenge = BAN_CHALLENGE, fp
        elif r.forbidden >= c.run_403:
            r.paused_on = BAN_403
        return r.paused_on

    def paused_on(self, key: str) -> str:
        r = self._keys.get(key)
        return r.paused_on if r is not None else ""

    def evict_idle(self, keep: int, busy: Callable[[str], bool], scan_max: int = SCAN_MAX) -> int:
        """Forget keys beyond `keep` that are neither paused nor `busy`; returns how many."""
        return len(sweep(self._keys, keep, lambda k, r: not r.paused_on and not busy(k), scan_max))

    def forget(self, keys: Iterable[str], busy: Callable[[str], bool]) -> int:
        """Forget the runs of `keys` that are neither paused nor `busy` (their
        partition went elsewhere); returns how many."""
        gone = [k for k in keys if (r := self._keys.get(k)) is not None and not r.paused_on and not busy(k)]
        for k in gone:
            del self._keys[k]
        return len(gone)

    def __len__(self) -> int:
        return len(self._keys)
