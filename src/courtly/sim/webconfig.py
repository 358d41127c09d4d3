"""The knobs of the simulated web and the vocabulary of its behaviours.

A `SimWebConfig` plus its seed fully determines the web: host names, IPs,
robots.txt variants, which host shows which behaviour, every page's text and
links, and when each page changes. Profiles are named starting points
(`demo`, `bench`, `hostile`); any field can be overridden.

`BEHAVIOURS` and `ROBOTS_VARIANTS` name everything the web can do, with a one
line description each; `courtly simweb --help` prints them and the manifest
lists, for each one, the hosts and paths that show it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = [
    "SimWebConfig",
    "PROFILES",
    "BEHAVIOURS",
    "ROBOTS_VARIANTS",
    "HOSTILE_BODIES",
    "TRAPS",
    "profile_config",
]

# Host-level behaviours. A host shows zero or more of these.
BEHAVIOURS: dict[str, str] = {
    "slow": "every response is delayed by latency_s before the status line",
    "throttle_429": "the first throttle_requests non-robots requests get 429 + Retry-After: <seconds>",
    "throttle_503_date": "for throttle_window_s after start, non-robots requests get 503 + Retry-After: <HTTP-date>",
    "throttle_503_bare": "the first throttle_requests non-robots requests get 503 without Retry-After",
    "soft404": "nonexistent paths answer 200 with an error template (tag soft404)",
    "trap_calendar": "/calendar/YYYY/MM/ with prev/next month links, endless (tag trap_calendar)",
    "trap_session": "/shop/item-N.html?s=<32 hex>, every page links with a fresh session id (tag trap_session)",
    "trap_filters": "/catalog?facet=value&... endless filter combinations (tag trap_filters)",
    "trap_repeat": "/repeat/a/ links relative a/ and b/: repeated path segments (tag trap_repeat)",
    "trap_deep": "/deep/1/ links 2/, 3/, ...: ever-deeper paths (tag trap_deep)",
    "duplicates": "/dup/K.html is a byte-identical copy of article K; /near/K-{ad,ts,nav}.html a near copy; /related/K.html shares every other paragraph with K (not a duplicate)",
    "redirects": "/go/S/C/I: redirect chains of 1-6 hops (some cross-host); /loop/S/I: a redirect loop",
    "hostile_bodies": "/hostile/<name>: bombs, endless/dripping bodies, huge headers, deep nesting, bad encodings",
    "ssrf_bait": "links and redirects (/bait/N) to metadata, private, loopback and alias addresses",
    "meta_robots": "some pages carry <meta name=robots content=noindex> or nofollow (orphans behind it)",
    "sitemaps": "/sitemap.xml index -> /sitemap-0.xml and /sitemap-1.xml.gz with lastmod",
    "feeds": "/feed.rss (RSS 2.0) and /feed.atom list recently changed articles",
    "changing": "pages change as Poisson processes (per-page rates); ETag/Last-Modified/304 always on",
    "spa": "single-page app (spa_hosts of them): / is a script shell whose links appear only when /spa/app.js "
           "runs (an API fetch, a timer, a script that never ends, requests to bait and robots-disallowed "
           "paths, a burst of parallel fetches; tags spa_*)",
    "legit_deep": "a real large site, not a trap: deep_pages articles /YYYY/MM/DD/<slug>-<id>.html (past "
                  "dates), /YYYY/ and /YYYY/MM/ indexes, /archive/page/N/ (20 a page, pager), /category/<c>/",
}

# robots.txt variants; every host has exactly one.
ROBOTS_VARIANTS: dict[str, str] = {
    "rules": "200 with several groups (one for courtly), wildcards * and $, Allow/Disallow, Crawl-delay, Sitemap",
    "allow_all": "200, empty Disallow for *",
    "disallow_all": "200, Disallow: / for *",
    "missing_404": "404: allow all",
    "forbidden_403": "403: allow all (RFC 9309: 4xx is unavailable)",
    "error_500": "500: unreachable, disallow all",
    "timeout": "hangs robots_hang_s before answering: unreachable, disallow all",
    "redirect_chain": "1-4 redirect hops (cross-host, tag robots_hop) to the rules file",
    "redirect_too_long": "6 redirect hops: more than 5, treat as unavailable (allow all)",
    "large": "over 500 KiB: rules first, a Disallow: / group after 500 KiB that must be ignored",
    "garbage": "200 with random bytes: no rules, allow all",
    "bom": "UTF-8 byte order mark then rules",
}

HOSTILE_BODIES: dict[str, str] = {
    "gzip-bomb": "Content-Encoding: gzip, bomb_bytes of zeros compressed ~1000:1",
    "brotli-bomb": "Content-Encoding: br, bomb_bytes of zeros (gzip to a client that does not accept br)",
    "zstd-bomb": "Content-Encoding: zstd, bomb_bytes of zeros (gzip to a client that does not accept zstd)",
    "endless-chunked": "chunked body that never ends (server cap: stream_bytes_max / stream_time_max_s)",
    "drip": "one byte every drip_interval_s (Content-Length set)",
    "huge-headers": "200 headers of 1 KiB plus one 64 KiB header",
    "deep-nesting": "100,000 nested <div> elements",
    "bad-utf8": "charset=utf-8 declared, body has invalid UTF-8 sequences",
    "bad-charset": "charset=x-no-such-charset declared, meta says another",
    "bad-gzip": "Content-Encoding: gzip on a body that is not gzip",
    "length-mismatch": "Content-Length larger than the body, then the connection closes",
}

TRAPS = ("trap_calendar", "trap_session", "trap_filters", "trap_repeat", "trap_deep")


@dataclass(frozen=True, slots=True)
class SimWebConfig:
    """Everything that shapes the simulated web. Same config => same web."""

    seed: int = 1
    profile: str = "demo"
    hosts: int = 40
    pages_per_host: int = 30
    ips: int = 8
    # share of hosts that get a non-plain behaviour or robots variant (demo)
    special_share: float = 0.4
    latency_s: float = 0.3
    # every answer takes at least this long, so parallel requests overlap visibly in the log
    service_time_s: float = 0.005
    throttle_requests: int = 2
    throttle_window_s: float = 3.0
    retry_after_s: int = 2
    robots_hang_s: float = 30.0
    drip_interval_s: float = 0.05
    bomb_bytes: int = 256 << 20
    stream_bytes_max: int = 1 << 30
    stream_time_max_s: float = 60.0
    # base change rate of a page (events/s); each page scales it by 0, 0.2, 1 or 5
    change_rate_per_s: float = 1.0 / 600.0
    # Crawl-delay values written into `rules` robots files (one chosen per host)
    crawl_delays_s: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0)
    hostile: bool = True  # False: no hostile behaviour at all (bench)
    # legit_deep hosts (taken from the plain hosts; none by default) and their articles each
    deep_hosts: int = 0
    deep_pages: int = 3000
    # single-page-app hosts (behaviour spa, sim/spa.py), taken from the plain hosts; none by default
    spa_hosts: int = 0
    # monitor watch pages (sim/watchpage): /watch/{real,noise,both}/N on every host; 0 = none
    watch_pages_per_kind: int = 0
    watch_gap_s_mean: float = 60.0   # mean gap between real changes (at least a third of it)
    # sim/wildtrap sites served beside the model's hosts (sim/wildweb), by kind
    wild: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}; known: {sorted(PROFILES)}")
        if not 1 <= self.hosts <= 200_000:
            raise ValueError("hosts must be in 1..200000")
        if not 10 <= self.pages_per_host <= 100_000:
            raise ValueError("pages_per_host must be in 10..100000")
        if not 1 <= self.ips <= 60_000:
            raise ValueError("ips must be in 1..60000")
        if self.ips > self.hosts:
            raise ValueError("ips must not exceed hosts (every IP serves at least one host)")
        if not 0.0 <= self.special_share <= 1.0:
            raise ValueError("special_share must be in [0, 1]")
        if not 0 <= self.deep_hosts <= self.hosts:
            raise ValueError("deep_hosts must be in 0..hosts")
        if not 0 <= self.spa_hosts <= self.hosts - self.deep_hosts:
            raise ValueError("spa_hosts must be in 0..hosts - deep_hosts")
        if not 1000 <= self.deep_pages <= 100_000:
            raise ValueError("deep_pages must be in 1000..100000")
        if not 0 <= self.watch_pages_per_kind <= 1000 or not self.watch_gap_s_mean > 0:
            raise ValueError("watch_pages_per_kind must be in 0..1000 and watch_gap_s_mean > 0")
        from courtly.sim.wildtrap import WILD_KINDS

        unknown = sorted(set(self.wild) - set(WILD_KINDS))
        if unknown:
            raise ValueError(f"unknown wild site kind(s) {unknown}; known: {', '.join(WILD_KINDS)}")

    def to_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        out["crawl_delays_s"] = list(self.crawl_delays_s)
        out["wild"] = list(self.wild)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "SimWebConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown SimWebConfig keys: {sorted(unknown)}")
        kwargs = dict(data)
        for name in ("crawl_delays_s", "wild"):
            if name in kwargs:
                kwargs[name] = tuple(kwargs[name])  # type: ignore[arg-type]
        return cls(**kwargs)  # type: ignore[arg-type]


PROFILES: dict[str, dict[str, object]] = {
    # small and mixed: most hosts plain, a share with each behaviour
    "demo": {},
    # many plain hosts, no hostile behaviour, no crawl-delay: throughput runs
    "bench": {
        "hosts": 5000,
        "pages_per_host": 200,
        "ips": 64,
        "special_share": 0.0,
        "hostile": False,
        "crawl_delays_s": (0.0,),
    },
    # every behaviour and every robots variant on at least one host, and one legit_deep host
    "hostile": {"hosts": 60, "pages_per_host": 20, "ips": 10, "special_share": 0.6, "deep_hosts": 1},
}


def profile_config(profile: str = "demo", **overrides: object) -> SimWebConfig:
    """The config of `profile` with `overrides` (None values are ignored)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {sorted(PROFILES)}")
    fields: dict[str, object] = dict(PROFILES[profile])
    fields.update({k: v for k, v in overrides.items() if v is not None})
    if overrides.get("ips") is None and isinstance(fields.get("hosts"), int):
        # fewer hosts than the profile's IPs: one host per IP, not an error about a flag not given
        default_ips = fields.get("ips", SimWebConfig.__dataclass_fields__["ips"].default)
        fields["ips"] = max(1, min(int(default_ips), fields["hosts"]))  # type: ignore[call-overload]
    fields["profile"] = profile
    return SimWebConfig(**fields)  # type: ignore[arg-type]
