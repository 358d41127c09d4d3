"""Tests for courtly.core.maintext: boilerplate removal for fingerprints."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.fingerprint import hamming, simhash64
from courtly.core.maintext import main_text

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None)

STORY = ("<p>The harbour master counted forty boats leaving before dawn, more than any "
         "spring in memory.</p><p>Fishermen said the warm current had brought the sardines "
         "back early this year, and prices at the market fell by a third.</p>")


def page(main: str = STORY, *, wrap: str = "main", extra: str = "") -> bytes:
    return (
        "<!doctype html><html><head><title>T</title><style>p{color:red}</style>"
        "<script>var tracking = 'x';</script></head><body>"
        '<header><a href="/">Home</a> <a href="/news">News</a></header>'
        '<nav class="top"><ul><li><a href="/a">Alpha</a></li><li><a href="/b">Beta</a></li></ul></nav>'
        f"{extra}<{wrap}>{main}</{wrap}>"
        '<aside class="sidebar">Most read: something else entirely</aside>'
        '<div class="cookie-banner">We use cookies to improve your experience on this site</div>'
        '<div id="comments"><p>First! This comment is long enough to be a paragraph here.</p></div>'
        "<footer>Copyright 2024 Example Corp. All rights reserved worldwide.</footer>"
        "<noscript>Enable JavaScript to see the comments</noscript></body></html>"
    ).encode()


def test_main_element_text_without_boilerplate():
    text = main_text(page(), "text/html; charset=utf-8")
    assert text.startswith("The harbour master counted forty boats")
    assert "sardines back early" in text
    for junk in ("Home", "Alpha", "Most read", "cookies", "First!", "Copyright", "tracking",
                 "color:red", "JavaScript"):
        assert junk not in text, junk


def test_article_is_used_when_there_is_no_main():
    text = main_text(page(wrap="article"), "text/html")
    assert text.startswith("The harbour master") and "Alpha" not in text


def test_article_header_with_the_title_is_kept():
    body = page("<header><h1>Sardines return</h1></header>" + STORY, wrap="article")
    assert main_text(body, "text/html").startswith("Sardines return The harbour master")


def test_without_main_or_article_long_blocks_are_kept_and_short_ones_dropped():
    body = page(STORY + "<p>Share this</p><ul><li>Short item</li>"
                "<li>This list item is long enough to count as real content here.</li></ul>"
                "<table><tr><td>x</td><td><p>A paragraph inside a table cell with words.</p></td></tr></table>",
                wrap="div")
    text = main_text(body, "text/html")
    lines = text.split("\n")
    assert lines[0].startswith("The harbour master")
    assert "This list item is long enough to count as real content here." in lines
    assert "A paragraph inside a table cell with words." in lines
    assert "Share this" not in text and "Short item" not in text
    assert text.count("A paragraph inside a table cell") == 1  # the cell does not repeat its paragraph


def test_a_wrapper_with_a_boilerplate_class_around_everything_is_kept():
    body = (b'<html><body><div class="page has-sidebar"><main>' + STORY.encode()
            + b'</main></div><div class="ad-slot">Buy now</div></body></html>')
    text = main_text(body, "text/html")
    assert text.startswith("The harbour master") and "Buy now" not in text


def test_boilerplate_words_match_whole_class_parts_only():
    body = (b'<html><body><div class="navigation">Skip me</div><div class="canvas-head">'
            b'<p>Canvas is not nav and this paragraph stays in the text.</p></div>'
            b'<div class="gradient"><p>Gradient is not ad and this paragraph stays too.</p></div></body></html>')
    text = main_text(body, "text/html")
    assert "Canvas is not nav" in text and "Gradient is not ad" in text and "Skip me" not in text


def test_whitespace_is_collapsed():
    body = b"<html><body><main>  a\n\n  b\t\tc  <b>d</b>e </main></body></html>"
    assert main_text(body, "text/html") == "a b c d e"


def test_charset_from_content_type_and_meta():
    latin = "<html><body><main>caf\xe9 cr\xe8me br\xfbl\xe9e</main></body></html>".encode("latin-1")
    assert main_text(latin, "text/html; charset=iso-8859-1") == "café crème brûlée"
    meta = b'<html><head><meta charset="windows-1252"></head><body><main>na\xefve</main></body></html>'
    assert main_text(meta, "text/html") == "naïve"


def test_plain_text_is_collapsed_and_other_types_have_no_text():
    assert main_text(b"one  two\nthree", "text/plain") == "one two three"
    assert main_text(b"%PDF-1.4 binary", "application/pdf") == ""
    assert main_text(b"\x89PNG\r\n", "image/png") == ""
    assert main_text(b"<html><body><main>sniffed</main></body></html>", "") == "sniffed"


def test_deeply_nested_hostile_page_falls_back_to_flat_text_quickly():
    body = b"<html><body>" + b"<div>" * 100_000 + b"<p>deep words</p>" + b"</div>" * 100_000 + b"</body></html>"
    assert main_text(body, "text/html") == "deep words"


@PROPERTY
@given(st.binary(max_size=2000), st.sampled_from(["text/html", "", "text/plain", "text/html; charset=utf-16"]))
def test_never_raises_on_garbage(body, content_type):
    assert isinstance(main_text(body, content_type), str)


@PROPERTY
@given(st.text(alphabet="<>/=\"' abcdivpmantrilhs1&;", max_size=400))
def test_never_raises_on_tag_soup(html):
    assert isinstance(main_text(html.encode(), "text/html"), str)


def test_page_chrome_changes_do_not_move_the_fingerprint():
    paragraphs = "".join(
        f"<p>Paragraph {i} tells how the river rose past the old mill and the bakers moved "
        f"their ovens uphill, one brick at a time, over the {i}th week of the flood.</p>"
        for i in range(40)
    )
    a = page(paragraphs)
    b = a.replace(b"Most read: something else entirely", b"Most read: a totally different story") \
         .replace(b'<a href="/b">Beta</a>', b'<a href="/c">Gamma</a><a href="/d">Delta</a>')
    assert hamming(simhash64(main_text(a, "text/html")), simhash64(main_text(b, "text/html"))) == 0


def test_speed_is_reported_not_asserted(capsys):
    """Prints microseconds per 30 KB page (no timing threshold: shared CI)."""
    body = page("".join(f"<p>{i} " + "lorem ipsum dolor sit amet consectetur " * 12 + "</p>"
                        f'<ul class="related"><li><a href="/x{i}">link {i}</a></li></ul>' for i in range(60)))
    assert 25_000 <= len(body) <= 45_000
    best_s = float("inf")
    for _ in range(5):  # best of 5 batches: the least disturbed by other jobs
        start = time.perf_counter()
        for _ in range(20):
            main_text(body, "text/html")
        best_s = min(best_s, (time.perf_counter() - start) / 20)
    with capsys.disabled():
        print(f"\nmain_text: {best_s * 1e6:.0f} us per {len(body) // 1000} KB page (best of 5 x 20)")
