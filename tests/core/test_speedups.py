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
from courtly.core.fingerprint import simhash64, simhash64_py
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
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join), shingles,
       st.sets(st.sampled_from(["word", "x", "_", "42", "café", "σοφός", "i̇stanbul", "k", "nothere"]), max_size=5))
def test_native_and_python_agree_when_words_are_left_out(text, shingle, drop):
    native = simhash64(text, shingle=shingle, drop=drop)
    assert native == simhash64_py(text, shingle=shingle, drop=drop)
    kept = [t for t in re.findall(r"\w+", text.lower()) if t not in drop]
    assert native == simhash64_py(" ".join(kept), shingle=shingle) or not text.isascii()


def test_more_words_to_leave_out_than_the_c_code_takes_go_the_python_way():
    text = " ".join(f"w{i}" for i in range(200))
    drop = {f"w{i}" for i in range(0, 200, 2)}
    assert len(drop) > fingerprint.DROP_NATIVE_MAX
    expected = simhash64_py(" ".join(f"w{i}" for i in range(1, 200, 2)))
    assert simhash64(text, drop=drop) == simhash64_py(text, drop=drop) == expected


def test_the_c_code_checks_the_words_to_leave_out():
    with pytest.raises(TypeError):
        speedups.simhash("a b", 3, ("a",))
    with pytest.raises(ValueError):
        speedups.simhash("a b", 3, tuple(b"w%d" % i for i in range(fingerprint.DROP_NATIVE_MAX + 1)))
    assert speedups.simhash("a b a", 1, (b"a",)) == speedups.simhash("b", 1)


def test_native_reads_the_text_cap(monkeypatch):
    monkeypatch.setattr(fingerprint, "TEXT_CHARS_MAX", 37)
    for text in CORPUS + long_texts():
        assert simhash64(text) == simhash64_py(text) == simhash64_py(text[:37])


def test_native_refuses_a_bad_shingle_like_python():
    for bad in (0, fingerprint.SHINGLE_MAX + 1):
        with pytest.raises(ValueError):
            speedups.simhash(b"a b", bad)
        with pytest.raises(ValueError):
            simhash64("a", shingle=bad, drop={"a"})


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


ALL_CODE_POINTS = "".join(map(chr, range(0x110000)))


def test_native_words_are_the_regex_words_for_every_code_point():
    """\\w as re defines it for str patterns, character by character: every
    code point once, then every code point between two word characters."""
    for text in (ALL_CODE_POINTS, "a".join(ALL_CODE_POINTS[::7]), " ".join(ALL_CODE_POINTS[::5])):
        expected = " ".join(re.findall(r"\w+", text)).encode("utf-8", "surrogatepass")
        assert speedups.words(text) == expected


@PROPERTY
@given(texts)
def test_native_words_of_ascii_bytes_are_the_python_tokens(text):
    ascii_text = text.encode("ascii", "replace")
    assert speedups.words(ascii_text) == b" ".join(fingerprint._tokens(ascii_text.decode()))


def test_native_collapse_is_split_and_join_for_every_code_point():
    texts_ = [ALL_CODE_POINTS, " ".join(ALL_CODE_POINTS[::3]), "\u3000a\u3000", "\u2003é\u2003\U0001F642 ",
              "ÿ\u2028x", "\x1c\x1d a \x85b\xa0", "", "   ", "x"]
    for text in texts_:
        out = speedups.collapse(text)
        assert out == " ".join(text.split())  # == also compares the str kind: canonical
        assert out.isascii() == " ".join(text.split()).isascii()


@PROPERTY
@given(st.one_of(texts, st.text(alphabet=" \t\n\r\x0b\x0c\x1c\xa0\u2003\u3000ab\u00e9\u4e00\U0001F642", max_size=60)))
def test_native_collapse_equals_split_and_join(text):
    assert speedups.collapse(text) == " ".join(text.split())


def test_main_text_is_the_same_with_the_python_collapse(monkeypatch):
    from courtly.core import maintext
    from courtly.sim.model import SimWeb
    from courtly.sim.page import render_page
    from courtly.sim.webconfig import profile_config

    web = SimWeb(profile_config("hostile", seed=3))
    bodies = []
    for name in list(web.manifest(8080, 1_700_000_000.0)["hosts"])[:12]:
        lay = web.layout(name)
        for path in lay.page_paths()[:6]:
            res = lay.resolve(path)
            if res.kind == "page":
                bodies.append(render_page(lay, res.page, res.variant, 0, 8080))
    bodies += [b"<p>caf\xc3\xa9\xc2\xa0 \xe3\x80\x80 word</p>" * 9, b"<main>\xe2\x80\x83x\xe2\x80\x83</main>"]
    assert maintext._collapse is speedups.collapse
    native = [maintext.main_text(b, "text/html; charset=utf-8") for b in bodies]
    monkeypatch.setattr(maintext, "_collapse", maintext._collapse_py)
    assert [maintext.main_text(b, "text/html; charset=utf-8") for b in bodies] == native
    assert sum(map(len, native)) > 10_000
