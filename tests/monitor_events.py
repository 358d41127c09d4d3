"""Real change events for status-page tests: the simulated web's watch pages
judged by the monitor's core, stored in a watch store."""

from __future__ import annotations

from courtly.core.change import content_of
from courtly.core.watch import Watch, WatchState, checked
from courtly.sim.watchpage import watch_pages


def fill(store, checks: int = 40) -> list[int]:
    """Two watches (a noisy page with real changes, a noise-only page) checked
    every 60 s; their events recorded. Returns the events' sequence numbers."""
    pages = [p for p in watch_pages(1, seed=5, duration_s=checks * 60, gap_s_min=300, gap_s_mean=500)
             if p.kind in ("both", "noise")]
    seqs = []
    for page in pages:
        w = store.add(Watch(f"http://shop.test{page.path}", every_s=60, webhook="http://127.0.0.1:9/hook"))
        st, rules = WatchState(), w.rules()
        for n in range(checks):
            at = 1_700_000_000.0 + 60 * n
            ev = checked(w, rules, st, content_of(page.html(at - 1_700_000_000.0, n), "text/html", rules), at, at)
            if ev is not None:
                seqs.append(store.record_change(ev, w.webhook))
        store.save_states({w.id: st})
    return seqs
