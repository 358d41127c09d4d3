"""Partition ownership: who should own which partition, and the lease rules.

Theory of operation
-------------------
A crawl has P partitions (fixed when it is created); a politeness key lives in
`partition_of(key, P)`. Exactly one worker may fetch for a partition at a time,
so exactly one fetch loop serves each key and politeness needs no per-fetch
lock. Three pieces make that true:

1. **Placement** (`owner_of`, `assignment`, `plan_rebalance`): rendezvous
   (highest-random-weight) hashing. Every worker scores every partition with
   blake2b(partition, worker) and the highest score wins. All workers that see
   the same live set compute the same answer without talking; a join takes
   about P/(N+1) partitions (only those the newcomer now wins) and a leave moves
   only the leaver's partitions. Placement is a wish: ownership is the lease.

2. **The authoritative lease** (`LeaseRecord`, `grant`, `extend`, `give_up`):
   one row per partition in the shared store: owner, fencing epoch,
   `lease_until` on the store's clock. `grant` succeeds only when the
   partition is free or its lease has expired, and bumps the epoch; `extend`
   succeeds only for the current owner and epoch *before* expiry (a lease that
   expired is gone: acquire again, new epoch); every write carries its epoch
   and is refused unless it is the current one (`write_allowed`). The SQL in
   shell/store/postgres.py implements exactly these rules; the tests check the
   model, the SQL against the same cases.

3. **A worker's view of one lease** (`PartitionView`): a state machine in a
   table (`TRANSITIONS`, (state, input) -> (effects, next state)) under a thin
   time layer. The worker measures `asked_at` on its own clock *before* sending
   an acquire or renew, so its local `expires_at = asked_at + ttl_s` is never
   later than the store's (the store starts the TTL when the request arrives).
   The worker renews `renew_before_s` before that, retries failed renewals
   every `retry_s`, and **stops fetching `stop_margin_s` before `expires_at`**
   if it could not renew; a renewal that answers after that instant is never
   used (LOST is absorbing), it is released instead. A new owner can only be
   granted the partition after the store's lease expired, which is at least
   `stop_margin_s` after the old owner stopped.

What the margin buys: a request the old owner decided to send just before its
stop instant reaches the site up to `stop_margin_s` later and the new owner
cannot start before then. A process frozen (SIGSTOP, GC, swap) for longer than
the margin between "may I fetch?" and the send is the one case no lease can
prevent for the fetch itself; the store still refuses that worker's writes
(stale epoch), so it cannot corrupt state.

Rules: pure; `now` is an argument (seconds on the caller's clock); hashing is
blake2b, never `hash()`; values are frozen.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

__all__ = [
    "rendezvous_weight",
    "owner_of",
    "assignment",
    "Rebalance",
    "plan_rebalance",
    "LeaseTerms",
    "LeaseRecord",
    "grant",
    "extend",
    "give_up",
    "write_allowed",
    "ViewState",
    "Input",
    "Effect",
    "TRANSITIONS",
    "transition",
    "PartitionView",
]


# ---- placement ------------------------------------------------------------------

def rendezvous_weight(partition: int, worker_id: str) -> int:
    """Score of `worker_id` for `partition`: blake2b-64 of both, big-endian."""
    data = partition.to_bytes(4, "big") + worker_id.encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def owner_of(partition: int, workers: Iterable[str]) -> str | None:
    """The live worker that should own `partition` (None when there is none).
    Independent of the order of `workers`; ties (astronomically rare) go to the
    greater id."""
    best: tuple[int, str] | None = None
    for w in workers:
        cand = (rendezvous_weight(partition, w), w)
        if best is None or cand > best:
            best = cand
    return None if best is None else best[1]


def assignment(partitions: int, workers: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """Every live worker -> the sorted partitions it should own (possibly none)."""
    live = sorted(set(workers))
    out: dict[str, list[int]] = {w: [] for w in live}
    if live:
        for p in range(partitions):
            out[owner_of(p, live)].append(p)  # type: ignore[index]
    return {w: tuple(ps) for w, ps in out.items()}


@dataclass(frozen=True, slots=True)
class Rebalance:
    """What one worker should do to match the placement: `release` first (after
    it stopped fetching and committed for those), then try to `acquire`."""

    acquire: tuple[int, ...]
    release: tuple[int, ...]


def plan_rebalance(worker_id: str, partitions: int, live_workers: Iterable[str],
                   held: Iterable[int]) -> Rebalance:
    """Partitions to acquire and to release so `worker_id` holds its share. The
    worker counts itself live even before its own heartbeat is visible."""
    live = set(live_workers) | {worker_id}
    wanted = set(assignment(partitions, live)[worker_id])
    have = set(held)
    return Rebalance(acquire=tuple(sorted(wanted - have)), release=tuple(sorted(have - wanted)))


# ---- lease terms and the authoritative record -----------------------------------------

@dataclass(frozen=True, slots=True)
class LeaseTerms:
    ttl_s: float = 30.0            # a lease lasts this long after the request that took or renewed it
    renew_before_s: float = 20.0   # renew when this much is left (here: 10 s into the lease)
    stop_margin_s: float = 5.0     # stop fetching this long before the lease ends if not renewed
    retry_s: float = 2.0           # a failed renewal is tried again after this

    def __post_init__(self) -> None:
        if not 0 < self.stop_margin_s < self.renew_before_s < self.ttl_s:
            raise ValueError("lease terms need 0 < stop_margin_s < renew_before_s < ttl_s")
        if not 0 < self.retry_s <= self.renew_before_s - self.stop_margin_s:
            raise ValueError("retry_s must leave room for a retry before the stop margin")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The shared store's row for one partition (its clock, its truth)."""

    partition: int
    owner: str | None = None
    epoch: int = 0
    lease_until: float = 0.0


