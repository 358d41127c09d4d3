"""Tests of politeness: the adaptive per-key delay, back-off, Retry-After,
the per-IP concurrency and rate limits, and allowlist entries.

All pure: every call gets `now`; property tests drive the state with
simulated instants, so nothing here depends on the clock.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.politeness import AllowEntry, Politeness, PolitenessConfig

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None)

# exact doubling and no parking: the delay formula alone (tests/core/test_health.py
# covers the jitter, parking and probes of the default settings)
CFG = PolitenessConfig(backoff_jitter=0.0, park_after=1000)
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()


def fetch(p: Politeness, key: str, now: float, *, response_s=0.01, status=200, retry_after=None) -> float:
    """Start at `now`, finish `response_s` later; return the key's next ready instant."""
    p.started(key, now)
    return p.finished(key, now + response_s, response_s=response_s, status=status, retry_after=retry_after)


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


# ---- the delay formula --------------------------------------------------------


def test_new_key_may_start_at_once():
    p = Politeness(CFG)
    assert p.ready_at("a", 0.0) == 0.0
    assert p.may_start("a", 0.0)


def test_fast_responses_keep_the_minimum_delay():
    p = Politeness(CFG)
    assert fetch(p, "a", 100.0, response_s=0.05) == pytest.approx(100.05 + 1.0)
    assert p.key("a").delay_s == 1.0


def test_one_slow_or_dripping_response_does_not_move_the_delay():
    p = Politeness(CFG)
    now = fetch(p, "a", 0.0, response_s=0.05)
    now = fetch(p, "a", now, response_s=60.0)     # a body dripped until the fetch deadline
    assert p.key("a").delay_s == 1.0
    for _ in range(3):
        now = fetch(p, "a", now, response_s=0.05)
    assert p.key("a").delay_s == 1.0


def test_slow_responses_on_most_of_the_window_raise_the_delay_smoothed_0_8_old_0_2_target():
    p = Politeness(CFG)
    fetch(p, "a", 0.0, response_s=0.5)
    fetch(p, "a", 10.0, response_s=0.5)
    assert p.key("a").delay_s == 1.0               # two of five: no trend yet
    ready = fetch(p, "a", 20.0, response_s=0.5)     # three of five: median 0.5, target 10 x 0.5
    assert p.key("a").delay_s == pytest.approx(0.8 * 1.0 + 0.2 * 5.0)
    assert ready == pytest.approx(20.5 + 1.8)


def test_the_response_time_term_is_capped():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(80):
        now = fetch(p, "a", now, response_s=50.0)   # 10 x 50 s would be 500 s
    assert p.key("a").delay_s == pytest.approx(CFG.response_delay_s_max, rel=1e-6)


def test_delay_converges_to_ten_times_the_response_time():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(80):
        now = fetch(p, "a", now, response_s=0.3)
    assert p.key("a").delay_s == pytest.approx(3.0, rel=1e-6)


def test_crawl_delay_is_a_floor_applied_at_once_and_never_smoothed_below():
    p = Politeness(CFG)
    p.set_crawl_delay("a", 5.0, now=0.0)
    assert p.key("a").delay_s == 5.0
    now = 0.0
    for _ in range(20):
        ready = fetch(p, "a", now, response_s=0.01)
        assert ready == pytest.approx(now + 0.01 + 5.0)
        assert p.key("a").delay_s >= 5.0
        now = ready


def test_crawl_delay_above_the_cap_is_capped():
    p = Politeness(PolitenessConfig(crawl_delay_s_max=30.0))
    p.set_crawl_delay("a", 100.0, now=0.0)
    assert p.key("a").delay_s == 30.0
    assert fetch(p, "a", 0.0, response_s=0.0) == 30.0


def test_crawl_delay_below_the_minimum_does_not_lower_it():
    p = Politeness(CFG)
    p.set_crawl_delay("a", 0.2, now=0.0)
    assert fetch(p, "a", 0.0, response_s=0.0) == 1.0


