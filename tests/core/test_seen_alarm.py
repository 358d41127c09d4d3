"""`SeenFilter.alarm` counts the filter's bits only when the URLs added since
the last count could have raised its fill past the alarm (core/seen.py); its
plain twin counts every time. Both give the same answer on every step of
seeded random crawls that cross the alarm, and a large filter barely filled
is not counted at all."""

from __future__ import annotations

import random

import pytest

from courtly.core.seen import SeenFilter


class _Counting:
    """The filter's Bloom, counting how often its bits are counted."""

    def __init__(self, bloom) -> None:
        self.bloom, self.counts = bloom, 0

    @property
    def approx_items(self):
        self.counts += 1
        return self.bloom.approx_items

    def __getattr__(self, name):
        return getattr(self.bloom, name)


def _plain_alarm(f: SeenFilter) -> bool:
    return f.fill_ratio > f.fill_alarm


@pytest.mark.parametrize("seed", range(12))
def test_the_alarm_counts_bits_only_when_it_could_have_changed_with_the_same_answers(seed):
    rnd = random.Random(seed)
    capacity = rnd.choice([50, 200, 1000])
    f = SeenFilter(capacity, rnd.choice([0.3, 0.05, 0.001]), fill_alarm=rnd.choice([0.3, 0.5, 0.8]))
    twin = SeenFilter(f.capacity, f.error_rate, fill_alarm=f.fill_alarm)
    answers = []
    n = 0
    while n < 3 * capacity:
        step = rnd.randint(1, max(1, capacity // 10))
        urls = [f"https://h{rnd.randrange(40)}.test/{n + i}" for i in range(step)]
        n += step
        if rnd.random() < 0.1:
            f.update(urls)
            twin.update(urls)
        else:
            for u in urls:
                f.add(u)
                twin.add(u)
            if rnd.random() < 0.2:
                f.add(urls[0])          # a URL seen again counts as an add too
                twin.add(urls[0])
        answers.append(f.alarm)
        assert answers[-1] == _plain_alarm(twin)
    assert answers[0] is False and answers[-1] is True      # the run crossed the alarm


def test_a_large_filter_barely_filled_is_not_counted_after_each_add():
    f = SeenFilter(100_000, 0.001)
    f._bloom = _Counting(f._bloom)
    for i in range(1000):
        f.add(f"https://a.test/{i}")
        assert not f.alarm
    assert f._bloom.counts == 0
    f.update(["https://b.test/"])       # a bulk update of unknown size: counted once
    assert not f.alarm and not f.alarm
    assert f._bloom.counts == 1
