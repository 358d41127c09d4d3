"""runtime/monitor: which watch is due, never two checks of one in flight,
edits of the list picked up at the next poll, events handed to every sink."""

from __future__ import annotations

from dataclasses import replace

from courtly.config import Config
from courtly.core.watch import LEARN_CHECKS, Watch
from courtly.sim.watchpage import WatchPage


class FakeStore:
    def __init__(self, watches):
        self.list, self.v, self.saved, self.changes = list(watches), 1, {}, []

    def version(self):
        return self.v

    def watches(self):
        return list(self.list)

    def states(self):
        return {}

    def save_states(self, states):
        self.saved.update(states)

    def record_change(self, ev, webhook):
        self.changes.append((ev, webhook))
        return len(self.changes)


class Sink:
    def __init__(self):
        self.got = []

    def change(self, seq, ev, webhook):
        self.got.append((seq, ev.url, webhook))

    def counts(self):
        return {"delivered": len(self.got)}


def monitor(watches):
    from courtly.runtime.monitor import Monitor

    m = Monitor(Config().replace("crawl", intent="monitor"))
    store, sink = FakeStore(watches), Sink()
    m.attach(store, [sink])
    m.load(0.0)
    return m, store, sink


def test_a_due_watch_is_handed_out_once_until_answered():
    m, _, _ = monitor([Watch("http://a.test/1", every_s=10, id=1)])
    assert m.due(0.0) == ["http://a.test/1"]
    assert m.due(0.0) == [] and m.next_wakeup() is None          # in flight
    m.fetched("http://a.test/1", 200, b"<p>hello there world</p>", "text/html", 0.5, 0.5)
    assert m.next_wakeup() == 0.5                                  # learning: again at once (politeness spaces it)


def test_paused_and_removed_watches_are_picked_up_at_the_next_poll():
    m, store, _ = monitor([Watch("http://a.test/1", id=1), Watch("http://a.test/2", id=2)])
    store.list = [replace(store.list[0], paused=True)]
    m.poll(1.0)
    assert m.due(1.0) == ["http://a.test/1", "http://a.test/2"]    # not re-read: the version did not move
    for url in ("http://a.test/1", "http://a.test/2"):
        m.released(url, 1.0)
    store.v += 1
    m.poll(2.0)
    assert m.due(2.0) == [] and m.next_wakeup() is None and not m.owns("http://a.test/2")


def test_a_real_change_goes_to_the_store_and_every_sink_noise_does_not():
    page = WatchPage("/p", "both", (100.0,), 7)
    m, store, sink = monitor([Watch("http://a.test/p", every_s=10, id=1, webhook="http://hook.test/")])
    at = 0.0
    for n in range(LEARN_CHECKS + 6):
        at = 10.0 * n
        assert m.due(at) == ["http://a.test/p"]
        m.fetched("http://a.test/p", 200, page.html(at, n), "text/html", at, at)
    assert sink.got == [] and store.changes == []      # published at the commit, after the WARC flush
    m.save()
    assert [(s, u, w) for s, u, w in sink.got] == [(1, "http://a.test/p", "http://hook.test/")]
    assert store.changes[0][0].detected_at == 100.0
    assert store.saved[1].changes == 1
    assert m.snapshot() == {"watches": {"active": 1, "paused": 0}, "checks": LEARN_CHECKS + 6, "changes": 1,
                            "webhook": {"delivered": 1}}


def test_a_non_2xx_answer_or_a_decision_schedules_the_next_check_at_the_interval():
    m, _, _ = monitor([Watch("http://a.test/1", every_s=10, id=1)])
    st = m.states[1]
    st.learning_left = 0
    m.due(0.0)
    m.fetched("http://a.test/1", 503, b"", "text/html", 1.0, 1.0)
    assert m.next_wakeup() == 11.0 and st.checks == 0
    m.due(11.0)
    m.released("http://a.test/1", 12.0)
    assert m.next_wakeup() == 22.0


def test_watches_are_keyed_by_the_crawls_own_normalisation():
    from courtly.runtime.monitor import Monitor

    m = Monitor(Config().replace("crawl", intent="monitor"),
                normalize=lambda urls: [u.replace("?sid=1", "") for u in urls])
    m.attach(FakeStore([Watch("http://a.test/p?sid=1", every_s=10, id=1)]), [])
    m.load(0.0)
    assert m.due(0.0) == ["http://a.test/p"] and m.owns("http://a.test/p")
    m.fetched("http://a.test/p", 200, b"<p>some words of text</p>", "text/html", 1.0, 1.0)
    assert m.states[1].checks == 1 and m.in_flight == set()


def test_only_the_watches_due_are_handed_out_in_order_of_their_instants():
    m, store, _ = monitor([Watch(f"http://a.test/{i}", every_s=10, id=i + 1, added_at=float(i)) for i in range(100)])
    assert m.due(4.5) == [f"http://a.test/{i}" for i in range(5)]
    assert m.next_wakeup() == 5.0
    store.list = store.list[:10]          # 90 removed while 5 are in flight
    store.v += 1
    m.poll(5.0)
    assert m.due(100.0) == [f"http://a.test/{i}" for i in range(5, 10)] and m.next_wakeup() is None
