"""core/watch: learning, events, the adaptive interval and the hosts' verdicts."""

import pytest

from courtly.core.change import content_of
from courtly.core.watch import (
    LEARN_CHECKS, Watch, WatchRuleError, WatchState, checked, host_verdicts, next_check_at, not_modified,
)
from courtly.sim.watchpage import watch_pages


def run(page, watch, times):
    """Check `page` at `times`; the instants of the events."""
    st, rules, out = WatchState(), watch.rules(), []
    for n, at in enumerate(times):
        ev = checked(watch, rules, st, content_of(page.html(at, n), "text/html", rules), at, at)
        if ev is not None:
            out.append(ev)
    return st, out


def sim_page(kind):
    return next(p for p in watch_pages(1, seed=3, duration_s=3000, gap_s_min=300, gap_s_mean=600)
                if p.kind == kind)


def test_learning_checks_never_report():
    st, events = run(sim_page("noise"), Watch("http://a.test/w", every_s=60), [float(t) for t in range(LEARN_CHECKS)])
    assert events == [] and st.learning_left == 0


def test_noise_only_page_gives_no_event_and_shows_what_was_learned():
    st, events = run(sim_page("noise"), Watch("http://a.test/w", every_s=60), [float(60 * t) for t in range(40)])
    assert events == []
    assert "Quote of the moment: *" in st.noise.learned


def test_each_real_change_on_a_noisy_page_is_one_event_with_its_diff():
    page = sim_page("both")
    times = [float(10 + 60 * t) for t in range(50)]
    _, events = run(page, Watch("http://a.test/w", every_s=60), times)
    made = [c for c in page.change_at if c < times[-1]]
    assert len(events) == len(made)
    for ev, c in zip(events, made):
        assert c <= ev.detected_at < c + 60
        assert ev.previous_capture == ev.detected_at - 60
        assert ev.diff["added"] or ev.diff["removed"] or ev.diff["changed"]


def test_event_json_has_the_documented_fields():
    page = sim_page("real")
    _, events = run(page, Watch("http://a.test/w", every_s=60, id=7), [float(10 + 60 * t) for t in range(20)])
    d = events[0].to_json()
    assert set(d) == {"url", "watch", "detected_at", "previous_capture", "capture", "diff"}
    assert d["detected_at"].endswith("Z") and d["watch"] == 7


def test_interval_grows_when_quiet_up_to_the_target_and_resets_on_change():
    w = Watch("http://a.test/w", every_s=60, target_s=200)
    st = WatchState(learning_left=0, interval_s=60)
    for n in range(20):
        not_modified(w, st, 100.0 * n)
    assert st.interval_s == 200
    assert next_check_at(w, st) == st.last_checked_at + 200


def test_fixed_interval_without_target():
    w = Watch("http://a.test/w", every_s=60)
    st = WatchState(learning_left=0)
    for n in range(5):
        not_modified(w, st, 60.0 * n)
    assert next_check_at(w, st) == 240.0 + 60


def test_paused_watch_is_never_due_and_new_one_is_due_when_added():
    assert next_check_at(Watch("http://a.test/", paused=True), WatchState()) is None
    assert next_check_at(Watch("http://a.test/", added_at=5.0), WatchState()) == 5.0


@pytest.mark.parametrize("kw", [{"url": "ftp://x/"}, {"url": "http://x/", "every_s": 0.1},
                                {"url": "http://x/", "every_s": 60, "target_s": 30},
                                {"url": "http://x/", "webhook": "mailto:a@b"}])
def test_invalid_watch_is_refused(kw):
    with pytest.raises(WatchRuleError):
        Watch(**kw).check()


def test_state_and_watch_survive_json():
    page = sim_page("noise")
    st, _ = run(page, Watch("http://a.test/w"), [float(t) for t in range(8)])
    again = WatchState.from_json(st.to_json())
    assert again.to_json() == st.to_json() and again.noise.learned == st.noise.learned
    w = Watch("http://a.test/w", select=("main",), ignore=("x+",), id=3)
    assert Watch.from_json(w.to_json()) == w


def test_host_verdict_names_watches_the_delay_makes_impossible():
    ws = [(Watch(f"http://a.test/{i}", every_s=5), "a.test") for i in range(4)] + \
         [(Watch("http://b.test/", every_s=5), "b.test"), (Watch("http://a.test/p", every_s=1, paused=True), "a.test")]
    v = {r.key: r for r in host_verdicts(ws, {"a.test": 2.0}, 1.0)}
    assert v["a.test"].watches == 4 and v["a.test"].best_detect_s == 8.0
    assert [u for u, _ in v["a.test"].impossible] == [f"http://a.test/{i}" for i in range(4)]
    assert v["b.test"].impossible == () and v["b.test"].best_detect_s == 1.0
