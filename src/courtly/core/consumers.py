"""Consumers of one fetch layer: quotas, host shares and fair turns (pure).

What it owns: the arithmetic that lets several named consumers (a search
index, an archive, a monitoring team) share one crawler without the sites
noticing. Politeness is not here and is never bent: the crawler keeps one
politeness state per key and per IP whoever asked; this module only decides
*whose* URL gets a turn and *who is charged* for it.

How it works
------------
* `Ledger` counts the requests made for each consumer in the current UTC day
  (`day_of(now)`), overall and per politeness key. `denial` tells, before a
  request, why a consumer may not have it: its `fetches_per_day` is used up,
  or its `host_share` of the key's daily capacity (86 400 s / the key's delay)
  is. `charge` books one request to the consumers that take it; each is
  counted one fetch against its quota, and billed 1/n of it (chargeback), so
  the bills add up to the requests made.
* `FairTurns` is weighted fair queuing of a key's turns: every consumer that
  wants the key has a virtual finish tag (turns served / weight); `order`
  puts the URLs of a key's batch in tag order, so over time each consumer
  gets turns in proportion to its weight.

Rules: no clock (`now` is passed in), no I/O; state is plain dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Sequence, TypeVar

__all__ = ["DAY_S", "Ledger", "FairTurns", "Quota", "ResultRow", "day_of"]

DAY_S = 86_400.0
T = TypeVar("T")


def day_of(now: float) -> int:
    """The UTC day number of the instant `now` (epoch seconds)."""
    return int(now // DAY_S)


class ResultRow(NamedTuple):
    """One line of a consumer's account: a delivery, a denial or a decision."""

    consumer: str
    url: str
    key: str
    at: float
    kind: str          # fetch | denied (quota) | decision (not fetched for another reason)
    status: int
    bytes: int
    warc: str          # file:offset of the response record
    digest: str        # its WARC-Payload-Digest
    shared: int        # 1: the same request served other consumers too
    charge: float      # this consumer's share of the request (1/n)
    detail: str


@dataclass(frozen=True, slots=True)
class Quota:
    """One consumer's limits (from config.ConsumerSection)."""

    name: str
    fetches_per_day: int = 0      # 0: no limit
    host_share: float = 0.0       # 0: no limit
    weight: float = 1.0


class Ledger:
    """Requests made for each consumer today: the quota check and the bill."""

    def __init__(self, quotas: Iterable[Quota]) -> None:
        self.quotas = {q.name: q for q in quotas}
        self.day = -1
        self.used: dict[str, int] = {}                 # consumer -> requests today
        self.used_on_key: dict[tuple[str, str], int] = {}   # (consumer, key) -> requests today

    def _roll(self, now: float) -> None:
        day = day_of(now)
        if day != self.day:   # a new day: every quota starts again
            self.day = day
            self.used.clear()
            self.used_on_key.clear()

    def restore(self, consumer: str, key: str, at: float, now: float) -> None:
        """Count a request made earlier (a resumed crawl) if it was made today."""
        self._roll(now)
        if day_of(at) == self.day:
            self.used[consumer] = self.used.get(consumer, 0) + 1
            self.used_on_key[consumer, key] = self.used_on_key.get((consumer, key), 0) + 1

    def denial(self, consumer: str, key: str, key_delay_s: float, now: float) -> str:
        """Why `consumer` may not have a request on `key` now ("" if it may)."""
        self._roll(now)
        q = self.quotas.get(consumer)
        if q is None:
            return ""
        if q.fetches_per_day and self.used.get(consumer, 0) >= q.fetches_per_day:
            return f"{consumer}: fetches_per_day {q.fetches_per_day} used (again at the next UTC day)"
        if q.host_share:
            capacity = DAY_S / max(key_delay_s, 1e-3)
            allowed = max(1, int(q.host_share * capacity))
            if self.used_on_key.get((consumer, key), 0) >= allowed:
                return f"{consumer}: host_share {q.host_share} of {key} ({allowed} requests a day) used"
        return ""

    def charge(self, consumers: Sequence[str], key: str, now: float) -> float:
        """Book one request to `consumers`; returns each one's share of the bill."""
        self._roll(now)
        for c in consumers:
            self.used[c] = self.used.get(c, 0) + 1
            self.used_on_key[c, key] = self.used_on_key.get((c, key), 0) + 1
        return 1.0 / len(consumers) if consumers else 0.0


class FairTurns:
    """Weighted fair queuing of one key's turns across the consumers that want it."""

    def __init__(self, weights: dict[str, float], keys_max: int = 100_000) -> None:
        self.weights = weights
        self.keys_max = keys_max                        # bounded: the oldest key's tags go first
        self.served: dict[str, dict[str, float]] = {}   # key -> consumer -> virtual finish tag

    def tag(self, key: str, consumer: str) -> float:
        return self.served.get(key, {}).get(consumer, 0.0)

    def served_turn(self, key: str, consumers: Iterable[str]) -> None:
        """A turn of `key` went to a URL wanted by `consumers`: their tags advance."""
        tags = self.served.pop(key, None) or {}
        self.served[key] = tags        # re-inserted: most recently used last
        for c in consumers:
            tags[c] = tags.get(c, 0.0) + 1.0 / self.weights.get(c, 1.0)
        while len(self.served) > self.keys_max:
            del self.served[next(iter(self.served))]

    def order(self, key: str, items: Sequence[T], owners: Callable[[T], Sequence[str]]) -> list[T]:
        """`items` of one key, the one whose consumers are furthest behind first.

        Simulates the turns: each pick advances the picked consumers' tags, so
        a batch is interleaved by weight, not just led by the poorest consumer.
        Items of the same consumers keep their order; items with no consumer
        come after the consumers' items, in their order."""
        groups: dict[tuple[str, ...], list[T]] = {}
        for it in items:
            groups.setdefault(tuple(owners(it)), []).append(it)
        if len(groups) < 2:
            return list(items)   # one set of consumers: nothing to share out
        tags = dict(self.served.get(key, {}))
        nobody = groups.pop((), [])
        heads = {who: 0 for who in groups}
        out: list[T] = []

        def finish(who: tuple[str, ...]) -> float:
            return min(tags.get(c, 0.0) + 1.0 / self.weights.get(c, 1.0) for c in who)

        while heads:
            who = min(heads, key=lambda w: (finish(w), w))
            out.append(groups[who][heads[who]])
            heads[who] += 1
            if heads[who] == len(groups[who]):
                del heads[who]
            for c in who:
                tags[c] = tags.get(c, 0.0) + 1.0 / self.weights.get(c, 1.0)
        return out + nobody
