"""Micro-benchmark: what each fast path of the extraction worker saves per page.

Times the worker's whole task (`extract_worker.process_task`, fingerprints
on, no soft-404 print) on bench-profile pages of the simulated web, rendered
in-process, first as configured, then with one fast path at a time switched
to its plain twin (the definition the tests compare it with), and prints the
CPU per page of each and the difference, in microseconds and as a share of
the task (`time.process_time`, best of `--repeat` interleaved passes each):

    python bench/fast_paths.py [--pages 300] [--repeat 5] [--non-ascii]

Also the fetcher's URL split and the CDXJ SURT key, per URL of those pages.
Pure CPU, bounded by the arguments; prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT / "src", ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import surt  # noqa: E402

from courtly.core import fingerprint, href, links, maintext, urls  # noqa: E402
from courtly.shell import extract_worker, fetcher, warc_index  # noqa: E402
from extract_steps import CT, bench_pages, best_us  # noqa: E402


class _PlainResolver(href.Resolver):
    """The resolver with its fast paths off: every reference to resolve_url."""

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.fast = False
        self.directory = None


@contextmanager
def _swapped(module: object, name: str, value: object) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


# (label, module, attribute, plain twin)
SWITCHES: list[tuple[str, object, str, object]] = [
    ("SimHash in C -> simhash64_py", fingerprint, "_simhash_native", None),
    ("anchor scan in C -> Python anchor()", links, "_link_anchors", None),
    ("href.Resolver fast paths -> resolve_url (and no C anchors)", links, "_Resolver", _PlainResolver),
    ("collapse in C -> split/join", maintext, "_collapse", maintext._collapse_py),
    ("class/id scan in C -> regex", maintext, "_attr_values", maintext._attr_values_py),
    ("'<' count in C -> str.count", links, "_count_over", links._count_over_py),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--non-ascii", action="store_true", help='pages with "\u00e9 " for every "e " (UTF-8)')
    args = ap.parse_args()
    pages = bench_pages(args.pages)
    if args.non_ascii:
        pages = [(url, body.replace(b"e ", "\u00e9 ".encode())) for url, body in pages]

    def task(p: tuple[str, bytes]) -> object:
        return extract_worker.process_task(p[1], p[0], CT, "", False, ("courtly", 5000, True))

    best_us(task, pages, 1)  # warm: caches, lazily built tables
    print(f"{len(pages)} pages; native: {'yes' if fingerprint.NATIVE else 'no'}; each row: the task as "
          "configured, then with one fast path off, back to back")
    for label, module, name, plain in SWITCHES:
        base = us = float("inf")
        for _ in range(args.repeat):  # interleaved: a busy spell hits both sides
            base = min(base, best_us(task, pages, 1))
            with _swapped(module, name, plain):
                us = min(us, best_us(task, pages, 1))
        print(f"  {label:<58} {base:>5.0f} -> {us:>5.0f} us/page: saves {us - base:>5.0f} us,"
              f" {(us - base) / base * 100:5.1f} % of the task")

    found = sorted({u for url, body in pages for u, *_ in links.link_fields(body, url, content_type=CT)[0]})
    found = [u for u in found if u.startswith("http")][:5000]
    rows: list[tuple[str, Callable[[str], object], Callable[[str], object]]] = [
        ("fetcher URL split: common spelling -> parsed", fetcher._split_url, fetcher._split_url_parsed),
        ("CDXJ SURT key: plain-URL shortcut -> surt.surt", warc_index._surt_key, surt.surt),
    ]
    for label, fast, plain in rows:
        f, p = best_us(fast, found, args.repeat), best_us(plain, found, args.repeat)
        print(f"  {label:<58} {f:>7.2f} vs {p:.2f} us/URL ({len(found)} URLs)")

    # normalize_url of every link of a page, as admission does, with urlfast's
    # common-spelling path and without it (what tests/core/test_urlfast.py switches off)
    page_links = [[u for u, *_ in links.link_fields(body, url, content_type=CT)[0]] for url, body in pages]

    def normalize_page(page: list[str]) -> None:
        for u in page:
            try:
                urls.normalize_url(u)
            except urls.UrlError:
                pass

    fast = plain = float("inf")
    for _ in range(args.repeat):
        fast = min(fast, best_us(normalize_page, page_links, 1))
        with _swapped(urls, "common_match", lambda u: None), _swapped(urls, "fast_parts", lambda u: None):
            plain = min(plain, best_us(normalize_page, page_links, 1))
    per_page = sum(map(len, page_links)) / len(page_links)
    label = "normalize_url of a page's links: urlfast -> full path"
    print(f"  {label:<58} {fast:>7.0f} vs {plain:.0f} us/page"
          f" ({per_page:.0f} links a page)")


if __name__ == "__main__":
    main()
