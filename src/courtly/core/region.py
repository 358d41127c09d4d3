"""Home regions: where a politeness key is crawled from and its bytes are kept (pure).

What it owns: the decisions of a multi-region crawl (issue 21; seeds, Deep
Dive 5: "regionalize bytes and politeness; globalize only fingerprints and
policy"), with no I/O, so the cluster can apply them and tests can check them:

* `choose_home`: a key's home region from probes made from each region. An
  override from the configuration wins. Otherwise a region the host refuses
  (403/451, or no answer) while another region gets an answer is
  geo-blocked and can never be home; answers that differ between regions
  (payload digests, each consistent within its region) flag the host as
  serving regional variants (`variants`, reported). Among the regions that
  get answers, the lowest median RTT wins, but a key keeps its current home
  unless another region is faster by `margin` (no flapping on noise), and
  nothing moves on fewer than `samples_min` probes per region.
* `RegionLayout`: the partition space cut into one contiguous range per
  region; a key's partition is inside its home region's range, so a worker
  leasing only its region's partitions fetches only keys homed there, and a
  key has one writer of its politeness state in the world.
* `route`: a link found in one region for a key homed in another is
  forwarded (queued for that region), never fetched here.
* `check_mix`: every stored object carries its region tag; an export
  refuses objects of several regions unless told to mix them.

Rules: no clock, no I/O; regions are plain names (letters, digits, '-').
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable, Mapping, Sequence

__all__ = ["Probe", "HomeChoice", "HomeReason", "RegionError", "RegionLayout", "Route", "check_mix",
           "choose_home", "route"]

BLOCKED_STATUSES = frozenset({403, 451})


class RegionError(ValueError):
    """A region rule broken: an unknown region, or regions mixed without leave."""


class HomeReason(StrEnum):
    OVERRIDE = "override"      # configured
    GEO_BLOCK = "geo_block"    # the only region(s) the host answers
    RTT = "rtt"                # the lowest median round trip
    KEPT = "kept"              # no region better by the margin: the current home stays
    DEFAULT = "default"        # not enough probes yet


@dataclass(frozen=True, slots=True)
class Probe:
    """One request to a key made from `region`: round trip, status, payload digest."""

    region: str
    rtt_s: float | None        # None: no answer (refused connection, timeout)
    status: int = 0            # 0: no HTTP answer
    digest: str = ""           # the answer's payload digest ("" when none)


@dataclass(frozen=True, slots=True)
class HomeChoice:
    region: str
    reason: HomeReason
    blocked: tuple[str, ...] = ()      # regions the host refuses
    variants: bool = False             # the host serves different content to different regions
    rtt_s: Mapping[str, float] | None = None   # median RTT per region that has answers


def _answered(p: Probe) -> bool:
    """The host served this region: any HTTP answer but a refusal (403/451) or
    a server error (a robots.txt probe answered 404 is an answer)."""
    return p.rtt_s is not None and 200 <= p.status < 500 and p.status not in BLOCKED_STATUSES


def choose_home(probes: Iterable[Probe], regions: Sequence[str], *, default: str, current: str = "",
                override: str = "", samples_min: int = 3, margin: float = 1.25) -> HomeChoice:
    """The home region of one key (see the module docstring)."""
    known = set(regions)
    for name in (default, override, current):
        if name and name not in known:
            raise RegionError(f"unknown region {name!r} (regions: {', '.join(regions)})")
    if override:
        return HomeChoice(override, HomeReason.OVERRIDE)
    by_region: dict[str, list[Probe]] = {r: [] for r in regions}
    for p in probes:
        if p.region in by_region:
            by_region[p.region].append(p)
    fallback = current or default
    if any(len(ps) < samples_min for ps in by_region.values()):
        return HomeChoice(fallback, HomeReason.DEFAULT)
    serving = [r for r, ps in by_region.items() if any(_answered(p) for p in ps)]
    blocked = tuple(sorted(r for r, ps in by_region.items() if r not in serving and any(
        p.rtt_s is None or p.status in BLOCKED_STATUSES for p in ps)))
    digests = {r: {p.digest for p in ps if _answered(p) and p.digest} for r, ps in by_region.items()}
    consistent = [d for r, d in digests.items() if r in serving and len(d) == 1]
    variants = len(consistent) > 1 and len(set().union(*consistent)) > 1
    rtt = {r: statistics.median(p.rtt_s for p in ps if p.rtt_s is not None and _answered(p))
           for r, ps in by_region.items() if r in serving}
    if not serving:
        return HomeChoice(fallback, HomeReason.DEFAULT, blocked, variants, rtt)
    if blocked and len(serving) < len(regions):
        # geo-blocked somewhere: only the regions it serves may be home
        best = min(serving, key=lambda r: (rtt[r], r))
        home = current if current in serving and rtt[current] <= rtt[best] * margin else best
        return HomeChoice(home, HomeReason.GEO_BLOCK, blocked, variants, rtt)
    best = min(serving, key=lambda r: (rtt[r], r))
    if current in serving and rtt[best] * margin >= rtt[current]:
        return HomeChoice(current, HomeReason.KEPT, blocked, variants, rtt)
    return HomeChoice(best, HomeReason.RTT, blocked, variants, rtt)


@dataclass(frozen=True, slots=True)
class RegionLayout:
    """The partition space cut into one contiguous range per region (in `regions` order)."""

    regions: tuple[str, ...]
    partitions: int

    def __post_init__(self) -> None:
        if not self.regions:
            raise RegionError("at least one region")
        if len(set(self.regions)) != len(self.regions):
            raise RegionError("a region is named twice")
        if self.partitions < len(self.regions):
            raise RegionError(f"{self.partitions} partitions cannot give {len(self.regions)} regions one each")

    def range_of(self, region: str) -> range:
        """The partitions of `region`: an even share, the first regions taking the remainder."""
        try:
            i = self.regions.index(region)
        except ValueError:
            raise RegionError(f"unknown region {region!r} (regions: {', '.join(self.regions)})") from None
        share, extra = divmod(self.partitions, len(self.regions))
        start = i * share + min(i, extra)
        return range(start, start + share + (1 if i < extra else 0))

    def partition_of(self, key: str, home: str) -> int:
        """`key`'s partition, within its home region's range (blake2b-64 of the key)."""
        r = self.range_of(home)
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        return r.start + int.from_bytes(digest, "big") % len(r)

    def region_of_partition(self, partition: int) -> str:
        for region in self.regions:
            if partition in self.range_of(region):
                return region
        raise RegionError(f"partition {partition} is outside 0..{self.partitions - 1}")


class Route(StrEnum):
    FETCH = "fetch"        # homed in this region: queue it here
    FORWARD = "forward"    # homed elsewhere: queue it for that region, fetch nothing


def route(home: str, here: str) -> Route:
    """What a worker of region `here` does with a link whose key is homed in `home`."""
    return Route.FETCH if home == here else Route.FORWARD


def check_mix(tags: Iterable[str], *, allow_mixed: bool = False) -> frozenset[str]:
    """The residency tags of the objects an export would take; RegionError
    when they name more than one region, unless `allow_mixed`."""
    seen = frozenset(tags)
    if len(seen) > 1 and not allow_mixed:
        raise RegionError(f"the export would mix regions {', '.join(sorted(seen))}: "
                          "export one region, or say that mixing is allowed")
    return seen
