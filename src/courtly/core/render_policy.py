"""Which fetched pages get a headless-browser render: the shell test and the budget.

What it owns: the judgement that a raw HTML page is a script shell (its links
only exist after JavaScript runs) and the render budget, a share of page
fetches per politeness key and over the whole crawl. The browser, its
subrequests and what is stored live in shell/render.py and runtime/render.py.

How it works
------------
* `ShellTest.judge(html)` reads at most `SCAN_BYTES_MAX` of the raw body with
  a few regular expressions (no DOM): a known framework root element that is
  empty (`<div id="root"></div>`, `<app-root>`), a `<noscript>` asking for
  JavaScript, or little visible text while scripts make most of the bytes.
  It returns the first sign found, or None. The test is configuration
  (`[render]` in config.py); it errs towards "not a shell", since a render
  costs a hundred raw fetches of CPU.
* `RenderBudget` counts page fetches and renders per key and in total. A
  render is allowed while it keeps renders <= share_max x fetches + burst, on the key
  and over the crawl (`burst`: a small host whose first pages are shells is
  rendered at all). `decide` is the whole policy in order: not HTML or
  rendering off, then the shell test, then the band, then the budget; every
  page gets one `RenderChoice`, so a page parsed raw for want of budget is
  known and counted (`RenderChoice.BUDGET_KEY`, `BUDGET_CRAWL`).

Rules: pure (no clock, no I/O); bounded (the scan, the per-key table, which
forgets the oldest keys past `keys_max`).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["SCAN_BYTES_MAX", "ShellTest", "ShellSign", "RenderChoice", "RenderBudget", "RenderPolicy"]

SCAN_BYTES_MAX = 262_144   # a shell is small; a big page has its text in it

_SCRIPT = re.compile(rb"<script\b[^>]*>(.*?)</script\s*>", re.I | re.S)
_SCRIPT_SRC = re.compile(rb"<script\b[^>]*\bsrc\s*=", re.I)
_NOSCRIPT = re.compile(rb"<noscript\b[^>]*>(.*?)</noscript\s*>", re.I | re.S)
_HIDDEN = re.compile(rb"<(style|template|noscript|head)\b[^>]*>.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_TAG = re.compile(rb"<[^>]*>")
_SPACE = re.compile(rb"\s+")
_ASKS_FOR_JS = re.compile(rb"javascript|enable\s+js|\bjs\b", re.I)
# an external script counts as this many bytes of script: its code is elsewhere
SCRIPT_SRC_BYTES = 2048


class ShellSign(StrEnum):
    """Why a page was judged a shell."""

    ROOT = "root"            # an empty framework root element
    NOSCRIPT = "noscript"    # a <noscript> asking for JavaScript
    SCRIPTS = "scripts"      # little text, mostly scripts


class RenderChoice(StrEnum):
    """What happens to a fetched page, as far as rendering goes."""

    RENDER = "render"
    NOT_HTML = "not_html"
    OFF = "off"                      # rendering disabled or unavailable
    NOT_SHELL = "not_shell"
    BAND = "band"                    # its priority band is too low
    BUDGET_KEY = "budget_key"        # parsed raw: the host's share is used up
    BUDGET_CRAWL = "budget_crawl"    # parsed raw: the crawl's share is used up
    QUEUE_FULL = "queue_full"        # parsed raw: too many shells wait for the browser already
    DEAD = "dead"                    # it crashed or hung the browser before: never rendered again

    @property
    def budget_ran_out(self) -> bool:
        return self in (RenderChoice.BUDGET_KEY, RenderChoice.BUDGET_CRAWL, RenderChoice.QUEUE_FULL)


@dataclass(frozen=True, slots=True)
class ShellTest:
    text_chars_max: int = 200
    script_share_min: float = 0.5
    roots: tuple[str, ...] = ('id="root"', 'id="app"', 'id="__next"', 'id="__nuxt"', "<app-root", "ng-app")

    def judge(self, html: bytes) -> ShellSign | None:
        head = html[:SCAN_BYTES_MAX]
        text_len = len(_visible_text(head))
        if text_len > self.text_chars_max:
            return None   # a page with its text in it: raw parsing finds its links
        lowered = head.lower()
        for root in self.roots:
            if _empty_root(lowered, root.lower().encode()):
                return ShellSign.ROOT
        for m in _NOSCRIPT.finditer(head):
            if _ASKS_FOR_JS.search(m.group(1)):
                return ShellSign.NOSCRIPT
        scripts = sum(len(m.group(1)) for m in _SCRIPT.finditer(head))
        scripts += SCRIPT_SRC_BYTES * len(_SCRIPT_SRC.findall(head))
        if scripts and scripts / (scripts + text_len) >= self.script_share_min:
            return ShellSign.SCRIPTS
        return None


def _visible_text(html: bytes) -> bytes:
    body = _SCRIPT.sub(b" ", html)
    body = _HIDDEN.sub(b" ", body)
    return _SPACE.sub(b" ", _TAG.sub(b" ", body)).strip()


def _empty_root(lowered: bytes, marker: bytes) -> bool:
    """`marker` appears in a start tag whose element holds no text up to its
    first child tag or its end tag."""
    at = lowered.find(marker)
    while at >= 0:
        start = lowered.rfind(b"<", 0, at)
        end = lowered.find(b">", at)
        if start >= 0 and end > 0:
            nxt = lowered.find(b"<", end)
            inner = lowered[end + 1: nxt if nxt >= 0 else len(lowered)]
            if not inner.strip():
                return True
        at = lowered.find(marker, at + 1)
    return False


@dataclass(slots=True)
class _Count:
    fetches: int = 0
    renders: int = 0

    def room(self, share: float, burst: int) -> bool:
        return self.renders + 1 <= share * self.fetches + burst


class RenderBudget:
    """Renders per page fetch, per key and over the crawl (see the module doc)."""

    def __init__(self, share_max: float, burst: int = 1, keys_max: int = 100_000) -> None:
        self.share_max = share_max
        self.burst = burst
        self.keys_max = keys_max
        self.total = _Count()
        self._keys: OrderedDict[str, _Count] = OrderedDict()

    def _key(self, key: str) -> _Count:
        count = self._keys.get(key)
        if count is None:
            count = self._keys[key] = _Count()
            if len(self._keys) > self.keys_max:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(key)
        return count

    def fetched(self, key: str) -> None:
        self._key(key).fetches += 1
        self.total.fetches += 1

    def room(self, key: str) -> RenderChoice:
        if not self._key(key).room(self.share_max, self.burst):
            return RenderChoice.BUDGET_KEY
        if not self.total.room(self.share_max, self.burst):
            return RenderChoice.BUDGET_CRAWL
        return RenderChoice.RENDER

    def rendered(self, key: str) -> None:
        self._key(key).renders += 1
        self.total.renders += 1

    def returned(self, key: str) -> None:
        """A render taken from the budget that did not happen after all."""
        count = self._key(key)
        count.renders = max(0, count.renders - 1)
        self.total.renders = max(0, self.total.renders - 1)

    @property
    def used(self) -> float:
        """Renders per page fetch over the crawl so far."""
        return self.total.renders / self.total.fetches if self.total.fetches else 0.0


class RenderPolicy:
    """The order of the questions: HTML? on? shell? band? budget? One choice a page."""

    def __init__(self, test: ShellTest, budget: RenderBudget, *, band_max: int, enabled: bool) -> None:
        self.test = test
        self.budget = budget
        self.band_max = band_max
        self.enabled = enabled

    def decide(self, key: str, band: int, content_type: str, html: bytes) -> tuple[RenderChoice, ShellSign | None]:
        """Count the fetch and choose; a RENDER choice is taken from the budget at once."""
        self.budget.fetched(key)
        if "html" not in content_type.lower():
            return RenderChoice.NOT_HTML, None
        if not self.enabled:
            return RenderChoice.OFF, None
        sign = self.test.judge(html)
        if sign is None:
            return RenderChoice.NOT_SHELL, None
        if band > self.band_max:
            return RenderChoice.BAND, sign
        choice = self.budget.room(key)
        if choice is RenderChoice.RENDER:
            self.budget.rendered(key)
        return choice, sign
