"""Hrefs of a page: cleaned as a URL parser reads them, resolved against its base.

`clean_href` trims what browsers trim (C0 controls and space at the ends, tab
and newlines anywhere) and drops what is not crawlable (empty, fragment-only,
javascript:, mailto:, tel:, data:). `Resolver(base)` resolves references
against one base URL: RFC 3986 by `courtly.core.urls.resolve_url`, behind
fast paths for the common forms (see its docstring). `refresh_target` reads
the URL of a ``<meta http-equiv=refresh>``. Pure; used by
`courtly.core.links`, which owns the page-level rules. The compiled
`courtly.core._speedups.link_anchors` takes the common anchors the same way
(the tests compare it with this module).
"""

from __future__ import annotations

import re

from courtly.core.urls import UrlError, resolve_url

__all__ = ["C0_SPACE", "SCHEMES_SKIPPED", "Resolver", "clean_href", "refresh_target"]

C0_SPACE = "".join(chr(c) for c in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
SCHEMES_SKIPPED = frozenset({"javascript", "mailto", "tel", "data"})
_REFRESH = re.compile(r"\s*[0-9.]+\s*[;,]?\s*(?:url\s*=\s*)?(.*)", re.I | re.S)


def clean_href(href: str | None) -> str | None:
    """The href as a URL parser sees it, or None when it is not crawlable."""
    if not href:
        return None
    href = href.strip(C0_SPACE)
    if "\t" in href or "\n" in href or "\r" in href:
        href = href.translate(_TAB_NEWLINE)
    if not href or href[0] == "#":
        return None
    match = _SCHEME.match(href)
    if match and match.group(1).lower() in SCHEMES_SKIPPED:
        return None
    return href


_REFERENCE = re.compile(  # RFC 3986 appendix B, with a strict scheme
    r"(?:([A-Za-z][A-Za-z0-9+.-]*):)?(//[^/?#]*)?([^?#]*)(\?[^#]*)?(#.*)?", re.S
)
_COLON_FIRST = re.compile(r"[^/?#]*:")  # a colon in the first segment
_C0_OR_SPACE = re.compile(r"[\x00-\x20]")
_SLASH_RUNS = ("http:///", "https:///")  # the host comes after the whole run: not for the fast paths


class Resolver:
    """Resolves references against one base URL: RFC 3986 section 5.2 by
    `courtly.core.urls.resolve_url`, behind fast paths for the common forms.

    The fast paths join absolute http(s), scheme-relative, root-relative and
    plain relative-path references (``g``, ``../g``: leading ``../`` and no
    other dot segment, no colon) without backslashes directly; the rest go
    to resolve_url. Why: resolve_url alone cost a page of links more than
    the rest of `extract_links` (figures: docs/performance.md, "Figures moved
    out of the code"). The fast paths resolve as resolve_url does:
    test_links_resolve.py::test_the_fast_paths_resolve_as_the_rfc_path_does.

    Browser readings kept on the way in (RFC-allowed or WHATWG behaviour):
    ``http:g`` against an http base is relative (RFC 3986 5.4.2, "for
    backward compatibility"; resolve_url is strict), a backslash before the
    query is a slash, and a first segment with a colon that is no valid
    scheme (``1a:b``) is a relative path. Against an http(s) base the
    slashes of a reference read as the WHATWG parser reads them (see
    `_special_reference`): ``https:x.test`` from an http page,
    ``http:///x.test`` and ``///x.test`` lead to the host x.test, as a
    browser follows them, where RFC 3986 reads a URL without a host. Unlike
    urllib's urljoin, empty segments (``a//b``) are kept. None for every
    reference when the page URL is not absolute (resolve_url refuses such a
    base).

    The relative-path fast path
    (test_links_resolve.py::test_relative_paths_take_the_fast_path_and_resolve_as_rfc3986_says)
    needs a base whose path has no dot segment and no
    character resolve_url would trim or drop (C0, space): then the merge of
    RFC 3986 5.2.3 is the base's directory, less one segment per ``../``.
    """

    def __init__(self, base: str) -> None:
        match = _REFERENCE.fullmatch(base)
        assert match is not None  # every group is optional
        self.base = base
        self.scheme, self.authority = match.group(1, 2)
        http = self.scheme is not None and self.scheme.lower() in ("http", "https")
        self.http_scheme = self.scheme.lower() if http else None
        self.fast = http and bool(self.authority) and "\\" not in base
        if self.scheme is not None and self.authority is not None:
            self.origin = f"{self.scheme}:{self.authority}"
        path = match.group(3)
        self.directory: str | None = None   # the base's path up to its last "/", for the fast path
        if self.fast and "/." not in path and not _C0_OR_SPACE.search(base):
            self.directory = path[: path.rfind("/") + 1] or "/"

    def __call__(self, ref: str) -> str | None:
        if self.fast and "\\" not in ref:
            if "/." not in ref:
                # a run of three slashes or more leads to the host: `_resolve`
                if ref.startswith(("http://", "https://")):
                    if not ref.startswith(_SLASH_RUNS):
                        return ref
                elif ref.startswith("//"):
                    if ref[2:3] != "/":
                        return f"{self.scheme}:{ref}"
                elif ref.startswith("/"):
                    return self.origin + ref
            if self.directory is not None and ":" not in ref and ref[:1] not in "/?#":
                return self._relative(ref, self.directory)
        return self._resolve(ref)

    def _relative(self, ref: str, directory: str) -> str | None:
        """A relative-path reference without colon or backslash: the base's
        directory, one segment up per leading "../" (never above the root),
        when no other dot segment follows."""
        rest = ref
        while rest.startswith("../"):
            rest = rest[3:]
            if len(directory) > 1:
                directory = directory[: directory.rindex("/", 0, -1) + 1]
        if rest.startswith(".") or "/." in rest:  # ".", "..", "./g", ".g", "g/../h": resolve_url
            return self._resolve(ref)
        return self.origin + directory + rest

    def _resolve(self, ref: str) -> str | None:
        if "\\" in ref:
            head, sep, tail = ref.partition("?")
            ref = head.replace("\\", "/") + sep + tail
        match = _REFERENCE.fullmatch(ref)
        assert match is not None  # every group is optional
        scheme = match.group(1)
        if self.http_scheme is not None and (scheme is None or scheme.lower() in ("http", "https")):
            ref, scheme = _special_reference(ref, scheme, self.http_scheme)
        if scheme is None and _COLON_FIRST.match(ref):
            ref = "./" + ref  # not a scheme: keep it a relative path for resolve_url
        try:
            return resolve_url(self.base, ref)
        except UrlError:  # the page URL itself was not absolute
            return None


def _special_reference(ref: str, scheme: str | None, base_scheme: str) -> tuple[str, str | None]:
    """`ref` (backslashes read as slashes already) rewritten so that RFC 3986
    resolution against an http(s) base of scheme `base_scheme` gives what
    the WHATWG URL parser gives, and the scheme it then has (`scheme` is
    its scheme as written, None or http(s) in any case).

    The WHATWG parser reads any run of slashes as one "//" before the host
    (its "special authority ignore slashes state"): after two or more
    slashes, and after ``http:``/``https:`` when that is not the base's
    scheme. So ``///x.test/p`` and ``http:///x.test/p`` are x.test's /p,
    and ``https:x.test`` or ``https:/x.test`` from an http page is
    https://x.test/; RFC 3986 reads each as a URL with no host (which
    `normalize_url` refuses), so these links were lost. With the base's own
    scheme and fewer than two slashes it is relative: ``http:g``,
    ``http:/g``. Pages write such links by mistake; browsers follow them.
    """
    rest = ref if scheme is None else ref[len(scheme) + 1 :]
    slashes = len(rest) - len(rest.lstrip("/"))
    if scheme is None:
        return ("//" + rest[slashes:] if slashes > 2 else ref), None
    if slashes < 2 and scheme.lower() == base_scheme:
        return rest, None
    return (ref if slashes == 2 else f"{scheme}://{rest[slashes:]}"), scheme


def refresh_target(content: str | None) -> str | None:
    """The URL in `<meta http-equiv=refresh content="5; url=...">`, if any."""
    match = _REFRESH.match(content or "")
    if not match:
        return None
    target = match.group(1).strip(C0_SPACE)
    if target[:1] in ("'", '"'):
        target = target[1:].split(target[0], 1)[0]
    return target or None