def test_dropping_the_crawl_delay_lets_the_delay_come_back_down():
    p = Politeness(CFG)
    p.set_crawl_delay("a", 10.0, now=0.0)
    now = fetch(p, "a", 0.0, response_s=0.0)
    p.set_crawl_delay("a", None, now=now)
    for _ in range(60):
        now = fetch(p, "a", now, response_s=0.0)
    assert p.key("a").delay_s == pytest.approx(1.0, abs=1e-3)


STATUSES = st.sampled_from([200, 200, 200, 301, 404, 500, 429, 503])


@PROPERTY
@given(
    delay_s=st.sampled_from([0.0, 0.25, 1.0, 3.0]),
    cap=st.sampled_from([0.0, 5.0, 30.0]),
    crawl_delay=st.none() | st.sampled_from([0.0, 0.5, 2.0, 10.0, 120.0]),
    steps=st.lists(st.tuples(st.floats(0.0, 20.0), STATUSES), min_size=1, max_size=40),
)
def test_delay_follows_the_formula_and_never_goes_below_the_floor(delay_s, cap, crawl_delay, steps):
    cfg = PolitenessConfig(delay_s=delay_s, crawl_delay_s_max=cap, backoff_jitter=0.0, park_after=1000)
    p = Politeness(cfg)
    window: list[float] = []
    p.set_crawl_delay("a", crawl_delay, now=0.0)
    floor = delay_s if crawl_delay is None else max(delay_s, min(crawl_delay, cap))
    expected = max(delay_s, floor)
    now = 0.0
    for response_s, status in steps:
        ready = fetch(p, "a", now, response_s=response_s, status=status)
        if status in (429, 500, 503):
            expected = max(min(max(expected * 2.0, floor), 3600.0), floor)
        else:
            window = (window + [response_s])[-5:]
            median = sorted(window + [0.0] * (5 - len(window)))[2]
            target = max(delay_s, floor, min(10.0 * median, 30.0))
            expected = max(floor, 0.8 * expected + 0.2 * target)
        d = p.key("a").delay_s
        assert d == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert d >= floor
        assert ready == now + response_s + d
        now = ready


# ---- 429 / 503 back-off and Retry-After ---------------------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_double_the_delay_up_to_one_hour(status):
    p = Politeness(CFG)
    now = 0.0
    seen = []
    for _ in range(16):
        ready = fetch(p, "a", now, response_s=0.0, status=status)
        seen.append(p.key("a").delay_s)
        assert ready == now + p.key("a").delay_s
        now = ready
    assert seen[:11] == [2.0**k for k in range(1, 12)]  # 2 s .. 2048 s
    assert seen[11:] == [3600.0] * 5


def test_answers_that_are_not_failures_do_not_double_the_delay():
    p = Politeness(CFG)
    for status in (404, 403, 400, 301):
        fetch(p, "a", p.ready_at("a", 0.0) + 1000.0, response_s=0.0, status=status)
        assert p.key("a").delay_s == 1.0


def test_retry_after_seconds_sets_the_back_off():
    p = Politeness(CFG)
    ready = fetch(p, "a", 1000.0, response_s=0.0, status=429, retry_after="120")
    assert ready == 1120.0
    assert p.ready_at("a", 1001.0) == 1120.0
    assert not p.may_start("a", below(1120.0))
    with pytest.raises(RuntimeError):
        p.started("a", below(1120.0))
    p.started("a", 1120.0)


def test_retry_after_http_date_sets_the_back_off():
    p = Politeness(CFG)
    header = format_datetime(datetime.fromtimestamp(T0 + 300, tz=timezone.utc), usegmt=True)
    ready = fetch(p, "a", T0, response_s=0.0, status=503, retry_after=header)
    assert ready == T0 + 300
    assert p.key("a").backoff_until == T0 + 300


