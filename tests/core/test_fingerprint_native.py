"""The compiled SimHash (courtly.core._speedups) against the pure-Python
definition: fingerprints are stored in crawl databases, so the two paths
must agree bit for bit on every text and shingle size; and the fallback
(no extension) must give the same values."""

from __future__ import annotations

import random
import re

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core import fingerprint
from courtly.core.fingerprint import simhash64, simhash64_py, simhash64_tokens, word_tokens
from courtly.core.soft404 import error_fingerprint

speedups = pytest.importorskip("courtly.core._speedups", reason="C extension not built (no compiler?)")

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None)
shingles = st.integers(min_value=1, max_value=fingerprint.SHINGLE_MAX)
# words, separators and the characters where lowercasing or \w is subtle:
# final sigma, dotted capital I, Kelvin sign, sharp s, combining marks, CJK,
# digits of other scripts, emoji, a lone surrogate
PIECES = ["word", "Word", "WORD", "x", "_", "a_b", "42", "café", "ΣΟΦΟΣ", "σοφός", "İstanbul", "\u212a",
          "straße", "e\u0301", "日本語", "٣٤", "🙂", "\ud800", " ", "  ", ",", ". ", "\n", "\t", "-", "'",
          "\u00a0", "\u2028"]
texts = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=400),
    st.lists(st.sampled_from(PIECES), max_size=80).map("".join),
)

CORPUS = [
    "",
    " ,;. ",
    "one",
    "One two",
    "the quick brown fox jumps over the lazy dog",
    "The QUICK brown fox -- jumps over (the) lazy_dog 42 times!",
    "ΟΔΥΣΣΕΥΣ και Πηνελόπη ΣΟΦΟΣ σοφός",
    "İstanbul ISTANBUL istanbul \u212aelvin",
    "Grüße aus Köln, straße STRASSE",
    "東京は日本の首都です 東京 は 日本",
    "emoji 🙂 between 🙂🙂 words",
    "lone \ud800 surrogate and \udfff another",
    "tab\tnew\nline\r\nnbsp\u00a0sep\u2028end",
    "a" * 5000,
    " ".join(["w"] * 40),
    "x" * 31 + " " + "y" * 32 + " " + "z" * 33,   # XXH64's 32-byte stripes inside shingles
]


def long_texts() -> list[str]:
    r = random.Random(5)
    words = ["river", "Stone", "GARDEN", "café", "naïve", "日本", "x", "under_score", "99"]
    seps = [" ", ", ", ". ", "\n", " -- ", "'"]
    return ["".join(r.choice(words) + r.choice(seps) for _ in range(n)) for n in (1, 2, 3, 17, 300, 3000)]


def test_the_extension_is_in_use_when_it_is_built():
    assert fingerprint.NATIVE
    assert fingerprint._simhash_native is speedups.simhash


def test_xxh64_matches_the_xxhash_package():
    r = random.Random(11)
    inputs = [b"", b"a", b"abc", bytes(range(256))]
    inputs += [r.randbytes(n) for n in range(0, 130) for _ in range(8)]
    inputs += [r.randbytes(r.randrange(130, 20_000)) for _ in range(50)]
    for data in inputs:
        assert speedups.xxh64(data) == xxhash.xxh64_intdigest(data), len(data)


@pytest.mark.parametrize("shingle", range(1, fingerprint.SHINGLE_MAX + 1))
def test_native_and_python_agree_on_a_corpus(shingle):
    for text in CORPUS + long_texts():
        assert simhash64(text, shingle=shingle) == simhash64_py(text, shingle=shingle), (text[:60], shingle)


@PROPERTY
@given(texts, shingles)
def test_native_and_python_agree_on_any_text(text, shingle):
    assert simhash64(text, shingle=shingle) == simhash64_py(text, shingle=shingle)


@PROPERTY
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join), shingles)
def test_native_tokens_path_agrees_with_python(text, shingle):
    tokens = word_tokens(text)
    native = simhash64_tokens(tokens, shingle=shingle)
    assert native == fingerprint._simhash_tokens_py(tokens, shingle)
    assert native == simhash64(text, shingle=shingle)


def test_native_reads_the_text_cap(monkeypatch):
    monkeypatch.setattr(fingerprint, "TEXT_CHARS_MAX", 37)
    for text in CORPUS + long_texts():
        assert simhash64(text) == simhash64_py(text) == simhash64_py(text[:37])


def test_native_refuses_a_bad_shingle_like_python():
    for bad in (0, fingerprint.SHINGLE_MAX + 1):
        with pytest.raises(ValueError):
            speedups.simhash(b"a b", bad)
        with pytest.raises(ValueError):
            simhash64_tokens([b"a"], shingle=bad)


def test_without_the_extension_the_python_path_gives_the_same_values(monkeypatch):
    fox = "the quick brown fox jumps over the lazy dog"
    texts_ = CORPUS + long_texts()
    native = [(simhash64(t), simhash64(t, shingle=2), error_fingerprint(t, "http://a.test/x/quick-fox"))
              for t in texts_]
    calls = []
    real = fingerprint._simhash_tokens_py

    def counted(tokens, shingle):
        calls.append(shingle)
        return real(tokens, shingle)

    monkeypatch.setattr(fingerprint, "_simhash_native", None)
    monkeypatch.setattr(fingerprint, "_simhash_tokens_py", counted)
    fallback = [(simhash64(t), simhash64(t, shingle=2), error_fingerprint(t, "http://a.test/x/quick-fox"))
                for t in texts_]
    assert fallback == native
    assert len(calls) == 3 * len(texts_)  # every value above came from the Python path
    assert f"{simhash64(fox):016x}" == "39edbf7f29b4b877"


def _error_fingerprint_as_defined(text: str, url: str) -> int:
    """soft404.error_fingerprint's definition (its general path)."""
    drop = set(re.findall(r"\w+", url.lower()))
    kept = [t for t in re.findall(r"\w+", text.lower()) if t not in drop]
    return simhash64_py(" ".join(kept), shingle=2)


@PROPERTY
@given(texts, st.sampled_from(["http://a.test/", "http://a.test/news/word-x.html", "http://b.test/café/ΣΟΦΟΣ?q=42",
                               "https://c.test/the/quick/brown"]))
def test_error_fingerprint_fast_path_keeps_its_definition(text, url):
    assert error_fingerprint(text, url) == _error_fingerprint_as_defined(text, url)
