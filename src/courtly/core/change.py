"""Change detection for the monitor: content, not bytes.

What it owns: turning a fetched page into the comparable content of a watch
(`content_of`), masking what always changes (`mask`), learning a page's own
noise (`NoiseBook`), judging two observations (`compare`) and the structured
diff of a real change (`diff_blocks`). Pure: no clock, no I/O, never raises
on a page (garbage in, no content out).

How it works

1. Content. The page is parsed once (`links.parse_html`). The watch's
   exclude selectors are removed; with include selectors, the text of the
   matching elements is the content, else the main content after boilerplate
   removal (`maintext.main_text` edits the tree: navigation, ads, cookie
   banners, related/sharing blocks go). The remaining tree is read as
   blocks: the text of each leaf block element (p, li, h1-h6, td, ...).
2. Masking (`mask`), per block: dates, times, "5 minutes ago", counters
   (a number beside views/visitors/online/...), long tokens (session, CSRF,
   nonces: 16+ characters mixing letters and digits), query strings of URLs
   (cache busters), "Advertisement" slots; then the watch's ignore regexes
   and the noise it learned. Prices and other numbers stay: they are content.
   A watch may keep any generic mask off (`keep`: a date can be the content).
3. Comparison. Blocks are compared as a multiset: a block moved elsewhere
   (a reordered recommendation list) is not a change. The fingerprint is
   the SHA-256 of the sorted masked blocks.
4. Noise learning (`NoiseBook`): a block replaced in place gives a skeleton
   (the words both versions start and end with, `*` for the middle: "Tip of
   the day: *"; none when they share too little). A skeleton
   that changed in at least `NOISE_CHANGES_MIN` observations and in at least
   `NOISE_SHARE_MIN` of the observations where it was present is learned:
   its `*` parts are masked from then on. Both the candidates and the
   learned patterns are capped; the watch shows what it learned.
5. Diff (`diff_blocks`): blocks only before are removed, only after added;
   a pair replaced in place is diffed word by word, and a number that became
   another number is a changed value (price, count, stock level) with the
   words before it as context.

Rules: every list has a cap (blocks, block length, diff entries, patterns);
ignore regexes are the user's and are compiled once by the caller
(`compile_rules`), which raises `WatchRuleError` on a bad one.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Collection, Iterator

from courtly.core.links import parse_html
from courtly.core.maintext import main_text

__all__ = [
    "WatchRules", "WatchRuleError", "TriggerOn", "MASK_NAMES", "compile_rules", "content_of", "mask", "fingerprint",
    "NoiseBook", "Observation", "observe", "Judgement", "compare", "diff_blocks", "skeleton",
    "BLOCKS_MAX", "BLOCK_CHARS_MAX", "DIFF_ENTRIES_MAX", "NOISE_CHANGES_MIN", "NOISE_SHARE_MIN",
]

BLOCKS_MAX = 2000             # blocks kept of one page
BLOCK_CHARS_MAX = 2000        # characters kept of one block
DIFF_ENTRIES_MAX = 50         # per list of a diff (added, removed, changed)
NOISE_CHANGES_MIN = 3         # changes of one skeleton before it is learned
NOISE_SHARE_MIN = 0.6         # ... in at least this share of the observations it was in
NOISE_CANDIDATES_MAX = 64
NOISE_LEARNED_MAX = 32
SELECTORS_MAX = 16
MASK = "\u2217"               # what a masked span becomes (never typed by a page author)

_BLOCK_TAGS = "h1, h2, h3, h4, h5, h6, p, li, td, th, dt, dd, pre, blockquote, figcaption, caption, div, section"
_INNER = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "td", "th", "dt", "dd", "pre",
                    "blockquote", "figcaption", "caption", "div", "section", "ul", "ol", "table"})

_MONTHS = ("jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
           "sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
_DAYS = "mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?"
# (name, pattern): order matters (a timestamp before its date and time parts)
_MASKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url-query", re.compile(r"(?<=\S)\?(?=\S*=)[^\s#\"'<>]*")),
    ("iso-timestamp", re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
                                 re.I)),
    ("date", re.compile(rf"\b(?:(?:{_DAYS}),?\s+)?(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}|"
                        rf"(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|"
                        rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\.?,?\s+\d{{4}})\b", re.I)),
    ("time", re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?(?:\s*(?:UTC|GMT|Z))?", re.I)),
    ("ago", re.compile(r"\b\d+\s+(?:second|sec|minute|min|hour|hr|day|week)s?\s+ago\b", re.I)),
    ("counter", re.compile(r"\b\d[\d,.]*\s*(?:views?|visitors?|visits?|hits?|online|readers?|reads|"
                           r"people\s+(?:are\s+)?(?:viewing|watching|online)|users?\s+online)\b|"
                           r"\b(?:views?|visitors?|visits?|hits?|online|visitor\s+count|page\s+views)\s*[:#]?\s*\d[\d,.]*",
                           re.I)),
    ("token", re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{16,}\b")),
    # a block that announces itself as an ad ("Advertisement: ...", "Sponsored", "Ad | ...")
    ("ad-slot", re.compile(r"^\s*(?:advertisement|sponsored|ad)\s*(?:[:|\-\u2013\u2014]|$).*$", re.I)),
)
MASK_NAMES = tuple(name for name, _ in _MASKS)
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"^[^\d]*?(-?\d[\d,]*(?:\.\d+)?)[^\d]*$")


class TriggerOn(StrEnum):
    """When a watch's trigger text makes a change."""

    APPEAR = "appear"
    DISAPPEAR = "disappear"


