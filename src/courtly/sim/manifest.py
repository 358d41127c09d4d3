"""What the simulated web contains, for tests and humans: the manifest and
the set of reachable allowed pages.

`build_manifest(web, port, started_at)` lists every host with its IP,
registered domain, robots variant, crawl-delay, behaviours, and the paths
that show each behaviour (trap entries, hostile bodies, duplicates and what
they copy, redirect chains and loops, SSRF bait links, meta-robots pages,
robots redirect hops, sitemaps, feeds, a legit_deep host's indexes and
article range). The model is the authority: a test
rebuilds it with `web_from_manifest` and asks it directly.

`reachable_pages` walks the link graph the way a polite crawler should:
from the seeds, following hrefs resolved against `<base href>` or the page
URL, skipping rel=nofollow links and the links of meta-nofollow pages,
never leaving the served hosts (so never touching SSRF bait), obeying
robots.txt for `courtly` (unreachable robots = nothing), following at most
`max_redirects` redirect hops. It returns the HTML pages that answer 200
(articles, section indexes, home pages, duplicates); optional resources
(print views, PDFs, soft-404s, traps, hostile bodies, feeds) are not in it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable
from urllib.parse import urljoin, urlsplit

from courtly.sim.layout import NEAR_VARIANTS, TRAP_ENTRIES, bait_redirects, bait_urls
from courtly.sim.model import BAIT_IP, SimWeb
from courtly.sim.robotsfile import robots_hops
from courtly.sim.webconfig import BEHAVIOURS, HOSTILE_BODIES, ROBOTS_VARIANTS, SimWebConfig

__all__ = ["build_manifest", "reachable_pages", "web_from_manifest", "SCHEMA"]

SCHEMA = "courtly.simweb.manifest/1"
_VISITS_MAX = 20_000_000


def web_from_manifest(manifest: dict[str, Any]) -> SimWeb:
    """Rebuild the model a manifest was written from (same seed => same web)."""
    if manifest.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} manifest")
    return SimWeb(SimWebConfig.from_dict(manifest["config"]))


def _split(url: str) -> tuple[str, int | None, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname.lower(), port, target


def _join(base: str, base_host: str, base_port: int, href: str) -> tuple[str, int | None, str] | None:
    """urljoin + split, with fast paths for the common href shapes (the same
    answers by test_simweb_model.py::test_reachability_fast_href_join_agrees_with_urljoin)."""
    if href.startswith("//"):
        href = "http:" + href
    if href.startswith("http://") and "[" not in href and "@" not in href:
        rest = href[7:].split("#", 1)[0]
        hostport, slash, tail = rest.partition("/")
        host, _, port_text = hostport.partition(":")
        target = "/" + tail
        if "/." not in target and port_text.isdigit():
            return host.lower(), int(port_text), target
    elif href.startswith("/") and "/." not in href and "#" not in href:
        return base_host, base_port, href
    return _split(urljoin(base, href))


def reachable_pages(web: SimWeb, seeds: Iterable[str], *, hosts: Iterable[str] | None = None,
                    max_redirects: int = 5, follow_nofollow: bool = False) -> set[str]:
    """URLs (http://host:port/path) of the pages a polite crawl from `seeds` should fetch."""
    queue: deque[tuple[str, str, int]] = deque()
    port: int | None = None
    for seed in seeds:
        parts = _split(seed)
        if parts is None:
            continue
        host, p, target = parts
        port = p if port is None else port
        queue.append((host, target, 0))
    if port is None:
        return set()
    only = set(hosts) if hosts is not None else None
    seen: set[tuple[str, str]] = set()
    pages: set[str] = set()
    visits = 0
    while queue and visits < _VISITS_MAX:
        host, target, hops = queue.popleft()
        if (host, target) in seen:
            continue
        seen.add((host, target))
        visits += 1
        if host not in web.by_name or (only is not None and host not in only):
            continue
        if not web.allowed(host, target):
            continue
        lay = web.layout(host)
        res = lay.resolve(target)
        if res.kind == "redirect":
            if hops >= max_redirects or not res.location_host:
                continue
            seen.discard((host, target))  # reachable again via a shorter chain
            queue.append((res.location_host, res.location, hops + 1))
            continue
        if res.kind != "page":
            continue
        url = f"http://{host}:{port}{target}"
        pages.add(url)
        links = lay.links(res.page, res.variant, port)
        if links.nofollow:
            continue
        base = links.base_href or url
        base_parts = _split(base)
        assert base_parts is not None and base_parts[1] is not None
        for href, _text, nofollow in links.links:
            if nofollow and not follow_nofollow:
                continue
            parts = _join(base, base_parts[0], base_parts[1], href)
            if parts is None or parts[1] != port:
                continue
            if (parts[0], parts[2]) not in seen:
                queue.append((parts[0], parts[2], 0))
    return pages


def _host_paths(web: SimWeb, name: str, port: int) -> dict[str, Any]:
    spec = web.by_name[name]
    lay = web.layout(name)
    out: dict[str, Any] = {}
    trap = lay.trap()
    if trap:
        out["trap_entry"] = TRAP_ENTRIES[trap]
    if spec.has("hostile_bodies"):
        out["hostile"] = {f"/hostile/{n}": d for n, d in HOSTILE_BODIES.items()}
    if lay.dup_sources:
        dups = []
        for k in lay.dup_sources:
            dups.append({"path": f"/dup/{k}.html", "of": lay.path_of(k), "kind": "exact"})
            for v in NEAR_VARIANTS:
                dups.append({"path": f"/near/{k}-{v}.html", "of": lay.path_of(k), "kind": "near", "differs_by": v})
            dups.append({"path": f"/related/{k}.html", "of": lay.path_of(k), "kind": "related"})
        out["duplicates"] = dups
    if spec.has("redirects"):
        chains = []
        for c in range(1, 7):
            start = lay.hop_host(spec, c, 0)
            chains.append({"start": f"http://{start}:{port}/go/{spec.index}/{c}/0", "hops": c,
                           "cross_host": c % 2 == 0,
                           "final": f"http://{name}:{port}{lay.path_of(lay.articles[(c * 7) % len(lay.articles)])}"})
        out["redirect_chains"] = chains
        out["redirect_loop"] = [f"/loop/{spec.index}/0", f"/loop/{spec.index}/1"]
    if spec.has("ssrf_bait"):
        out["ssrf_bait_links"] = bait_urls(port)
        out["ssrf_bait_redirects"] = {f"/bait/{i}": u for i, u in enumerate(bait_redirects(port))}
    if spec.has("meta_robots"):
        out["meta_noindex"] = [lay.path_of(k) for k in lay.articles if lay.meta(k)[0]]
        out["meta_nofollow"] = [lay.path_of(k) for k in lay.articles if lay.meta(k)[1]]
        out["nofollow_orphans"] = [f"/{lay.section_of(k)}/orphan-{k}.html" for k in lay.articles if lay.meta(k)[1]]
    hops = robots_hops(web, spec)
    if hops:
        out["robots_redirect_hops"] = [f"http://{h}:{port}{p}" for h, p in hops]
    if spec.has("sitemaps"):
        out["sitemaps"] = ["/sitemap.xml", "/sitemap-0.xml", "/sitemap-1.xml.gz"]
    if spec.has("feeds"):
        out["feeds"] = ["/feed.rss", "/feed.atom"]
    if lay.deep is not None:
        out["legit_deep"] = _deep_paths(lay)
    return out


def _deep_paths(lay: Any) -> dict[str, Any]:
    """Every index page of a legit_deep host, and its articles as a range."""
    d = lay.deep
    ids = lambda first, n: [lay.path_of(first + i) for i in range(n)]  # noqa: E731
    return {
        "categories": ids(1, len(lay.sections)),
        "years": ids(d.first_year, d.first_month - d.first_year),
        "months": ids(d.first_month, d.first_archive - d.first_month),
        "archive": ids(d.first_archive, d.archive_pages),
        "articles": {"count": d.n, "pattern": "/YYYY/MM/DD/<slug>-<id>.html",
                     "ids": [d.first_article, d.first_article + d.n - 1],
                     "oldest": lay.path_of(d.first_article), "newest": lay.path_of(d.first_article + d.n - 1)},
        "pages": lay.n_pages,
    }


def build_manifest(web: SimWeb, port: int, started_at: float) -> dict[str, Any]:
    hosts: dict[str, Any] = {}
    by_behaviour: dict[str, list[str]] = {b: [] for b in BEHAVIOURS}
    by_robots: dict[str, list[str]] = {v: [] for v in ROBOTS_VARIANTS}
    for spec in web.hosts:
        lay = web.layout(spec.name)
        hosts[spec.name] = {
            "index": spec.index, "ip": spec.ip, "domain": spec.domain, "robots": spec.robots,
            "crawl_delay_s": spec.crawl_delay_s, "behaviours": list(spec.behaviours),
            "latency_s": spec.latency_s, "change_rate_per_s": spec.change_rate_per_s,
            "partner": spec.partner, "sections": list(lay.sections), "pages": lay.n_pages,
            "paths": _host_paths(web, spec.name, port),
        }
        for b in spec.behaviours:
            by_behaviour[b].append(spec.name)
        by_robots[spec.robots].append(spec.name)
    return {
        "schema": SCHEMA,
        "config": web.config.to_dict(),
        "port": port,
        "started_at": started_at,
        "bait_ip": BAIT_IP,
        "allowed_networks": web.allowed_networks(),
        "ips": {ip: list(names) for ip, names in web.hosts_by_ip.items()},
        "hosts": hosts,
        "behaviours": by_behaviour,
        "robots_variants": by_robots,
        "wild": {domain: site.kind for domain, site in web.wild.sites.items()},
        "ssrf_bait": {"names": list(web.bait_names), "ip": BAIT_IP, "links": bait_urls(port),
                      "redirect_locations": bait_redirects(port)},
        "rules": {
            "hidden_nofollow_targets": "articles with id % 4 == 1 link rel=nofollow to /<section>/hidden-<id>.html",
            "broken_links": "articles with id % 9 == 4 link /<section>/missing-<id>.html (404, or soft404)",
            "pdf_links": "articles with id % 6 == 0 link /files/report-<id>.pdf and ...pdf?download=1",
            "print_links": "every article links <path>?print=1",
            "base_href": "articles with id % 5 == 2 carry <base href> of the next section",
            "change": "page rate = host change_rate_per_s x (0, 0.2, 1, 5 by hash; home x5); epochs from started_at",
        },
        "descriptions": {"behaviours": BEHAVIOURS, "robots_variants": ROBOTS_VARIANTS,
                         "hostile_bodies": HOSTILE_BODIES},
        "pages_total": sum(web.layout(s.name).n_pages for s in web.hosts),
    }
