"""Atom feeds of change events (RFC 4287), per crawl and per watch.

What it owns: `atom_feed(rows, ...)`, the feed document of the newest change
events. Each entry: a stable id (`feed_id` + the event's sequence number),
the page as its link, the detection time as `updated`, and the diff as text
(added, removed, changed values). Built with ElementTree, so every string is
escaped; characters XML 1.0 cannot carry are replaced.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from courtly.core.watch import iso

__all__ = ["atom_feed", "diff_text", "ATOM_NS"]

ATOM_NS = "http://www.w3.org/2005/Atom"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def diff_text(diff: dict) -> str:
    lines = [f"- {t}" for t in diff.get("removed", [])] + [f"+ {t}" for t in diff.get("added", [])]
    lines += [f"~ {c.get('context', '')} {c['before']} -> {c['after']}".strip() for c in diff.get("changed", [])]
    return "\n".join(lines)


def atom_feed(rows, *, feed_id: str, title: str, self_url: str, updated_at: float) -> bytes:  # type: ignore[no-untyped-def]
    """`rows`: ChangeRow-like (seq, url, detected_at, event), newest first."""
    ET.register_namespace("", ATOM_NS)
    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    _sub(feed, "id", feed_id)
    _sub(feed, "title", title)
    newest = max([r.detected_at for r in rows], default=updated_at)
    _sub(feed, "updated", iso(newest))
    _sub(_sub(feed, "author"), "name", "courtly monitor")
    ET.SubElement(feed, f"{{{ATOM_NS}}}link", rel="self", href=_clean(self_url))
    _sub(feed, "generator", "courtly")
    for r in rows:
        e = _sub(feed, "entry")
        _sub(e, "id", f"{feed_id}/change/{r.seq}")
        _sub(e, "title", f"Changed: {r.url}")
        _sub(e, "updated", iso(r.detected_at))
        ET.SubElement(e, f"{{{ATOM_NS}}}link", rel="alternate", href=_clean(r.url))
        _sub(e, "summary", diff_text(r.event.get("diff", {})) or "(changed)")
    return ET.tostring(feed, encoding="utf-8", xml_declaration=True)


def _sub(parent, name: str, text: str | None = None):  # type: ignore[no-untyped-def]
    el = ET.SubElement(parent, f"{{{ATOM_NS}}}{name}")
    if text is not None:
        el.text = _clean(text)
    return el
