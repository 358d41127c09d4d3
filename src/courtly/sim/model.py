"""The simulated web as a pure, deterministic model: hosts, IPs and roles.

`SimWeb(config)` derives, from the seed alone, every host (name, registered
domain, loopback IP, robots.txt variant, behaviours, crawl-delay, latency,
change rate) and a shared vocabulary. Pages are never pre-generated: the
per-host URL space lives in `layout.py` and the bytes in `page.py`, both
computed on demand, so a web of 5,000 hosts x 200 pages costs a few MB.

Addresses: hosts live on 127.0.1.1, 127.0.1.2, ... (`--ips` of them; the
first quarter of the IPs are "shared hosting" and carry tens of hosts each).
127.0.0.1 is *not* a host IP: it is the SSRF bait address. The crawler
should allow only `allowed_networks()`; bait names (localhost, 2130706433,
0x7f000001, intranet.test, ...) all lead to 127.0.0.1 or to addresses that
must never be contacted.

Reachability and manifests live in `manifest.py`; this file only builds.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable

from courtly.sim.hashing import h, rng
from courtly.sim.robotsrule import RobotsRules
from courtly.sim.webconfig import BEHAVIOURS, ROBOTS_VARIANTS, SimWebConfig

if TYPE_CHECKING:
    from courtly.sim.layout import HostLayout

__all__ = ["HostSpec", "SimWeb", "BAIT_IP", "ip_of_index", "registered_domain"]

BAIT_IP = "127.0.0.1"
_FEATURES = ("meta_robots", "sitemaps", "feeds")  # common, non-hostile extras
_SPECIAL_BEHAVIOURS = tuple(b for b in BEHAVIOURS if b not in _FEATURES + ("changing", "legit_deep", "spa"))
_SPECIAL_ROBOTS = tuple(v for v in ROBOTS_VARIANTS if v not in ("rules", "allow_all"))
_RULES_LIKE = ("rules", "bom", "large", "redirect_chain")
_SYLLABLES = (
    "ka", "lo", "mi", "ne", "su", "ta", "ri", "ve", "do", "pa", "zu", "ho", "fi", "ge",
    "ba", "cor", "tel", "mun", "dra", "vis", "len", "tor", "qua", "sel", "bri", "nox",
)
_BRANDS = ("shop", "news", "blog", "acme", "media", "city", "travel", "food")
_SUBDOMAINS = ("www", "blog", "shop", "news", "docs", "m")


def ip_of_index(i: int) -> str:
    """The i-th host IP: 127.0.1.1 .. 127.0.1.254, 127.0.2.1, ..."""
    return f"127.0.{1 + i // 254}.{1 + i % 254}"


def registered_domain(host: str) -> str:
    """Default politeness key for the sim: the last two labels (`.test` names)."""
    host = host.split(":", 1)[0].rstrip(".").lower() if not host.startswith("[") else host
    labels = host.split(".")
    return ".".join(labels[-2:]) if len(labels) >= 2 else host


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One served host and everything the seed decided about it."""

    index: int
    name: str
    domain: str
    ip: str
    robots: str
    behaviours: tuple[str, ...]
    crawl_delay_s: float | None
    latency_s: float
    change_rate_per_s: float
    key: int
    partner: str  # a plain host that carries this host's cross-host redirect hops

    def has(self, behaviour: str) -> bool:
        return behaviour in self.behaviours


