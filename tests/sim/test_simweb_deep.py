"""The legit_deep host: a large real site (dated articles, paginated archive,
categories) that trap defences must leave alone. Pure model tests."""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urljoin, urlsplit

import pytest

from courtly.core.fingerprint import NearDupIndex, simhash64
from courtly.core.maintext import main_text
from courtly.sim.layout import ARCHIVE_PAGE_SIZE
from courtly.sim.model import SimWeb
from courtly.sim.page import render_page
from courtly.sim.route import Request, RouteState, route
from courtly.sim.webconfig import BEHAVIOURS, profile_config

PORT = 8123
_ARTICLE = re.compile(r"^/(\d{4})/(\d{2})/(\d{2})/[a-z]+-(\d+)\.html$")


@pytest.fixture(scope="module")
def hostile() -> SimWeb:
    return SimWeb(profile_config("hostile", seed=7))


@pytest.fixture(scope="module")
def deep(hostile: SimWeb):
    (name,) = [s.name for s in hostile.hosts if s.has("legit_deep")]
    return hostile.layout(name)


def test_hostile_profile_has_one_legit_deep_host_and_other_profiles_none(hostile: SimWeb) -> None:
    assert "legit_deep" in BEHAVIOURS
    assert len(hostile.manifest(PORT, 1.0)["behaviours"]["legit_deep"]) == 1
    for profile in ("demo", "bench"):
        assert not any(s.has("legit_deep") for s in SimWeb(profile_config(profile, seed=7, hosts=100, ips=8)).hosts)


def test_opting_in_changes_only_the_chosen_host() -> None:
    plain = SimWeb(profile_config("demo", seed=9))
    opted = SimWeb(profile_config("demo", seed=9, deep_hosts=1, deep_pages=1000))
    changed = [a.name for a, b in zip(plain.hosts, opted.hosts) if a != b]
    assert len(changed) == 1 and opted.by_name[changed[0]].has("legit_deep")
    assert opted.layout(changed[0]).n_pages > 1000


def test_legit_deep_host_has_thousands_of_pages_with_past_dates(deep) -> None:
    d = deep.deep
    assert deep.spec.robots == "rules" and deep.spec.crawl_delay_s is None
    assert len(deep.articles) == d.n == 3000 and deep.n_pages > 3000
    paths = [deep.path_of(k) for k in range(deep.n_pages)]
    assert len(set(paths)) == len(paths), "every page has its own path"
    for k, path in enumerate(paths):
        assert deep.resolve(path).kind == "page" and deep.resolve(path).page == k, path
        assert deep.resolve(path + "?x=1").kind == "not_found"
    dates = []
    for k in deep.articles:
        m = _ARTICLE.match(deep.path_of(k))
        assert m and int(m.group(4)) == k
        dates.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    assert dates == sorted(dates) and (2014, 1, 1) <= dates[0] and dates[-1] <= (2023, 12, 31)
    assert deep.resolve("/2024/01/").kind == "not_found" and deep.resolve("/2013/").kind == "not_found"
    assert deep.resolve(f"/archive/page/{d.archive_pages + 1}/").kind == "not_found"


def test_archive_pages_list_twenty_articles_newest_first_with_a_pager(deep) -> None:
    d = deep.deep
    listed: list[int] = []
    for page in range(d.archive_pages):
        links = [h for h, _t, _nf in deep.links(d.first_archive + page, "", PORT).links]
        base = f"http://{deep.spec.name}:{PORT}/archive/page/{page + 1}/"
        targets = [urlsplit(urljoin(base, h)).path for h in links]
        ids = [int(m.group(4)) for t in targets if (m := _ARTICLE.match(t))]
        assert len(ids) == min(ARCHIVE_PAGE_SIZE, d.n - ARCHIVE_PAGE_SIZE * page)
        assert ids == sorted(ids, reverse=True)
        listed += ids
        pager = [t for t in targets if t.startswith("/archive/page/")]
        if page + 1 < d.archive_pages:
            assert f"/archive/page/{page + 2}/" in pager
        if page > 0:
            assert f"/archive/page/{page}/" in pager
    assert sorted(listed) == list(deep.articles)


def test_every_page_is_reachable_and_articles_are_three_links_from_home(hostile: SimWeb, deep) -> None:
    name = deep.spec.name
    reachable = hostile.reachable_pages([f"http://{name}:{PORT}/"], hosts=[name])
    assert reachable == {f"http://{name}:{PORT}{deep.path_of(k)}" for k in range(deep.n_pages)}
    depth = {"/": 0}
    queue = deque(["/"])
    while queue:
        path = queue.popleft()
        res = deep.resolve(path)
        base = f"http://{name}:{PORT}{path}"
        for href, _t, _nf in deep.links(res.page, "", PORT).links:
            parts = urlsplit(urljoin(base, href))
            if parts.hostname == name and parts.path not in depth:
                depth[parts.path] = depth[path] + 1
                queue.append(parts.path)
    assert max(depth[deep.path_of(k)] for k in deep.articles) <= 3
    assert max(depth.values()) <= 10  # the archive pager: well under the crawler's depth cap (16)


def test_legit_deep_pages_are_distinct_not_near_duplicates(deep) -> None:
    index = NearDupIndex(3)
    near = []
    for k in range(deep.n_pages):
        fp = simhash64(main_text(render_page(deep, k, "", 0, PORT), "text/html"))
        if index.find(fp, scope="deep", limit=1):
            near.append(deep.path_of(k))
        index.add(deep.path_of(k), fp, "deep")
    assert near == []


def test_legit_deep_pages_are_served(hostile: SimWeb, deep) -> None:
    state = RouteState(started_at=0.0)

    def get(target: str):
        return route(hostile, state, Request("GET", f"{deep.spec.name}:{PORT}", target, deep.spec.ip, {}, PORT), 1.0)

    article = deep.path_of(deep.articles[-1])
    for target in ("/", "/2019/", "/2019/07/", "/archive/page/3/", article):
        reply = get(target)
        assert reply.status == 200 and reply.tag is None and 10_000 <= len(reply.body) <= 60_000, target
    assert get(article.replace(".html", "x.html")).status == 404
    assert get("/calendar/2024/01/").status == 404
