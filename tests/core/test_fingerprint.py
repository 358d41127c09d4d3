"""Tests for courtly.core.fingerprint: digests, SimHash, the near-duplicate
block index (checked against a brute-force scan) and the exact-dup index."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.fingerprint import (
    ExactDupIndex,
    FirstCapture,
    IndexFull,
    NearDupIndex,
    from_signed64,
    hamming,
    payload_digest,
    simhash64,
    to_signed64,
)
from courtly.core import fingerprint

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True, database=None)
fps = st.integers(min_value=0, max_value=(1 << 64) - 1)

WORDS = ("river stone garden window market silver candle orchard harbor lantern meadow copper "
         "thunder pillow basket violin marble cactus falcon glacier tunnel velvet prairie compass "
         "ladder walnut comet saddle quartz ember canyon feather anchor bramble cobalt dune").split()


def article(seed: int, n_words: int = 800) -> str:
    r = random.Random(seed)
    sentences = []
    while sum(len(s.split()) for s in sentences) < n_words:
        sentences.append(" ".join(r.choice(WORDS) for _ in range(r.randint(6, 16))).capitalize() + ".")
    return " ".join(sentences)


# ---------------------------------------------------------------- digests and hashes


def test_payload_digest_is_sha256_hex():
    assert payload_digest(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert payload_digest(b"a") != payload_digest(b"b")


def test_simhash_of_empty_text_is_zero_and_identical_texts_match():
    assert simhash64("") == simhash64("  ,;  ") == 0
    assert simhash64(article(1)) == simhash64(article(1))
    assert 0 < simhash64(article(1)) < 1 << 64


def test_simhash_ignores_case_punctuation_and_whitespace():
    a = "The quick brown fox jumps over the lazy dog, twice!"
    b = "the QUICK   brown fox\njumps over the lazy dog twice"
    assert simhash64(a) == simhash64(b)


def test_simhash_is_the_same_in_another_process():
    """Never Python's hash(): a fresh interpreter (another PYTHONHASHSEED)
    computes the same fingerprint."""
    text = article(7)
    code = ("import sys; from courtly.core.fingerprint import simhash64; "
            "print(simhash64(sys.stdin.read()))")
    out = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert int(out.stdout) == simhash64(text)


def test_simhash_values_are_pinned():
    """Stored fingerprints must stay comparable across releases: a change
    here means every persisted SimHash is stale (bump a version, re-index)."""
    fox = "the quick brown fox jumps over the lazy dog"
    assert f"{simhash64(fox):016x}" == "39edbf7f29b4b877"
    assert f"{simhash64(fox, shingle=1):016x}" == "593b03225397e4ae"


@PROPERTY
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_ascii_fast_path_tokenises_like_the_regex(text):
    expected = [t.encode() for t in re.findall(r"\w+", text.lower())]
    assert fingerprint._tokens(text) == expected


@PROPERTY
@given(st.text(max_size=200))
def test_simhash_never_raises_on_any_text(text):
    assert 0 <= simhash64(text) < 1 << 64
    assert 0 <= simhash64(text, shingle=1) < 1 << 64


def test_shingle_size_is_bounded():
    with pytest.raises(ValueError):
        simhash64("x", shingle=0)
    with pytest.raises(ValueError):
        simhash64("x", shingle=fingerprint.SHINGLE_MAX + 1)


def test_majority_bits_matches_a_per_bit_count():
    r = random.Random(3)
    for n in (1, 2, 7, 64, 1001):
        words = [r.getrandbits(64) for _ in range(n)]
        packed = b"".join(w.to_bytes(8, "little") for w in words)
        expected = sum(1 << b for b in range(64) if 2 * sum((w >> b) & 1 for w in words) > n)
        assert fingerprint._majority_bits(packed, n) == expected


# ---------------------------------------------------------------- near-duplicate texts


def test_changed_ad_timestamp_or_nav_line_stays_within_3_bits():
    body = article(11, 1200)
    base = f"Home News Sport Weather\n{body}\nPublished Tue, 09 Feb 2021 01:38:37 GMT\nSponsored: buy copper now"
    variants = {
        "ad": base.replace("buy copper now", "try velvet today"),
        "timestamp": base.replace("Published Tue, 09 Feb 2021 01:38:37 GMT", "Updated Mon, 02 Oct 2023 17:05:11 GMT"),
        "nav": base.replace("Home News Sport Weather", "Weather Sport News Home"),
    }
    fp = simhash64(base)
    for name, text in variants.items():
        assert hamming(fp, simhash64(text)) <= 3, name


def test_different_articles_are_far_apart():
    fps_ = [simhash64(article(seed, 600)) for seed in range(40)]
    distances = [hamming(a, b) for i, a in enumerate(fps_) for b in fps_[i + 1:]]
    assert min(distances) > 3
    assert 20 <= sum(distances) / len(distances) <= 44  # about 32 for unrelated texts


# ---------------------------------------------------------------- hamming


@PROPERTY
@given(fps, fps, fps)
def test_hamming_is_a_metric(a, b, c):
    assert hamming(a, b) == hamming(b, a)
    assert hamming(a, a) == 0
    assert (hamming(a, b) == 0) == (a == b)
    assert hamming(a, c) <= hamming(a, b) + hamming(b, c)
    assert 0 <= hamming(a, b) <= 64


@PROPERTY
@given(fps)
def test_signed64_round_trips(fp):
    signed = to_signed64(fp)
    assert -(1 << 63) <= signed < 1 << 63
    assert from_signed64(signed) == fp


# ---------------------------------------------------------------- the block index


def flip(fp: int, r: random.Random, bits: int) -> int:
    for b in r.sample(range(64), bits):
        fp ^= 1 << b
    return fp


def brute_force(docs: dict[str, tuple[int, str]], fp: int, scope: str | None, distance_max: int) -> set[tuple[str, int]]:
    return {
        (doc_id, hamming(fp, f))
        for doc_id, (f, s) in docs.items()
        if (scope is None or s == scope) and hamming(fp, f) <= distance_max
    }


@PROPERTY
@given(st.integers(0, 2**32), st.integers(0, 3))
def test_find_equals_a_brute_force_scan(seed, distance_max):
    r = random.Random(seed)
    index = NearDupIndex(distance_max)
    docs: dict[str, tuple[int, str]] = {}
    bases = [r.getrandbits(64) for _ in range(8)]
    for i in range(150):  # clustered fingerprints so matches are common
        fp = flip(r.choice(bases), r, r.randint(0, 5)) if r.random() < 0.8 else r.getrandbits(64)
        scope = r.choice(("a.test", "b.test", "c.test"))
        doc_id = f"d{i}"
        index.add(doc_id, fp, scope)
        docs[doc_id] = (fp, scope)
    for _ in range(40):
        query = flip(r.choice(bases), r, r.randint(0, 5)) if r.random() < 0.8 else r.getrandbits(64)
        for scope in (None, "a.test", "b.test", "nowhere.test"):
            found = index.find(query, scope, limit=10_000)
            assert set(found) == brute_force(docs, query, scope, distance_max)
            assert [d for _, d in found] == sorted(d for _, d in found)


def test_find_never_scans_the_index(monkeypatch):
    """A query probes four buckets and verifies only what they hold."""
    r = random.Random(5)
    index = NearDupIndex()
    for i in range(20_000):
        index.add(f"d{i}", r.getrandbits(64), "h.test")
    verified = 0
    real_docs = index._docs

    class Counting(dict):
        def __getitem__(self, key):
            nonlocal verified
            verified += 1
            return dict.__getitem__(self, key)

    index._docs = Counting(real_docs)
    index.find(r.getrandbits(64), None)
    assert verified < 100  # ~4 x 2 x 20,000 / 65,536 candidates, not 20,000


def test_distance_max_above_3_is_refused():
    with pytest.raises(ValueError):
        NearDupIndex(4)


def test_scopes_separate_hosts_and_global_sees_all():
    index = NearDupIndex()
    index.add("a", 0b1011, "one.test")
    index.add("b", 0b1010, "two.test")
    assert index.find(0b1011, "one.test") == [("a", 0)]
    assert index.find(0b1011, "two.test") == [("b", 1)]
    assert index.find(0b1011, None) == [("a", 0), ("b", 1)]


# ---------------------------------------------------------------- clusters


def test_first_seen_is_canonical_and_near_copies_join_its_cluster():
    index = NearDupIndex()
    assert index.add("orig", 0xF0F0, "h.test") == "orig"
    assert index.add("copy", 0xF0F1, "h.test") == "orig"
    assert index.add("other-host-copy", 0xF0F3, "mirror.test") == "orig"
    assert index.add("unrelated", 0x0F0F_0000_FFFF, "h.test") == "unrelated"
    assert index.canonical_of("copy") == "orig"
    assert index.cluster_size("orig") == 3
    assert index.canonical_of("nope") is None


def test_rel_canonical_target_in_the_same_cluster_becomes_representative():
    index = NearDupIndex()
    index.add("page?print=1", 0xAAAA, "h.test")
    index.add("page", 0xAAAB, "h.test")
    index.add("elsewhere", 0xFFFF_FFFF_0000, "h.test")
    assert index.prefer_canonical("page?print=1", "page")
    assert index.canonical_of("page?print=1") == index.canonical_of("page") == "page"
    assert not index.prefer_canonical("page", "elsewhere")  # another cluster: ignored
    assert not index.prefer_canonical("page", "unknown")
    assert index.canonical_of("page") == "page"


def test_readding_a_doc_replaces_its_fingerprint_and_cluster():
    index = NearDupIndex()
    index.add("a", 0x1, "h.test")
    index.add("b", 0x3, "h.test")
    index.add("b", 0xFFFF_0000_FFFF_0000, "h.test")  # recrawled, content changed
    assert len(index) == 2
    assert index.find(0x3, None) == [("a", 1)]
    assert index.canonical_of("b") == "b"


def test_removing_the_canonical_promotes_the_oldest_member():
    index = NearDupIndex()
    for name, fp in (("a", 0x10), ("b", 0x11), ("c", 0x13)):
        index.add(name, fp, "h.test")
    assert index.remove("a")
    assert not index.remove("a")
    assert index.canonical_of("c") == "b"
    assert index.find(0x10, None) == [("b", 1), ("c", 2)]


def test_index_is_bounded():
    index = NearDupIndex(docs_max=2)
    index.add("a", 1, "h")
    index.add("b", 2, "h")
    index.add("a", 5, "h")  # replacing an indexed doc is fine
    with pytest.raises(IndexFull):
        index.add("c", 3, "h")
    assert index.full


def test_rows_round_trip_through_json_and_load():
    r = random.Random(9)
    index = NearDupIndex()
    base = r.getrandbits(64)
    for i in range(60):
        fp = flip(base, r, r.randint(0, 2)) if i % 3 else r.getrandbits(64)
        index.add(f"http://h{i % 4}.test/{i}", fp, f"h{i % 4}.test")
    index.prefer_canonical("http://h1.test/1", "http://h2.test/2")
    index.remove("http://h0.test/0")
    rows = json.loads(json.dumps(list(index.rows())))
    assert all(-(1 << 63) <= row[1] < 1 << 63 for row in rows)  # fits SQLite INTEGER
    loaded = NearDupIndex.load(rows)
    assert list(loaded.rows()) == [tuple(row) for row in rows]
    for i in range(1, 60):
        doc = f"http://h{i % 4}.test/{i}"
        assert loaded.canonical_of(doc) == index.canonical_of(doc)
        fp = index.fingerprint_of(doc)
        assert loaded.find(fp, f"h{i % 4}.test") == index.find(fp, f"h{i % 4}.test")
    assert loaded.add("new", base, "h1.test") == index.add("new", base, "h1.test")


# ---------------------------------------------------------------- exact duplicates


def test_exact_dup_index_remembers_the_first_capture():
    index = ExactDupIndex()
    assert index.add("sha1:AAA", "http://a.test/", 100.0, "<urn:uuid:1>") is None
    assert index.add("sha1:AAA", "http://b.test/", 200.0) == FirstCapture("http://a.test/", 100.0, "<urn:uuid:1>")
    assert index.first("sha1:AAA").url == "http://a.test/"
    assert index.first("sha1:BBB") is None
    loaded = ExactDupIndex.load(json.loads(json.dumps(list(index.rows()))))
    assert loaded.first("sha1:AAA") == index.first("sha1:AAA")


def test_exact_dup_index_is_bounded_and_counts_what_it_drops():
    index = ExactDupIndex(entries_max=1)
    index.add("x", "u1", 1.0)
    assert index.add("y", "u2", 2.0) is None
    assert index.first("y") is None and index.dropped == 1 and len(index) == 1