@pytest.mark.parametrize("garbage", ["soon", "", "-5", "1.5", "Tomorrow, 12:00", "²", "١٢"])
def test_retry_after_garbage_is_ignored_and_the_doubled_delay_applies(garbage):
    p = Politeness(CFG)
    ready = fetch(p, "a", 50.0, response_s=0.0, status=429, retry_after=garbage)
    assert ready == 52.0
    assert p.key("a").backoff_until == 0.0


def test_retry_after_longer_than_an_hour_is_capped_at_an_hour():
    p = Politeness(CFG)
    assert fetch(p, "a", 10.0, response_s=0.0, status=429, retry_after="86400") == 10.0 + 3600.0


def test_retry_after_shorter_than_the_doubled_delay_does_not_shorten_it():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(4):
        now = fetch(p, "a", now, response_s=0.0, status=429)
    assert p.key("a").delay_s == 16.0
    assert fetch(p, "a", now, response_s=0.0, status=429, retry_after="3") == now + 32.0


def test_retry_after_on_a_success_is_ignored():
    p = Politeness(CFG)
    assert fetch(p, "a", 0.0, response_s=0.0, status=200, retry_after="120") == 1.0


def test_back_off_decays_after_successes():
    p = Politeness(CFG)
    now = 0.0
    for _ in range(5):
        now = fetch(p, "a", now, response_s=0.0, status=503)
    assert p.key("a").delay_s == 32.0
    previous = 32.0
    for _ in range(40):
        now = fetch(p, "a", now, response_s=0.01)
        d = p.key("a").delay_s
        assert d < previous
        previous = d
    assert previous < 1.01
    assert p.key("a").backoff_reason == ""


def test_back_off_reason_is_recorded():
    p = Politeness(CFG)
    fetch(p, "a", 0.0, response_s=0.0, status=429, retry_after="30")
    assert p.key("a").backoff_reason == "429 Retry-After 30"


# ---- one request in flight per key --------------------------------------------


def test_started_twice_without_finished_raises():
    p = Politeness(CFG)
    p.started("a", 0.0)
    with pytest.raises(RuntimeError):
        p.started("a", 100.0)
    assert not p.may_start("a", 100.0)
    p.started("b", 0.0)  # other keys are independent


def test_started_before_ready_raises_and_exactly_at_ready_is_allowed():
    p = Politeness(CFG)
    ready = fetch(p, "a", 0.0, response_s=0.2)
    assert ready == pytest.approx(0.2 + 1.0)
    with pytest.raises(RuntimeError):
        p.started("a", below(ready))
    assert not p.key("a").in_flight  # the refused start left no trace
    p.started("a", ready)


def test_aborted_frees_the_key_without_moving_its_next_fetch():
    p = Politeness(CFG)
    ready = fetch(p, "a", 0.0, response_s=0.0)
    p.started("a", ready)
    assert p.aborted("a", ready + 0.5) == ready
    assert p.may_start("a", ready + 0.5)


def test_snapshot_and_restore_keep_the_next_fetch_instant():
    p = Politeness(CFG)
    p.set_crawl_delay("a", 4.0, now=0.0)
    ready = fetch(p, "a", 0.0, response_s=0.0, status=429, retry_after="60")
    q = Politeness(CFG)
    q.restore("a", p.key("a").snapshot())
    assert q.ready_at("a", 1.0) == ready == 60.0
    assert q.key("a").snapshot() == p.key("a").snapshot()