def grant(rec: LeaseRecord, worker_id: str, now: float, ttl_s: float) -> LeaseRecord | None:
    """Acquire: only when free or expired (a new owner starts only after the old
    lease expired); the epoch goes up by one. None when refused."""
    if rec.owner is not None and rec.lease_until > now:
        return None
    return replace(rec, owner=worker_id, epoch=rec.epoch + 1, lease_until=now + ttl_s)


def extend(rec: LeaseRecord, worker_id: str, epoch: int, now: float, ttl_s: float) -> LeaseRecord | None:
    """Renew: only the current owner with the current epoch, before expiry; never
    shortens. None when refused (the lease is lost: acquire again)."""
    if rec.owner != worker_id or rec.epoch != epoch or rec.lease_until <= now:
        return None
    return replace(rec, lease_until=max(rec.lease_until, now + ttl_s))


def give_up(rec: LeaseRecord, worker_id: str, epoch: int) -> LeaseRecord | None:
    """Release (the worker already stopped fetching): free now, epoch kept so the
    next grant still moves it forward. None when it was not ours."""
    if rec.owner != worker_id or rec.epoch != epoch:
        return None
    return replace(rec, owner=None, lease_until=0.0)


def write_allowed(rec: LeaseRecord, epoch: int) -> bool:
    """A write for this partition is accepted only with the current epoch."""
    return rec.epoch == epoch


# ---- a worker's view of one lease: the table ---------------------------------------------

class ViewState(enum.Enum):
    OWNED = "owned"          # fetching; no renewal in flight
    RENEWING = "renewing"    # fetching; a renewal is in flight
    LOST = "lost"            # not fetching; never extended again (absorbing)
    RELEASED = "released"    # given up on purpose (absorbing)


class Input(enum.Enum):
    RENEW_DUE = "renew_due"            # time to send a renewal
    RENEW_OK = "renew_ok"              # the store extended the lease
    RENEW_FAILED = "renew_failed"      # no answer / store unavailable: try again later
    RENEW_REFUSED = "renew_refused"    # the store says it is not ours any more
    STOP_DUE = "stop_due"              # stop_margin_s before the lease ends, not renewed
    RELEASE = "release"                # the worker gives it up (rebalance, shutdown)
    WRITE_REFUSED = "write_refused"    # a write came back StaleEpoch


class Effect(enum.Enum):
    SEND_RENEW = "send_renew"
    EXTEND = "extend"                  # move expires_at to renew asked_at + ttl_s
    STOP_FETCHING = "stop_fetching"
    SEND_RELEASE = "send_release"


_S, _I, _E = ViewState, Input, Effect
_STOP = (_E.STOP_FETCHING,)
_LET_GO = (_E.STOP_FETCHING, _E.SEND_RELEASE)

