"""Helpers of the frontier tests (tests/core/test_frontier*.py)."""

from __future__ import annotations

import copy
import math

from courtly.core.frontier import Frontier, Lease
from courtly.core.types import UrlItem

__all__ = ["item", "drain", "fingerprint"]


def drain(f: Frontier) -> list[Lease]:
    """Hand out everything (expiring live leases first); completes each lease as done."""
    f.expire(math.inf)
    out = []
    while (lease := f.lease(math.inf)) is not None:
        out.append(lease)
        assert f.complete(lease.lease_id, math.inf)
    assert len(f) == 0 and f.leased_count == 0 and f.next_wakeup() is None
    return out


def item(key: str, n: int, band: int = 4) -> UrlItem:
    return UrlItem(url=f"https://{key}/{n}", key=key, band=band)


def fingerprint(f: Frontier) -> tuple:
    """Everything observable about `f`, computed on a copy so `f` is untouched."""
    probe = copy.deepcopy(f)
    return (
        len(probe),
        probe.leased_count,
        sorted((l.lease_id, l.key, l.items, l.expires_at) for l in probe.leases()),
        probe.next_wakeup(),
        [(l.key, l.items) for l in drain(probe)],
    )
