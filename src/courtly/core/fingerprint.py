"""Content fingerprints: exact payload digests, SimHash, and their indexes.

What it owns
------------
* `warc_payload_digest(content)` -> ``"sha1:<base32>"``: the WARC-Payload-Digest
  the writer records (`courtly.shell.warc.payload_digest_of` is this function)
  and the key of the exact-duplicate index, so a revisit record refers to the
  digest it carries; `sha1_b32` formats any SHA-1 that way.
* `payload_digest(content)` -> ``"sha256:<hex>"``: the content hash the
  recrawl scheduler compares between fetches.
* `simhash64(text)`: Charikar's SimHash over word shingles (Manku, Jain and
  Das Sarma, WWW 2007). Tokens are ``\\w+`` runs of the lowercased text; a
  shingle is ``shingle`` consecutive tokens joined by one space; each shingle
  occurrence votes +1/-1 on each of the 64 bits of its xxHash64 (seed 0), so
  a shingle's weight is its term frequency. A bit of the fingerprint is 1 when
  strictly more than half of the votes are 1. Deterministic across processes,
  machines and Python versions (never ``hash()``); the empty text is 0.
  Two implementations, bit-identical (fingerprints are stored in crawl
  databases; the tests compare them): the compiled `courtly.core._speedups`
  (C, with the upstream xxHash header's XXH64; built by ``pip install``, optional) when it imports
  (`NATIVE`), else `simhash64_py`. ``drop=`` leaves words out first (the
  soft-404 fingerprint leaves out the words of the requested URL).
* `NearDupIndex`: fingerprints within `distance_max` bits, found by four
  table probes, never by a scan (below); near-duplicate clusters with a
  canonical representative; rows for persistence.
* `ExactDupIndex`: payload digest -> the first capture (url, date, record id),
  what a WARC revisit record refers to.

Why four probes are enough (pigeonhole)
---------------------------------------
A 64-bit fingerprint is cut into four 16-bit blocks. Two fingerprints at
Hamming distance d <= 3 differ in at most 3 bit positions, which lie in at
most 3 of the 4 blocks, so at least one block is *identical*. Table i maps the
value of block i to the documents holding that value; `find` looks up the
query's four block values (four dict probes), and verifies each candidate's
full distance. So `find` returns exactly the documents a brute-force scan
would, and touches only candidates sharing a block (about N / 65536 per probe
for random fingerprints). The constructor refuses `distance_max` > 3, where
the argument fails.

Scopes
------
Each document belongs to a scope (the lead uses the politeness key or host).
The tables are keyed by ``(scope id << 16) | block value``, and every document
is entered twice: under its own scope and under the global scope (id 0), so a
per-host probe never wades through other hosts' buckets and a global probe
sees everything. `find(fp, scope)` searches one scope; `find(fp, None)` all.

Clusters
--------
`add` puts a new document into the cluster of its nearest match in *any*
scope (ties: the earliest added), or founds a new cluster. A cluster's
canonical representative is its founder (the first seen) until
`prefer_canonical(doc, target)` names the rel=canonical target, which is
honoured only when the target is in the same cluster. Clusters never merge
(a document joins one cluster; no transitive closure), so a chain of small
edits can start a new cluster: each cluster stays within 2 x distance_max of
its founder's neighbourhood, which is what a dedup decision wants.

Rules: pure; everything is bounded (`docs_max`; a full index refuses new
documents and says so); rows carry the fingerprint as a *signed* 64-bit
integer so a SQLite INTEGER column holds it.
"""

from __future__ import annotations

import hashlib
import re
import sys
from array import array
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Callable

import xxhash

_simhash_native: Callable[[str, int, tuple[bytes, ...], bool], int] | None
try:  # the compiled SimHash (src/courtly/core/_speedups.c); optional
    from courtly.core._speedups import simhash as _simhash_c

    _simhash_c("", 1, (), True)  # a stale build (no lower argument) raises: the Python path
    _simhash_native = _simhash_c
except (ImportError, TypeError):  # pragma: no cover - built without a C compiler, or stale
    _simhash_native = None

__all__ = [
    "DISTANCE_MAX_PROBED",
    "NATIVE",
    "payload_digest",
    "simhash64",
    "simhash64_py",
    "hamming",
    "to_signed64",
    "from_signed64",
    "NearDupIndex",
    "IndexFull",
    "ExactDupIndex",
    "FirstCapture",
]

