"""The extraction worker's shortcuts against their definitions: the compiled
class/id scan of `maintext` against its regex, `main_words` (main_text's
words, whitespace uncollapsed) against `main_text` under both fingerprints,
on hypothesis inputs and on real pages of the simulated web. Fingerprints
are stored in crawl databases: these must agree bit for bit."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core import maintext
from courtly.core.fingerprint import simhash64
from courtly.core.maintext import main_text, main_words
from courtly.core.soft404 import error_fingerprint

speedups = pytest.importorskip("courtly.core._speedups", reason="C extension not built (no compiler?)")

PROPERTY = settings(max_examples=400, deadline=None, derandomize=True, database=None)
CT = "text/html; charset=utf-8"

# pieces where the attribute regex is subtle: names inside other names,
# whitespace of every kind around "=", quotes of both kinds (closed or not),
# ">" ending an unquoted value, non-ASCII text (2- and 4-byte strings)
ATTR_PIECES = ["class", "id", "CLASS", "Id", "=", " = ", "==", " ", "\t", "\n", "\f", "\x0b", "\x1c", "\u00a0",
               "\u2003", "\u3000", '"', "'", ">", "/", "<div ", "data-", "grid", "x", "nav", "ad-slot", "a b",
               "é", "日", "🙂", "\ud800", "_", "-"]
attr_texts = st.one_of(
    st.lists(st.sampled_from(ATTR_PIECES), max_size=60).map("".join),
    st.text(max_size=200),
    st.text(alphabet="clasid= \t\"'>/x\u00a0é", max_size=120),
)


def sim_pages(profile: str, hosts: int, per_host: int, seed: int = 3) -> list[tuple[str, bytes]]:
    """(url, body) of ordinary pages of the simulated web's `profile`."""
    from courtly.sim.model import SimWeb
    from courtly.sim.page import render_page
    from courtly.sim.webconfig import profile_config

    web = SimWeb(profile_config(profile, seed=seed))
    out = []
    for name in list(web.manifest(8080, 1_700_000_000.0)["hosts"])[:hosts]:
        lay = web.layout(name)
        for path in lay.page_paths()[:per_host]:
            res = lay.resolve(path)
            if res.kind == "page":
                out.append((f"http://{name}:8080{path}", render_page(lay, res.page, res.variant, 0, 8080)))
    return out


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, bytes]]:
    return sim_pages("hostile", 12, 8) + sim_pages("bench", 4, 10)


@PROPERTY
@given(attr_texts, st.sampled_from(["class", "id"]))
def test_native_attribute_scan_is_the_regex_scan(text, name):
    assert speedups.attr_values(text, name) == maintext._attr_values_py(text, name)


def test_native_attribute_scan_edge_cases():
    cases = ['', 'class="a"', ' class="a"', ' class =\t"a b" ', " class='q'>", ' class=x>y', ' class= >',
             ' class="open', " class='open", ' class="a" class="b"', ' class=""', ' data-class="n"',
             ' class="x=y" id=z', ' id = " sp "', ' id\u00a0=\u2003v', '/id=v', '"id=v', 'grid=v',
             ' class="' * 50, " class=" * 50, ' class = = "a"', ' clas s="a"', ' class="a\u3000nav"']
    for text in cases:
        for name in ("class", "id"):
            assert speedups.attr_values(text, name) == maintext._attr_values_py(text, name), (text, name)
    with pytest.raises(ValueError):
        speedups.attr_values("x", "")
    with pytest.raises(ValueError):
        speedups.attr_values("x", "é")
    with pytest.raises(TypeError):
        speedups.attr_values(b"x", "id")


def test_native_attribute_scan_on_sim_pages(pages):
    for _, body in pages:
        text = body.decode("utf-8", "replace")
        for name in ("class", "id"):
            assert speedups.attr_values(text, name) == maintext._attr_values_py(text, name)


def test_main_text_is_the_same_with_the_python_attribute_scan(pages, monkeypatch):
    bodies = [body for _, body in pages]
    assert maintext._attr_values is speedups.attr_values
    native = [main_text(b, CT) for b in bodies]
    monkeypatch.setattr(maintext, "_attr_values", maintext._attr_values_py)
    assert [main_text(b, CT) for b in bodies] == native
    assert sum(map(len, native)) > 10_000