@PROPERTY
@given(
    keys=st.integers(1, 3),
    steps=st.lists(
        st.tuples(
            st.integers(0, 2),                                   # which key's loop moves
            st.sampled_from([0.0, 0.0, 0.1, 2.0]),               # extra wait before starting
            st.floats(0.0, 5.0),                                 # response time
            STATUSES,
            st.sampled_from([None, "0", "5", "7200", "garbage", "DATE+90"]),  # Retry-After
            st.sampled_from(["same", "same", "same", None, 0.5, 4.0, 60.0]),  # robots refresh
        ),
        max_size=60,
    ),
)
def test_fetch_loop_gap_is_never_below_the_delay_that_applied(keys, steps):
    p = Politeness(CFG)
    clock = {}      # per key: instant the loop is at
    required = {}   # per key: earliest permitted next start, from the last completion
    last_done = {}  # per key: instant the last request completed
    for idx, wait, response_s, status, retry_after, crawl_delay in steps:
        key = f"k{idx % keys}"
        now = clock.get(key, 1000.0)
        if crawl_delay != "same":
            p.set_crawl_delay(key, crawl_delay, now)
        ready = p.ready_at(key, now)
        if key in required:
            assert ready >= required[key]
            # the delay in force now, which a larger Crawl-delay may have raised
            assert ready - last_done[key] >= p.key(key).delay_s - 1e-9
        with pytest.raises(RuntimeError):
            p.started(key, below(ready))  # a moment too early is refused
        start = max(now, ready) + wait
        p.started(key, start)
        with pytest.raises(RuntimeError):
            p.started(key, start)  # one request in flight per key
        done = start + response_s
        header = retry_after
        if header == "DATE+90":
            header = format_datetime(datetime.fromtimestamp(done, tz=timezone.utc) + timedelta(seconds=90), usegmt=True)
        nxt = p.finished(key, done, response_s=response_s, status=status, retry_after=header)
        delay = p.key(key).delay_s
        assert delay >= 1.0
        cd = p.key(key).crawl_delay_s
        if cd is not None:
            assert delay >= min(cd, CFG.crawl_delay_s_max)
        need = done + delay
        if status in (429, 503) and retry_after not in (None, "garbage"):
            # the server's instant, computed here without the parser under test
            server = math.floor(done) + 90 if retry_after == "DATE+90" else done + int(retry_after)
            need = max(need, min(server, done + CFG.backoff_s_max))
        assert nxt >= need
        required[key] = need
        last_done[key] = done
        clock[key] = done


# ---- per IP -------------------------------------------------------------------


def test_ip_concurrency_is_a_hard_limit_and_ready_is_none_at_the_limit():
    p = Politeness(PolitenessConfig(ip_concurrency=2, ip_rate=100.0))
    assert p.ip_ready_at("1.2.3.4", 0.0) == 0.0
    p.ip_started("1.2.3.4", 0.0)
    p.ip_started("1.2.3.4", 0.0)
    assert p.ip_in_flight("1.2.3.4") == 2
    assert p.ip_ready_at("1.2.3.4", 0.0) is None
    assert p.ip_ready_at("1.2.3.4", 1e6) is None
    with pytest.raises(RuntimeError):
        p.ip_started("1.2.3.4", 5.0)
    assert p.ip_in_flight("1.2.3.4") == 2
    assert p.ip_ready_at("5.6.7.8", 0.0) == 0.0  # other IPs are independent
    p.ip_finished("1.2.3.4")
    assert p.ip_ready_at("1.2.3.4", 5.0) == 5.0
    p.ip_started("1.2.3.4", 5.0)


def test_ip_rate_waits_for_the_oldest_start_to_leave_the_window():
    p = Politeness(PolitenessConfig(ip_concurrency=10, ip_rate=5.0, ip_margin_s=0.01))
    tokens = []
    for t in (0.0, 0.1, 0.2, 0.3, 0.4):
        assert p.ip_ready_at("ip", t) == t
        tokens.append(p.ip_started("ip", t))
    # the request the window hinges on is still in flight: wait for a completion
    assert p.ip_ready_at("ip", 0.5) is None
    p.ip_finished("ip", tokens[0], 0.0)          # it completed at once
    assert p.ip_ready_at("ip", 0.5) == pytest.approx(1.01)
    with pytest.raises(RuntimeError):
        p.ip_started("ip", 1.0)
    p.ip_started("ip", 1.01)
    p.ip_finished("ip", tokens[1], 0.1)
    assert p.ip_ready_at("ip", 1.02) == pytest.approx(1.11)