DISTANCE_MAX_PROBED = 3       # four 16-bit blocks: pigeonhole holds up to 3 differing bits
SHINGLE_MAX = 16
TEXT_CHARS_MAX = 4_000_000    # simhash64 reads at most this many characters
_MASK64 = (1 << 64) - 1
_BLOCKS = 4
_BLOCK_BITS = 16
_TOKEN = re.compile(r"\w+")
_ASCII_NON_WORD_TO_SPACE = bytes(
    v if chr(v).isalnum() or v == 0x5F else 0x20 for v in range(128)
) + b" " * 128  # ASCII \w is [A-Za-z0-9_]
_hash64 = xxhash.xxh64_intdigest
NATIVE = _simhash_native is not None   # simhash64 runs the compiled code
DROP_NATIVE_MAX = 64                   # more words to leave out: the Python path


def payload_digest(content: bytes) -> str:
    """Exact identity of a body: ``"sha256:<64 hex digits>"``."""
    return "sha256:" + hashlib.sha256(content).hexdigest()


def simhash64(text: str, *, shingle: int = 3, drop: Collection[str] = ()) -> int:
    """64-bit SimHash of `text` over `shingle`-word shingles (see module doc).
    Words equal to one in `drop` (lowercase ``\\w+`` tokens) are left out
    before the shingles are formed."""
    if _simhash_native is None or len(drop) > DROP_NATIVE_MAX:
        return simhash64_py(text, shingle=shingle, drop=drop)
    _check_shingle(shingle)
    # the C code reads the text as str.lower() gives it, without that copy
    # (docs/performance.md; the same words by
    # test_speedups_worker.py::test_native_lowered_words_are_the_words_of_str_lower_for_every_code_point)
    text = text[:TEXT_CHARS_MAX]
    if not drop:
        return _simhash_native(text, shingle, (), True)
    return _simhash_native(text, shingle, tuple(d.encode("utf-8", "surrogatepass") for d in drop), True)


def simhash64_py(text: str, *, shingle: int = 3, drop: Collection[str] = ()) -> int:
    """`simhash64` in pure Python: the definition, and the fallback when the
    C extension is not built."""
    _check_shingle(shingle)
    tokens = _tokens(text[:TEXT_CHARS_MAX])
    if drop:
        left_out = {d.encode("utf-8", "surrogatepass") for d in drop}
        tokens = [t for t in tokens if t not in left_out]
    return _simhash_tokens_py(tokens, shingle)


def _check_shingle(shingle: int) -> None:
    if not 1 <= shingle <= SHINGLE_MAX:
        raise ValueError(f"shingle must be in 1..{SHINGLE_MAX}")


def _simhash_tokens_py(tokens: list[bytes], shingle: int) -> int:
    if not tokens:
        return 0
    if len(tokens) <= shingle:
        grams = [b" ".join(tokens)]
    elif shingle == 1:
        grams = tokens
    else:
        grams = list(map(b" ".join, zip(*(tokens[i:] for i in range(shingle)))))
    hashes = array("Q", map(_hash64, grams))
    if sys.byteorder == "big":  # pragma: no cover - the lanes below assume little-endian bytes
        hashes.byteswap()
    return _majority_bits(hashes.tobytes(), len(hashes))


def _tokens(text: str) -> list[bytes]:
    """UTF-8 bytes of the ``\\w+`` runs of the lowercased text. ASCII text
    (the common case) takes a C-speed path with the same result."""
    low = text.lower()
    if low.isascii():
        return low.encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE).split()
    return [t.encode("utf-8", "surrogatepass") for t in _TOKEN.findall(low)]


