"""Watch pages of the simulated web: real changes at known times, noise, both.

What it owns: `WatchPage`, a page whose HTML is a pure function of the
instant it is asked for (and of a per-request nonce for what changes on every
fetch), and `watch_pages(...)`, a seeded set of them. The monitor's benchmark
(`bench/monitor.py`), its tests and the simweb routes read the same pages.

Kinds:

- `real`: real changes at known instants (`change_at`), cycling through a
  text edit, a price change and an item added; nothing else moves.
- `noise`: never changes in content, but every fetch differs in bytes: a
  timestamp, a visitor counter, a session token and a CSRF field, an ad
  slot, a cache-busting link, a "quote of the moment" that differs on every
  request (by `nonce`; no generic rule masks it: the monitor has to learn it)
  and a recommendation list in a new order.
- `both`: the real changes of `real` inside the noise of `noise`.

Served by `courtly simweb --watch-pages-per-kind N` on every host as
/watch/{kind}/{i} (`watch_reply`; instants are seconds since the server
started); pages with real changes carry an ETag and answer 304 to it, noise
pages carry no validators (they differ on every request).

Rules: real changes are at least `gap_s_min` apart (a change must be
detectable before the next one); instants are seconds from 0 (the virtual
clock) or unix seconds, as the caller likes; nothing here reads a clock.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import random
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from html import escape

__all__ = ["WatchPage", "watch_pages", "host_watch_pages", "watch_reply", "KINDS", "CHANGES_MAX"]

KINDS = ("real", "noise", "both")
CHANGES_MAX = 10_000     # real changes generated per page (the simweb's pages stop changing after them)
_QUOTES = (
    "Simplicity is prerequisite for reliability.", "Premature optimisation is the root of evil.",
    "Make it work, then make it fast.", "Less is more.", "Measure twice, cut once.",
    "Deleted code has no bugs.", "Readability counts.", "Errors should never pass silently.",
    "Small is beautiful.", "Worse is better.", "Now is better than never.", "Flat beats nested.",
)
_PICKS = ("Blue kettle", "Red teapot", "Green mug", "Oak tray", "Steel spoon", "Linen cloth")
_WORDS = ("harbour", "meadow", "lantern", "granite", "orchard", "compass", "ember", "quarry")


@dataclass(frozen=True, slots=True)
class WatchPage:
    path: str
    kind: str
    change_at: tuple[float, ...]    # instants of the real changes (empty for noise)
    seed: int

    def version(self, at: float) -> int:
        """Real changes made by `at` (0 before the first)."""
        return bisect.bisect_right(self.change_at, at)

    def html(self, at: float, nonce: int = 0, epoch: float = 0.0) -> bytes:
        """The page as served at `at`; `nonce` differs per request (noise);
        `epoch` + `at` is the unix time its timestamp shows."""
        v = self.version(at) if self.kind != "noise" else 0
        rng = random.Random(f"{self.seed}:{nonce}:{at!r}")
        noisy = self.kind != "real"
        parts = ["<!doctype html><html><head><meta charset=utf-8><title>Watch ", escape(self.path),
                 "</title></head><body><nav><a href='/'>Home</a> <a href='/shop'>Shop</a></nav><main>",
                 f"<h1>Product page {self.seed}</h1>"]
        parts.append(f"<p>{self._description(v)}</p>")
        parts.append(f"<p class='price'>Price: ${self._price(v):.2f} including tax</p>")
        parts.append("<ul class='items'>" + "".join(f"<li>Item {i + 1}: {self._item(i)}</li>"
                                                  for i in range(3 + v // 3)) + "</ul>")
        if noisy:
            stamp = datetime.fromtimestamp(epoch + at + rng.random(), timezone.utc)
            token = hashlib.sha256(f"{self.seed}:{nonce}:{at!r}".encode()).hexdigest()[:32]
            picks = list(_PICKS)
            rng.shuffle(picks)
            parts += [
                f"<p class='stamp'>Page generated {stamp:%Y-%m-%d %H:%M:%S} UTC</p>",
                f"<p>{rng.randrange(1000, 99999):,} views this week</p>",
                f"<p>Session {token}</p>",
                f"<form><input type=hidden name=csrf value='{token[::-1]}'><button>Buy</button></form>",
                f"<div class='ad-slot'>Advertisement: {escape(rng.choice(_PICKS))} now half price</div>",
                f"<p>Advertisement: {escape(rng.choice(_PICKS))} on sale</p>",
                f"<p>Brochure at /files/brochure.pdf?cb={rng.randrange(10**9)} for download</p>",
                f"<p>Quote of the moment: {escape(_QUOTES[(self.seed + nonce) % len(_QUOTES)])}</p>",
                "<h2>Recommended for you</h2><ul class='picks'>"
                + "".join(f"<li>{escape(p)}</li>" for p in picks) + "</ul>",
            ]
        parts.append("</main><footer>Shop footer, all rights reserved</footer></body></html>")
        return "".join(parts).encode()

    # real content: every third change edits the text, moves the price, adds an item
    def _description(self, v: int) -> str:
        edits = (v + 2) // 3
        words = [_WORDS[(self.seed + k) % len(_WORDS)] for k in range(edits)]
        return "A sturdy product for every home" + (": now with " + ", ".join(words) if words else "") + "."

    def _price(self, v: int) -> float:
        return 20.0 + self.seed % 7 + 0.5 * ((v + 1) // 3)

    def _item(self, i: int) -> str:
        return f"{_WORDS[(self.seed + i) % len(_WORDS)]} model {self.seed}-{i}"


def watch_pages(n_per_kind: int, *, seed: int, duration_s: float, gap_s_min: float,
                gap_s_mean: float, start_at: float = 0.0) -> list[WatchPage]:
    """`n_per_kind` pages of each kind; real changes at seeded instants in
    [start_at + gap_s_min, start_at + duration_s), at least `gap_s_min` apart."""
    rng = random.Random(seed)
    out = []
    for kind in KINDS:
        for i in range(n_per_kind):
            changes: list[float] = []
            if kind != "noise":
                at = start_at
                while True:
                    at += gap_s_min + rng.expovariate(1.0 / max(gap_s_mean - gap_s_min, 1e-9))
                    if at >= start_at + duration_s:
                        break
                    changes.append(round(at, 3))
            out.append(WatchPage(f"/watch/{kind}/{i}", kind, tuple(changes), seed * 1000 + len(out)))
    return out


@functools.lru_cache(maxsize=256)
def host_watch_pages(n_per_kind: int, gap_s_mean: float, seed: int, host_index: int) -> dict[str, WatchPage]:
    """A simweb host's watch pages by path (the same for every request)."""
    pages = watch_pages(n_per_kind, seed=seed * 100_003 + host_index, duration_s=CHANGES_MAX * gap_s_mean,
                        gap_s_min=gap_s_mean / 3, gap_s_mean=gap_s_mean)
    return {p.path: replace(p, change_at=p.change_at[:CHANGES_MAX]) for p in pages}


def watch_reply(config, host_index: int, path: str, t_s: float, started_at: float,  # type: ignore[no-untyped-def]
                nonce: int, headers) -> tuple[int, list[tuple[str, str]], bytes] | None:
    """(status, headers, body) of a simweb watch page, None when `path` is not one."""
    page = host_watch_pages(config.watch_pages_per_kind, config.watch_gap_s_mean, config.seed, host_index).get(path)
    if page is None:
        return None
    html = [("Content-Type", "text/html; charset=utf-8")]
    if page.kind != "real":
        return 200, html, page.html(t_s, nonce, epoch=started_at)
    etag = f'"w{page.version(t_s)}"'
    if headers.get("If-None-Match") == etag:
        return 304, [("ETag", etag)], b""
    return 200, [*html, ("ETag", etag)], page.html(t_s, nonce)
