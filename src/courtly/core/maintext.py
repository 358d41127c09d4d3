"""Main text of a page: the words a reader came for, boilerplate removed.

`main_text(body, content_type)` is what the fingerprints (SimHash,
near-duplicate and soft-404 detection) are computed over, so another ad, a
reordered navigation or a cookie banner does not make two copies of an
article look different. Pure: no I/O, no clock, never raises.

How it works

1. Type: HTML by `links.is_html` (Content-Type, or sniffing when untyped);
   ``text/plain`` is decoded and whitespace-collapsed; any other type is "".
   At most `BODY_BYTES_MAX` bytes are read. Decoding is the one link
   extraction uses (BOM, Content-Type charset, ``<meta charset>``, UTF-8).
2. Parse with selectolax's Lexbor engine, or take the tree the caller
   parsed for `extract_links` (`links.parse_html`). A page whose estimated
   nesting is hostile (the same test and limits as `courtly.core.links`) is
   not parsed: its tags are cut out by a linear regex instead.
3. Drop, with their content: script, style, noscript, template, iframe, svg,
   canvas, form, button, select, nav, aside, and header/footer outside an
   ``<article>``; then elements whose class or id has a boilerplate word as a
   ``-``/``_``-separated part (`BOILERPLATE_WORDS`: nav, menu, footer,
   sidebar, ad, banner, cookie, consent, comment, share, related, ...) -- unless
   the element is html/body/main/article or contains main/article/h1 (a
   ``<div class="page has-sidebar">`` around the whole page stays). The
   candidates are found by a linear scan of the class/id attributes in the
   raw text (compiled in `courtly.core._speedups` when built, the same as
   the regex of `_attr_values_py`) and matched back with exact selectors
   (``[class~=t]``, ``[id=t]``), several times cheaper than substring
   selectors.
4. If the page has a ``<main>``, its text; else the text of its top-level
   ``<article>`` elements; else the text of the block elements (h1-h6 always;
   p, pre, blockquote with >= `BLOCK_WORDS_MIN` words; li, td, th, dd with >=
   `CELL_WORDS_MIN` words and no block inside them).
5. Whitespace is collapsed to single spaces within a block; blocks are joined
   with ``"\\n"``. At most `TEXT_CHARS_MAX` characters are returned.
   `main_words` is the same text for the fingerprints, which read words
   only: a ``<main>``'s text comes uncollapsed (the SimHash is the same).

Speed: the figures are in docs/performance.md (`bench/neardup.py`,
`bench/extract_steps.py`); the test `test_speed_is_reported_not_asserted`
prints one on each run.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from courtly.core.links import DEPTH_MAX, TAGS_FAST_MAX, ParsedHtml, decode_html, is_html, nesting_depth

try:
    from selectolax.lexbor import LexborHTMLParser as _Parser
except ImportError:  # pragma: no cover - selectolax without Lexbor
    from selectolax.parser import HTMLParser as _Parser  # type: ignore[attr-defined,no-redef]

try:
    from selectolax.lexbor import LexborDocumentOptions as _Options

    _PARSE_OPTIONS: dict[str, Any] = {"options": int(_Options.WO_EVENTS)}
except (ImportError, AttributeError):  # pragma: no cover - older selectolax
    _PARSE_OPTIONS = {}

_collapse_native: Callable[[str], str] | None
_attr_values_native: Callable[[str, str], list[str]] | None
try:
    from courtly.core._speedups import collapse as _collapse_native
except ImportError:  # pragma: no cover - built without a C compiler
    _collapse_native = None
try:
    from courtly.core._speedups import attr_values as _attr_values_native
except ImportError:  # pragma: no cover - built without a C compiler, or stale
    _attr_values_native = None

__all__ = ["main_text", "main_words", "BOILERPLATE_WORDS", "BODY_BYTES_MAX", "TEXT_CHARS_MAX"]

BODY_BYTES_MAX = 4 << 20        # read at most this much of a body
TEXT_CHARS_MAX = 1_000_000      # return at most this much text
BLOCK_WORDS_MIN = 5             # p / pre / blockquote shorter than this are boilerplate
CELL_WORDS_MIN = 8              # li / td / th / dd shorter than this are navigation
BOILERPLATE_WORDS = frozenset(
    "nav navbar navigation menu menubar topbar footer sidebar sidenav aside ad ads advert "
    "adverts advertisement advertising adsbygoogle sponsor sponsored promo promotion banner "
    "cookie cookies consent gdpr comment comments disqus share sharing social breadcrumb "
    "breadcrumbs related newsletter subscribe popup modal skiplink widget".split()
)

_DROP_TAGS = [
    "script", "style", "noscript", "template", "iframe", "svg", "canvas",
    "form", "button", "select", "nav", "aside",
]
_KEEP_TAGS = frozenset({"html", "body", "main", "article"})
_PART_SPLIT = re.compile(r"[\s_-]+")
# Candidates are found in the raw text (a linear regex over class/id
# attributes) and matched back with exact selectors ([class~=t], [id=t]):
# cheaper than dozens of substring selectors over every element.
# Each pattern starts with a literal, which Python's re scans for at C speed
# (a pattern starting with \s or an alternation is several times slower).
# The compiled `_speedups.attr_values` does the same scan, faster ("id" is in
# many words); `_attr_values_py` is the definition (the same values:
# test_speedups_worker.py::test_native_attribute_scan_is_the_regex_scan).
_ATTRS = {
    "class": re.compile(r"""class\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))"""),
    "id": re.compile(r"""id\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))"""),
}
_NAME_BEFORE = frozenset(" \t\n\r\f\"'/")
_SAFE_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")
SELECTORS_MAX = 64
HOLDERS_MAX = 256  # main/article/h1 elements whose ancestors are protected
_BLOCKS = "h1, h2, h3, h4, h5, h6, p, pre, blockquote, li, td, th, dd"
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CELLS = frozenset({"li", "td", "th", "dd"})
_INNER_BLOCKS = "p, pre, blockquote, li, td, th, dd, h1, h2, h3, h4, h5, h6"
# the flat fallback for hostile pages: linear, no tree
_RAW_DROP = re.compile(r"<(script|style|noscript|template)\b.*?</\1\s*>", re.I | re.S)
_RAW_TAG = re.compile(r"<[^<>]{0,4096}>")
_ENTITY = re.compile(r"&(amp|lt|gt|quot|nbsp|#39);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "nbsp": " ", "#39": "'"}


def main_text(body: bytes, content_type: str = "", *, parsed: ParsedHtml | None = None) -> str:
    """The main text of `body` (see module docstring); "" when there is none.

    `parsed` is ``links.parse_html(body, content_type)`` when the caller
    parsed the page already (the extraction worker shares one parse with
    `extract_links`); its tree is edited here, so nothing may read it after.
    """
    try:
        if len(body) > BODY_BYTES_MAX:
            body, parsed = body[:BODY_BYTES_MAX], None  # `parsed` holds the whole body
        return _main_text(body, content_type, parsed)[:TEXT_CHARS_MAX]
    except Exception:  # noqa: BLE001 - garbage in, no text out
        return ""


def main_words(body: bytes, content_type: str = "", *, parsed: ParsedHtml | None = None) -> str:
    """A text with the words of `main_text` in the same order, for the
    fingerprints (which read words only): the text of a ``<main>`` comes
    with its whitespace as it is instead of collapsed (the collapse's CPU
    saved; the same prints by
    test_speedups_worker.py::test_main_words_fingerprints_are_main_text_fingerprints).
    Whitespace is never part of a word, and str.lower() reads it
    the same in a run as alone, so the SimHash is the same. Past
    `TEXT_CHARS_MAX` characters it collapses and cuts as `main_text` does."""
    try:
        if len(body) > BODY_BYTES_MAX:
            body, parsed = body[:BODY_BYTES_MAX], None
        text = _main_text(body, content_type, parsed, collapse=False)
        return _collapse(text)[:TEXT_CHARS_MAX] if len(text) > TEXT_CHARS_MAX else text
    except Exception:  # noqa: BLE001 - garbage in, no text out
        return ""


def _main_text(body: bytes, content_type: str, parsed: ParsedHtml | None, collapse: bool = True) -> str:
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "text/plain":
        return _collapse(decode_html(body, content_type))
    if not is_html(body, content_type):
        return ""
    if parsed is not None:
        text = parsed.text
        if parsed.flat:
            return _flat_text(text)
        tree = parsed.tree
    else:
        text = decode_html(body, content_type)
        if text.count("<") > TAGS_FAST_MAX and nesting_depth(text) > DEPTH_MAX:
            return _flat_text(text)
        tree = _Parser(text, **_PARSE_OPTIONS)
    tree.strip_tags(_DROP_TAGS)
    # by name: cheaper than a CSS query, and the same text by
    # test_speedups_worker.py::test_main_text_by_name_is_main_text_by_css
    for name in ("header", "footer"):
        for node in tree.tags(name):
            if not _inside_article(node):
                node.decompose()
    selector = _boilerplate_selector(text)
    if selector:
        protected = _holders_of_content(tree)
        for node in tree.css(selector):
            if node.tag not in _KEEP_TAGS and node.mem_id not in protected:
                node.decompose()
    mains = tree.tags("main")  # in document order, as css_first("main") finds the first
    if mains:
        text = mains[0].text(separator=" ")
        return _collapse(text) if collapse else text
    articles = [a for a in tree.tags("article") if not _inside_article(a)]
    if articles:
        return "\n".join(filter(None, (_collapse(a.text(separator=" ")) for a in articles)))
    return "\n".join(_blocks(tree))


def _blocks(tree: _Parser) -> list[str]:
    out = []
    for node in tree.css(_BLOCKS):
        tag = node.tag
        if tag in _CELLS and _has_inner_block(node):
            continue  # its inner blocks speak for it
        text = _collapse(node.text(separator=" "))
        if not text:
            continue
        words = text.count(" ") + 1
        if tag in _HEADINGS or words >= (CELL_WORDS_MIN if tag in _CELLS else BLOCK_WORDS_MIN):
            out.append(text)
    return out


def _has_inner_block(node) -> bool:  # type: ignore[no-untyped-def]
    """Lexbor's node.css() matches the node itself too: skip it."""
    own = node.mem_id
    return any(inner.mem_id != own for inner in node.css(_INNER_BLOCKS))