class WatchRuleError(ValueError):
    """A watch's filter is unusable (bad CSS selector or regular expression)."""


@dataclass(frozen=True, slots=True)
class WatchRules:
    """A watch's filters, compiled (`compile_rules`)."""

    select: tuple[str, ...] = ()          # CSS: only these elements' text is the content
    exclude: tuple[str, ...] = ()         # CSS: these elements are removed first
    ignore: tuple[re.Pattern[str], ...] = ()   # text matching these is masked
    keep: frozenset[str] = frozenset()    # generic masks (MASK_NAMES) not applied: a date may be the content
    trigger: str = ""                     # text whose appearance (or disappearance) is the change
    trigger_on: TriggerOn = TriggerOn.APPEAR


def compile_rules(select: Collection[str] = (), exclude: Collection[str] = (), ignore: Collection[str] = (),
                  trigger: str = "", trigger_on: str = "appear", keep: Collection[str] = ()) -> WatchRules:
    """Check and compile a watch's filters; raises `WatchRuleError` naming the bad one."""
    try:
        when = TriggerOn(trigger_on)
    except ValueError:
        raise WatchRuleError(f"trigger_on must be appear or disappear, not {trigger_on!r}") from None
    if len(select) + len(exclude) > SELECTORS_MAX or len(ignore) > SELECTORS_MAX:
        raise WatchRuleError(f"at most {SELECTORS_MAX} selectors and {SELECTORS_MAX} ignore patterns")
    probe = parse_html(b"<html><body><p>x</p></body></html>", "text/html").tree
    for sel in (*select, *exclude):
        try:
            probe.css(sel)
        except Exception as e:  # noqa: BLE001 - selectolax raises several types
            raise WatchRuleError(f"bad CSS selector {sel!r}: {e}") from None
    patterns = []
    for rx in ignore:
        try:
            patterns.append(re.compile(rx, re.I))
        except re.error as e:
            raise WatchRuleError(f"bad ignore pattern {rx!r}: {e}") from None
    unknown = sorted(set(keep) - set(MASK_NAMES))
    if unknown:
        raise WatchRuleError(f"no mask named {unknown[0]!r} (known: {', '.join(MASK_NAMES)})")
    return WatchRules(select=tuple(select), exclude=tuple(exclude), ignore=tuple(patterns), keep=frozenset(keep),
                      trigger=trigger, trigger_on=when)


def content_of(body: bytes, content_type: str, rules: WatchRules = WatchRules()) -> list[str]:
    """The page's content as blocks of collapsed text, unmasked (step 1)."""
    try:
        if "html" not in content_type.lower() and not body.lstrip()[:1] == b"<":
            text = body.decode("utf-8", "replace")
            blocks = [_collapse(line) for line in text.splitlines()]
        else:
            blocks = _html_blocks(body, content_type, rules)
    except Exception:  # noqa: BLE001 - garbage in, no content out
        return []
    return [b[:BLOCK_CHARS_MAX] for b in blocks if b][:BLOCKS_MAX]


