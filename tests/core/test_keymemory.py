"""courtly.core.keymemory: the sweep that keeps a per-key map under a bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from courtly.core.keymemory import sweep


def test_sweep_evicts_the_oldest_idle_entries_down_to_the_bound() -> None:
    d = {f"k{i}": i for i in range(10)}
    gone = sweep(d, keep=6, idle=lambda k, v: True)
    assert gone == [("k0", 0), ("k1", 1), ("k2", 2), ("k3", 3)]
    assert list(d) == [f"k{i}" for i in range(4, 10)]


def test_sweep_keeps_busy_entries_and_moves_them_to_the_back() -> None:
    d = {f"k{i}": i for i in range(6)}
    gone = sweep(d, keep=3, idle=lambda k, v: v % 2 == 1)
    assert gone == [("k1", 1), ("k3", 3), ("k5", 5)]
    assert list(d) == ["k0", "k2", "k4"]   # looked at, busy: kept, in their order


def test_sweep_under_the_bound_changes_nothing() -> None:
    d = {"a": 1, "b": 2}
    assert sweep(d, keep=2, idle=lambda k, v: True) == []
    assert list(d) == ["a", "b"]


def test_sweep_of_all_busy_entries_leaves_the_map_above_its_bound() -> None:
    d = {f"k{i}": i for i in range(5)}
    assert sweep(d, keep=1, idle=lambda k, v: False) == []
    assert len(d) == 5


def test_sweep_looks_at_no_more_than_scan_max_entries() -> None:
    d = {f"k{i}": i for i in range(100)}
    looked: list[str] = []

    def idle(k: str, v: int) -> bool:
        looked.append(k)
        return k != "k0"

    gone = sweep(d, keep=0, idle=idle, scan_max=10)
    assert len(looked) == 10 and len(gone) == 9 and len(d) == 91
    assert list(d)[-1] == "k0"   # the busy one goes to the back: the next sweep starts elsewhere


def test_sweep_refuses_a_negative_bound() -> None:
    with pytest.raises(ValueError):
        sweep({}, keep=-1, idle=lambda k, v: True)


@given(st.lists(st.booleans(), max_size=60), st.integers(0, 60), st.integers(1, 80))
def test_sweep_evicts_only_idle_entries_and_loses_none(idles: list[bool], keep: int, scan_max: int) -> None:
    d = {i: b for i, b in enumerate(idles)}
    gone = sweep(d, keep=keep, idle=lambda k, v: v, scan_max=scan_max)
    assert all(v for _, v in gone)
    assert sorted([k for k, _ in gone] + list(d)) == list(range(len(idles)))
    assert len(gone) <= max(0, len(idles) - keep)
    if scan_max >= len(idles):   # everything looked at: the bound holds unless busy entries prevent it
        assert len(d) <= keep or all(not v for v in d.values())