def test_ip_rate_counts_from_completion_so_a_late_arrival_cannot_crowd_the_window():
    # a request stamped at 0.0 may reach the server as late as its completion
    # (a slow connect): the window is measured from there, not from the stamp
    p = Politeness(PolitenessConfig(ip_concurrency=10, ip_rate=2.0, ip_margin_s=0.0))
    first = p.ip_started("ip", 0.0)
    second = p.ip_started("ip", 0.05)
    p.ip_finished("ip", first, 0.3)
    p.ip_finished("ip", second, 0.06)
    assert p.ip_ready_at("ip", 0.1) == pytest.approx(1.3)


def test_ip_finished_never_goes_below_zero():
    p = Politeness(CFG)
    p.ip_finished("ip")
    assert p.ip_in_flight("ip") == 0


@PROPERTY
@given(
    conc=st.integers(1, 5),
    rate=st.sampled_from([0.5, 1.0, 2.5, 5.0, 8.0]),
    events=st.lists(
        st.tuples(st.booleans(), st.sampled_from([0.0, 0.0, 0.003, 0.05, 0.4, 1.3])),
        max_size=120,
    ),
)
def test_ip_starts_at_permitted_instants_never_exceed_the_rate_in_any_window(conc, rate, events):
    p = Politeness(PolitenessConfig(ip_concurrency=conc, ip_rate=rate))
    now = 0.0
    starts: list[float] = []
    in_flight = 0
    for want_start, dt in events:
        now += dt
        ready = p.ip_ready_at("ip", now)
        if want_start and ready is not None:
            assert ready >= now
            if ready > now:
                with pytest.raises(RuntimeError):
                    p.ip_started("ip", now)
            now = ready
            p.ip_started("ip", now)
            starts.append(now)
            in_flight += 1
        elif in_flight and (ready is None or not want_start):
            p.ip_finished("ip")
            in_flight -= 1
        assert p.ip_in_flight("ip") == in_flight <= conc
        if in_flight >= conc:
            assert p.ip_ready_at("ip", now) is None
    # any closed window of length `span` holds at most `allowed` starts
    span, allowed = (1.0, math.floor(rate)) if rate >= 1 else (1.0 / rate, 1)
    for i, s in enumerate(starts):
        in_window = [t for t in starts[i:] if t <= s + span]
        assert len(in_window) <= allowed, (s, in_window)
    if rate >= 1:
        for i, s in enumerate(starts):
            assert len([t for t in starts[i:] if t <= s + 1.0]) <= rate


# ---- allowlist ----------------------------------------------------------------


def _loop_gaps(p: Politeness, key: str, start: float, until: float, response_s: float = 0.0):
    """Fetch as fast as allowed; return (start, gap since the previous completion) pairs."""
    out = []
    now = start
    done = None
    while now < until:
        while (ready := p.ready_at(key, now)) > now:  # as the runtime does: wait, ask again
            now = ready
        p.started(key, now)
        if done is not None:
            out.append((now, now - done))
        done = now + response_s
        p.finished(key, done, response_s=response_s, status=200)
        now = done
    return out


def test_allowlist_faster_delay_applies_until_it_expires_then_the_default_returns():
    entry = AllowEntry(key="friend.example", delay_s=0.1, owner="ops@example", expires_at=100.0)
    p = Politeness(CFG, allowlist=(entry,))
    assert p.delay_s_min("friend.example", 99.9) == 0.1
    assert p.delay_s_min("friend.example", 100.0) == 1.0
    assert p.delay_s_min("other.example", 50.0) == 1.0
    gaps = _loop_gaps(p, "friend.example", 0.0, 200.0, response_s=0.01)
    before = [g for t, g in gaps if t < 95.0]
    after = [g for t, g in gaps if t >= 100.0]
    assert before and after
    assert min(before) < 0.2            # the negotiated delay was used
    assert max(before[-10:]) < 1.0
    assert min(after) >= 1.0 - 1e-9     # and the default came back by itself
    assert p.key("friend.example").delay_s >= 1.0
    # an ordinary key never goes below the default
    q = Politeness(CFG, allowlist=(entry,))
    assert min(g for _, g in _loop_gaps(q, "other.example", 0.0, 50.0)) >= 1.0


