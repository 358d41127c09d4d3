"""Host health: when a politeness key is failing, parked (down) or given up.

Theory of operation
-------------------
Every completed request to a key is one signal: a success, or a failure of
one `FailureKind` (connection refused, reset, timeout, TLS, a 5xx; a 429 backs
the key off but says the host is up, so it is not a health failure). The key
walks the table below; the *effect* tells `core/politeness.py` what to do
with the key's delay and next fetch instant:

    state     signal          -> state     effect
    healthy   success            healthy   recover   (delay smoothed back down)
    healthy   failure            failing   back_off  (delay doubled, jitter, cap)
    healthy   failure_limit      parked    park      (first probe in probe_s_min)
    failing   success            healthy   recover
    failing   failure            failing   back_off
    failing   failure_limit      parked    park
    parked    success            healthy   resume    (normal delay again)
    parked    failure            parked    reprobe   (probe interval doubled)
    parked    horizon            down      give_up   (queued URLs: host_down)
    down      success            healthy   resume
    down      failure            down      reprobe
    any       ban                paused    pause     (core/ban.py: 403 wave, challenge)
    down      ban                down      reprobe   (its URLs stay given up)
    paused    ban                paused    reprobe
    paused    failure            paused    reprobe
    paused    horizon            down      give_up   (queued URLs: banned)
    paused    success            healthy   resume
    ...       horizon            (as before, where not listed above)

`failure_limit` is a failure that makes `park_after` in a row; `horizon` is a
failure (or a ban answer) more than `down_horizon_s` after the first one of
the run. A paused key (banning us) is probed like a parked one. A parked key takes no URL from its queue: its next fetch instant is
the probe, one request (the next URL) on an exponential schedule from
`probe_s_min` doubling up to `probe_s_max`. Its queued URLs stay queued and
their attempt counts are not touched (the host failed, not the URL). A
down key still probes on that schedule; the URLs it is handed meanwhile are
given up with reason `host_down`, naming the first and last failure.

Rules: pure; a table, tried whole by a property test over every pair.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Health", "Signal", "Effect", "FailureKind", "TABLE", "step", "failure_kind"]


class Health(StrEnum):
    HEALTHY = "healthy"
    FAILING = "failing"     # one or more failures in a row, below park_after
    PARKED = "parked"       # down: one probe at a time on the probe schedule
    DOWN = "down"           # down past the horizon: its URLs are given up
    PAUSED = "paused"       # answers with a ban or a challenge: probes only


class Signal(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    FAILURE_LIMIT = "failure_limit"   # this failure makes park_after in a row
    HORIZON = "horizon"               # a failure past down_horizon_s since the first
    BAN = "ban"                       # the answer shows a ban (core/ban.py)


class Effect(StrEnum):
    RECOVER = "recover"
    BACK_OFF = "back_off"
    PARK = "park"
    REPROBE = "reprobe"
    RESUME = "resume"
    GIVE_UP = "give_up"
    PAUSE = "pause"


class FailureKind(StrEnum):
    """What went wrong, as counted in metrics and shown by `explain`."""

    CONNECT = "connect"     # refused, unreachable, connect failed
    RESET = "reset"         # the connection was reset or closed mid-answer
    TIMEOUT = "timeout"     # connect or read timeout (fetch.connect_s / total_s)
    TLS = "tls"             # handshake or certificate failure
    HTTP_5XX = "5xx"        # any 5xx answer (500, 502, 503, 504, ...)
    BAN = "ban"             # a 403 wave or a challenge page (core/ban.py), not from failure_kind


_H, _S, _E = Health, Signal, Effect
TABLE: dict[tuple[Health, Signal], tuple[Health, Effect]] = {
    (_H.HEALTHY, _S.SUCCESS): (_H.HEALTHY, _E.RECOVER),
    (_H.HEALTHY, _S.FAILURE): (_H.FAILING, _E.BACK_OFF),
    (_H.HEALTHY, _S.FAILURE_LIMIT): (_H.PARKED, _E.PARK),
    (_H.HEALTHY, _S.HORIZON): (_H.PARKED, _E.PARK),       # park_after 1 and a long-ago first failure
    (_H.FAILING, _S.SUCCESS): (_H.HEALTHY, _E.RECOVER),
    (_H.FAILING, _S.FAILURE): (_H.FAILING, _E.BACK_OFF),
    (_H.FAILING, _S.FAILURE_LIMIT): (_H.PARKED, _E.PARK),
    (_H.FAILING, _S.HORIZON): (_H.DOWN, _E.GIVE_UP),
    (_H.PARKED, _S.SUCCESS): (_H.HEALTHY, _E.RESUME),
    (_H.PARKED, _S.FAILURE): (_H.PARKED, _E.REPROBE),
    (_H.PARKED, _S.FAILURE_LIMIT): (_H.PARKED, _E.REPROBE),
    (_H.PARKED, _S.HORIZON): (_H.DOWN, _E.GIVE_UP),
    (_H.DOWN, _S.SUCCESS): (_H.HEALTHY, _E.RESUME),
    (_H.DOWN, _S.FAILURE): (_H.DOWN, _E.REPROBE),
    (_H.DOWN, _S.FAILURE_LIMIT): (_H.DOWN, _E.REPROBE),
    (_H.DOWN, _S.HORIZON): (_H.DOWN, _E.REPROBE),
    (_H.HEALTHY, _S.BAN): (_H.PAUSED, _E.PAUSE),
    (_H.FAILING, _S.BAN): (_H.PAUSED, _E.PAUSE),
    (_H.PARKED, _S.BAN): (_H.PAUSED, _E.PAUSE),
    (_H.DOWN, _S.BAN): (_H.DOWN, _E.REPROBE),      # given up already: a ban keeps it so
    (_H.PAUSED, _S.SUCCESS): (_H.HEALTHY, _E.RESUME),
    (_H.PAUSED, _S.FAILURE): (_H.PAUSED, _E.REPROBE),
    (_H.PAUSED, _S.FAILURE_LIMIT): (_H.PAUSED, _E.REPROBE),
    (_H.PAUSED, _S.HORIZON): (_H.DOWN, _E.GIVE_UP),
    (_H.PAUSED, _S.BAN): (_H.PAUSED, _E.REPROBE),
}


def step(state: Health, signal: Signal) -> tuple[Health, Effect]:
    """The next state and the effect of `signal` in `state` (the table, total)."""
    return TABLE[(state, signal)]


# fetcher error kinds that mean the host (not the URL) failed; the others
# (protocol, too_large_headers, decode, ...) are answers from a live host
_ERROR_KINDS = {
    "connect": FailureKind.CONNECT,
    "reset": FailureKind.RESET,
    "timeout": FailureKind.TIMEOUT,
    "tls": FailureKind.TLS,
}


def failure_kind(status: int, error: str | None) -> FailureKind | None:
    """The health failure a completed request shows, or None for a live host.
    A 429 is a throttle (backed off in politeness), not a failure of the host."""
    if status >= 500:
        return FailureKind.HTTP_5XX
    if status == 0 and error:
        return _ERROR_KINDS.get(error)
    return None
