"""Refusals at the seed stage: said on the terminal with their fix, and
reconsidered on resume when the setting behind them has changed.

What it owns: the sentence for a refused seed ("seed URL refused: REASON
(DETAIL); add --allow-network 10.0.0.5/32 to crawl it"), the same fix for
`courtly explain`, the count of refused seeds a run ends with (runtime/exits
turns "nothing fetched, every seed refused" into its own exit status), and
the reconsideration of refused seeds when a crawl folder is resumed.

How it works: the seed stage is depth 0, the seed itself and the hops it
redirects through. `Crawler.decide` hands every depth-0 decision to a
`SeedRefusals`, which logs a warning line (the first `SHOWN_MAX`, then one
line with the count) and counts them. On resume, `reconsider` reads the
depth-0 URLs skipped as `non_public`, `dns` or `scope` and queues them again
when the setting that decided them changed since the last run (the network
allowance and host pins, or the scope; a name that did not resolve is always
tried again: DNS answers change without courtly), each with a
`reconsidered` flag naming what was decided before and why it is tried
again (`courtly explain` shows it).

Rules: politeness is untouched (a reconsidered URL waits its turn like any
queued one); a scope refusal is reconsidered only if the URL is in scope
now; nothing is reconsidered silently.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import TYPE_CHECKING

from courtly.core.types import Reason, UrlItem
from courtly.core.urls import host_of_normalized, politeness_key

if TYPE_CHECKING:
    from courtly.config import Config
    from courtly.runtime.roles import RefusalHost

__all__ = ["fix_for", "refusal_line", "SeedRefusals", "settings_of", "reconsider", "RECONSIDERED"]

log = logging.getLogger("courtly")

SHOWN_MAX = 20                 # refused seeds told one per line; the rest as a count
RECONSIDER_MAX = 100_000       # refused seeds read back per resume (a bound, not a target)
RECONSIDERED = "reconsidered"  # the flag a reconsidered URL carries in the store
_RECONSIDERABLE = (Reason.NON_PUBLIC, Reason.DNS, Reason.SCOPE)
_SETTING_OF = {Reason.NON_PUBLIC: "network", Reason.DNS: "pins", Reason.SCOPE: "scope"}


def _addresses(detail: str) -> list[str]:
    """The addresses in a non_public detail ("host: no permitted address in A, B")."""
    _, sep, rest = detail.partition("no permitted address in ")
    return [a.strip() for a in rest.split(",") if a.strip()] if sep else []


def _kind(ip: str) -> str:
    try:
        a = ipaddress.ip_address(ip)
    except ValueError:
        return "not a public address"
    if a.is_loopback:
        return "a loopback address"
    if a.is_link_local:
        return "a link-local address"
    if a.is_private:
        return "a private address"
    return "not a public address"


def _network(ip: str) -> str:
    """The smallest network naming just `ip` (allow no more than asked for)."""
    try:
        a = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    return f"{a}/{a.max_prefixlen}"


def fix_for(url: str, reason: str, detail: str, scope: str = "any", *, seed_stage: bool = True) -> str:
    """What the operator can do about a refusal, or "" when nothing should
    be done (robots.txt is obeyed, a purge is wanted). A resume reconsiders
    the seed stage only (`reconsider`): a link refused deeper is crawled by
    giving it as a seed."""
    later = "" if seed_stage else " (a resume reconsiders seeds only: give this URL as a seed)"
    if reason == Reason.NON_PUBLIC:
        nets = " ".join(f"--allow-network {_network(a)}" for a in _addresses(detail))
        return f"add {nets or '--allow-network CIDR'} to crawl it{later}"
    if reason == Reason.DNS:
        return ("check the name, or pin it with --resolve HOST:IP or --hosts-file F"
                + ("; a resume tries it again" if seed_stage else later))
    if reason == Reason.SCOPE:
        if scope == "seed-hosts":
            return f"use --scope seed-domains (same registered domain) or --scope any to follow it{later}"
        return f"use --scope any to follow it{later}"
    if reason == Reason.ROBOTS_UNREACHABLE:
        return "check that the site answers its robots.txt (courtly fetches nothing where it cannot read it)"
    return ""


def refusal_line(url: str, via: str, reason: str, detail: str, scope: str = "any") -> str:
    """One line: what was refused, why, and the fix (the text `SeedRefusals` logs)."""
    verb = "failed" if reason == Reason.ERROR else "refused"
    what = f"seed {via} redirects to {url}, {verb}" if via else f"seed {url} {verb}"
    why = detail
    if reason == Reason.NON_PUBLIC:
        addrs = _addresses(detail)
        if addrs:
            why = "; ".join(f"{a} is {_kind(a)}" for a in addrs)
    elif reason == Reason.SCOPE:
        why = f"outside --scope {scope}"
    fix = fix_for(url, reason, detail, scope)
    return f"{what}: {reason}" + (f" ({why})" if why else "") + (f"; {fix}" if fix else "")


class SeedRefusals:
    """Told of each depth-0 decision (`Crawler.on_seed_refused`): logs it
    with its fix, counts it."""

    def __init__(self, scope: str = "any", crawl_id: str = "", stats=None) -> None:
        self.scope = scope
        self.crawl_id = crawl_id
        self.stats = stats     # CrawlStats: counts them in seeds_refused
        self.count = 0

    def __call__(self, url: str, via: str, reason: Reason, detail: str) -> None:
        self.count += 1
        if self.stats is not None:
            self.stats.seeds_refused += 1
        if self.count <= SHOWN_MAX:
            log.warning("%s", refusal_line(url, via, reason, detail, self.scope),
                        extra={"event": "seed_refused", "crawl_id": self.crawl_id, "url": url,
                               "reason": str(reason), "detail": detail,
                               "fix": fix_for(url, reason, detail, self.scope)})
        elif self.count == SHOWN_MAX + 1:
            log.warning("more seeds refused: courtly stats and courtly explain URL tell each",
                        extra={"event": "seed_refused_more", "crawl_id": self.crawl_id})


def settings_of(cfg: "Config", pins: dict[str, list[str]]) -> dict[str, str]:
    """The settings behind each reconsiderable refusal, as comparable text."""
    return {"network": json.dumps(sorted(cfg.network.allow)),
            "pins": json.dumps(sorted((h, sorted(ips)) for h, ips in pins.items())),
            "scope": cfg.crawl.scope}


def _why_again(reason: str, before: dict[str, str], now: dict[str, str]) -> str:
    """Why a refusal is tried again, or "" when it stands."""
    setting = _SETTING_OF.get(Reason(reason))
    if setting is None:
        return ""
    if before.get(setting) != now[setting]:
        names = {"network": "network.allow (--allow-network)", "pins": "host pins (--resolve, --hosts-file)",
                 "scope": "crawl.scope (--scope)"}
        return f"{names[setting]} changed"
    if reason == Reason.DNS:
        return "a resume resolves names again"
    return ""


def reconsider(crawler: "RefusalHost", settings: dict[str, str], now: float) -> int:
    """Queue again the refused seed-stage URLs whose setting changed (see the
    module docstring); record each with a `reconsidered` flag. Call after the
    seeds are fed (the scope knows them). Returns how many."""
    store, c = crawler.store, crawler
    raw = store.get_meta("refusal_settings")
    before = json.loads(raw) if raw else {}
    rows = store.refused_at_depth0([str(r) for r in _RECONSIDERABLE], RECONSIDER_MAX)
    again = []
    for url, key, via, reason, detail in rows:
        why = _why_again(reason, before, settings) if before else "no record of the settings that refused it"
        if not why:
            continue
        if reason == Reason.SCOPE and not c.admission.in_scope(host_of_normalized(url)):
            continue
        again.append((url, key or "", via, reason, detail, why))
    for i, (url, key, via, reason, detail, why) in enumerate(again):
        if not key:   # a decision recorded before the URL had a key
            again[i] = (url, politeness_key(host_of_normalized(url), c.cfg.crawl.politeness_key),
                        via, reason, detail, why)
    if again:
        store.requeue([(a[1], a[0]) for a in again])
    for url, key, via, reason, detail, why in again:
        note = f"was {reason} ({detail}); {why}"
        c.batch.flags.append((url, now, RECONSIDERED, note))
        log.info("reconsidered %s: %s", url, note,
                 extra={"event": "reconsidered", "crawl_id": c.crawl_id, "url": url, "reason": reason,
                        "detail": detail, "why": why})
        c.queue(UrlItem(url=url, key=key, band=1, depth=0, via=via), now, stored=True)
    c.batch.meta["refusal_settings"] = json.dumps(settings, sort_keys=True)
    return len(again)


def seed_outcome(store, scope: str, told: int) -> tuple[dict[str, int], list[str]]:
    """(seed-stage URLs by state, lines for the refused ones) after a run;
    the lines only when this run told none (a resume that changed nothing
    would otherwise end with no word about why nothing was fetched)."""
    states = store.seed_states()
    if told:
        return states, []
    rows = store.refused_at_depth0([str(r) for r in Reason], SHOWN_MAX)
    return states, [f"{refusal_line(u, via, r, d, scope)} (decided by an earlier run)" for u, _, via, r, d in rows]
