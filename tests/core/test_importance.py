"""Tests of online OPIC importance: cash conservation, ranking, scaling, blending."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.core.importance import Opic

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None)

GRAPH = {  # a small web: "a" is linked by everyone, "f" by no one
    "a": ["b", "c"],
    "b": ["a"],
    "c": ["a", "d"],
    "d": ["a", "b", "e"],
    "e": ["a"],
    "f": ["a", "e"],
}


def crawl_round_robin(opic: Opic, graph: dict[str, list[str]], rounds: int) -> None:
    for _ in range(rounds):
        for page in sorted(graph):
            opic.fetched(page, graph[page])


def pagerank(graph: dict[str, list[str]], damping: float, iterations: int = 200) -> dict[str, float]:
    pages = sorted(graph)
    pr = {p: 1 / len(pages) for p in pages}
    for _ in range(iterations):
        nxt = {p: 0.0 for p in pages}
        spread = 0.0
        for p in pages:
            links = graph[p]
            if links:
                for q in links:
                    nxt[q] += damping * pr[p] / len(links)
                spread += (1 - damping) * pr[p]
            else:
                spread += pr[p]
        for p in pages:
            nxt[p] += spread / len(pages)
        pr = nxt
    return pr


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 30), st.lists(st.integers(0, 40), max_size=8)), max_size=120),
       st.floats(0.0, 1.0))
def test_cash_is_conserved(fetches, damping):
    opic = Opic(damping=damping)
    for page, links in fetches:
        opic.fetched(f"p{page}", [f"p{q}" for q in links])
        assert opic.cash_total() == pytest.approx(1.0, rel=1e-9, abs=1e-12)


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 30), st.lists(st.integers(0, 40), max_size=8)), min_size=1,
                max_size=120))
def test_importance_lies_in_zero_one_and_the_top_page_is_one(fetches):
    opic = Opic()
    for page, links in fetches:
        opic.fetched(f"p{page}", [f"p{q}" for q in links])
    urls = [f"p{k}" for k in range(41) if f"p{k}" in opic]
    values = [opic.importance(u) for u in urls]
    assert all(0.0 < v <= 1.0 for v in values)
    assert max(values) == pytest.approx(1.0)


def test_history_only_grows_and_values_never_fall():
    opic = Opic()
    rng = random.Random(3)
    pages = [f"p{k}" for k in range(20)]
    before = {p: 0.0 for p in pages}
    for _ in range(500):
        p = rng.choice(pages)
        opic.fetched(p, rng.sample(pages, 3))
        for q in pages:
            assert opic.value(q) >= before[q] - 1e-12
            before[q] = opic.value(q)


def test_round_robin_opic_converges_to_pagerank():
    opic = Opic(damping=0.85)
    crawl_round_robin(opic, GRAPH, 400)
    pr = pagerank(GRAPH, 0.85)
    total = opic.history_total()
    for page in GRAPH:
        assert opic.value(page) / (total + 1.0) == pytest.approx(pr[page], rel=0.05), page
    ranked = sorted(GRAPH, key=opic.importance, reverse=True)
    assert ranked[0] == "a" and ranked[-1] == "f"


def test_new_pages_start_without_cash_and_gain_from_links():
    opic = Opic()
    opic.fetched("seed", ["x", "y"])
    assert "x" in opic and opic.value("x") > 0
    assert opic.add("lonely") is True and opic.add("lonely") is False
    assert opic.value("lonely") == 0.0
    assert opic.importance("lonely") == opic.floor


def test_dangling_pages_give_everything_to_the_virtual_page():
    opic = Opic()
    opic.add("a")  # V keeps the initial cash until the first fetch, then pays every known page
    opic.add("b")
    assert opic.value("b") == 0.0
    opic.fetched("a", [])
    assert opic.cash_total() == pytest.approx(1.0)
    assert opic.value("b") == pytest.approx(0.5)  # half of a's cash, via V


def test_user_map_blends_geometrically():
    opic = Opic(user_map={"a": 10.0, "f": 1.0}, user_weight=1.0)
    crawl_round_robin(opic, GRAPH, 20)
    assert opic.importance("a") == pytest.approx(1.0)
    assert opic.importance("f") == pytest.approx(0.1)
    assert opic.importance("c") == pytest.approx(opic.opic("c"))  # not in the map: OPIC alone
    half = Opic(user_map={"f": 10.0, "a": 10.0}, user_weight=0.5)
    crawl_round_robin(half, GRAPH, 20)
    assert half.importance("f") == pytest.approx(half.opic("f") ** 0.5)


def test_limits_and_validation():
    opic = Opic(pages_max=2)
    assert opic.add("a") and opic.add("b") and not opic.add("c")
    opic.fetched("a", ["c", "b"])  # "c" cannot be added: its share goes to the known link
    assert "c" not in opic and opic.cash_total() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        Opic(damping=1.5)
    with pytest.raises(ValueError):
        Opic(user_map={"a": 0.0})
