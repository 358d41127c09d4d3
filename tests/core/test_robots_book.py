"""courtly.core.robots: the fetch outcomes and the fetch-state table of RobotsBook (RFC 9309 2.3.1 and 2.4)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.robots import (
    ALLOW_ALL,
    CACHE_S_MAX,
    DISALLOW_ALL,
    TRANSITIONS,
    Effect,
    Event,
    Phase,
    RobotsBook,
    RobotsFailed,
    RobotsFailure,
    RobotsFetched,
    RobotsState,
    RobotsStateError,
    classify,
)
from courtly.core.types import Origin, Reason


# --- outcomes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "event"),
    [
        (RobotsFetched(200, b""), Event.LOADED),
        (RobotsFetched(204, b""), Event.LOADED),
        (RobotsFetched(200, b"", redirects=5), Event.LOADED),
        (RobotsFetched(200, b"", redirects=6), Event.UNAVAILABLE),
        (RobotsFetched(301, b""), Event.UNAVAILABLE),
        (RobotsFetched(304, b""), Event.UNAVAILABLE),
        (RobotsFetched(401, b""), Event.UNAVAILABLE),
        (RobotsFetched(403, b""), Event.UNAVAILABLE),
        (RobotsFetched(404, b""), Event.UNAVAILABLE),
        (RobotsFetched(410, b""), Event.UNAVAILABLE),
        (RobotsFetched(429, b""), Event.UNREACHABLE),
        (RobotsFetched(500, b""), Event.UNREACHABLE),
        (RobotsFetched(503, b""), Event.UNREACHABLE),
        (RobotsFetched(599, b""), Event.UNREACHABLE),
        (RobotsFetched(100, b""), Event.UNREACHABLE),
        (RobotsFetched(999, b""), Event.UNREACHABLE),
        (RobotsFailed("timeout"), Event.UNREACHABLE),
        (RobotsFailed("network"), Event.UNREACHABLE),
        (RobotsFailed("too_many_redirects"), Event.UNAVAILABLE),
        (RobotsFailed("dns"), Event.BLOCKED),
        (RobotsFailed("non_public"), Event.BLOCKED),
    ],
)
def test_robots_outcome_classification(outcome: RobotsFetched | RobotsFailed, event: Event) -> None:
    assert classify(outcome) is event


def test_robots_failed_kind_is_checked() -> None:
    with pytest.raises(ValueError):
        RobotsFailed("cosmic_ray")


def test_a_robots_failure_given_as_its_string_becomes_the_enum_member() -> None:
    assert RobotsFailed("dns").kind is RobotsFailure.DNS
    assert RobotsFailed(RobotsFailure.TIMEOUT) == RobotsFailed("timeout")


# --- the fetch-state table ------------------------------------------------------------------------

O = "http://a.test:8080"
GOOD = b"User-agent: *\nDisallow: /private\n"
OUTCOMES = {
    Event.LOADED: RobotsFetched(200, GOOD),
    Event.UNAVAILABLE: RobotsFetched(404, b"User-agent: *\nDisallow: /\n"),
    Event.UNREACHABLE: RobotsFetched(503, b""),
    Event.BLOCKED: RobotsFailed("dns"),
}


def _book_in(phase: Phase, now: float = 0.0) -> RobotsBook:
    book = RobotsBook()
    if phase is not Phase.ABSENT:
        book.fetch_started(O, now)
    if phase is Phase.FRESH:
        book.fetch_finished(O, now, OUTCOMES[Event.LOADED])
    if phase is Phase.FAILED:
        book.fetch_finished(O, now, OUTCOMES[Event.UNREACHABLE])
    assert book.phase(O) is phase
    return book


def test_robots_table_covers_every_state_input_pair() -> None:
    assert set(TRANSITIONS) == set(itertools.product(Phase, Event))


@pytest.mark.parametrize(("phase", "event"), list(itertools.product(Phase, Event)))
def test_robots_table_every_pair(phase: Phase, event: Event) -> None:
    book = _book_in(phase)
    before = book.snapshot(O)
    nxt, effect = TRANSITIONS[(phase, event)]
    if event is Event.START:
        if effect is Effect.REJECT:
            with pytest.raises(RobotsStateError):
                book.fetch_started(O, 1.0)
        else:
            book.fetch_started(O, 1.0)
    else:
        book.fetch_finished(O, 1.0, OUTCOMES[event])
    assert book.phase(O) is nxt
    view = book.lookup(O, 1.0)
    expected_state = {
        Phase.ABSENT: RobotsState.NEED_FETCH,
        Phase.FETCHING: RobotsState.FETCHING,
        Phase.FRESH: RobotsState.READY,
        Phase.FAILED: RobotsState.READY,
    }[nxt]
    assert view.state is expected_state
    if effect in (Effect.IGNORE, Effect.REJECT):
        assert book.snapshot(O) == before
    if effect is Effect.STORE:
        assert view.rules is not None and not view.rules.allowed("courtly", "/private/x")
        assert view.expires_at == 1.0 + CACHE_S_MAX
    if effect is Effect.STORE_ALLOW_ALL:
        assert view.rules == ALLOW_ALL  # the 404 body is never parsed
    if effect is Effect.BLOCK:
        assert view.rules == DISALLOW_ALL and view.unreachable
    if effect is Effect.BACK_OFF:
        assert view.retry_at is not None and view.retry_at > 1.0
        # from FETCHING after a good copy at t=0 the copy is reused; otherwise disallow all
        assert view.rules is not None


def test_robots_2xx_is_cached_at_most_24_hours() -> None:
    book = _book_in(Phase.FRESH, now=100.0)
    assert book.lookup(O, 100.0 + CACHE_S_MAX - 1).state is RobotsState.READY
    assert book.lookup(O, 100.0 + CACHE_S_MAX).state is RobotsState.NEED_FETCH
    assert book.next_due_at(O) == 100.0 + CACHE_S_MAX
    with pytest.raises(ValueError):
        RobotsBook(cache_s=CACHE_S_MAX + 1)


def test_robots_the_view_of_a_fresh_copy_follows_every_change_of_the_copy() -> None:
    book = _book_in(Phase.FRESH, now=0.0)
    first = book.lookup(O, 1.0)
    assert book.lookup(O, 2.0) == first and not first.rules.allowed("courtly", "/private")
    book.fetch_started(O, 3.0)   # a refetch in flight keeps the copy in use
    assert book.lookup(O, 3.0).state is RobotsState.FETCHING
    book.fetch_finished(O, 4.0, RobotsFetched(200, b"User-agent: *\nDisallow: /other\n"))
    second = book.lookup(O, 5.0)
    assert second.expires_at == 4.0 + CACHE_S_MAX and second.rules.allowed("courtly", "/private")
    book.restore(O, _book_in(Phase.FRESH, now=10.0).snapshot(O))
    third = book.lookup(O, 11.0)
    assert third.expires_at == 10.0 + CACHE_S_MAX and not third.rules.allowed("courtly", "/private")
    book.forget(O)
    assert book.lookup(O, 12.0).state is RobotsState.NEED_FETCH


def test_robots_4xx_allows_all() -> None:
    book = RobotsBook()
    book.fetch_started(O, 0.0)
    view = book.fetch_finished(O, 0.0, RobotsFetched(404, b"User-agent: *\nDisallow: /\n"))
    assert view.state is RobotsState.READY and view.skip_reason("courtly", "/x") is None


def test_robots_too_many_redirects_allows_all() -> None:
    book = RobotsBook()
    book.fetch_started(O, 0.0)
    assert book.fetch_finished(O, 0.0, RobotsFetched(200, b"User-agent: *\nDisallow: /", redirects=6)).rules == ALLOW_ALL


@pytest.mark.parametrize("outcome", [RobotsFetched(500), RobotsFetched(503), RobotsFetched(429), RobotsFailed("timeout"), RobotsFailed("network")])
def test_robots_5xx_disallows_all(outcome: RobotsFetched | RobotsFailed) -> None:
    book = RobotsBook()
    book.fetch_started(O, 0.0)
    view = book.fetch_finished(O, 0.0, outcome)
    assert view.state is RobotsState.READY and view.rules == DISALLOW_ALL and view.unreachable
    assert view.skip_reason("courtly", "/x") is Reason.ROBOTS_UNREACHABLE
    assert view.retry_at == 60.0


def test_robots_5xx_reuses_the_last_good_copy_for_24_hours() -> None:
    book = RobotsBook(cache_s=3600.0)
    book.fetch_started(O, 0.0)
    book.fetch_finished(O, 0.0, RobotsFetched(200, GOOD))
    book.fetch_started(O, 3600.0)
    view = book.fetch_finished(O, 3600.0, RobotsFetched(503))
    assert view.rules is not None and view.rules.allowed("courtly", "/public") and not view.unreachable
    assert view.skip_reason("courtly", "/private") is Reason.ROBOTS
    # the back-off lets the copy age past 24 h: then it is disallow all
    t = 3600.0
    while t < CACHE_S_MAX + 7200:
        v = book.lookup(O, t)
        if v.state is RobotsState.NEED_FETCH:
            book.fetch_started(O, t)
            book.fetch_finished(O, t, RobotsFailed("network"))
            v = book.lookup(O, t)
        assert v.state is RobotsState.READY
        assert v.unreachable is (t > CACHE_S_MAX)
        t += 600.0


def test_robots_dns_failure_never_reuses_the_old_copy() -> None:
    book = RobotsBook(cache_s=60.0)
    book.fetch_started(O, 0.0)
    book.fetch_finished(O, 0.0, RobotsFetched(200, GOOD))
    book.fetch_started(O, 60.0)
    view = book.fetch_finished(O, 60.0, RobotsFailed("non_public"))
    assert view.rules == DISALLOW_ALL and view.unreachable


def test_robots_retry_backs_off_doubling_to_the_cap() -> None:
    book = RobotsBook(retry_s_min=60.0, retry_s_max=3600.0)
    now, gaps = 0.0, []
    for _ in range(9):
        assert book.lookup(O, now).state is RobotsState.NEED_FETCH
        book.fetch_started(O, now)
        view = book.fetch_finished(O, now, RobotsFetched(503))
        assert view.retry_at is not None and book.next_due_at(O) == view.retry_at
        gaps.append(view.retry_at - now)
        now = view.retry_at
    assert gaps == [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]
    book.fetch_started(O, now)
    book.fetch_finished(O, now, RobotsFetched(200, GOOD))
    book.fetch_started(O, now + CACHE_S_MAX)
    assert book.fetch_finished(O, now + CACHE_S_MAX, RobotsFetched(503)).retry_at == now + CACHE_S_MAX + 60


def test_robots_fetch_that_never_finishes_times_out() -> None:
    book = RobotsBook(fetch_timeout_s=30.0)
    book.fetch_started(O, 0.0)
    assert book.lookup(O, 29.0).state is RobotsState.FETCHING
    assert book.next_due_at(O) == 30.0
    with pytest.raises(RobotsStateError):
        book.fetch_started(O, 29.0)
    view = book.lookup(O, 30.0)
    assert view.state is RobotsState.READY and view.unreachable and view.retry_at == 90.0
    book.fetch_finished(O, 31.0, RobotsFetched(200, GOOD))  # late answer: ignored
    assert book.lookup(O, 31.0).unreachable


def test_robots_view_not_ready_has_no_verdict() -> None:
    with pytest.raises(RobotsStateError):
        RobotsBook().lookup(O, 0.0).skip_reason("courtly", "/")


def test_robots_book_accepts_origin_values() -> None:
    book = RobotsBook()
    origin = Origin("http", "a.test", 8080)
    book.fetch_started(origin, 0.0)
    assert book.lookup(O, 0.0).state is RobotsState.FETCHING


def test_robots_snapshot_round_trips_through_json() -> None:
    book = _book_in(Phase.FRESH, now=5.0)
    data = json.loads(json.dumps(book.snapshot(O)))
    other = RobotsBook()
    other.restore(O, data)
    assert other.lookup(O, 10.0) == book.lookup(O, 10.0)
    assert RobotsBook().snapshot(O) is None


def test_robots_snapshot_forgets_the_fetch_in_flight() -> None:
    book = _book_in(Phase.FRESH, now=0.0)
    book.fetch_started(O, CACHE_S_MAX)
    restored = RobotsBook()
    restored.restore(O, book.snapshot(O))
    assert restored.phase(O) is Phase.FRESH
    assert restored.lookup(O, CACHE_S_MAX).state is RobotsState.NEED_FETCH
    fresh = RobotsBook()
    fresh.fetch_started(O, 0.0)
    assert fresh.snapshot(O) is None
    with pytest.raises(ValueError):
        fresh.restore(O, {"v": 99, "phase": "fresh"})


def test_robots_prune_drops_only_expired_good_copies() -> None:
    book = _book_in(Phase.FRESH, now=0.0)
    assert book.prune(CACHE_S_MAX) == 0
    assert book.prune(CACHE_S_MAX + 1) == 1 and len(book) == 0


_OPS = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=40_000, allow_nan=False),
        st.sampled_from(["lookup", "start", *[e.value for e in OUTCOMES], "late"]),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_robots_book_invariants_hold_for_any_sequence(ops: list[tuple[float, str]]) -> None:
    book = RobotsBook(cache_s=20_000.0, fetch_timeout_s=500.0)
    now, good_at, fetching = 0.0, None, False
    for dt, op in ops:
        now += dt
        view = book.lookup(O, now)
        fetching = view.state is RobotsState.FETCHING
        if op == "start":
            if fetching:
                with pytest.raises(RobotsStateError):
                    book.fetch_started(O, now)
            else:
                book.fetch_started(O, now)
        elif op in {e.value for e in OUTCOMES}:
            event = Event(op)
            book.fetch_finished(O, now, OUTCOMES[event])
            if fetching and event in (Event.LOADED, Event.UNAVAILABLE):
                good_at = now
        view = book.lookup(O, now)
        if view.state is RobotsState.READY:
            assert view.rules is not None
            if view.unreachable:
                assert view.rules == DISALLOW_ALL and view.retry_at is not None
            else:
                assert good_at is not None and now - good_at <= CACHE_S_MAX
        else:
            assert view.rules is None
        snap = book.snapshot(O)
        json.dumps(snap)
        if snap is not None and view.state is not RobotsState.FETCHING:
            copy = RobotsBook(cache_s=20_000.0, fetch_timeout_s=500.0)
            copy.restore(O, snap)
            assert copy.lookup(O, now) == view


def test_an_abandoned_fetch_leaves_the_origin_as_it_was_so_the_next_lookup_fetches_again() -> None:
    """A fetch that ends with no answer (the lease lost, the crawl stopping)
    must not stay FETCHING: its URLs would wait `fetch_timeout_s` and then be
    refused as robots-unreachable although nothing was asked of the server."""
    first = _book_in(Phase.FETCHING)                    # a first fetch, abandoned
    first.fetch_abandoned(O)
    assert first.phase(O) is Phase.ABSENT and first.lookup(O, 500.0).state is RobotsState.NEED_FETCH
    again = _book_in(Phase.FRESH)                       # a refresh of a good copy, abandoned
    expires = again.next_due_at(O)
    assert expires is not None
    again.fetch_started(O, expires)
    again.fetch_abandoned(O)
    assert again.phase(O) is Phase.FRESH and again.lookup(O, expires).state is RobotsState.NEED_FETCH
    again.fetch_started(O, expires + 1.0)               # a new fetch may start at once
    assert again.phase(O) is Phase.FETCHING
    idle = _book_in(Phase.FAILED)                       # nothing in flight: nothing changes
    snap = idle.snapshot(O)
    idle.fetch_abandoned(O)
    assert idle.snapshot(O) == snap
