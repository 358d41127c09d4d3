"""The watch list store and the webhook sender: retries with back-off on the
injected clock, dead letters, resumption after a restart, the Atom feed."""

from __future__ import annotations

import asyncio

import feedparser
import pytest

from clock_support import ManualClock
from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.shell.feed import atom_feed
from courtly.shell.store.sqlite import StoreError
from courtly.shell.store.watch_sqlite import SqliteWatchStore
from courtly.shell.webhook import ChangeLog, WebhookSender


def event(watch_id: int, at: float, url: str = "http://a.test/p") -> ChangeEvent:
    return ChangeEvent(watch_id, url, at, at - 60, at, {"added": ["new <b> & text"], "removed": ["old"],
                                                        "changed": [{"before": "$1", "after": "$2", "context": "Price:"}]},
                       ("old",), ("new <b> & text",))


@pytest.fixture
def store(tmp_path):
    s = SqliteWatchStore(tmp_path / "crawl.db")
    yield s
    s.close()


def test_watches_are_added_paused_removed_and_survive_reopening(tmp_path, store):
    w = store.add(Watch("http://a.test/p", every_s=30, select=("main",)))
    assert w.id == 1 and store.version() == 1
    with pytest.raises(StoreError, match="watched already"):
        store.add(Watch("http://a.test/p"))
    store.set_paused("http://a.test/p", True)
    again = SqliteWatchStore(tmp_path / "crawl.db")
    assert again.watches() == [Watch("http://a.test/p", every_s=30, select=("main",), paused=True, id=1)]
    again.remove("1")
    assert again.watches() == [] and again.version() == 3
    assert store.add(Watch("http://a.test/p", every_s=5)).id == 1    # back, with its old id
    again.close()


def test_states_round_trip(store):
    st = WatchState(checks=3, blocks=("a", "b"), fingerprint="f")
    st.noise.learned.append("Quote: *")
    store.save_states({1: st})
    assert store.states()[1].to_json() == st.to_json()


def run_sender(sender: WebhookSender, until) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        task = asyncio.create_task(sender.run())
        for _ in range(1000):
            if until():
                break
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(main())


def test_failing_receiver_is_retried_with_backoff_then_dead_lettered(store):
    clock = ManualClock(1000.0)
    attempts = []

    async def post(url, body, timeout_s, headers):
        attempts.append(clock.now())
        return 503, ""

    sender = WebhookSender(clock, store, attempts_max=4, backoff_s=2.0, post=post)
    seq = store.record_change(event(1, 1000.0), "http://hook.test/")
    sender.change(seq, event(1, 1000.0), "http://hook.test/")
    run_sender(sender, lambda: sender.dead == 1)
    assert attempts == [1000.0, 1002.0, 1006.0, 1014.0]
    [dead] = store.dead_letters()
    assert dead.seq == seq and dead.attempts == 4 and dead.last_error == "status 503"


def test_delivered_event_carries_the_change_is_signed_and_is_marked(store):
    clock = ManualClock(0.0)
    bodies = []

    async def post(url, body, timeout_s, headers):
        bodies.append(body)
        signatures.append(headers["X-Courtly-Signature"])
        return 204, ""

    signatures: list[str] = []
    sender = WebhookSender(clock, store, post=post, secret="shared")
    seq = store.record_change(event(1, 50.0), "http://hook.test/")
    sender.change(seq, event(1, 50.0), "http://hook.test/")
    run_sender(sender, lambda: sender.delivered == 1)
    assert b'"diff"' in bodies[0] and store.change(seq).delivery == "delivered"
    import hashlib
    import hmac

    assert signatures == ["sha256=" + hmac.new(b"shared", bodies[0], hashlib.sha256).hexdigest()]


def test_pending_deliveries_resume_after_a_restart(store):
    seq = store.record_change(event(1, 50.0), "http://hook.test/")
    store.set_delivery(seq, "pending", 2, "status 500")
    sender = WebhookSender(ManualClock(0.0), store, attempts_max=3, post=None)
    assert sender.load_pending() == 1 and len(sender) == 1


def test_full_queue_makes_a_dead_letter_not_a_loss(store):
    sender = WebhookSender(ManualClock(0.0), store, queue_max=1, post=None)
    for at in (1.0, 2.0):
        seq = store.record_change(event(1, at), "http://hook.test/")
        sender.change(seq, event(1, at), "http://hook.test/")
    assert len(sender) == 1 and [d.last_error for d in store.dead_letters()] == ["queue full (1 events waiting)"]


def test_change_log_writes_one_json_line_per_event(tmp_path):
    log = ChangeLog(tmp_path / "changes.jsonl")
    log.change(1, event(1, 10.0), "")
    log.change(2, event(1, 20.0), "")
    log.close()
    assert len((tmp_path / "changes.jsonl").read_text().splitlines()) == 2


def test_atom_feed_validates_with_feedparser_and_escapes(store):
    for at in (100.0, 200.0):
        store.record_change(event(1, at), "")
    xml = atom_feed(store.changes(), feed_id="urn:courtly:test", title="changes \x01 & more",
                    self_url="http://127.0.0.1/feed.atom", updated_at=300.0)
    feed = feedparser.parse(xml)
    assert not feed.bozo, feed.bozo_exception
    assert feed.version == "atom10" and len(feed.entries) == 2
    assert feed.entries[0].id == "urn:courtly:test/change/2"
    assert "+ new <b> & text" in feed.entries[0].summary
