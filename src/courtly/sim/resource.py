"""What a simulated host's URL space hands out: the `Resource` a request
target resolves to, the `PageLinks` a page carries, and how an href is
written (relative, absolute-path, absolute or protocol-relative)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Resource", "PageLinks", "href_in_form", "relative_href"]


@dataclass(frozen=True, slots=True)
class Resource:
    """What a request target is. kind: page | extra | pdf | redirect | robots_body |
    trap | hostile | sitemap | feed | soft404 | not_found."""

    kind: str
    page: int = -1
    variant: str = ""
    status: int = 200
    location_host: str = ""  # redirect to this served host ...
    location: str = ""  # ... and this path; or, with no host, an absolute URL ({port} filled)
    tag: str | None = None


@dataclass(slots=True)
class PageLinks:
    """The link-bearing parts of a page, as written in its HTML."""

    base_href: str | None
    canonical: str
    links: list[tuple[str, str, bool]] = field(default_factory=list)  # (href, text, nofollow)
    noindex: bool = False
    nofollow: bool = False
    feeds: bool = False


def href_in_form(name: str, port: int, base_dir: str, path: str, form: str, host: str | None = None) -> str:
    """`path` on host `name` (or `host`) written as form rel, abs_path, abs or proto."""
    if host is not None and host != name:
        return f"//{host}:{port}{path}" if form == "proto" else f"http://{host}:{port}{path}"
    if form == "abs":
        return f"http://{name}:{port}{path}"
    if form == "proto":
        return f"//{name}:{port}{path}"
    if form == "rel":
        return relative_href(base_dir, path)
    return path


def relative_href(base_dir: str, target: str) -> str:
    """The relative reference that resolves to absolute path `target` from `base_dir`."""
    path, sep, query = target.partition("?")
    cut = path.rfind("/") + 1
    tdir, name = path[:cut], path[cut:]
    if tdir == base_dir:
        out = name
    elif tdir.startswith(base_dir):
        out = tdir[len(base_dir):] + name
    else:
        a, b = base_dir.strip("/").split("/"), tdir.strip("/").split("/")
        a = [] if a == [""] else a
        b = [] if b == [""] else b
        common = 0
        while common < min(len(a), len(b)) and a[common] == b[common]:
            common += 1
        out = "../" * (len(a) - common) + "".join(x + "/" for x in b[common:]) + name
    if not out:
        out = "./"
    return out + (sep + query if sep else "")