def _boilerplate_selector(text: str) -> str:
    """Exact selectors for the class tokens and ids in `text` that have a
    boilerplate word as a part (at most `SELECTORS_MAX`)."""
    selectors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for kind in _ATTRS:
        for value in _attr_values(text, kind):
            for token in value.split() if kind == "class" else (value.strip(),):
                if (kind, token) in seen or not _SAFE_TOKEN.fullmatch(token):
                    continue
                seen.add((kind, token))
                if any(part in BOILERPLATE_WORDS for part in _PART_SPLIT.split(token.lower())):
                    selectors.append(f'[class~="{token}"]' if kind == "class" else f'[id="{token}"]')
                    if len(selectors) >= SELECTORS_MAX:
                        return ",".join(selectors)
    return ",".join(selectors)


def _attr_values_py(text: str, name: str) -> list[str]:
    """The values of the `name` ("class" or "id") attributes in the raw
    `text`: the matches of its `_ATTRS` pattern preceded by one of
    `_NAME_BEFORE` (not data-id=, grid=, subclass=, nor at 0)."""
    values = []
    for m in _ATTRS[name].finditer(text):
        if text[m.start() - 1 : m.start()] in _NAME_BEFORE:
            values.append(m.group(1) or m.group(2) or m.group(3) or "")
    return values


