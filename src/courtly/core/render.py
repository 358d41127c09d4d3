"""The values a render exchanges between the browser (shell/render.py) and the
crawl's rules (runtime/render.py): a subrequest the page makes, the answer it
gets, and what a render produced. Plain frozen values; no behaviour but
`is_media`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Awaitable, Callable, Mapping

__all__ = ["RenderOutcome", "SubRequest", "SubResponse", "SubrequestGate", "Rendered", "is_media"]

_MEDIA = frozenset({"image", "font", "media"})


class RenderOutcome(StrEnum):
    RENDERED = "rendered"
    DEADLINE = "deadline"          # the page did not finish within the deadline: no DOM
    NAVIGATION = "navigation"      # the page's own load did not end within navigation_s
    CRASHED = "crashed"            # the page or the browser died
    HUNG = "hung"                  # the browser stopped answering (it is restarted)
    FAILED = "failed"              # anything else the browser reported
    UNAVAILABLE = "unavailable"    # the browser did not start (tried again after a pause)


@dataclass(frozen=True, slots=True)
class SubRequest:
    url: str
    method: str
    resource_type: str             # the browser's: document, script, fetch, xhr, image, ...
    headers: Mapping[str, str]
    page_url: str
    deadline_at: float = float("inf")   # the render's end (the browser's clock): a later turn is no turn


@dataclass(frozen=True, slots=True)
class SubResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes                    # decoded (no content coding)


# The caller's rules: an answer to fulfill into the page, or a refusal reason (aborted).
SubrequestGate = Callable[[SubRequest], Awaitable["SubResponse | str"]]


@dataclass(frozen=True, slots=True)
class Rendered:
    url: str
    outcome: RenderOutcome
    dom: bytes = b""               # the serialised DOM, UTF-8
    elapsed_s: float = 0.0
    detail: str = ""
    subrequests: int = 0           # handed to the gate
    refused: tuple[str, ...] = field(default_factory=tuple)   # one reason per refused request


def is_media(resource_type: str) -> bool:
    """Images, fonts and media: refused unless the crawl renders with images."""
    return resource_type in _MEDIA