class SimWeb:
    """The deterministic model. Cheap to build, safe to share, never mutated."""

    def __init__(self, config: SimWebConfig) -> None:
        self.config = config
        self.seed = config.seed
        r = rng(config.seed, "vocab")
        words: set[str] = set()
        while len(words) < 1500:
            words.add("".join(r.choice(_SYLLABLES) for _ in range(r.randint(2, 4))))
        self.vocab: tuple[str, ...] = tuple(sorted(words))
        self.paragraphs: tuple[str, ...] = tuple(
            _paragraph(r, self.vocab) for _ in range(769)  # prime: any stride visits all
        )
        self.ips: tuple[str, ...] = tuple(ip_of_index(i) for i in range(config.ips))
        self.hosts: tuple[HostSpec, ...] = tuple(self._build_hosts())
        self.by_name: dict[str, HostSpec] = {s.name: s for s in self.hosts}
        hosts_by_ip: dict[str, list[str]] = {ip: [] for ip in self.ips}
        for s in self.hosts:
            hosts_by_ip[s.ip].append(s.name)
        self.hosts_by_ip: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in hosts_by_ip.items()}
        self.bait_names: tuple[str, ...] = (
            "169.254.169.254", "10.0.0.1", "192.168.1.1", "localhost", "127.0.0.1",
            "2130706433", "0x7f000001", "0177.0.0.1", "intranet.test", "[::1]",
        )
        self._layout = lru_cache(maxsize=8192)(self._make_layout)
        from courtly.sim.wildweb import WildHosts

        self.wild = WildHosts(config.wild, config.seed, self.ips)   # sim/wildtrap sites, if asked for

    # ---- building -------------------------------------------------------

    def _build_hosts(self) -> list[HostSpec]:
        cfg = self.config
        r = rng(cfg.seed, "hosts")
        names, groups = _host_names(r, cfg.hosts)
        n_shared = max(1, cfg.ips // 4) if cfg.ips > 1 else 1
        ip_index: list[int] = []
        for i in range(cfg.hosts):
            if groups[i] >= 0 and groups[i] != i:
                ip_index.append(ip_index[groups[i]])  # siblings share the first's IP
            elif i < cfg.ips:
                ip_index.append(i)  # every IP serves at least one host
            elif r.random() < 0.5:
                ip_index.append(r.randrange(n_shared))
            else:
                ip_index.append(r.randrange(cfg.ips))
        roles = self._roles()
        plain = [i for i in range(cfg.hosts) if roles[i] is None] or list(range(cfg.hosts))
        plain_pos = {i: j for j, i in enumerate(plain)}
        deep = _deep_hosts(cfg.seed, cfg.deep_hosts, roles, groups)
        spa = set([i for i in plain if i not in deep and roles[i] is None][:cfg.spa_hosts])   # sim/spa.py
        specs = []
        for i, name in enumerate(names):
            hr = rng(cfg.seed, "host", i)
            role = roles[i]
            robots = role if role in ROBOTS_VARIANTS else ("rules" if hr.random() < 0.7 else "allow_all")
            behaviours = [role] if role in BEHAVIOURS else []
            behaviours += [f for f in _FEATURES if hr.random() < 0.5]
            if "duplicates" not in behaviours:
                behaviours.append("changing")
            delay = hr.choice(cfg.crawl_delays_s)
            if i in deep:  # a large real site: rules robots, no Crawl-delay, no extras
                robots, behaviours, delay = "rules", ["changing", "legit_deep"], 0.0
            if i in spa:   # no sitemap or feed names its pages; robots.txt disallows what its script asks for
                robots, behaviours = "rules", ["spa"]
            j = plain_pos.get(i)
            partner = plain[(j + 1) % len(plain)] if j is not None else plain[i % len(plain)]
            if partner == i and cfg.hosts > 1:
                partner = (i + 1) % cfg.hosts
            specs.append(
                HostSpec(
                    index=i,
                    name=name,
                    domain=registered_domain(name),
                    ip=self.ips[ip_index[i]],
                    robots=robots,
                    behaviours=tuple(sorted(behaviours)),
                    crawl_delay_s=(delay if delay > 0 and robots in _RULES_LIKE else None),
                    latency_s=cfg.latency_s * (1 + hr.randrange(3)) if role == "slow" else 0.0,
                    change_rate_per_s=cfg.change_rate_per_s * hr.choice((0.5, 1.0, 2.0)),
                    key=h(cfg.seed, "hostkey", i),
                    partner=names[partner],
                )
            )
        return specs

    def _roles(self) -> list[str | None]:
        cfg = self.config
        roles: list[str | None] = [None] * cfg.hosts
        if not cfg.hostile or cfg.special_share <= 0:
            return roles
        items = list(_SPECIAL_BEHAVIOURS) + list(_SPECIAL_ROBOTS)
        order = list(range(cfg.hosts))
        rng(cfg.seed, "roles").shuffle(order)
        n_special = min(cfg.hosts, max(1, round(cfg.special_share * cfg.hosts)))
        items_order = list(items)
        rng(cfg.seed, "items").shuffle(items_order)
        for j in range(n_special):
            roles[order[j]] = items_order[j % len(items_order)]
        return roles

    # ---- lookups --------------------------------------------------------

    def host_of(self, host_header: str) -> HostSpec | None:
        """The served host a Host header names (IP literal: that IP's first host)."""
        name = _strip_port(host_header)
        spec = self.by_name.get(name)
        if spec is not None:
            return spec
        names = self.hosts_by_ip.get(name)
        return self.by_name[names[0]] if names else None

    def is_bait(self, host_header: str) -> bool:
        return _strip_port(host_header) in self.bait_names

    def hosts_map(self) -> dict[str, str]:
        """name -> IP for the crawler's --hosts-file (the bait name included)."""
        out = {s.name: s.ip for s in self.hosts}
        out["intranet.test"] = BAIT_IP
        out.update(self.wild.hosts_map())
        return out

    def allowed_networks(self) -> list[str]:
        """The /24 networks the crawler must allow (and nothing else of 127/8)."""
        nets = sorted({str(ipaddress.ip_network(f"{ip}/24", strict=False)) for ip in self.ips},
                      key=lambda n: ipaddress.ip_network(n))
        return nets

    def seeds(self, port: int) -> list[str]:
        """One root URL per served host."""
        return [f"http://{s.name}:{port}/" for s in self.hosts] + self.wild.seeds(port)

    def layout(self, name: str) -> "HostLayout":
        return self._layout(name)

    def _make_layout(self, name: str) -> "HostLayout":
        from courtly.sim.layout import HostLayout

        return HostLayout(self, self.by_name[name])

    # ---- robots ---------------------------------------------------------

    def robots_text(self, spec: HostSpec, port: int) -> str:
        """The rules file of a rules-like host (also the end of its redirect chain)."""
        from courtly.sim.robotsfile import rules_text

        return rules_text(self, spec, port)

    def robots_rules(self, name: str, port: int = 0) -> RobotsRules | None:
        """What courtly must obey on `name`; None = unreachable (disallow all)."""
        spec = self.by_name[name]
        v = spec.robots
        if v in ("error_500", "timeout"):
            return None
        if v in ("allow_all", "missing_404", "forbidden_403", "garbage", "redirect_too_long"):
            return RobotsRules.allow_all()
        if v == "disallow_all":
            return RobotsRules.disallow_all()
        from courtly.sim.robotsfile import robots_body

        return RobotsRules.parse(robots_body(self, spec, port))

    def reachable_pages(self, seeds: "Iterable[str]", *, hosts: "Iterable[str] | None" = None,
                        max_redirects: int = 5, follow_nofollow: bool = False) -> set[str]:
        """URLs of the pages a polite crawl from `seeds` should fetch (see manifest.py)."""
        from courtly.sim.manifest import reachable_pages

        return reachable_pages(self, seeds, hosts=hosts, max_redirects=max_redirects,
                               follow_nofollow=follow_nofollow)

    def manifest(self, port: int, started_at: float) -> "dict[str, Any]":
        from courtly.sim.manifest import build_manifest

        return build_manifest(self, port, started_at)

    @classmethod
    def from_manifest(cls, manifest: "dict[str, Any]") -> "SimWeb":
        from courtly.sim.manifest import web_from_manifest

        return web_from_manifest(manifest)

    def allowed(self, name: str, path: str) -> bool:
        """May courtly fetch `path` on served host `name` (robots as the model knows it)?"""
        rules = self._rules_cached(name)
        return rules is not None and rules.allowed(path)

    @lru_cache(maxsize=65536)  # noqa: B019 (one model per simulated web, alive as long as it)
    def _rules_cached(self, name: str) -> RobotsRules | None:
        return self.robots_rules(name, 0)


def _deep_hosts(seed: int, n: int, roles: list[str | None], groups: list[int]) -> set[int]:
    """Indexes of the legit_deep hosts: plain hosts with a registered domain of
    their own first (their politeness key is theirs alone), chosen by the seed.
    Other hosts' roles are untouched, so opting in changes nothing else."""
    if n <= 0:
        return set()
    r = rng(seed, "legit_deep")
    alone = [i for i, role in enumerate(roles) if role is None and groups[i] < 0]
    shared = [i for i, role in enumerate(roles) if role is None and groups[i] >= 0]
    r.shuffle(alone)
    r.shuffle(shared)
    return set((alone + shared)[:n])


def _strip_port(host_header: str) -> str:
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end > 0 else value
    return value.rsplit(":", 1)[0] if ":" in value else value.rstrip(".")


def _paragraph(r: object, vocab: tuple[str, ...]) -> str:
    n = r.randint(40, 130)  # type: ignore[attr-defined]
    words = r.choices(vocab, k=n)  # type: ignore[attr-defined]
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def _host_names(r: object, n: int) -> tuple[list[str], list[int]]:
    """Host names, and for each the index of its group's first host (-1: single)."""
    names: list[str] = []
    group_first: list[int] = []
    g = 0
    while len(names) < n:
        room = n - len(names)
        if room >= 2 and r.random() < 0.12:  # type: ignore[attr-defined]
            k = min(r.randint(2, 4), room)  # type: ignore[attr-defined]
            base = f"{r.choice(_BRANDS)}{g}.test"  # type: ignore[attr-defined]
            g += 1
            first = len(names)
            for sub in r.sample(_SUBDOMAINS, k):  # type: ignore[attr-defined]
                names.append(f"{sub}.{base}")
                group_first.append(first)
        else:
            names.append(f"site{len(names):04d}.test")
            group_first.append(-1)
    return names, group_first