_attr_values = _attr_values_py if _attr_values_native is None else _attr_values_native


def _holders_of_content(tree) -> set[int]:  # type: ignore[no-untyped-def]
    """mem_ids of main/article/h1 elements and all their ancestors: never
    removed as boilerplate (a ``<div class="page has-sidebar">`` wrapper)."""
    held: set[int] = set()
    nodes = [node for name in ("main", "article", "h1") for node in tree.tags(name)]
    if len(nodes) > HOLDERS_MAX:  # the first ones in document order
        nodes = tree.css("main, article, h1")[:HOLDERS_MAX]
    for node in nodes:  # the union of their ancestors does not depend on the order
        while node is not None and node.mem_id not in held:
            held.add(node.mem_id)
            node = node.parent
    return held


def _inside_article(node) -> bool:  # type: ignore[no-untyped-def]
    parent = node.parent
    while parent is not None:
        if parent.tag == "article":
            return True
        parent = parent.parent
    return False


def _collapse_py(text: str) -> str:
    return " ".join(text.split())


# the same in C (courtly.core._speedups, when built), faster; equal by
# test_speedups.py::test_native_collapse_equals_split_and_join
_collapse = _collapse_py if _collapse_native is None else _collapse_native


def _flat_text(text: str) -> str:
    text = _RAW_TAG.sub(" ", _RAW_DROP.sub(" ", text))
    return _collapse(_ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text))
