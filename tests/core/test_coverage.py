"""The coverage sample (core/coverage): deterministic bottom-k sampling by
URL hash, or a fixed list of canaries; its hit ratio and ages per stage."""

from __future__ import annotations

import random

import pytest

from courtly.core.coverage import CoverageSample, url_hash

URLS = [f"https://h{i % 7}.example/p/{i}" for i in range(500)]


def _sample(urls, size=50):
    s = CoverageSample(size)
    for i, u in enumerate(urls):
        s.note_known(u, float(i))
    return s


def test_hash_sample_is_the_same_whatever_order_the_urls_arrive_in():
    shuffled = list(URLS)
    random.Random(3).shuffle(shuffled)
    a, b = _sample(URLS), _sample(shuffled)
    chosen = {u for u in URLS if u in a}
    assert chosen == {u for u in URLS if u in b}
    assert chosen == set(sorted(URLS, key=url_hash)[:50])       # the 50 smallest hashes


def test_hash_sample_holds_at_most_its_size():
    s = _sample(URLS, size=20)
    assert len(s) == 20
    assert len(_sample(URLS[:5], size=20)) == 5


def test_hit_ratio_is_the_share_of_sampled_urls_fetched():
    s = _sample(URLS, size=10)
    sampled = [u for u in URLS if u in s]
    for u in sampled[:4]:
        s.note_fetched(u, 1000.0)
    f = s.figures(1100.0)
    assert (f.sampled, f.fetched) == (10, 4)
    assert f.hit_ratio == pytest.approx(0.4)
    assert f.fetch_ages_s == (100.0,) * 4
    assert len(f.waiting_ages_s) == 6 and all(a > 0 for a in f.waiting_ages_s)


def test_a_url_outside_the_sample_fetched_changes_nothing():
    s = _sample(URLS, size=10)
    outside = next(u for u in URLS if u not in s)
    s.note_fetched(outside, 5.0)
    assert s.figures(10.0).fetched == 0


def test_a_url_pushed_out_of_the_sample_takes_its_fetch_with_it():
    s = CoverageSample(1)
    big, small = sorted(URLS[:2], key=url_hash, reverse=True)
    s.note_known(big, 0.0)
    s.note_fetched(big, 1.0)
    assert s.figures(2.0).hit_ratio == 1.0
    s.note_known(small, 2.0)                     # a smaller hash: it replaces `big`
    assert small in s and big not in s
    assert s.figures(3.0).hit_ratio == 0.0


def test_canaries_are_the_whole_sample_even_before_the_crawl_finds_them():
    canaries = ["https://a.example/volatile", "https://b.example/news"]
    s = CoverageSample(1000, canaries)
    for u in URLS:
        s.note_known(u, 0.0)                     # other URLs never enter a canary sample
    assert len(s) == 2
    s.note_fetched(canaries[1], 10.0)
    f = s.figures(20.0)
    assert f.hit_ratio == 0.5 and f.waiting_ages_s == ()        # the other one was never queued


def test_size_zero_samples_nothing():
    s = _sample(URLS, size=0)
    assert len(s) == 0 and s.figures(1.0).hit_ratio == 0.0


def test_parse_age_counts_sampled_urls_fetched_then_parsed():
    s = _sample(URLS, size=10)
    sampled = [u for u in URLS if u in s]
    s.note_parsed(sampled[0], 1.0)                 # not fetched yet: not a parse of a fetched page
    s.note_fetched(sampled[0], 100.0)
    s.note_fetched(sampled[1], 100.0)
    s.note_parsed(sampled[0], 110.0)
    f = s.figures(200.0)
    assert f.parse_ages_s == (90.0,) and f.fetch_ages_s == (100.0, 100.0)
