"""The wild sites (sim/wildtrap) served by `courtly simweb --wild KIND,...`.

What it owns: which wild sites a simulated web serves, their host names and
IPs, and the `Reply` to a request for one of them. Each kind gets the
registered domain ``<kind with dashes>.test`` (``wild-calendar.test``); the
link farm's minted names (`FARM_HOSTS` of them) are all listed in the hosts
map, so a crawler resolving through it can reach every one. Their
robots.txt is a 404 (allow all). A trap page's reply is tagged
``trap_<kind>`` (``trap_wild_calendar``), so the request log and
`sim.check.count_trap_fetches` count it; real pages are untagged.

The model's own hosts are untouched: wild hosts are not `HostSpec`s, so the
checker's per-host rules and the coverage walk leave them out; a test judges
them from the request log by their tags (tests/e2e/test_traps_wild.py).
"""

from __future__ import annotations

from courtly.sim.wildtrap import WILD_KINDS, WildSite

__all__ = ["WildHosts", "wild_domain"]


def wild_domain(kind: str) -> str:
    return kind.replace("_", "-") + ".test"


class WildHosts:
    """The wild sites of one simulated web (none when `kinds` is empty)."""

    def __init__(self, kinds: tuple[str, ...], seed: int, ips: tuple[str, ...]) -> None:
        unknown = [k for k in kinds if k not in WILD_KINDS]
        if unknown:
            raise ValueError(f"unknown wild site kind(s) {unknown}; known: {', '.join(WILD_KINDS)}")
        self.sites = {wild_domain(k): WildSite(k, wild_domain(k), seed) for k in kinds}
        self._ip = {domain: ips[i % len(ips)] for i, domain in enumerate(self.sites)}

    def site_of(self, host: str) -> WildSite | None:
        """The wild site serving `host` (a domain or, for the farm, one of its names)."""
        site = self.sites.get(host)
        if site is not None or not self.sites:
            return site
        domain = host.split(".", 1)[1] if "." in host else ""
        site = self.sites.get(domain)
        return site if site is not None and site.kind == "wild_farm" else None

    def hosts_map(self) -> dict[str, str]:
        out = {}
        for domain, site in self.sites.items():
            out[domain] = self._ip[domain]
            if site.kind == "wild_farm":
                out.update({f"{name}.{domain}": self._ip[domain] for name in site.farm_names()})
        return out

    def seeds(self, port: int) -> list[str]:
        return [f"http://{domain}:{port}/" for domain in self.sites]

    def answer(self, host: str, target: str, port: int) -> tuple[int, bytes, str | None] | None:
        """(status, body, tag) for a request to a wild host on `port`; None when `host` is not one."""
        site = self.site_of(host)
        if site is None:
            return None
        if target == "/robots.txt":
            return 404, b"not found\n", None
        page = site.page(host, target, port)
        return page.status, page.html, ("trap_" + site.kind) if page.tag == "trap" else None