def _html_blocks(body: bytes, content_type: str, rules: WatchRules) -> list[str]:
    parsed = parse_html(body, content_type or "text/html")
    tree = parsed.tree
    for sel in rules.exclude:
        for node in tree.css(sel):
            node.decompose()
    if rules.select:
        roots = [n for sel in rules.select for n in tree.css(sel)]
        return [b for r in roots for b in _leaf_blocks(r)]
    if parsed.flat:
        return main_text(body, content_type, parsed=parsed).split("\n")
    # main_text strips the boilerplate from the tree in place; its blocks are read after
    main_text(body, content_type, parsed=parsed)
    root = tree.css_first("main") or tree.body or tree.root
    return _leaf_blocks(root) if root is not None else []


def _leaf_blocks(root: Any) -> list[str]:
    nodes = [root, *root.css(_BLOCK_TAGS)]
    out = []
    for node in nodes:
        if any(child.tag in _INNER for child in node.iter()):
            # a container: its own loose text (not inside a child block) is a block too
            own = _collapse(" ".join(t for t in _own_text(node)))
            if own:
                out.append(own)
            continue
        text = _collapse(node.text(separator=" "))
        if text:
            out.append(text)
    return out


def _own_text(node: Any) -> Iterator[str]:
    for child in node.iter(include_text=True):
        if child.tag == "-text":
            yield child.text_content or ""
        elif child.tag not in _INNER:
            yield child.text(separator=" ")


