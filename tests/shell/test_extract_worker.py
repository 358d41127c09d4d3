"""The extraction worker's per-page task, in-process (no pool, no sockets):
one shared decode and Lexbor parse gives exactly what `extract_links` and
`main_text` give when each parses the page itself."""

from __future__ import annotations

import pytest

from courtly.core import links as links_module
from courtly.core import maintext
from courtly.core.fingerprint import simhash64
from courtly.core.links import DEPTH_MAX, TAGS_FAST_MAX, extract_links, is_html, parse_html
from courtly.core.maintext import main_text
from courtly.core.soft404 import error_fingerprint
from courtly.shell import extract_worker
from courtly.shell.extract_worker import decode_page, encode_page, process_task
from courtly.sim.hostile import plan
from courtly.sim.model import SimWeb
from courtly.sim.page import render_page, render_soft404
from courtly.sim.webconfig import profile_config

OPTIONS = ("courtly", 5000, True)
HTML = "text/html; charset=utf-8"


def separately(body: bytes, url: str, content_type: str, x_robots_tag: str = "", error_print: bool = True):
    """What the worker answered before the parse was shared: each parses alone."""
    page = extract_links(body, url, content_type=content_type, x_robots_tag=x_robots_tag)
    if not is_html(body, content_type):
        return encode_page(page)
    text = main_text(body, content_type)
    prints = (simhash64(text), error_fingerprint(text, url) if error_print else None)
    return encode_page(page)[:-1] + (prints,)


def corpus() -> list[tuple[str, bytes, str]]:
    web = SimWeb(profile_config("hostile", seed=5))
    out = []
    for name in list(web.manifest(8080, 1_700_000_000.0)["hosts"])[:25]:
        lay = web.layout(name)
        for path in lay.page_paths()[:8]:
            res = lay.resolve(path)
            if res.kind == "page":
                out.append((f"http://{name}:8080{path}", render_page(lay, res.page, res.variant, 0, 8080), HTML))
        out.append((f"http://{name}:8080/missing.html", render_soft404(lay, "/missing.html"), HTML))
    for name in ("deep-nesting", "bad-utf8", "bad-charset", "drip", "huge-headers"):
        p = plan(name)
        out.append((f"http://h.test/hostile/{name}", p.body, dict(p.headers)["Content-Type"]))
    deep = "<div>" * (max(DEPTH_MAX, TAGS_FAST_MAX) + 1) + "<title>T</title><a href=/x><p>" + "word " * 50
    out += [
        ("http://a.test/deep", deep.encode(), "text/html"),
        ("http://a.test/plain", b"just some plain text words here", "text/plain"),
        ("http://a.test/untyped", b"<!doctype html><main><p>sniffed page with words</p><a href=/y>y</a></main>", ""),
        ("http://a.test/latin", "<meta charset=latin-1><main><p>café naïve Œuvre</p></main>".encode("cp1252"),
         "text/html"),
        ("http://a.test/empty", b"", "text/html"),
        ("http://a.test/garbage", bytes(range(256)) * 20, "text/html"),
    ]
    return out


def test_the_shared_parse_gives_what_separate_parses_give():
    pages = corpus()
    assert len(pages) > 100
    for url, body, content_type in pages:
        for error_print in (True, False):
            assert process_task(body, url, content_type, "", error_print, OPTIONS) == \
                separately(body, url, content_type, "", error_print), url


def test_the_worker_parses_each_page_once(monkeypatch):
    calls = []
    real = links_module._Parser

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(links_module, "_Parser", counting)
    monkeypatch.setattr(maintext, "_Parser", counting)
    url, body, content_type = corpus()[0]
    process_task(body, url, content_type, "", True, OPTIONS)
    assert len(calls) == 1
    calls.clear()
    separately(body, url, content_type)
    assert len(calls) == 2


def test_without_fingerprints_there_are_no_prints_and_links_are_the_same():
    url, body, content_type = corpus()[0]
    reply = process_task(body, url, content_type, "noindex", True, ("courtly", 5000, False))
    assert decode_page(reply).prints is None
    assert decode_page(reply) == extract_links(body, url, content_type=content_type, x_robots_tag="noindex")


def test_a_body_over_the_main_text_cap_is_not_shared(monkeypatch):
    """main_text reads BODY_BYTES_MAX bytes; a parse of the whole body is not its text."""
    monkeypatch.setattr(maintext, "BODY_BYTES_MAX", 200)
    body = b"<html><body><main><p>" + b"early words " * 20 + b"</p><p>" + b"later words " * 50 + b"</p></main>"
    parsed = parse_html(body, "text/html")
    assert main_text(body, "text/html", parsed=parsed) == main_text(body, "text/html")
    assert "later" in parsed.text and "later" not in main_text(body, "text/html", parsed=parsed)


def test_a_failing_shared_parse_falls_back_to_separate_parses(monkeypatch):
    url, body, content_type = corpus()[0]
    expected = process_task(body, url, content_type, "", True, OPTIONS)

    def broken(body, content_type=""):
        raise ValueError("no parse")

    monkeypatch.setattr(extract_worker, "parse_html", broken)
    assert process_task(body, url, content_type, "", True, OPTIONS) == expected


@pytest.mark.parametrize("content_type", ["image/png", "application/pdf"])
def test_non_html_gets_no_prints(content_type):
    reply = process_task(b"<html><a href=/x>x</a></html>", "http://a.test/", content_type, "", True, OPTIONS)
    assert decode_page(reply).prints is None and decode_page(reply).links == ()


HEAP_PROBE = """
import ctypes, sys
from courtly.shell import extract_worker

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "tuned":
    extract_worker._keep_freed_heap()
blocks = [bytes(100_000) for _ in range(80)]   # 8 MB in heap blocks (under both mmap thresholds)
del blocks
print(libc.mallinfo2().arena)
"""


def test_the_worker_keeps_freed_heap_instead_of_returning_it_each_page():
    """After 8 MB are freed, the tuned heap still holds them (the next page
    reuses them); glibc's default trims the heap back (page faults later)."""
    import ctypes
    import subprocess
    import sys

    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("needs glibc >= 2.33 (mallinfo2)")
    arena = {}
    for mode in ("tuned", "default"):
        out = subprocess.run([sys.executable, "-c", HEAP_PROBE, mode], capture_output=True, text=True, check=True)
        arena[mode] = int(out.stdout)
    assert arena["tuned"] >= 8_000_000 > arena["default"]