def test_whitespace_is_no_word_and_no_case_context_for_every_code_point():
    """Why `main_words` may leave whitespace uncollapsed: no whitespace
    character is part of a \\w word, and none is cased or case-ignorable
    (str.lower()'s final-sigma rule reads across those only)."""
    for cp in range(sys.maxunicode + 1):
        s = chr(cp)
        if not s.isspace():
            continue
        assert not (s.isalnum() or s == "_"), hex(cp)
        assert ("a\u03a3" + s + "b").lower() == "a\u03c2" + s.lower() + "b", hex(cp)  # s ends the word
        assert ("a" + s + "\u03a3").lower() == "a" + s.lower() + "\u03c3", hex(cp)  # s starts a word


HTML_PIECES = ["<main>", "</main>", "<p>", "</p>", "<article>", "</article>", "<div class=nav>", "</div>",
               "<h1>", "</h1>", "<li>", "word", "Word", "\u03a3\u03bf\u03c6\u03bf\u03a3", " ", "  ", "\n", "\t",
               "\u00a0", "\u2003", "\u3000", "&nbsp;", "caf\u00e9", "\u65e5\u672c", "<br>", "<span>", "</span>",
               "x y z w v"]


@PROPERTY
@given(st.lists(st.sampled_from(HTML_PIECES), max_size=80).map("".join))
def test_main_words_fingerprints_are_main_text_fingerprints(html):
    body = html.encode("utf-8")
    text, words = main_text(body, CT), main_words(body, CT)
    assert simhash64(words) == simhash64(text)
    assert simhash64(words, shingle=2) == simhash64(text, shingle=2)
    assert error_fingerprint(words, "http://a.test/word/x") == error_fingerprint(text, "http://a.test/word/x")
    assert " ".join(words.split()) == " ".join(text.split())


def test_main_words_fingerprints_on_sim_pages(pages):
    for url, body in pages:
        text, words = main_text(body, CT), main_words(body, CT)
        assert simhash64(words) == simhash64(text), url
        assert error_fingerprint(words, url) == error_fingerprint(text, url), url
        assert " ".join(words.split()) == text or "<main" not in body.decode("utf-8", "replace"), url


def test_main_words_past_the_text_cap_is_main_text(monkeypatch):
    monkeypatch.setattr(maintext, "TEXT_CHARS_MAX", 40)
    body = ("<main>" + "alpha \n\n beta   " * 20 + "</main>").encode()
    assert main_words(body, CT) == main_text(body, CT)
    assert len(main_text(body, CT)) == 40
    assert main_words(b"\xff" * 10, "image/png") == main_text(b"\xff" * 10, "image/png") == ""


@PROPERTY
@given(attr_texts, st.sampled_from(["<", "=", "é", "日", "🙂", "\x00"]), st.integers(min_value=-2, max_value=12))
def test_native_count_over_is_str_count(text, char, limit):
    assert speedups.count_over(text, char, limit) is (text.count(char) > limit)


