"""Host health (core/health.py) and what it does to politeness: back-off on
every failure kind, parking with an exponential probe schedule, giving up past
the horizon, recovery, and the per-IP response-time rule.

All pure: instants are arguments; jitter comes from a seeded generator.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.health import TABLE, Effect, FailureKind, Health, Signal, failure_kind, step
from courtly.core.politeness import Politeness, PolitenessConfig

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None)
CFG = PolitenessConfig()
FAILURES = [(0, "connect"), (0, "reset"), (0, "timeout"), (0, "tls"), (500, None), (502, None), (504, None)]


def fetch(p: Politeness, key: str, now: float, *, status: int = 200, error: str | None = None,
          response_s: float = 0.01, ip: str | None = None) -> float:
    """Start at `now` (or when the key is ready, if later); return the next ready instant."""
    start = max(now, p.ready_at(key, now))
    p.started(key, start)
    return p.finished(key, start + response_s, response_s=response_s, status=status, error=error, ip=ip)


# ---- the table ----------------------------------------------------------------


@pytest.mark.parametrize("state", list(Health))
@pytest.mark.parametrize("signal", list(Signal))
def test_every_state_and_signal_pair_has_one_transition_that_keeps_the_rules(state, signal):
    nxt, effect = step(state, signal)
    probing = (Health.PARKED, Health.DOWN, Health.PAUSED)
    if signal is Signal.SUCCESS:
        assert nxt is Health.HEALTHY                         # an answer always brings the key back
        assert effect is (Effect.RESUME if state in probing else Effect.RECOVER)
    else:
        assert nxt is not Health.HEALTHY                     # a failure or a ban never looks healthy
        assert effect not in (Effect.RESUME, Effect.RECOVER)
    if signal is Signal.BAN:   # a ban pauses, whatever came before; a key given up stays given up
        assert nxt is (Health.DOWN if state is Health.DOWN else Health.PAUSED)
        assert effect is (Effect.REPROBE if state in (Health.PAUSED, Health.DOWN) else Effect.PAUSE)
    if effect is Effect.GIVE_UP:
        assert nxt is Health.DOWN and state is not Health.DOWN   # URLs are given up once per outage
    if state in probing and signal is not Signal.SUCCESS:
        assert nxt in probing                                # a probed key never goes back to plain back-off
    assert len(TABLE) == len(Health) * len(Signal)


@pytest.mark.parametrize("status,error", FAILURES)
def test_failure_kinds_are_named_from_the_status_or_the_fetcher_error(status, error):
    kind = failure_kind(status, error)
    assert kind == (FailureKind.HTTP_5XX if status else FailureKind(error))


@pytest.mark.parametrize("status,error", [(200, None), (404, None), (429, None), (0, "protocol"), (0, "decode")])
def test_answers_from_a_live_host_are_no_failure(status, error):
    assert failure_kind(status, error) is None


# ---- back-off on every failure kind -------------------------------------------


@pytest.mark.parametrize("status,error", FAILURES)
def test_every_failure_kind_doubles_the_delay_with_at_most_ten_percent_jitter(status, error):
    p = Politeness(CFG, rng=random.Random(1))
    now = fetch(p, "a", 0.0)
    previous = p.key("a").delay_s
    for _ in range(CFG.park_after - 1):
        now = fetch(p, "a", now, status=status, error=error)
        d = p.key("a").delay_s
        assert 2.0 * previous <= d < 2.0 * previous * (1 + CFG.backoff_jitter)
        previous = d
    assert p.health("a") is Health.FAILING


def test_the_back_off_is_capped_at_backoff_s_max():
    cfg = PolitenessConfig(park_after=1000, backoff_s_max=100.0)
    p = Politeness(cfg)
    now = 0.0
    for _ in range(12):
        now = fetch(p, "a", now, status=0, error="timeout")
    assert p.key("a").delay_s == 100.0


def test_successes_bring_a_backed_off_delay_down_gradually_not_at_once():
    p = Politeness(PolitenessConfig(park_after=1000, backoff_jitter=0.0))
    now = 0.0
    for _ in range(4):
        now = fetch(p, "a", now, status=502)
    assert p.key("a").delay_s == 16.0
    seen = []
    for _ in range(30):
        now = fetch(p, "a", now)
        seen.append(p.key("a").delay_s)
    assert seen[0] == pytest.approx(0.8 * 16.0 + 0.2 * 1.0)
    assert all(b < a for a, b in zip(seen, seen[1:])) and seen[-1] < 1.05


def test_the_jitter_comes_from_the_injected_generator():
    def delays(seed: int) -> list[float]:
        p = Politeness(PolitenessConfig(park_after=1000), rng=random.Random(seed))
        now, out = 0.0, []
        for _ in range(5):
            now = fetch(p, "a", now, status=0, error="reset")
            out.append(p.key("a").delay_s)
        return out

    assert delays(7) == delays(7) and delays(7) != delays(8)


# ---- parking, probes, giving up -----------------------------------------------


@pytest.mark.parametrize("status, error, unreachable", [(0, "connect", True), (0, "timeout", True),
                                                          (500, None, False), (503, None, False)])
def test_a_parked_key_is_unreachable_only_when_its_host_did_not_answer(status, error, unreachable):
    # a host answering 5xx is up: its robots.txt failing is RFC 9309's disallow all, not an outage
    p = Politeness(CFG)
    now = 0.0
    assert not p.unreachable("a")
    for _ in range(CFG.park_after):
        now = fetch(p, "a", now, status=status, error=error)
    assert p.health("a") is Health.PARKED
    assert p.unreachable("a") is unreachable


def test_park_after_failures_in_a_row_waits_for_the_first_probe():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(CFG.park_after):
        now = fetch(p, "a", now, status=0, error="connect")
    st_ = p.key("a")
    assert p.health("a") is Health.PARKED
    assert st_.last_failure_at + 60.0 <= now < st_.last_failure_at + 66.0
    assert "parked" in st_.backoff_reason and "connect" in st_.backoff_reason


def test_probes_of_a_parked_key_double_from_one_minute_up_to_six_hours():
    p = Politeness(CFG, rng=random.Random(3))
    now = 0.0
    for _ in range(CFG.park_after):
        now = fetch(p, "a", now, status=0, error="connect")
    gaps = []
    for _ in range(12):
        done = p.key("a").last_failure_at
        gaps.append(now - done)
        now = fetch(p, "a", now, status=0, error="timeout", response_s=0.0)
    base = [min(60.0 * 2**k, 6 * 3600.0) for k in range(12)]
    for gap, b in zip(gaps, base):
        assert b <= gap <= min(b * (1 + CFG.backoff_jitter), 6 * 3600.0)


def test_a_host_down_for_ten_minutes_gets_about_a_dozen_attempts_then_resumes_at_its_delay():
    p = Politeness(CFG, rng=random.Random(5))
    now, attempts = 0.0, 0
    down_until = 600.0
    while now < down_until:
        attempts += 1
        now = fetch(p, "a", now, status=0, error="connect", response_s=0.001)
    assert attempts <= 12
    ready = fetch(p, "a", now)
    assert p.health("a") is Health.HEALTHY
    assert p.key("a").delay_s == CFG.delay_s and p.key("a").failures == 0
    assert ready == pytest.approx(now + 0.01 + CFG.delay_s)


def test_a_key_down_past_the_horizon_gives_its_urls_up_until_the_next_probe():
    cfg = PolitenessConfig(probe_s_min=10.0, probe_s_max=40.0, down_horizon_s=100.0, backoff_jitter=0.0)
    p = Politeness(cfg)
    now = 0.0
    while p.health("a") is not Health.DOWN:
        now = fetch(p, "a", now, status=503)
        assert now < 1000.0
    st_ = p.key("a")
    assert st_.last_failure_at - st_.first_failure_at >= 100.0
    assert p.gives_up("a", st_.last_failure_at + 1.0)
    assert p.ready_at("a", st_.last_failure_at + 1.0) < st_.backoff_until   # its queue drains meanwhile
    with pytest.raises(RuntimeError):
        p.started("a", st_.backoff_until - 1.0)                              # no request before the probe
    assert not p.gives_up("a", st_.backoff_until)
    fetch(p, "a", st_.backoff_until)                                         # the probe is answered
    assert p.health("a") is Health.HEALTHY and not p.gives_up("a", st_.backoff_until + 1.0)


def test_a_429_backs_off_but_never_parks():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(10):
        now = fetch(p, "a", now, status=429)
    assert p.health("a") is Health.HEALTHY and p.key("a").failures == 0


def test_health_survives_a_snapshot_and_restore():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(CFG.park_after + 1):
        now = fetch(p, "a", now, status=0, error="tls")
    q = Politeness(CFG)
    q.restore("a", p.key("a").snapshot())
    for field in ("health", "failures", "failure_kind", "first_failure_at", "last_failure_at", "probe_s",
                  "backoff_until", "responses"):
        assert getattr(q.key("a"), field) == getattr(p.key("a"), field)
    assert q.ready_at("a", 0.0) == p.ready_at("a", 0.0)


SIGNALS = st.sampled_from(FAILURES + [(200, None)] * 3 + [(429, None), (404, None)])


@PROPERTY
@given(st.lists(st.tuples(SIGNALS, st.floats(0.0, 30.0), st.sampled_from([0.0, 0.0, 5.0])), max_size=60))
def test_gap_after_every_answer_or_failure_is_at_least_the_delay_and_a_parked_key_waits_its_probe(steps):
    p = Politeness(CFG, rng=random.Random(0))
    now = 0.0
    for (status, error), response_s, wait in steps:
        start = max(now, p.ready_at("a", now)) + wait
        if p.gives_up("a", start):
            start = p.key("a").backoff_until
        p.started("a", start)
        done = start + response_s
        nxt = p.finished("a", done, response_s=response_s, status=status, error=error)
        st_ = p.key("a")
        assert nxt >= done + st_.delay_s
        assert st_.delay_s >= CFG.delay_s
        if st_.health in (Health.PARKED, Health.DOWN):
            assert st_.backoff_until >= done + CFG.probe_s_min
        if status == 200:
            assert st_.health is Health.HEALTHY and st_.failures == 0
        now = nxt


# ---- per IP ---------------------------------------------------------------------


def test_slow_answers_from_one_key_on_an_ip_slow_its_neighbours_on_that_ip_only():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(5):
        now = fetch(p, "slow", now, response_s=2.0, ip="10.0.0.1")
    assert p.key("slow").delay_s > CFG.delay_s
    fetch(p, "neighbour", 0.0, response_s=0.01, ip="10.0.0.1")
    fetch(p, "elsewhere", 0.0, response_s=0.01, ip="10.0.0.2")
    assert p.key("neighbour").delay_s == pytest.approx(0.8 * 1.0 + 0.2 * 20.0)
    assert p.key("elsewhere").delay_s == CFG.delay_s


# ---- bans ----------------------------------------------------------------------


def test_a_ban_pauses_the_key_until_a_probe_answers_without_one():
    p = Politeness(CFG, rng=random.Random(2))
    now = fetch(p, "a", 0.0)
    p.started("a", now)
    nxt = p.finished("a", now + 0.01, response_s=0.01, status=403, ban="403 wave")
    st_ = p.key("a")
    assert p.health("a") is Health.PAUSED and "403 wave" in st_.backoff_reason
    assert nxt >= now + 0.01 + CFG.probe_s_min
    p.started("a", nxt)
    again = p.finished("a", nxt + 0.01, response_s=0.01, status=403, ban="403 wave")   # still banned
    assert p.health("a") is Health.PAUSED and again >= nxt + 0.01 + 2 * CFG.probe_s_min
    p.started("a", again)
    p.finished("a", again + 0.01, response_s=0.01, status=200)
    assert p.health("a") is Health.HEALTHY and p.key("a").delay_s == CFG.delay_s


def test_a_key_banning_past_the_horizon_is_down():
    cfg = PolitenessConfig(probe_s_min=10.0, probe_s_max=40.0, down_horizon_s=100.0)
    p = Politeness(cfg)
    now = 0.0
    while p.health("a") is not Health.DOWN:
        start = max(now, p.ready_at("a", now))
        p.started("a", start)
        now = p.finished("a", start + 0.01, response_s=0.01, status=403, ban="challenge page")
        assert start < 1000.0
    assert p.key("a").failure_kind == "ban (challenge page)"


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 80), st.sampled_from([0.0, 0.01, 0.3, 2.0, 9.0])), max_size=300))
def test_the_ip_term_is_the_largest_median_of_the_last_64_keys_on_that_ip(answers):
    from courtly.core.politeness import IP_KEYS_MAX

    p = Politeness(CFG)
    medians: dict[str, float] = {}   # recomputed here, without the incremental bookkeeping
    for i, (k, response_s) in enumerate(answers):
        key = f"k{k}"
        p.started(key, p.ready_at(key, 10.0 * i))
        p.finished(key, max(10.0 * i, p.ready_at(key, 10.0 * i)), response_s=response_s, status=200, ip="10.0.0.9")
        times = p.key(key).responses
        medians.pop(key, None)
        medians[key] = sorted(times + [0.0] * (5 - len(times)))[2]
        while len(medians) > IP_KEYS_MAX:
            del medians[next(iter(medians))]
        ips = p._ips["10.0.0.9"]
        assert ips.key_response_s == medians
        assert ips.key_response_s[ips.slowest_key] == max(medians.values())


@pytest.mark.parametrize("error", ["not_sent", "non_public", "invalid_url", "dns"])
def test_a_request_that_got_no_answer_and_no_host_failure_changes_no_health(error):
    p = Politeness(CFG)
    now = 0.0
    for _ in range(CFG.park_after):
        now = fetch(p, "a", now, status=0, error="connect")
    before = p.key("a").snapshot()
    fetch(p, "a", now, status=0, error=error)      # e.g. the crawl stopping while the probe waited
    after = p.key("a").snapshot()
    assert p.health("a") is Health.PARKED
    assert {k: v for k, v in after.items() if k not in ("next_fetch_at", "fetches")} == \
        {k: v for k, v in before.items() if k not in ("next_fetch_at", "fetches")}