def _collapse(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def mask(block: str, rules: WatchRules = WatchRules(), learned: tuple[re.Pattern[str], ...] = ()) -> str:
    """`block` with its volatile parts replaced by MASK (step 2); "" if nothing is left."""
    for name, rx in _MASKS:
        if name not in rules.keep:
            block = rx.sub(MASK, block)
    for rx in rules.ignore:
        block = rx.sub(MASK, block)
    for rx in learned:
        block = rx.sub(_masked_groups, block)
    return "" if not block.replace(MASK, "").strip(" .,:;-|") else block


def _masked_groups(m: re.Match[str]) -> str:
    text, out, pos = m.string, [], m.start()
    for i in range(1, (m.re.groups or 0) + 1):
        out.append(text[pos:m.start(i)])
        out.append(MASK)
        pos = m.end(i)
    out.append(text[pos:m.end()])
    return "".join(out)


def fingerprint(blocks: list[str]) -> str:
    """The content's identity: blocks as a multiset (order is not content, step 3)."""
    h = hashlib.sha256()
    for b in sorted(blocks):
        h.update(b.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def skeleton(before: str, after: str) -> str | None:
    """The words `before` and `after` start and end with, `*` for the middle
    that differs ("Quote of the moment: *"); None when they share too little
    to be one block that changed (a prefix and suffix are stable anchors
    where the words in common inside the middle are chance)."""
    a, b = before.split(" "), after.split(" ")
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head + tail == 0 or 3 * (head + tail) < n:
        return None
    return " ".join([*a[:head], "*", *(a[len(a) - tail:] if tail else [])])


def _pattern(skel: str) -> re.Pattern[str]:
    """A skeleton as a pattern whose groups are its `*` parts."""
    pieces = [re.escape(w) if w != "*" else "(.+?)" for w in skel.split(" ")]
    return re.compile("^" + " ".join(pieces) + "$")


@dataclass(slots=True)
class NoiseBook:
    """What a watch learned changes on (nearly) every fetch (step 4)."""

    candidates: dict[str, list[int]] = field(default_factory=dict)   # skeleton -> [changed, present]
    learned: list[str] = field(default_factory=list)                  # skeletons, oldest first
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict)

    def patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(self._pattern_of(s) for s in self.learned)

    def _pattern_of(self, skel: str) -> re.Pattern[str]:
        p = self._patterns.get(skel)
        if p is None:
            p = self._patterns[skel] = _pattern(skel)
        return p

    def observe(self, before: list[str], after: list[str]) -> list[str]:
        """Count one observation (two successive masked contents); returns
        the skeletons learned by it."""
        pairs = _replaced_pairs(before, after)
        changed = {s for s in (skeleton(a, b) for a, b in pairs) if s is not None and s not in self.learned}
        for s in sorted(changed):
            if s not in self.candidates and len(self.candidates) < NOISE_CANDIDATES_MAX:
                self.candidates[s] = [0, 0]
        new = []
        for s, counts in self.candidates.items():
            present = s in changed or any(self._pattern_of(s).match(b) for b in after)
            if not present:
                continue
            counts[1] += 1
            if s in changed:
                counts[0] += 1
            if counts[0] >= NOISE_CHANGES_MIN and counts[0] >= NOISE_SHARE_MIN * counts[1]:
                new.append(s)
        for s in new:
            del self.candidates[s]
            if len(self.learned) < NOISE_LEARNED_MAX:
                self.learned.append(s)
        return new

    def to_json(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "learned": self.learned}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "NoiseBook":
        return cls(candidates={k: list(v) for k, v in d.get("candidates", {}).items()},
                   learned=list(d.get("learned", [])))


def _replaced_pairs(before: list[str], after: list[str]) -> list[tuple[str, str]]:
    """Blocks replaced in place (after dropping those in both, as a multiset)."""
    sm = difflib.SequenceMatcher(None, before, after, autojunk=False)
    pairs: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "replace":
            pairs.extend(zip(before[i1:i2], after[j1:j2]))
    return pairs


@dataclass(frozen=True, slots=True)
class Observation:
    """One check's content, masked, with what the trigger saw."""

    blocks: tuple[str, ...]
    fingerprint: str
    trigger_present: bool


def observe(raw_blocks: list[str], rules: WatchRules, noise: NoiseBook) -> Observation:
    learned = noise.patterns()
    blocks = tuple(m for m in (mask(b, rules, learned) for b in raw_blocks) if m)
    present = bool(rules.trigger) and any(rules.trigger.lower() in b.lower() for b in raw_blocks)
    return Observation(blocks, fingerprint(list(blocks)), present)


@dataclass(frozen=True, slots=True)
class Judgement:
    changed: bool
    diff: dict[str, Any]


def compare(prev: Observation, cur: Observation, rules: WatchRules) -> Judgement:
    """Is `cur` a real change from `prev` (steps 3 and 5)? With a trigger,
    only its appearance (or disappearance) is."""
    if prev.fingerprint == cur.fingerprint:
        return Judgement(False, {})
    if rules.trigger:
        flipped = (not prev.trigger_present and cur.trigger_present) if rules.trigger_on is TriggerOn.APPEAR \
            else (prev.trigger_present and not cur.trigger_present)
        if not flipped:
            return Judgement(False, {})
    return Judgement(True, diff_blocks(list(prev.blocks), list(cur.blocks)))


def diff_blocks(before: list[str], after: list[str]) -> dict[str, Any]:
    """{"added": [...], "removed": [...], "changed": [{"before", "after", "context"}]}."""
    left = _minus(before, after)
    right = _minus(after, before)
    added: list[str] = []
    removed: list[str] = []
    changed: list[dict[str, Any]] = []
    sm = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "delete":
            removed.extend(left[i1:i2])
        elif op == "insert":
            added.extend(right[j1:j2])
        elif op == "replace":
            for k in range(max(i2 - i1, j2 - j1)):
                a = left[i1 + k] if i1 + k < i2 else None
                b = right[j1 + k] if j1 + k < j2 else None
                if a is None:
                    assert b is not None  # k < the longer run's length: one side has a block
                    added.append(b)
                elif b is None:
                    removed.append(a)
                else:
                    _diff_words(a, b, added, removed, changed)
    cap = DIFF_ENTRIES_MAX
    return {"added": added[:cap], "removed": removed[:cap], "changed": changed[:cap]}


def _minus(xs: list[str], ys: list[str]) -> list[str]:
    """`xs` without the blocks also in `ys` (multiset), order kept."""
    left: dict[str, int] = {}
    for y in ys:
        left[y] = left.get(y, 0) + 1
    out = []
    for x in xs:
        if left.get(x, 0):
            left[x] -= 1
        else:
            out.append(x)
    return out


def _diff_words(a: str, b: str, added: list[str], removed: list[str], changed: list[dict[str, Any]]) -> None:
    wa, wb = a.split(" "), b.split(" ")
    sm = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        old, new = " ".join(wa[i1:i2]), " ".join(wb[j1:j2])
        na, nb = _NUMBER.match(old) if old else None, _NUMBER.match(new) if new else None
        if op == "replace" and na and nb:
            context = " ".join(wa[max(0, i1 - 4):i1])
            changed.append({"before": old, "after": new, "context": context,
                            "before_value": _number(na.group(1)), "after_value": _number(nb.group(1))})
            continue
        if old:
            removed.append(old)
        if new:
            added.append(new)


def _number(text: str) -> float:
    return float(text.replace(",", ""))