def test_parse_html_counts_tags_the_same_without_the_extension(monkeypatch):
    from courtly.core import links

    assert links._count_over is speedups.count_over
    many = "<p>x</p>" * (links.TAGS_FAST_MAX // 2) + "é<"
    for text in ("", "<", many, many[:-1], many.encode("utf-8").decode("latin-1")):
        assert speedups.count_over(text, "<", links.TAGS_FAST_MAX) is links._count_over_py(
            text, "<", links.TAGS_FAST_MAX)
    body = ("<div>" * (links.TAGS_FAST_MAX + 10) + '<a href="/x">x</a>').encode()
    native = links.parse_html(body, "text/html")
    monkeypatch.setattr(links, "_count_over", links._count_over_py)
    fallback = links.parse_html(body, "text/html")
    assert native.flat and fallback.flat and native.error == fallback.error


def test_native_simhash_across_hash_batches_and_counter_flushes():
    """Shingle counts around the C code's batch of 128 hashes and its
    flush of the 8-bit vote lanes (before 255 votes), where an off-by-one
    would show; one word repeated makes every vote the same (a lane full)."""
    import random

    from courtly.core.fingerprint import simhash64_py

    r = random.Random(8)
    vocabulary = [f"w{r.randrange(10**6)}" for _ in range(200)]
    for n in (1, 2, 127, 128, 129, 130, 253, 254, 255, 256, 257, 383, 384, 385, 511, 512, 513, 1000):
        words = [r.choice(vocabulary) for _ in range(n)]
        for text in (" ".join(words), " ".join(["same"] * n)):
            for shingle in (1, 3):
                assert simhash64(text, shingle=shingle) == simhash64_py(text, shingle=shingle), (n, shingle)


# -- the compiled anchor scan (links._extract with _speedups.link_anchors) ----

LINK_BASES = ["http://a.test/dir/page.html", "http://a.test", "https://a.test:8443/x/y/", "http://a.test/a/./b/c",
              "http://a.test/d e/f.html", "HTTP://A.test/A/", "http://a.test//x", "ftp://a.test/x",
              "http://a.test/a\\b", "relative/page", "http://a.test/p?q#f"]
HREF_BITS = ["http://b.test/x", "https://b.test", "HTTP://b.test/", "//c.test/p", "/", "/p", "p", "q.html",
             "../", "../../", "..", ".", "./", ".p", "/.", "?q=1", "#f", ":", "a:b", "1a:b", "http:g",
             "javascript:void(0)", "JavaScript:x", "mailto:x@y", "TEL:1", "data:,x", "ftp://f.test/",
             "\\", "///", "https:", "é", "日本", "%2e", " ", "\t", "\n", "\x00", "\x1f", "\u00a0", "&amp;", "=", "'", '"']
HREFS = ["../p", "../../p", "../../../p", "../", "p", "p/q", "q.html?x#y", "/p", "//c.test/p", "http://b.test/x",
         "https://b.test", "HTTP://b.test/", "#f", "", " ", " /p ", "\t/p", "/p\n", "tel:1", "TEL:1",
         "javascript:x", "mailto:x", "data:,x", "ftp://f.test/", "a:b", "1a:b", "http:g", "p\\q", "./p", ".p",
         "..p", "p/../q", "/.", "?q", "\u00e9/\u65e5", "\x00p", "\x1fp", "\u00a0p", "%2e%2e/p", "p.",
         "../p/./q", "http://b.test/./x", "///c.test/p", "////c.test", "http:///b.test/x", "https:///b.test",
         "https:b.test/x", "https:/b.test", "http:/b.test", "http:", "https:", "///", "\\\\\\c.test"]
REL_VALUES = [None, "", "nofollow", "NoFollow", "ugc", "SPONSORED", "ugc sponsored", "external", "nofollowx", "x\tNOFOLLOW",
              "sponsored\x1c", "\u00a0nofollow", "\u212anofollow", "n\u00f3follow", "nofollow\u2003ugc"]


def _anchor_html(items: list[tuple[str, str | None, str]]) -> bytes:
    import html as html_module

    out = ["<html><head><title>t</title>"]
    for href, rel, tag in items:
        rel_attr = "" if rel is None else f' rel="{html_module.escape(rel)}"'
        if tag == "base":
            out.append(f'<base href="{html_module.escape(href)}">')
        elif tag == "link":
            out.append(f'<link rel="{rel or "canonical"}" href="{html_module.escape(href)}">')
        elif tag == "meta":
            out.append(f'<meta http-equiv="refresh" content="0; url={html_module.escape(href)}">')
        elif tag == "bare":
            out.append("<a>no href</a><a href>empty</a>")
        else:
            out.append(f'<{tag} href="{html_module.escape(href)}"{rel_attr}>x</{tag}>')
    return "".join(out).encode("utf-8", "surrogatepass")


def _both_ways(body: bytes, url: str, links_max: int = 5000) -> tuple[tuple, tuple]:
    from courtly.core import links

    native = links.link_fields(body, url, content_type=CT, links_max=links_max)
    saved, links._link_anchors = links._link_anchors, None
    try:
        python = links.link_fields(body, url, content_type=CT, links_max=links_max)
    finally:
        links._link_anchors = saved
    return native, python


anchor_items = st.lists(st.tuples(
    st.one_of(st.sampled_from(HREFS), st.lists(st.sampled_from(HREF_BITS), max_size=5).map("".join)),
    st.sampled_from(REL_VALUES),
    st.sampled_from(["a", "a", "a", "area", "link", "meta", "base", "bare"]),
), max_size=25)


@PROPERTY
@given(anchor_items, st.sampled_from(LINK_BASES), st.sampled_from([0, 1, 2, 3, 5000]))
def test_native_anchor_scan_is_the_python_scan(items, url, links_max):
    native, python = _both_ways(_anchor_html(items), url, links_max)
    assert native == python


def test_native_anchor_scan_is_the_python_scan_on_every_href_base_and_rel():
    for url in LINK_BASES:
        for href in HREFS:
            for rel in REL_VALUES:
                for tag in ("a", "area"):
                    body = _anchor_html([(href, rel, tag), ("p", None, "a"), (href, rel, "a"), (href, None, "a")])
                    native, python = _both_ways(body, url)
                    assert native == python, (url, href, rel, tag)
    for links_max in range(4):
        body = _anchor_html([(h, r, "a") for h, r in zip(HREFS * 2, REL_VALUES * 7)])
        assert _both_ways(body, LINK_BASES[0], links_max)[0] == _both_ways(body, LINK_BASES[0], links_max)[1]


def test_native_anchor_scan_is_in_use_and_the_same_on_sim_pages(pages):
    from courtly.core import links

    calls = []
    real = links._link_anchors

    def counted(*args):
        calls.append(args[1])
        return real(*args)

    links._link_anchors = counted
    try:
        results = [_both_ways(body, url) for url, body in pages]
    finally:
        links._link_anchors = real
    assert calls  # the compiled scan ran
    for native, python in results:
        assert native == python
    assert sum(len(native[0]) for native, _ in results) > 500


def test_native_anchor_scan_refuses_bad_arguments():
    with pytest.raises(TypeError):
        speedups.link_anchors([], 0, [], {}, 10, ("http", "http://a"), print)
    with pytest.raises(TypeError):
        speedups.link_anchors((), 0, [], {}, 10, ("http", "http://a", None), print)
    assert speedups.link_anchors([], 0, [], {}, 10, ("http", "http://a", None), print) == 0


def test_only_ascii_letters_lowercase_to_the_nofollow_words():
    """The C code reads an ASCII rel itself and leaves any other to Python:
    no non-ASCII character lowercases into the letters of nofollow, ugc,
    sponsored (U+212A KELVIN SIGN becomes "k", which none of them has)."""
    letters = set("nofollowugcsponsored")
    for cp in range(0x80, sys.maxunicode + 1):
        low = chr(cp).lower()
        assert not (low.isascii() and set(low) & letters), hex(cp)


def test_native_short_shingle_hash_is_xxh64_at_every_length():
    """A one-word text's SimHash with shingles of one word is the XXH64 of
    that word (one vote per bit): the hash of shingles around XXH64's 32-byte
    stripe, checked against the xxhash package at every length."""
    import random

    import xxhash

    r = random.Random(4)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789_" + bytes(range(0x80, 0x100))
    for length in range(1, 70):
        for _ in range(40):
            word = bytes(r.choice(alphabet) for _ in range(length))
            assert speedups.simhash(word, 1) == xxhash.xxh64_intdigest(word), word


# -- main_text finds elements by name where it used CSS queries -------------------


def _main_text_by_css(body: bytes) -> str:
    """main_text of an HTML page as it was written with CSS queries for
    header/footer, the protected holders, <main> and <article> (the
    reference for the by-name lookups)."""
    from courtly.core.links import parse_html

    m = maintext
    tree = parse_html(body, CT).tree
    tree.strip_tags(m._DROP_TAGS)
    for node in tree.css("header, footer"):
        if not m._inside_article(node):
            node.decompose()
    selector = m._boilerplate_selector(body.decode("utf-8", "replace"))
    if selector:
        held: set[int] = set()
        for node in tree.css("main, article, h1")[:m.HOLDERS_MAX]:
            while node is not None and node.mem_id not in held:
                held.add(node.mem_id)
                node = node.parent
        for node in tree.css(selector):
            if node.tag not in m._KEEP_TAGS and node.mem_id not in held:
                node.decompose()
    main = tree.css_first("main")
    if main is not None:
        return m._collapse(main.text(separator=" "))[:m.TEXT_CHARS_MAX]
    articles = [a for a in tree.css("article") if not m._inside_article(a)]
    if articles:
        return "\n".join(filter(None, (m._collapse(a.text(separator=" ")) for a in articles)))
    return "\n".join(m._blocks(tree))


STRUCTURE_PIECES = ["<main>", "</main>", "<article>", "</article>", "<header>", "</header>", "<footer>", "</footer>",
                    "<h1>", "</h1>", "<div class=\"nav\">", "<div id=\"sidebar\">", "<div class=\"page has-sidebar\">",
                    "</div>", "<p>", "</p>", "<li>", "<td>", "<svg>", "</svg>", "<math>", "</math>", "<template>",
                    "</template>", "<script>", "</script>", "<nav>", "</nav>", "<aside class=ad>", "</aside>",
                    "one two three four five six", "Words here ", "x ", "<table>", "</table>", "<ul>", "</ul>"]


@PROPERTY
@given(st.lists(st.sampled_from(STRUCTURE_PIECES), max_size=60).map("".join))
def test_main_text_by_name_is_main_text_by_css(html):
    body = html.encode()
    assert main_text(body, CT) == _main_text_by_css(body)


def test_main_text_by_name_is_main_text_by_css_on_sim_pages_and_many_holders(pages):
    bodies = [body for _, body in pages]
    many = "".join(f"<h1>h{i}</h1><div class=nav>n{i}</div>" for i in range(maintext.HOLDERS_MAX + 20))
    late = "<div class=nav><h1>late heading</h1>past the holders cap</div>"  # protected only by a late h1
    bodies += [f"<div class=related><main>{many}</main></div>".encode(), f"<article>{many}</article>".encode(),
               f"<main>{many}{late}</main>".encode()]
    for body in bodies:
        assert main_text(body, CT) == _main_text_by_css(body)
    assert "late heading" not in main_text(bodies[-1], CT)


# -- parse_html hands a valid UTF-8 body to the parser as bytes ---------------------


def test_parse_html_gives_the_parser_the_body_only_when_it_is_the_texts_utf8():
    from courtly.core import links

    seen = []
    real = links._Parser

    def recording(source, **options):
        seen.append(type(source))
        return real(source, **options)

    cases = [
        (b"<p>plain ascii</p>", "text/html; charset=utf-8", bytes),
        (b"<p>plain ascii</p>", "text/html", bytes),
        (b"<p>caf\xc3\xa9</p>", "text/html", bytes),                    # valid UTF-8
        ("<p>\u65e5\U0001f642</p>".encode(), "text/html; charset=UTF8", bytes),
        (b"<p>\xed\xa0\x80 surrogate</p>", "text/html", str),           # not UTF-8: U+FFFD
        (b"\xef\xbb\xbf<p>bom</p>", "text/html", str),                   # the BOM is not text
        (b"<p>bad \xff byte</p>", "text/html", str),                     # U+FFFD
        (b"\xc1\xc2<p>", "text/html; charset=cp500", str),                # EBCDIC: ASCII text, other bytes
        (b"<p>latin</p>", "text/html; charset=iso-8859-1", str),
        ("<p>utf16</p>".encode("utf-16-le"), "text/html; charset=utf-16le", str),
        (b'<meta charset="utf-8"><p>meta</p>', "text/html", bytes),
    ]
    links._Parser = recording
    try:
        for body, content_type, kind in cases:
            seen.clear()
            parsed = links.parse_html(body, content_type)
            assert seen == [kind], (body, content_type)
            assert parsed.tree.html == real(links.decode_html(body, content_type)).html
    finally:
        links._Parser = real


def test_link_fields_and_main_text_are_the_same_when_parsed_from_the_text(pages, monkeypatch):
    from courtly.core import links

    pages = pages + [("http://a.test/caf\u00e9/", (
        '<html><head><title>Caf\u00e9 \u65e5\u672c</title></head><body><main><h1>\u00c9t\u00e9</h1>'
        '<p>Na\u00efve \u201cquotes\u201d and \U0001f642 <a href="/\u00e9t\u00e9">\u00e9t\u00e9</a>'
        '<a href="r\u00e9sum\u00e9.html" rel="nofollow">cv</a> \u0130stanbul \u03a3\u039f\u03a6\u039f\u03a3</p>'
        '<div class="nav">\u00a0menu</div></main></body></html>').encode())]
    before = [(links.link_fields(body, url, content_type=CT), main_text(body, CT)) for url, body in pages]
    assert any(not body.isascii() for _, body in pages)
    real = links._decode
    monkeypatch.setattr(links, "_decode", lambda body, content_type: (real(body, content_type)[0], False))
    after = [(links.link_fields(body, url, content_type=CT), main_text(body, CT)) for url, body in pages]
    assert after == before


def test_native_words_of_ascii_in_16_byte_blocks_are_the_regex_words():
    """The SSE2 path of the C word splitter (blocks of 16 bytes that drop no
    byte and start at most 4 words) against the regex, on texts of every
    mix: long words, one-letter words, runs of separators, bytes >= 0x80,
    capitals, at lengths around the block size."""
    import random
    import re

    from courtly.core.fingerprint import simhash64_py

    r = random.Random(16)
    pieces = [b"word", b"Longerwordsthanablock_of16", b"a", b"I", b"x1", b"\xc3\xa9t\xc3\xa9", b"\xff", b"_",
              b" ", b"  ", b", ", b".\n", b"-", b"\t", b"ABC", b"zZ09", b"~", b"@[`{"]
    for length in list(range(0, 70)) + [200, 1000, 5000]:
        for _ in range(30):
            data = b""
            while len(data) < length:
                data += r.choice(pieces)
            data = data[:length]
            expected = b" ".join(re.findall(rb"[A-Za-z0-9_\x80-\xff]+", data)).lower()
            assert speedups.words(data) == expected, data
            text = data.decode("latin-1")
            if text.isascii():
                assert simhash64(text) == simhash64_py(text), text


# -- the C code lowercases non-ASCII text itself (simhash(..., lower=True)) -------

ALL_CODE_POINTS = "".join(map(chr, range(sys.maxunicode + 1)))


def test_native_lowered_words_are_the_words_of_str_lower_for_every_code_point():
    """Every code point alone, between word characters, next to capital
    sigma and dotted capital I (which go through str.lower() itself), and in
    1-byte and 2-byte strings."""
    texts = [ALL_CODE_POINTS, "a".join(ALL_CODE_POINTS[::7]), " ".join(ALL_CODE_POINTS[::5]),
             "\u03a3".join(ALL_CODE_POINTS[::11]), "\u0130" + ALL_CODE_POINTS[::13],
             "".join(map(chr, range(0x80, 0x100))) * 3, "x\u00c9\u00e9 \u00c0B\u00ff", "\u212aelvin K\u212a",
             ALL_CODE_POINTS[:0x10000:3], "\u03a3\u03bf\u03c6\u03bf\u03a3 \u03a3 a\u03a3 \u03a3a", ""]
    for text in texts:
        assert speedups.words(text, True) == speedups.words(text.lower()), text[:40]
        assert speedups.words(text, True) == " ".join(
            __import__("re").findall(r"\w+", text.lower())).encode("utf-8", "surrogatepass")


def test_a_lowercase_never_needs_more_utf8_than_its_kind_allows():
    """Why compact_lower may write into the buffer sized for the text's kind."""
    for cp in range(sys.maxunicode + 1):
        low = chr(cp).lower()
        budget = 2 if cp < 0x100 else 3 if cp < 0x10000 else 4
        assert len(low.encode("utf-8", "surrogatepass")) <= budget * len(low), hex(cp)
        assert len(low) == 1 or cp == 0x130, hex(cp)


@PROPERTY
@given(st.text(max_size=300), st.sampled_from([1, 2, 3]))
def test_native_simhash_of_any_text_lowercases_as_python_does(text, shingle):
    from courtly.core.fingerprint import simhash64_py

    assert speedups.simhash(text, shingle, (), True) == speedups.simhash(text.lower(), shingle)
    assert simhash64(text, shingle=shingle) == simhash64_py(text, shingle=shingle)


def test_lowercasing_twice_is_lowercasing_once_for_every_code_point():
    """Why soft404.error_fingerprint may hand any text to simhash64 with the
    URL's words to leave out (its definition lowercases the words again)."""
    for cp in range(sys.maxunicode + 1):
        low = chr(cp).lower()
        assert low.lower() == low, hex(cp)
        assert "\u03a3" not in low, hex(cp)  # no capital sigma whose context could change


NON_ASCII_PIECES = ["caf\u00e9", "CAF\u00c9", "\u03a3\u039f\u03a6\u039f\u03a3", "\u03c3\u03bf\u03c6\u03cc\u03c2",
                    "\u0130stanbul", "\u212aelvin", "stra\u00dfe", "\u1e9e", "\u65e5\u672c", "\U00010400x", " ", ", ",
                    "\u2019", "\u00a0", "word", "WORD", "quick", "fox"]


@PROPERTY
@given(st.lists(st.sampled_from(NON_ASCII_PIECES), max_size=60).map("".join),
       st.sampled_from(["http://a.test/", "http://a.test/caf\u00e9/quick-fox", "http://b.test/\u03a3\u039f\u03a6\u039f\u03a3"]))
def test_error_fingerprint_of_non_ascii_text_keeps_its_definition(text, url):
    import re

    from courtly.core.fingerprint import simhash64_py

    drop = set(re.findall(r"\w+", url.lower()))
    kept = [t for t in re.findall(r"\w+", text.lower()) if t not in drop]
    assert error_fingerprint(text, url) == simhash64_py(" ".join(kept), shingle=2)