def test_allowlist_expiring_during_a_request_applies_to_the_gap_after_it():
    entry = AllowEntry(key="a", delay_s=0.1, owner="ops", expires_at=100.0)
    p = Politeness(CFG, allowlist=(entry,))
    p.restore("a", {"delay_s": 0.1, "fetches": 10})
    p.started("a", 99.9)
    nxt = p.finished("a", 100.2, response_s=0.3, status=200)
    assert p.key("a").delay_s >= 1.0
    assert nxt >= 100.2 + 1.0


@pytest.mark.parametrize("cause", ["allowlist_expires", "crawl_delay_grows"])
def test_a_floor_that_rises_between_requests_applies_to_the_next_request(cause):
    entry = AllowEntry(key="a", delay_s=0.1, owner="ops", expires_at=100.0)
    p = Politeness(CFG, allowlist=(entry,) if cause == "allowlist_expires" else ())
    p.restore("a", {"delay_s": 0.1 if cause == "allowlist_expires" else 1.0, "fetches": 10})
    done = 99.95
    p.started("a", 99.0)
    nxt = p.finished("a", done, response_s=0.0, status=200)
    if cause == "crawl_delay_grows":
        p.set_crawl_delay("a", 10.0, now=99.96)  # robots.txt refreshed
    start = max(100.0, p.ready_at("a", 100.0))  # asked again once the floor has risen
    assert nxt < start  # the instant promised under the old floor is no longer enough
    with pytest.raises(RuntimeError):
        p.started("a", max(100.0, nxt))
    p.started("a", start)
    assert start - done >= p.key("a").delay_s - 1e-9
    assert p.key("a").delay_s == (1.0 if cause == "allowlist_expires" else 10.0)


# ---- config -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay_s": -1.0},
        {"crawl_delay_s_max": -1.0},
        {"backoff_s_max": 0.0},
        {"ip_concurrency": 0},
        {"ip_rate": 0.0},
        {"smoothing_old": 1.0},
        {"smoothing_old": -0.1},
    ],
)
def test_config_refuses_impossible_values(kwargs):
    with pytest.raises(ValueError):
        PolitenessConfig(**kwargs)


def test_hold_key_until_delays_only_that_key_and_never_shortens():
    p = Politeness(PolitenessConfig(delay_s=1.0))
    p.hold_key_until("a.test", 50.0)
    assert p.ready_at("a.test", 10.0) == 50.0 and p.ready_at("b.test", 10.0) == 0.0
    p.hold_key_until("a.test", 20.0)
    assert p.ready_at("a.test", 10.0) == 50.0
    p.started("a.test", 50.0)
    p.finished("a.test", 50.5, response_s=0.1, status=200)
    assert p.ready_at("a.test", 50.5) == pytest.approx(51.5)


def test_a_slowed_key_waits_factor_times_its_floor_at_once_and_gets_it_back_when_lifted():
    p = Politeness(PolitenessConfig(delay_s=1.0))
    p.started("a", 0.0)
    assert p.finished("a", 0.0, response_s=0.0, status=200) == 1.0
    p.slow_down("a", 10.0, 0.0, 0.5)
    assert p.ready_at("a", 0.5) == 10.0 and p.key("a").delay_s == 10.0
    p.slow_down("b", 2.0, 30.0, 0.5)           # the fixed minimum wins over 2 x 1 s
    assert p.key("b").delay_s == 30.0 and p.slowed_keys() == ["a", "b"]
    p.lift_slow_down("a", 1.0)
    assert p.key("a").delay_s == 1.0 and p.ready_at("a", 1.0) == 10.0   # the planned fetch keeps its time
    p.started("a", 10.0)
    assert p.finished("a", 10.0, response_s=0.0, status=200) == 11.0


def test_a_slow_down_never_speeds_a_key_up():
    with pytest.raises(ValueError):
        Politeness(PolitenessConfig()).slow_down("a", 0.5, 0.0, 0.0)