def _majority_bits(packed: bytes, n: int) -> int:
    """Bit b is 1 when more than half of the n little-endian 64-bit words in
    `packed` have bit b set. Byte lane j of every word is ``packed[j::8]``;
    read as one big integer, its bit k of every byte is picked by a mask of
    0x01 bytes and counted with ``int.bit_count`` (C speed, 64 passes)."""
    fp = 0
    ones = int.from_bytes(b"\x01" * n, "little")
    for j in range(8):
        lane = int.from_bytes(packed[j::8], "little")
        for k in range(8):
            if 2 * ((lane >> k) & ones).bit_count() > n:
                fp |= 1 << (8 * j + k)
    return fp


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints."""
    return ((a ^ b) & _MASK64).bit_count()


def warc_payload_digest(content: bytes) -> str:
    """WARC-Payload-Digest as the WARC writer records it: "sha1:" + base32
    (the writer's `payload_digest_of` is this function)."""
    return sha1_b32(hashlib.sha1(content))


_B32_PAIRS = tuple(a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def sha1_b32(h: "hashlib._Hash") -> str:
    """``"sha1:"`` + the RFC 4648 base32 of a SHA-1 digest (20 bytes: 32
    characters, no padding), two characters per 10 bits of each 80-bit half:
    four record digests per exchange made `base64.b32encode` (pure Python)
    ~5 % of the WARC writer."""
    d = h.digest()
    a = int.from_bytes(d[:10], "big")
    b = int.from_bytes(d[10:], "big")
    p = _B32_PAIRS
    return "".join((
        "sha1:", p[a >> 70], p[(a >> 60) & 1023], p[(a >> 50) & 1023], p[(a >> 40) & 1023],
        p[(a >> 30) & 1023], p[(a >> 20) & 1023], p[(a >> 10) & 1023], p[a & 1023],
        p[b >> 70], p[(b >> 60) & 1023], p[(b >> 50) & 1023], p[(b >> 40) & 1023],
        p[(b >> 30) & 1023], p[(b >> 20) & 1023], p[(b >> 10) & 1023], p[b & 1023],
    ))


def to_signed64(fp: int) -> int:
    """The fingerprint as a signed 64-bit integer (what SQLite INTEGER holds)."""
    return fp - (1 << 64) if fp >= 1 << 63 else fp


def from_signed64(value: int) -> int:
    return value & _MASK64


# ---------------------------------------------------------------- near-duplicates


class IndexFull(Exception):
    """`NearDupIndex.add` refused a new document: `docs_max` reached."""


@dataclass(slots=True)
class _Doc:
    doc_id: str
    fp: int
    scope: int          # scope id (>= 1)
    cluster: int        # serial of the cluster's founder


class NearDupIndex:
    """Fingerprints within `distance_max` bits by four block probes.

    API: ``add(doc_id, fp, scope) -> canonical doc id``; ``find(fp, scope)``
    -> [(doc_id, distance)] nearest first; ``remove(doc_id)``;
    ``canonical_of(doc_id)``; ``prefer_canonical(doc_id, canonical_doc_id)``;
    ``rows()`` / ``NearDupIndex.load(rows)``. Re-adding a doc id replaces its
    fingerprint (a recrawl whose content changed) and re-clusters it.
    """

    def __init__(self, distance_max: int = DISTANCE_MAX_PROBED, *, docs_max: int = 10_000_000) -> None:
        if not 0 <= distance_max <= DISTANCE_MAX_PROBED:
            raise ValueError(f"distance_max must be 0..{DISTANCE_MAX_PROBED} (pigeonhole over 4 blocks)")
        if docs_max < 1:
            raise ValueError("docs_max must be positive")
        self.distance_max = distance_max
        self.docs_max = docs_max
        self._tables: tuple[dict[int, list[int]], ...] = tuple({} for _ in range(_BLOCKS))
        self._docs: dict[int, _Doc] = {}        # serial -> doc
        self._serial_of: dict[str, int] = {}    # doc id -> serial
        self._scope_ids: dict[str, int] = {}    # scope -> id (>= 1); 0 is global
        self._scopes: list[str] = [""]
        self._canonical: dict[int, int] = {}    # cluster (founder serial) -> canonical serial
        self._members: dict[int, list[int]] = {}  # cluster -> member serials, oldest first
        self._founder: dict[int, str] = {}      # cluster -> founder doc id (its name in rows)
        self._next = 0

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._serial_of

    @property
    def full(self) -> bool:
        return len(self._docs) >= self.docs_max

    # -- queries

    def find(self, fp: int, scope: str | None = None, *, limit: int = 64) -> list[tuple[str, int]]:
        """Documents within `distance_max` of `fp` in `scope` (None: every
        scope): ``[(doc_id, distance)]``, nearest first, then oldest first;
        at most `limit`. Four probes plus verification, never a scan."""
        return [(self._docs[s].doc_id, d) for s, d in self._matches(fp, scope)[:limit]]

    def fingerprint_of(self, doc_id: str) -> int | None:
        serial = self._serial_of.get(doc_id)
        return None if serial is None else self._docs[serial].fp

    def canonical_of(self, doc_id: str) -> str | None:
        """The canonical representative of `doc_id`'s cluster (None: unknown doc)."""
        serial = self._serial_of.get(doc_id)
        if serial is None:
            return None
        return self._docs[self._canonical[self._docs[serial].cluster]].doc_id

    def cluster_size(self, doc_id: str) -> int:
        serial = self._serial_of.get(doc_id)
        return 0 if serial is None else len(self._members[self._docs[serial].cluster])

    # -- changes

    def add(self, doc_id: str, fp: int, scope: str) -> str:
        """Index `doc_id` under `scope`; return its cluster's canonical doc id
        (`doc_id` itself when it founded a new cluster). Raises `IndexFull`
        for a new doc id when `docs_max` documents are held."""
        fp &= _MASK64
        if doc_id in self._serial_of:
            self.remove(doc_id)
        elif self.full:
            raise IndexFull(f"NearDupIndex holds docs_max={self.docs_max} documents")
        matches = self._matches(fp, None)
        serial = self._next
        self._next += 1
        if matches:
            cluster = self._docs[matches[0][0]].cluster
        else:
            cluster = self._found(serial, doc_id)
        self._members[cluster].append(serial)
        self._insert(serial, _Doc(doc_id, fp, self._scope_id(scope), cluster))
        return self._docs[self._canonical[cluster]].doc_id

    def remove(self, doc_id: str) -> bool:
        """Forget `doc_id`; a cluster that loses its canonical picks its
        oldest remaining member. False if it was not indexed."""
        serial = self._serial_of.pop(doc_id, None)
        if serial is None:
            return False
        doc = self._docs.pop(serial)
        for i, key in enumerate(self._keys(doc.fp, doc.scope)):
            for k in key:
                bucket = self._tables[i][k]
                bucket.remove(serial)
                if not bucket:
                    del self._tables[i][k]
        members = self._members[doc.cluster]
        members.remove(serial)
        if not members:
            del self._members[doc.cluster], self._canonical[doc.cluster], self._founder[doc.cluster]
        elif self._canonical[doc.cluster] == serial:
            self._canonical[doc.cluster] = members[0]
        return True

    def prefer_canonical(self, doc_id: str, canonical_doc_id: str) -> bool:
        """`doc_id` names `canonical_doc_id` as its rel=canonical: make that
        the cluster's representative if both are indexed and in the same
        cluster. Returns whether it was applied."""
        a, b = self._serial_of.get(doc_id), self._serial_of.get(canonical_doc_id)
        if a is None or b is None or self._docs[a].cluster != self._docs[b].cluster:
            return False
        self._canonical[self._docs[a].cluster] = b
        return True

    # -- persistence

    def rows(self) -> Iterator[tuple[str, int, str, str, bool]]:
        """``(doc_id, fp as signed int64, scope, cluster founder doc_id,
        is_canonical)`` per document, oldest first: JSON-able, SQLite-able.
        The founder id names the cluster (it may have been removed since)."""
        for serial, doc in self._docs.items():
            yield (doc.doc_id, to_signed64(doc.fp), self._scopes[doc.scope], self._founder[doc.cluster],
                   self._canonical[doc.cluster] == serial)

    @classmethod
    def load(
        cls,
        rows: Iterable[Iterable[Any]],
        distance_max: int = DISTANCE_MAX_PROBED,
        *,
        docs_max: int = 10_000_000,
    ) -> NearDupIndex:
        """Rebuild an index from `rows()` output (order kept: oldest first)."""
        index = cls(distance_max, docs_max=docs_max)
        clusters: dict[str, int] = {}
        for row in rows:
            doc_id, fp, scope, founder, canonical = tuple(row)
            serial = index._next
            index._next += 1
            cluster = clusters.setdefault(str(founder), serial)
            if cluster == serial:
                index._found(serial, str(founder))
            index._members[cluster].append(serial)
            index._insert(serial, _Doc(str(doc_id), from_signed64(int(fp)), index._scope_id(str(scope)), cluster))
            if canonical:
                index._canonical[cluster] = serial
        return index

    # -- internals

    def _found(self, serial: int, founder: str) -> int:
        """Start a cluster named after `founder`, led by `serial`."""
        self._canonical[serial] = serial
        self._members[serial] = []
        self._founder[serial] = founder
        return serial

    def _scope_id(self, scope: str) -> int:
        sid = self._scope_ids.get(scope)
        if sid is None:
            sid = self._scope_ids[scope] = len(self._scopes)
            self._scopes.append(scope)
        return sid

    @staticmethod
    def _keys(fp: int, scope: int) -> list[tuple[int, int]]:
        """Per table i: (global key, scoped key) of block i of `fp`."""
        out = []
        for i in range(_BLOCKS):
            block = (fp >> (_BLOCK_BITS * i)) & 0xFFFF
            out.append((block, (scope << _BLOCK_BITS) | block))
        return out

    def _insert(self, serial: int, doc: _Doc) -> None:
        self._docs[serial] = doc
        self._serial_of[doc.doc_id] = serial
        for i, key in enumerate(self._keys(doc.fp, doc.scope)):
            for k in key:
                self._tables[i].setdefault(k, []).append(serial)

    def _matches(self, fp: int, scope: str | None) -> list[tuple[int, int]]:
        """(serial, distance) within distance_max, nearest then oldest first."""
        fp &= _MASK64
        if scope is None:
            sid = 0
        else:
            sid = self._scope_ids.get(scope, -1)
            if sid < 0:
                return []
        seen: set[int] = set()
        found = []
        for i in range(_BLOCKS):
            block = (fp >> (_BLOCK_BITS * i)) & 0xFFFF
            for serial in self._tables[i].get((sid << _BLOCK_BITS) | block, ()):
                if serial in seen:
                    continue
                seen.add(serial)
                d = ((self._docs[serial].fp ^ fp)).bit_count()
                if d <= self.distance_max:
                    found.append((d, serial))
        found.sort()
        return [(s, d) for d, s in found]


# ---------------------------------------------------------------- exact duplicates


@dataclass(frozen=True, slots=True)
class FirstCapture:
    """The first capture of a payload: what a revisit record refers to."""

    url: str
    date: float           # fetched_at of the first capture (epoch seconds)
    record_id: str = ""   # its WARC-Record-ID, when known


class ExactDupIndex:
    """Payload digest -> first capture, for revisit decisions.

    ``first(digest)`` looks up; ``add(digest, url, date, record_id)`` returns
    the earlier capture when the digest is known (write a revisit record that
    refers to it) or records this one and returns None (write the full
    response). Keys are whatever digest string the caller uses; for WARC
    revisits use the writer's form (`warc_payload_digest`).
    Bounded by `entries_max`: when full, new digests are not remembered
    (`dropped` counts them) and their captures are simply written in full.
    """

    def __init__(self, *, entries_max: int = 10_000_000) -> None:
        if entries_max < 1:
            raise ValueError("entries_max must be positive")
        self.entries_max = entries_max
        self.dropped = 0
        self._first: dict[str, FirstCapture] = {}

    def __len__(self) -> int:
        return len(self._first)

    def first(self, digest: str) -> FirstCapture | None:
        return self._first.get(digest)

    def add(self, digest: str, url: str, date: float, record_id: str = "") -> FirstCapture | None:
        known = self._first.get(digest)
        if known is not None:
            return known
        if len(self._first) >= self.entries_max:
            self.dropped += 1
        else:
            self._first[digest] = FirstCapture(url, date, record_id)
        return None

    def rows(self) -> Iterator[tuple[str, str, float, str]]:
        """``(digest, url, date, record_id)`` per entry, insertion order."""
        for digest, cap in self._first.items():
            yield (digest, cap.url, cap.date, cap.record_id)

    @classmethod
    def load(cls, rows: Iterable[Iterable[object]], *, entries_max: int = 10_000_000) -> ExactDupIndex:
        index = cls(entries_max=entries_max)
        for row in rows:
            digest, url, date, record_id = tuple(row)
            index._first.setdefault(str(digest), FirstCapture(str(url), float(date), str(record_id)))  # type: ignore[arg-type]
        return index
