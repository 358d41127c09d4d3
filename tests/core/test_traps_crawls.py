"""Whole crawls of one host through courtly.core.traps, the way the runtime
drives the guard: a legitimate deep host is never flagged, and the simulated
web's traps are flagged and fenced off after a few dozen trap fetches."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

import pytest

from courtly.core.traps import TrapConfig, TrapGuard
from courtly.core.urls import NormalizeRules, UrlError, normalize_url, resolve_url

NOW = 1_700_000_000.0  # 2023-11-14: dates after 2024 are "future"


def guard(**config) -> TrapGuard:
    return TrapGuard(TrapConfig(**config), random.Random(1))


# ---------------------------------------------------------------- a legitimate deep host


def news_site(path: str) -> list[str]:
    """Links of a big, honest news site: 4,000 articles under /article/<n>,
    2,000 dated stories, a 300-page paginated archive, tags with ?page=,
    a search page with a few parameters."""
    r = random.Random(path)
    words = ["river", "stone", "garden", "market", "silver", "orchard", "harbor", "meadow"]

    def story(n: int) -> str:
        year, month, day = 2005 + n % 19, 1 + n % 12, 1 + n % 28
        return f"/news/{year}/{month:02d}/{day:02d}/story-{n}.html"

    links = ["/", "/archive/page/1", f"/tag/{r.choice(words)}/"]
    if path == "/":
        links += [f"/article/{n}" for n in range(40)] + [story(n) for n in range(20)]
        links += [f"/archive/page/{m}" for m in range(2, 12)]
    elif path.startswith("/archive/page/"):
        m = int(path.rstrip("/").rsplit("/", 1)[1])
        near = [m + d for d in range(-10, 11)] + [10 * k for k in range(1, 31)]
        links += [f"/archive/page/{p}" for p in near if 1 <= p <= 300]
        links += [f"/article/{n}" for n in range(m * 13, m * 13 + 13) if n < 4000]
        links += [story(n) for n in range(m * 7, m * 7 + 7) if n < 2000]
    elif path.startswith("/tag/"):
        links += [f"{path.split('?')[0]}?page={p}" for p in range(1, 30)]
        links += [f"/article/{r.randrange(4000)}" for _ in range(10)]
        links += [f"/search?q={r.choice(words)}&page={p}&sort=date" for p in range(1, 3)]
    else:
        links += [f"/article/{r.randrange(4000)}" for _ in range(8)]
        links += [story(r.randrange(2000)) for _ in range(4)]
        links += [f"/news/{2005 + r.randrange(19)}/{1 + r.randrange(12):02d}/"]
    return links


def crawl(g: TrapGuard, key: str, start: str, links_of: Callable[[str], list[str]], fetches: int,
          is_trap: Callable[[str], bool] = lambda p: False, near_dup: Callable[[str], bool] = lambda p: False,
          rules: NormalizeRules | None = None) -> dict[str, object]:
    """Breadth-first crawl of one host through the guard, the way the runtime
    will drive it: check_queued before a fetch, note_fetch after it,
    check_new_url for each new normalised link."""
    base = f"http://{key}"
    queue = deque([(base + start, 0)])
    seen = {base + start}
    out: dict[str, object] = {"fetches": 0, "trap_fetches": 0, "flagged_at": None, "denied": {}}
    denied: dict[str, int] = out["denied"]  # type: ignore[assignment]
    while queue and out["fetches"] < fetches:  # type: ignore[operator]
        url, depth = queue.popleft()
        now = NOW + out["fetches"]  # type: ignore[operator]
        if not g.check_queued(key, url, now).allowed:
            continue
        path = url[len(base):]
        out["fetches"] += 1  # type: ignore[operator]
        out["trap_fetches"] += is_trap(path)  # type: ignore[operator]
        g.note_fetch(key, url, near_dup(path), now)
        for href in links_of(path):
            try:
                link = normalize_url(resolve_url(url, href), rules or NormalizeRules())
            except UrlError:
                continue
            if not link.startswith(base + "/") or link in seen:
                continue
            seen.add(link)
            verdict = g.check_new_url(key, link, depth + 1, now)
            if verdict.allowed:
                queue.append((link, depth + 1))
            else:
                denied[verdict.rule] = denied.get(verdict.rule, 0) + 1
        if out["flagged_at"] is None and g.suspects():
            out["flagged_at"] = (out["fetches"], out["trap_fetches"])
    return out


def test_legitimate_deep_host_is_never_flagged():
    g = guard()
    result = crawl(g, "news.test", "/", news_site, 6000,
                   near_dup=lambda p: random.Random(p).random() < 0.1)  # print views and the like
    assert result["fetches"] == 6000
    assert g.suspects() == []
    assert result["denied"] == {}
    host = g._hosts["news.test"]
    assert host.templates["/article/{n}"].urls > 1000  # the cardinality signal alone is not enough
    assert host.templates["/archive/page/{n}"].urls == 300


# ---------------------------------------------------------------- the simulated web's traps


SIM_TRAPS = ["trap_calendar", "trap_session", "trap_filters", "trap_repeat", "trap_deep"]
RAW_RULES = NormalizeRules(strip_params=frozenset(), strip_path_params=frozenset())


def sim_host(trap: str, pages_per_host: int):  # type: ignore[no-untyped-def]
    from courtly.sim.model import SimWeb
    from courtly.sim.webconfig import profile_config

    web = SimWeb(profile_config("hostile", pages_per_host=pages_per_host))
    spec = next(s for s in web.hosts if s.has(trap))
    lay = web.layout(spec.name)

    def links_of(path: str) -> list[str]:
        res = lay.resolve(path)
        if res.kind == "page":
            page = lay.links(res.page, res.variant, 80)
            base = page.base_href
            hrefs = [h for h, _, nofollow in page.links if not nofollow]
            # links are resolved against the page URL by crawl(); honour <base href> here
            return [resolve_url(base, h) if base else h for h in hrefs]
        if res.kind == "trap":
            p, _, q = path.partition("?")
            return lay.trap_links(p, q)
        return []

    return spec.name, links_of, lambda path: lay.resolve(path).kind == "trap"


@pytest.mark.parametrize("pages_per_host", [20, 200])
@pytest.mark.parametrize("trap", SIM_TRAPS)
@pytest.mark.parametrize("rules", [None, RAW_RULES], ids=["normalised", "raw-params"])
def test_sim_traps_are_flagged_and_fenced_within_a_few_dozen_trap_fetches(trap, pages_per_host, rules):
    name, links_of, is_trap = sim_host(trap, pages_per_host)
    g = guard()
    result = crawl(g, name, "/", links_of, 3000, is_trap=is_trap, rules=rules)
    # the simulated session trap uses s=<32 hex>, a name URL normalisation cannot
    # know, so with or without normalisation only the guard can stop it
    assert result["flagged_at"] is not None
    host_fetches, trap_fetches = result["flagged_at"]  # type: ignore[misc]
    assert trap_fetches <= 60, result
    if pages_per_host == 20:  # a small host: the trap is most of what there is to fetch
        assert host_fetches <= 500, result
    assert result["trap_fetches"] <= 60, result  # fenced: the trap stops costing fetches
    assert result["fetches"] < 3000  # the crawl of the host ends
