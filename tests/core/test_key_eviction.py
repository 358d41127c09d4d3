"""Evicting idle per-key state and reading it back (issue 16, item 5): the
politeness state of keys and IPs, the robots.txt book and the ban runs.

Pure: `now` is an argument; the "store" is a dict of JSON texts, so what is
read back went through the same round trip as crawl.db. The main check is a
twin: one book evicts and reads back, the other never evicts; fed the same
events, both must answer the same (politeness is never bent by an eviction).
"""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.ban import BanWatch
from courtly.core.health import Health
from courtly.core.politeness import Politeness, PolitenessConfig
from courtly.core.robots import RobotsBook, RobotsFailed, RobotsFetched, RobotsState

T0 = 1_700_000_000.0
CFG = PolitenessConfig()


class DictStore:
    """Snapshots as JSON text, as the hosts and robots tables hold them."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.reads = 0

    def save(self, pairs) -> int:
        for k, snap in pairs:
            self.rows[k] = json.dumps(snap)
        return len(pairs)

    def load(self, k: str):
        self.reads += 1
        text = self.rows.get(k)
        return None if text is None else json.loads(text)


def never_busy(_key: str) -> bool:
    return False


def politeness_pair() -> tuple[Politeness, Politeness, DictStore]:
    store = DictStore()
    evicting = Politeness(CFG, rng=random.Random(3), load=store.load)
    twin = Politeness(CFG, rng=random.Random(3))
    return evicting, twin, store


def fetch(p: Politeness, key: str, now: float, *, status=200, response_s=0.05, retry_after=None,
          error=None, ip="192.0.2.1") -> float:
    p.started(key, now)
    return p.finished(key, now + response_s, response_s=response_s, status=status,
                      retry_after=retry_after, error=error, ip=ip)


# ---- politeness keys ----------------------------------------------------------------------------


def test_an_idle_key_is_evicted_and_its_state_read_back_equals_the_state_before() -> None:
    p, _, store = politeness_pair()
    p.set_crawl_delay("a.test", 7.0, T0)
    fetch(p, "a.test", T0, response_s=2.0)
    fetch(p, "a.test", T0 + 20, status=500)
    before = p.key("a.test").snapshot()
    assert store.save(p.evict_idle(T0 + 10_000, keep=0, busy=never_busy)) == 1
    assert p.key_count == 0
    assert p.key("a.test").snapshot() == before
    assert p.key_count == 1


def test_a_key_is_not_evicted_in_flight_before_its_next_fetch_in_back_off_or_when_busy() -> None:
    p, _, _ = politeness_pair()
    p.started("flight.test", T0)
    ready = fetch(p, "wait.test", T0)
    fetch(p, "backoff.test", T0, status=503, retry_after="600")
    fetch(p, "busy.test", T0)
    gone = p.evict_idle(ready - 0.001, keep=0, busy=lambda k: k == "busy.test")
    assert gone == []
    gone = p.evict_idle(ready, keep=0, busy=lambda k: k == "busy.test")
    assert [k for k, _ in gone] == ["wait.test"]
    gone = p.evict_idle(T0 + 600.05, keep=0, busy=lambda k: k == "busy.test")
    assert [k for k, _ in gone] == ["backoff.test"]
    assert sorted(p.known_keys()) == ["busy.test", "flight.test"]


def test_forgetting_a_released_partitions_keys_keeps_those_in_flight_waiting_in_back_off_or_busy() -> None:
    p, _, _ = politeness_pair()
    p.started("flight.test", T0)
    ready = fetch(p, "wait.test", T0)
    fetch(p, "backoff.test", T0, status=503, retry_after="600")
    fetch(p, "busy.test", T0)
    fetch(p, "other.test", T0)
    released = ["flight.test", "wait.test", "backoff.test", "busy.test", "unknown.test"]
    assert p.forget_idle(released, ready - 0.001, busy=lambda k: k == "busy.test") == 0
    assert p.forget_idle(released, ready, busy=lambda k: k == "busy.test") == 1
    assert sorted(p.known_keys()) == ["backoff.test", "busy.test", "flight.test", "other.test"]


def test_the_bound_holds_for_idle_keys() -> None:
    p, _, store = politeness_pair()
    for i in range(50):
        fetch(p, f"k{i}.test", T0)
    store.save(p.evict_idle(T0 + 100, keep=10, busy=never_busy))
    assert p.key_count == 10 and len(store.rows) == 40
    assert p.known_keys() == [f"k{i}.test" for i in range(40, 50)]   # the oldest went first


def test_an_evicted_key_that_returns_waits_its_delay_back_off_and_retry_after_as_if_never_evicted() -> None:
    p, twin, store = politeness_pair()
    now = T0
    for q in (p, twin):   # slow answers raise the delay; a 503 with Retry-After backs it off
        for i in range(5):
            fetch(q, "slow.test", now + 100 * i, response_s=1.5)
        fetch(q, "slow.test", now + 600, status=503, retry_after="900")
    assert p.ready_at("slow.test", now + 600) >= now + 1500   # the Retry-After is in force
    assert p.evict_idle(now + 1400, keep=0, busy=never_busy) == []   # in back-off: kept
    now += 1500.1
    store.save(p.evict_idle(now, keep=0, busy=never_busy))
    assert p.key_count == 0
    for _ in range(4):   # back again: every instant it may start at is the twin's
        r1, r2 = p.ready_at("slow.test", now), twin.ready_at("slow.test", now)
        assert r1 == r2 and p.key("slow.test").delay_s == twin.key("slow.test").delay_s > 3.0
        n1 = fetch(p, "slow.test", max(r1, now), response_s=0.2)
        n2 = fetch(twin, "slow.test", max(r2, now), response_s=0.2)
        assert n1 == n2
        now = n1
        store.save(p.evict_idle(now, keep=0, busy=never_busy))   # evicted after every fetch
    assert store.reads >= 4


def test_an_evicted_parked_key_is_still_parked_and_keeps_its_probe_schedule() -> None:
    p, twin, store = politeness_pair()
    now = T0
    for q in (p, twin):
        t = now
        for _ in range(CFG.park_after):
            t = max(fetch(q, "down.test", t, status=0, error="connect"), t)
    assert p.health("down.test") is Health.PARKED
    probe_at = p.ready_at("down.test", now)
    store.save(p.evict_idle(probe_at, keep=0, busy=never_busy))
    assert p.key_count == 0
    assert p.health("down.test") is Health.PARKED   # read back on the question
    n1 = fetch(p, "down.test", probe_at, status=0, error="connect")
    n2 = fetch(twin, "down.test", probe_at, status=0, error="connect")
    assert n1 == n2 and p.key("down.test").probe_s == twin.key("down.test").probe_s


def test_a_key_never_seen_and_never_saved_starts_fresh() -> None:
    p, _, store = politeness_pair()
    assert p.ready_at("new.test", T0) == 0.0 and p.key("new.test").delay_s == CFG.delay_s
    assert store.reads == 1


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([200, 200, 404, 429, 500, 503, 0]),
                          st.floats(0.0, 4.0), st.sampled_from([None, "30", "garbage"]),
                          st.booleans()),
                min_size=1, max_size=40))
def test_evicting_whenever_possible_never_changes_when_a_key_may_start(events) -> None:
    p, twin, store = politeness_pair()
    now = T0
    for k, status, response_s, retry_after, evict in events:
        key = f"k{k}.test"
        start = max(now, p.ready_at(key, now))
        assert start == max(now, twin.ready_at(key, now))
        error = "connect" if status == 0 else None
        n1 = fetch(p, key, start, status=status, response_s=response_s, retry_after=retry_after, error=error)
        n2 = fetch(twin, key, start, status=status, response_s=response_s, retry_after=retry_after, error=error)
        assert n1 == n2
        now = start + response_s
        if evict:
            store.save(p.evict_idle(now, keep=0, busy=never_busy))
    for k in range(4):
        assert p.key(f"k{k}.test").snapshot() == twin.key(f"k{k}.test").snapshot()


# ---- politeness IPs -----------------------------------------------------------------------------


def test_an_ip_is_evicted_only_when_idle_past_its_rate_window() -> None:
    p = Politeness(CFG)
    token = p.ip_started("192.0.2.7", T0)
    assert p.evict_idle_ips(T0 + 5, keep=0) == 0            # in flight
    p.ip_finished("192.0.2.7", token, T0 + 0.5)
    assert p.evict_idle_ips(T0 + 1.5, keep=0) == 0          # its window still counts
    assert p.evict_idle_ips(T0 + 1.5 + CFG.ip_margin_s, keep=0) == 1
    assert p.ip_count == 0
    assert p.ip_ready_at("192.0.2.7", T0 + 2) == T0 + 2     # as good as remembered: nothing waits


def test_an_ip_that_remembers_a_slow_key_is_kept() -> None:
    p = Politeness(CFG)
    for i in range(5):   # a median response of 2 s: 10 x 2 s raises every key on that server
        fetch(p, "slow.test", T0 + 100 * i, response_s=2.0, ip="192.0.2.9")
    fetch(p, "fast.test", T0, response_s=0.01, ip="192.0.2.10")
    assert p.evict_idle_ips(T0 + 10_000, keep=0) == 1
    assert p.ip_count == 1


def test_the_ip_bound_holds_for_idle_ips() -> None:
    p = Politeness(CFG)
    for i in range(30):
        tok = p.ip_started(f"192.0.2.{i}", T0)
        p.ip_finished(f"192.0.2.{i}", tok, T0)
    assert p.evict_idle_ips(T0 + 60, keep=5) == 25 and p.ip_count == 5


# ---- robots.txt ---------------------------------------------------------------------------------


def robots_pair() -> tuple[RobotsBook, RobotsBook, DictStore]:
    store = DictStore()
    return RobotsBook(load=store.load), RobotsBook(), store


def test_an_evicted_robots_copy_is_read_back_and_not_refetched_before_it_expires() -> None:
    book, twin, store = robots_pair()
    for b in (book, twin):
        b.fetch_started("https://a.test", T0)
        b.fetch_finished("https://a.test", T0 + 1, RobotsFetched(200, b"User-agent: *\nDisallow: /private\n"))
    before = book.snapshot("https://a.test")
    assert store.save(book.evict_idle(keep=0)) == 1 and len(book) == 0
    view = book.lookup("https://a.test", T0 + 3600)
    assert view.state is RobotsState.READY and view.expires_at == twin.lookup("https://a.test", T0 + 3600).expires_at
    assert view.skip_reason("courtly", "/private/x") is not None and view.skip_reason("courtly", "/ok") is None
    assert book.snapshot("https://a.test") == before
    assert book.lookup("https://a.test", view.expires_at).state is RobotsState.NEED_FETCH   # and due after


def test_an_evicted_robots_failure_keeps_its_retry_time_and_failure_count() -> None:
    book, twin, store = robots_pair()
    for b in (book, twin):
        for t in (T0, T0 + 100):
            b.fetch_started("https://f.test", t)
            b.fetch_finished("https://f.test", t + 1, RobotsFailed("timeout"))
    store.save(book.evict_idle(keep=0))
    assert len(book) == 0
    for t in (T0 + 150, T0 + 300):
        v1, v2 = book.lookup("https://f.test", t), twin.lookup("https://f.test", t)
        assert (v1.state, v1.retry_at, v1.unreachable) == (v2.state, v2.retry_at, v2.unreachable)
    assert book.next_due_at("https://f.test") == twin.next_due_at("https://f.test")


def test_a_robots_fetch_in_flight_is_never_evicted_and_the_bound_holds_for_the_rest() -> None:
    book, _, store = robots_pair()
    book.fetch_started("https://busy.test", T0)
    for i in range(20):
        o = f"https://o{i}.test"
        book.fetch_started(o, T0)
        book.fetch_finished(o, T0 + 1, RobotsFetched(404))
    store.save(book.evict_idle(keep=5))
    assert len(book) == 5 and "https://busy.test" not in store.rows
    assert book.evict_idle(keep=0) and len(book) == 1   # only the fetch in flight is left


# ---- ban runs -----------------------------------------------------------------------------------


def test_idle_ban_runs_are_forgotten_beyond_the_bound_and_a_paused_key_is_kept() -> None:
    bans = BanWatch()
    for i in range(10):
        bans.answered("paused.test", f"https://paused.test/{i}", 403, b"no")
    assert bans.paused_on("paused.test")
    for i in range(20):
        bans.answered(f"k{i}.test", "https://k.test/", 200, b"x" * 100)
    assert bans.evict_idle(keep=3, busy=lambda k: k == "k19.test") == 18
    assert len(bans) == 3 and bans.paused_on("paused.test")


def test_forgetting_a_released_partitions_ban_runs_keeps_a_paused_or_busy_key() -> None:
    bans = BanWatch()
    for i in range(10):
        bans.answered("paused.test", f"https://paused.test/{i}", 403, b"no")
    for key in ("a.test", "b.test", "kept.test"):
        bans.answered(key, "https://k.test/", 200, b"x" * 100)
    assert bans.forget(["paused.test", "a.test", "b.test", "none.test"], busy=lambda k: k == "b.test") == 1
    assert len(bans) == 3 and bans.paused_on("paused.test")
