"""The README's configuration block is the truth about the config.

* The block (README, "Configuration") parses as TOML and loads as a Config:
  every key it shows exists.
* Every field of the config dataclasses is documented there (a commented-out
  line counts, as for `[[recrawl.tiers]]`), or, for `[distributed]`, in the
  table of docs/distributed.md; and every value shown is the default, except
  the examples named below.
* Where it can be observed cheaply, a key does what its comment says: a
  small in-process crawl (tests/inproc_support.py: real Crawler and store,
  manual clock) or the real fetcher against a loopback server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import tomllib
import typing
from pathlib import Path

import pytest
from aiohttp import web
from fetch_support import AppServer
from inproc_support import crawler, fetch, gaps

from courtly.config import Config, config_from_dict
from courtly.core.types import Reason, UrlItem

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"crawl.contact"}     # shown with an example value, not the default ("")


def _readme_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Configuration"):]
    start = section.index("```toml\n") + len("```toml\n")
    return section[start:section.index("```", start)]


def _documented() -> set[str]:
    """Dotted keys the README block shows, commented-out ones included."""
    keys, table = set(), ""
    for line in _readme_block().splitlines():
        bare = line.lstrip("# ").split("#", 1)[0].strip()
        if m := re.fullmatch(r"\[\[?([\w.]+)\]\]?", bare):
            table = m.group(1)
        elif m := re.match(r"(\w+)\s*=", bare):
            keys.add(f"{table}.{m.group(1)}")
    return keys


def _distributed_doc() -> dict[str, str]:
    """`[distributed]` keys and defaults from the table of docs/distributed.md."""
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", (ROOT / "docs/distributed.md").read_text(), re.M)
    return {k: v.strip() for k, v in rows}


def _fields(cls=Config, prefix: str = "") -> set[str]:
    out = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        if dataclasses.is_dataclass(inner):
            out |= _fields(inner, f"{prefix}{f.name}.")
        else:
            out.add(f"{prefix}{f.name}")
    return out


# ---- the block and the dataclasses agree ----------------------------------------


def test_the_readme_config_block_loads_as_a_config():
    cfg = config_from_dict(tomllib.loads(_readme_block()))
    assert cfg.politeness.allow[0].key == "example.org" and cfg.budget.allow[0].new_urls_per_day == 500000


def test_every_config_field_is_documented_in_the_readme_or_the_distributed_doc():
    documented = _documented() | {f"distributed.{k}" for k in _distributed_doc()}
    assert sorted(_fields() - documented) == []


def test_every_key_the_readme_shows_is_a_config_field():
    assert sorted(_documented() - _fields()) == []


def test_every_value_the_readme_shows_is_the_default():
    shown = tomllib.loads(_readme_block())
    default = Config()
    wrong = []
    for section, table in shown.items():
        for key, value in table.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                continue   # an example entry ([[politeness.allow]], [[budget.allow]])
            have = getattr(getattr(default, section, None), key, "<no such field>")
            if f"{section}.{key}" not in EXAMPLES and (list(have) if isinstance(have, tuple) else have) != value:
                wrong.append(f"{section}.{key}: README {value!r}, default {have!r}")
    assert wrong == []


def test_the_distributed_doc_shows_the_defaults():
    d = Config().distributed

    def value(v):   # numbers, or a quoted string
        return v.strip('"') if v.startswith('"') else float(v)

    assert {k: value(v) for k, v in _distributed_doc().items()} == {
        f.name: getattr(d, f.name) if isinstance(getattr(d, f.name), str) else float(getattr(d, f.name))
        for f in dataclasses.fields(d)}


# ---- keys do what their comment says --------------------------------------------


def _cfg(**sections) -> Config:
    return config_from_dict(sections)


def test_politeness_delay_s_is_the_minimum_gap_between_requests_to_one_key(tmp_path):
    c = crawler(tmp_path, _cfg(politeness={"delay_s": 2.5, "response_factor": 0.0}))
    fetch(c, *(f"https://a.example/{i}" for i in range(4)), "https://b.example/")
    assert gaps(c, "a.example") == [2.5, 2.5, 2.5]


def test_politeness_response_factor_makes_the_delay_at_least_that_many_response_times(tmp_path):
    # 10 x 0.1 s response = 1 s target; the delay moves toward it by smoothing, never below delay_s
    c = crawler(tmp_path, _cfg(politeness={"delay_s": 0.2, "response_factor": 10.0}))
    fetch(c, *(f"https://a.example/{i}" for i in range(30)))
    g = gaps(c, "a.example")
    assert all(0.2 <= x <= 1.0 for x in g) and g == sorted(g) and g[-1] == pytest.approx(1.0, abs=0.01)


def test_crawl_depth_max_refuses_links_deeper_than_it(tmp_path):
    c = crawler(tmp_path, _cfg(crawl={"depth_max": 2}))
    assert c.admission.admit("https://a.example/2", via="https://a.example/", band=4, depth=2, now=c.clock.t)
    assert not c.admission.admit("https://a.example/3", via="https://a.example/", band=4, depth=3, now=c.clock.t)
    assert c.batch.decisions[-1][5] == Reason.DEPTH


def test_urls_length_max_refuses_longer_urls(tmp_path):
    c = crawler(tmp_path, _cfg(urls={"length_max": 40}))
    assert c.admission.admit("https://a.example/" + "x" * 20, via=None, band=1, depth=0, now=c.clock.t)
    assert not c.admission.admit("https://a.example/" + "x" * 30, via=None, band=1, depth=0, now=c.clock.t)
    assert c.batch.decisions[-1][5] == Reason.LENGTH


def test_urls_strip_params_adds_to_the_built_in_list_and_order_sensitive_hosts_keep_their_order(tmp_path):
    c = crawler(tmp_path, _cfg(urls={"strip_params": ["Ref"], "order_sensitive_hosts": ["b.example"]}))
    c.add_seeds(["https://a.example/p?z=1&ref=x&utm_source=y&a=2", "https://b.example/p?z=1&a=2"])
    c.commit()
    assert sorted(u for u, *_ in c.store.iter_queued()) == ["https://a.example/p?a=2&z=1",
                                                            "https://b.example/p?z=1&a=2"]


def test_fetch_redirects_max_refuses_a_redirect_past_it(tmp_path):
    c = crawler(tmp_path, _cfg(fetch={"redirects_max": 2}))
    item = UrlItem(url="https://a.example/r2", key="a.example", redirects=2)
    c.admission.admit_redirect("/r3", item, c.clock.t)
    assert c.batch.decisions[-1][5] == Reason.REDIRECTS
    c.admission.admit_redirect("/r2b", UrlItem(url="https://a.example/r1", key="a.example", redirects=1), c.clock.t)
    assert c.batch.new_urls[-1][0] == "https://a.example/r2b"


def test_crawl_scope_seed_hosts_refuses_links_to_other_hosts(tmp_path):
    c = crawler(tmp_path, _cfg(crawl={"scope": "seed-hosts"}))
    c.add_seeds(["https://www.a.example/"])
    assert c.admission.admit("https://www.a.example/x", via="https://www.a.example/", band=4, depth=1, now=c.clock.t)
    assert not c.admission.admit("https://blog.a.example/", via="https://www.a.example/", band=4, depth=1,
                                 now=c.clock.t)
    assert c.batch.decisions[-1][5] == Reason.SCOPE


def test_crawl_politeness_key_host_gives_each_host_its_own_key(tmp_path):
    c = crawler(tmp_path, _cfg(crawl={"politeness_key": "host"}, politeness={"response_factor": 0.0}))
    fetch(c, "https://www.a.example/", "https://blog.a.example/")
    (_, _, www_done), (_, blog_sent, _) = c.fetcher.sent
    assert blog_sent < www_done + 1.0          # not one key: no 1 s gap between them


def test_crawl_max_pages_is_the_page_budget_and_contact_goes_in_the_user_agent(tmp_path):
    c = crawler(tmp_path, _cfg(crawl={"max_pages": 7, "contact": "ops@example.org"}))
    assert c.budget_left() == 7
    assert c.agent.endswith("(polite crawler; +ops@example.org)")


def test_seen_and_robots_and_politeness_ip_keys_reach_the_crawler(tmp_path):
    c = crawler(tmp_path, _cfg(seen={"bloom_capacity": 1234, "bloom_error_rate": 0.01}, robots={"token": "mybot"},
                               politeness={"ip_concurrency": 2, "ip_rate": 3.0}))
    assert (c.seen.capacity, c.seen.error_rate, c.token) == (1234, 0.01, "mybot")
    assert (c.politeness.config.ip_concurrency, c.politeness.config.ip_rate) == (2, 3.0)


def test_fetch_body_bytes_max_truncates_bodies_and_marks_them():
    from courtly.runtime.wiring import build_network

    async def big(request):
        return web.Response(body=b"z" * 5000)

    async def go():
        cfg = _cfg(fetch={"body_bytes_max": 1000}, network={"allow": ["127.0.0.0/8"]})
        _resolver, fetcher, extractor = build_network(cfg)
        try:
            async with AppServer({"/": big}) as s:
                return await fetcher.fetch(s.url("/"), ip="127.0.0.1")
        finally:
            await fetcher.close()
            await extractor.close()

    r = asyncio.run(asyncio.wait_for(go(), 30))
    assert r.status == 200 and r.truncated == "length" and len(r.body) == 1000


def test_extract_links_max_caps_the_links_taken_from_one_page():
    from courtly.runtime.wiring import build_network

    page = b"<html><body>" + b"".join(b"<a href=/p%d>p</a>" % i for i in range(50)) + b"</body></html>"

    async def go():
        _resolver, fetcher, extractor = build_network(_cfg(extract={"links_max": 7}))
        try:
            return await extractor.submit(page, "http://a.example/", "text/html", "")
        finally:
            await fetcher.close()
            await extractor.close()

    assert len(asyncio.run(asyncio.wait_for(go(), 60)).links) == 7


def test_budget_daily_new_urls_max_caps_the_new_urls_admitted_per_key_per_day(tmp_path):
    c = crawler(tmp_path, _cfg(budget={"daily_new_urls_max": 5}))
    c.add_seeds(["https://a.example/"])
    admitted = [c.admission.admit(f"https://a.example/topic-{i}.html", via="https://a.example/", band=4, depth=1,
                                  now=c.clock.t) for i in range(8)]
    assert admitted.count(True) == 5 - 1 and c.batch.decisions[-1][5] == Reason.BUDGET   # the seed counts too


def test_frontier_memory_max_and_key_memory_max_bound_the_urls_held_in_memory_the_rest_wait_in_the_store(tmp_path):
    c = crawler(tmp_path, _cfg(frontier={"memory_max": 6, "key_memory_max": 2}))
    c.add_seeds([f"https://{h}.example/{i}" for h in "abcd" for i in range(3)])
    assert len(c.frontier) == 6 and all(c.frontier.queued_for(f"{h}.example") <= 2 for h in "abcd")
    c.commit()
    assert len(list(c.store.iter_queued())) == 12          # none lost: every one is a queued record