TRANSITIONS: Mapping[tuple[ViewState, Input], tuple[tuple[Effect, ...], ViewState]] = {
    (_S.OWNED, _I.RENEW_DUE): ((_E.SEND_RENEW,), _S.RENEWING),
    (_S.OWNED, _I.RENEW_OK): ((), _S.OWNED),              # a stray duplicate answer: ignored
    (_S.OWNED, _I.RENEW_FAILED): ((), _S.OWNED),          # a stray duplicate answer: ignored
    (_S.OWNED, _I.RENEW_REFUSED): (_STOP, _S.LOST),
    (_S.OWNED, _I.STOP_DUE): (_STOP, _S.LOST),
    (_S.OWNED, _I.RELEASE): (_LET_GO, _S.RELEASED),
    (_S.OWNED, _I.WRITE_REFUSED): (_STOP, _S.LOST),
    (_S.RENEWING, _I.RENEW_DUE): ((), _S.RENEWING),       # one renewal in flight at a time
    (_S.RENEWING, _I.RENEW_OK): ((_E.EXTEND,), _S.OWNED),
    (_S.RENEWING, _I.RENEW_FAILED): ((), _S.OWNED),       # retried after retry_s
    (_S.RENEWING, _I.RENEW_REFUSED): (_STOP, _S.LOST),
    (_S.RENEWING, _I.STOP_DUE): (_STOP, _S.LOST),
    (_S.RENEWING, _I.RELEASE): (_LET_GO, _S.RELEASED),
    (_S.RENEWING, _I.WRITE_REFUSED): (_STOP, _S.LOST),
    # A renewal that lands after the stop instant is never used: give it back.
    (_S.LOST, _I.RENEW_OK): ((_E.SEND_RELEASE,), _S.LOST),
    **{(_S.LOST, i): ((), _S.LOST) for i in Input if i is not _I.RENEW_OK},
    **{(_S.RELEASED, i): ((), _S.RELEASED) for i in Input},
}

FETCHING = frozenset({ViewState.OWNED, ViewState.RENEWING})


def transition(state: ViewState, event: Input) -> tuple[tuple[Effect, ...], ViewState]:
    return TRANSITIONS[(state, event)]


# ---- the time layer -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PartitionView:
    """One worker's view of its lease on one partition (local clock)."""

    partition: int
    epoch: int
    terms: LeaseTerms
    state: ViewState
    expires_at: float
    renew_at: float
    renew_asked_at: float | None = None

    @classmethod
    def granted(cls, partition: int, epoch: int, asked_at: float, terms: LeaseTerms) -> "PartitionView":
        """The view after an acquire that was *sent* at `asked_at` succeeded."""
        expires = asked_at + terms.ttl_s
        return cls(partition, epoch, terms, ViewState.OWNED, expires, expires - terms.renew_before_s)

    @property
    def stop_at(self) -> float:
        return self.expires_at - self.terms.stop_margin_s

    def may_fetch(self, now: float) -> bool:
        """The gate every fetch for this partition passes, checked right before
        the request is sent: owned and before the stop instant."""
        return self.state in FETCHING and now < self.stop_at

    def next_wakeup(self) -> float | None:
        if self.state is ViewState.OWNED:
            return min(self.renew_at, self.stop_at)
        if self.state is ViewState.RENEWING:
            return self.stop_at
        return None

    def tick(self, now: float) -> tuple["PartitionView", tuple[Effect, ...]]:
        """Feed the time inputs that are due: STOP_DUE wins over RENEW_DUE."""
        if self.state in FETCHING and now >= self.stop_at:
            return self._fire(Input.STOP_DUE, now)
        if self.state is ViewState.OWNED and now >= self.renew_at:
            return self._fire(Input.RENEW_DUE, now)
        return self, ()

    def on(self, event: Input, now: float) -> tuple["PartitionView", tuple[Effect, ...]]:
        """Feed an answer or a request. A due stop is applied first, so an answer
        that arrives after the stop instant cannot revive the lease."""
        view: PartitionView = self
        effects: tuple[Effect, ...] = ()
        if self.state in FETCHING and now >= self.stop_at:
            view, effects = self._fire(Input.STOP_DUE, now)
        view, more = view._fire(event, now)
        return view, effects + more

    def _fire(self, event: Input, now: float) -> tuple["PartitionView", tuple[Effect, ...]]:
        effects, nxt = transition(self.state, event)
        view = replace(self, state=nxt)
        if Effect.SEND_RENEW in effects:
            view = replace(view, renew_asked_at=now)
        if Effect.EXTEND in effects:
            asked = self.renew_asked_at if self.renew_asked_at is not None else now
            expires = max(self.expires_at, asked + self.terms.ttl_s)
            view = replace(view, expires_at=expires, renew_at=expires - self.terms.renew_before_s,
                           renew_asked_at=None)
        elif event is Input.RENEW_FAILED and self.state is ViewState.RENEWING:
            view = replace(view, renew_at=now + self.terms.retry_s, renew_asked_at=None)
        return view, effects
