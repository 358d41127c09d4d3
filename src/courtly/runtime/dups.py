"""Duplicates you can inspect: `courtly dups --out DIR [--format json]`.

What it owns: the view of a crawl's duplicates, built from what the budget
defence (runtime/budget.py) recorded at each fetch, never recomputed:

* ``exact_dup`` flags: a payload identical to an earlier capture, with that
  capture's URL (the WARC holds a revisit record pointing to it);
* ``near_dup`` flags: a page whose main-text SimHash is within the
  near-duplicate distance of one already seen on its host, with the
  cluster's canonical page;
* ``rel_canonical`` flags: the ``<link rel=canonical>`` a near-duplicate
  declared ("" when none);
* the SimHash fingerprints (``simhashes``), for each member's Hamming
  distance to its canonical page.

`clusters(rows, prints)` turns those rows into `NearCluster` and `ExactDup`
rows (pure; the benchmark bench/dups.py runs the same function), and
`dups(out, as_json)` renders them. A URL flagged more than once (a recrawl)
counts once, by its latest flag. Read-only: safe while a crawl runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from dataclasses import asdict, dataclass

from courtly.core.fingerprint import from_signed64

__all__ = ["NearMember", "NearCluster", "ExactDup", "clusters", "dups", "FLAGS"]

FLAGS = ("exact_dup", "near_dup", "rel_canonical")


@dataclass(frozen=True, slots=True, order=True)
class NearMember:
    url: str
    distance: int | None          # Hamming distance of the SimHashes to the canonical page's
    rel_canonical: str | None     # what the page declared (None: nothing)
    agreed: bool | None           # its rel=canonical names the cluster's canonical page (None: none declared)


@dataclass(frozen=True, slots=True)
class NearCluster:
    canonical: str
    members: tuple[NearMember, ...]


@dataclass(frozen=True, slots=True, order=True)
class ExactDup:
    url: str
    first_url: str                # the capture whose payload it repeats


def clusters(rows: Iterable[tuple[str, float, str, str]],
             prints: dict[str, int]) -> tuple[list[NearCluster], list[ExactDup]]:
    """Near-duplicate clusters (by canonical URL) and exact duplicates from
    flag rows (url, at, flag, detail) and fingerprints by URL."""
    latest: dict[tuple[str, str], tuple[float, str]] = {}
    for url, at, flag, detail in rows:
        if flag in FLAGS:
            old = latest.get((url, flag))
            if old is None or at >= old[0]:
                latest[(url, flag)] = (at, detail)
    exact = sorted(ExactDup(url, detail) for (url, flag), (_, detail) in latest.items() if flag == "exact_dup")
    by_canonical: dict[str, list[NearMember]] = {}
    for (url, flag), (_, canonical) in latest.items():
        if flag != "near_dup" or url == canonical:
            continue
        declared = latest.get((url, "rel_canonical"))
        rel = declared[1] or None if declared is not None else None
        a, b = prints.get(url), prints.get(canonical)
        distance = bin(a ^ b).count("1") if a is not None and b is not None else None
        agreed = None if rel is None else rel == canonical
        by_canonical.setdefault(canonical, []).append(NearMember(url, distance, rel, agreed))
    near = [NearCluster(c, tuple(sorted(m))) for c, m in sorted(by_canonical.items())]
    return near, exact


def dups(out: Path, *, as_json: bool = False) -> str:
    from courtly.runtime.report import open_store

    store = open_store(out)
    try:
        rows = list(store.iter_flags(FLAGS))
        wanted = {r[0] for r in rows if r[2] == "near_dup"} | {r[3] for r in rows if r[2] == "near_dup"}
        prints = {doc: from_signed64(fp) for doc, fp, _ in store.iter_simhashes() if doc in wanted}
    finally:
        store.close()
    near, exact = clusters(rows, prints)
    if as_json:
        return json.dumps({
            "near_duplicates": [{"canonical": c.canonical, "members": [asdict(m) for m in c.members]}
                                for c in near],
            "exact_duplicates": [asdict(e) for e in exact],
        }, indent=2)
    members = sum(len(c.members) for c in near)
    lines = [f"{len(near)} near-duplicate cluster(s) ({members} page(s) beside their canonical), "
             f"{len(exact)} exact duplicate(s)"]
    for c in near:
        lines.append(f"near-duplicates of {c.canonical}")
        for m in c.members:
            d = "?" if m.distance is None else str(m.distance)
            rel = ("no rel=canonical" if m.rel_canonical is None
                   else "rel=canonical agrees" if m.agreed else f"rel=canonical names {m.rel_canonical}")
            lines.append(f"  {m.url}  distance {d}  {rel}")
    if exact:
        lines.append("exact duplicates (same payload as the URL after ->)")
        lines += [f"  {e.url} -> {e.first_url}" for e in exact]
    return "\n".join(lines)
