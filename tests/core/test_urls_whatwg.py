"""courtly against the WHATWG URL Standard, on the http(s) cases of
web-platform-tests url/resources/urltestdata.json (BSD-3-Clause; a subset,
in tests/data/whatwg_urls.json, which names its source).

Each input is taken as a link on a page at its base: `clean_href`, the
page's `Resolver`, then `normalize_url` (with base about:blank, an absolute
input goes to `normalize_url` alone). What must come out is WHATWG's href
adjusted only by courtly's documented normalisations (userinfo, fragment,
empty query and default port dropped, escapes and query order
canonicalised, ...: `normalize_url(href)`), and a refusal where the WHATWG
parser fails: a bogus URL must never reach the frontier. A case where
courtly differs on purpose carries its reason (a key of the file's
"reasons", which say why the difference cannot hurt a crawl) and
courtly's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from courtly.core.href import Resolver, clean_href
from courtly.core.target import target_allowed
from courtly.core.urls import UrlError, normalize_url

DATA = json.loads((Path(__file__).parent.parent / "data" / "whatwg_urls.json").read_text("utf-8"))
CASES = DATA["cases"]


def _as_link(ref: str, base: str) -> str | None:
    """What courtly crawls for `ref` on a page at `base`: the normalised URL,
    None when refused, "skip" when it is not a link at all."""
    try:
        if base == "about:blank":
            return normalize_url(ref)
        href = clean_href(ref)
        if href is None:
            return "skip"
        target = Resolver(base)(href)
        return normalize_url(target) if target is not None else None
    except UrlError:
        return None


def _adjusted(href: str | None) -> str | None:
    """WHATWG's href with courtly's normalisations; None for a failure."""
    if href is None:
        return None
    try:
        return normalize_url(href)
    except UrlError:
        return None


@pytest.mark.parametrize("case", CASES, ids=[f"{i}:{c['input'][:40]!r}@{c['base']}" for i, c in enumerate(CASES)])
def test_whatwg_case(case: dict) -> None:
    got = _as_link(case["input"], case["base"])
    assert got == case["courtly"]
    if "why" in case:
        assert case["why"] in DATA["reasons"]
    else:
        assert got == _adjusted(case["href"])


def test_every_whatwg_failure_is_refused_and_the_deviations_are_few() -> None:
    failures = [c for c in CASES if c["href"] is None]
    assert len(failures) > 150 and all(c["courtly"] is None and "why" not in c for c in failures)
    assert len(CASES) > 400 and sum("why" in c for c in CASES) < 30


# WHATWG reads these hosts as IPv4 addresses; so must courtly, to the dotted
# quad the network policy judges (an odd spelling must not slip past it).
IPV4_SPELLINGS = [
    ("http://0x7f.1/", "127.0.0.1"), ("http://0X7F.0x1/", "127.0.0.1"), ("http://0177.1/", "127.0.0.1"),
    ("http://017700000001/", "127.0.0.1"), ("http://2130706433/", "127.0.0.1"), ("http://0x7f000001./", "127.0.0.1"),
    ("http://127.1./", "127.0.0.1"), ("http://127.0.0.1%2e/", "127.0.0.1"), ("http://127%2e0%2e0%2e1/", "127.0.0.1"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "127.0.0.1"), ("http://127.0.0.1\u3002/", "127.0.0.1"),
    ("http://00000000000000000000000000177.0.0.1/", "127.0.0.1"), ("http://0x0000000000000000007f.1/", "127.0.0.1"),
    ("http://0/", "0.0.0.0"), ("http://0x/", "0.0.0.0"), ("http://10.1/", "10.0.0.1"),
    ("http://0251.0376.0251.0376/", "169.254.169.254"), ("http://0xa9fea9fe/", "169.254.169.254"),
    ("http://2852039166/", "169.254.169.254"), ("http://3232235777/", "192.168.1.1"), ("http://192.168.1/", "192.168.0.1"),
    ("http://[::127.0.0.1]/", "[::7f00:1]"), ("http://[::FFFF:127.0.0.1]/", "[::ffff:7f00:1]"),
    ("http://[0:0:0:0:0:ffff:7f00:1]/", "[::ffff:7f00:1]"),
]


@pytest.mark.parametrize(("url", "host"), IPV4_SPELLINGS)
def test_odd_ip_spellings_canonicalise_for_the_network_policy(url: str, host: str) -> None:
    assert normalize_url(url) == f"http://{host}/"
    assert not target_allowed(url, lambda name: ["93.184.216.34"])
