"""runtime/render.py in a real Crawler with fakes (no browser, no network): which
fetched pages are rendered, what a render leaves behind, and the dead letter."""

from __future__ import annotations

import asyncio

from test_overflow import HOSTS, PAGES, _config, _crawler, _web

from courtly.core.links import Link, PageLinks
from courtly.core.render import Rendered, RenderOutcome
from courtly.core.types import UrlItem
from courtly.runtime.render import STRIKES_MAX, PageRenders

SHELL = b'<html><body><div id="root"></div><script src="/app.js"></script></body></html>'


class _ShellExtractor:
    """The raw page: its web links; a rendered DOM (b'<dom ...'): one more link, `<url>/only-rendered`."""

    def __init__(self, web):
        self.web = web

    async def submit(self, content: bytes, url: str, ctype: str = "", xrt: str = "", error_print: bool = True):
        await asyncio.sleep(0)
        links = list(self.web.get(url, ()))
        if content.startswith(b"<dom"):
            links.append(url.rstrip("/") + "/only-rendered")
        return PageLinks(links=tuple(Link(u, "a", False) for u in links))


class _Renderer:
    def __init__(self, outcome=RenderOutcome.RENDERED):
        self.outcome = outcome
        self.rendered: list[str] = []
        self.restart_reasons: dict[str, int] = {}

    def available(self) -> str:
        return ""

    async def render(self, url, document, gate):
        self.rendered.append(url)
        dom = b"<dom/>" if self.outcome is RenderOutcome.RENDERED else b""
        return Rendered(url, self.outcome, dom, 0.01, "" if dom else "the page crashed")

    async def close(self) -> None:
        pass


class _Warc:
    def __init__(self):
        self.n = 0
        self.conversions: list[dict] = []

    def flush(self):
        pass

    def write_exchange(self, **kw):
        from types import SimpleNamespace
        self.n += 1
        return SimpleNamespace(filename="f.warc.gz", offset=self.n, record_id=f"<urn:uuid:{self.n}>")

    def write_conversion(self, **kw):
        self.conversions.append(kw)


def _shell_crawler(tmp_path, *, share_max: float, burst: int, web=None, renderer=None, **render):
    web = web or _web(seed=3)
    cfg = _config(memory_max=10_000, key_memory_max=1000).replace(
        "render", enabled=True, share_max=share_max, burst=burst, **render)
    c, fetcher = _crawler(tmp_path, web, cfg)
    original = fetcher.fetch

    async def fetch(url, *, ip, headers):   # every page is a script shell
        result = await original(url, ip=ip, headers=headers)
        if result.status == 200:
            result.body = result.content = SHELL
        return result

    fetcher.fetch = fetch
    c.extractor = _ShellExtractor(web)
    c.warc = _Warc()
    renderer = renderer or _Renderer()
    c.use_renders(PageRenders(c, renderer, cfg))
    return c, fetcher, renderer, web


def test_shells_beyond_the_render_budget_are_parsed_raw_and_flagged(tmp_path):
    c, fetcher, renderer, web = _shell_crawler(tmp_path, share_max=0.05, burst=1)
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    pages = len([u for u in fetcher.pages if u in web])
    flags = dict(c.store._db.execute("SELECT flag, count(*) FROM flags GROUP BY flag"))
    renders = len(renderer.rendered)
    assert renders == flags["rendered"] and renders <= 0.05 * pages + 1
    assert flags["render_budget"] == pages - renders    # every other shell: parsed raw, flagged
    assert c.renders.stats.budget_raw == pages - renders
    c.store.close()


def test_links_only_the_rendered_dom_has_are_crawled_and_the_dom_refers_to_the_raw_record(tmp_path):
    c, fetcher, renderer, web = _shell_crawler(tmp_path, share_max=1.0, burst=1)
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    rendered = set(renderer.rendered)
    assert len(rendered) == len([u for u in web if u in fetcher.pages])   # every shell rendered once
    only = [u for u in fetcher.pages if u.endswith("/only-rendered")]
    assert sorted(only) == sorted({u.rstrip("/") + "/only-rendered" for u in rendered})   # each fetched once
    (links,) = c.store._db.execute("SELECT count(*) FROM flags WHERE flag = 'render_link'").fetchone()
    assert links == c.renders.stats.links_added == len(set(only))
    conv = c.warc.conversions[0]
    assert conv["refers_to_record_id"].startswith("<urn:uuid:") and conv["refers_to_uri"] == conv["url"]
    c.store.close()


def test_a_page_that_crashes_the_browser_twice_becomes_a_dead_letter(tmp_path):
    from test_overflow import fake_result

    c, _fetcher, renderer, _web_ = _shell_crawler(tmp_path, share_max=1.0, burst=100,
                                                  renderer=_Renderer(RenderOutcome.CRASHED))
    url = f"https://{HOSTS[0]}/p1"
    item = UrlItem(url=url, key=HOSTS[0])
    result = fake_result(url, "127.0.0.1", 200, SHELL)
    page = PageLinks()

    async def render_thrice():
        for _ in range(STRIKES_MAX + 1):
            await c.renders.after_extract(item, result, "text/html", page, "<urn:uuid:1>")

    asyncio.run(render_thrice())
    assert renderer.rendered == [url] * STRIKES_MAX      # not rendered again after the second strike
    assert [d[0] for d in c.batch.dead_letters] == [url]
    assert "crashed or hung the browser 2 times" in c.batch.dead_letters[0][2]
    assert [f[2] for f in c.batch.flags].count("render_failed") == STRIKES_MAX
    c.store.close()


def test_a_browser_that_does_not_start_leaves_the_crawl_whole_flagged_and_strikes_no_page(tmp_path):
    class _NoBrowser(_Renderer):
        async def render(self, url, document, gate):
            self.rendered.append(url)
            return Rendered(url, RenderOutcome.UNAVAILABLE, detail="the browser did not start: exit 1")

    c, fetcher, renderer, web = _shell_crawler(tmp_path, share_max=1.0, burst=100, renderer=_NoBrowser())
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    fetched = [u for u in web if u in fetcher.pages]
    assert len(fetched) == len(web)                     # every page of the web still crawled from its raw links
    rows = c.store._db.execute("SELECT url, detail FROM flags WHERE flag = 'render_failed'").fetchall()
    assert sorted(u for u, _ in rows) == sorted(renderer.rendered) and rows
    assert all(d.startswith("unavailable: the browser did not start") for _, d in rows)
    assert c.renders.stats.outcomes == {"unavailable": len(rows)}
    assert c.batch.dead_letters == [] and not c.store._db.execute(
        "SELECT count(*) FROM flags WHERE flag = 'dead_letter'").fetchone()[0]
    c.store.close()


def test_render_metrics_equal_the_render_stage_and_pass_promtool(tmp_path):
    import shutil
    import subprocess

    from prometheus_client.parser import text_string_to_metric_families

    from courtly.shell.metrics import exposition, new_registry

    c, _fetcher, renderer, _web_ = _shell_crawler(tmp_path, share_max=0.05, burst=1)
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    text = exposition(new_registry(lambda: {"render": c.renders.snapshot()})).decode()
    m = {(s.name, tuple(sorted(s.labels.items()))): s.value
         for fam in text_string_to_metric_families(text) for s in fam.samples}
    stats = c.renders.stats
    assert m[("courtly_renders_total", (("outcome", "rendered"),))] == len(renderer.rendered) == stats.renders
    assert m[("courtly_render_seconds_count", ())] == stats.attempts
    assert m[("courtly_render_budget_raw_total", ())] == stats.budget_raw > 0
    assert m[("courtly_render_budget_used_ratio", ())] == c.renders.policy.budget.used <= 0.05 + 1 / PAGES
    assert m[("courtly_render_links_added_total", ())] == stats.links_added
    c.store.close()
    if shutil.which("promtool"):
        done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_no_render_metrics_without_rendering():
    from courtly.shell.metrics import exposition, new_registry

    text = exposition(new_registry(lambda: {"render": None})).decode()
    assert not [line for line in text.splitlines() if line.startswith("courtly_render")]


def test_without_a_browser_the_crawl_runs_raw_only_and_says_why_once(tmp_path, caplog):
    import logging

    from courtly.runtime.render import page_renders
    from courtly.shell.clock import SystemClock
    from courtly.shell.render import ChromiumRenderer

    web = _web(seed=3)
    cfg = _config(memory_max=10_000, key_memory_max=1000).replace(
        "render", enabled=True, executable_path="/nonexistent/chromium")
    c, fetcher = _crawler(tmp_path, web, cfg)
    with caplog.at_level(logging.WARNING, logger="courtly"):
        c.renders = page_renders(cfg, c, ChromiumRenderer.from_config(cfg.render, clock=SystemClock(),
                                                                      user_agent="courtly"))
        c.add_seeds([f"https://{h}/" for h in HOSTS])
        asyncio.run(c.run())
    assert c.renders is None
    said = [r.getMessage() for r in caplog.records if "rendering is off" in r.getMessage()]
    assert said == ["rendering is off for this crawl: no browser at /nonexistent/chromium (apt-get install "
                    "chromium, or set render.executable_path); every page is parsed raw"]
    assert sorted(fetcher.pages) == sorted(web)   # the crawl itself went on, raw
    c.store.close()


def test_shells_beyond_the_render_queue_are_parsed_raw_and_flagged(tmp_path):
    class _SlowRenderer(_Renderer):
        async def render(self, url, document, gate):
            await asyncio.sleep(0.02)
            return await super().render(url, document, gate)

    c, fetcher, renderer, web = _shell_crawler(tmp_path, share_max=1.0, burst=1, renderer=_SlowRenderer(),
                                               queue_max=1, contexts_max=1)
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    flags = dict(c.store._db.execute("SELECT detail, count(*) FROM flags WHERE flag = 'render_budget' GROUP BY 1"))
    pages = len([u for u in fetcher.pages if u in web])
    assert flags["queue_full"] > 0
    assert flags["queue_full"] + len(renderer.rendered) == pages   # each shell: rendered or flagged
    assert c.renders.policy.budget.total.renders == len(renderer.rendered)   # the flagged gave theirs back
    c.store.close()


def test_a_subrequest_whose_turn_comes_after_the_render_deadline_is_dropped_unsent(tmp_path):
    from courtly.core.render import SubRequest
    from courtly.runtime.render import SubrequestGate

    c, fetcher, _renderer, _web_ = _shell_crawler(tmp_path, share_max=1.0, burst=1)
    url = f"https://{HOSTS[0]}/api"
    gate = SubrequestGate(c.renders, f"https://{HOSTS[0]}/")

    async def ask(deadline_in_s: float):
        now = c.clock.now()
        return await gate(SubRequest(url, "GET", "fetch", {}, f"https://{HOSTS[0]}/", now + deadline_in_s))

    async def scenario():
        first = await ask(5.0)                           # robots.txt, then the request itself
        c.politeness.hold_all_until(c.clock.now() + 100.0)   # the next turn is 100 s away
        second = await ask(5.0)
        return first, second

    first, second = asyncio.run(scenario())
    assert first.status == 404 and fetcher.pages.count(url) == 1   # sent once, answered into the page
    assert second == "deadline" and fetcher.pages.count(url) == 1  # dropped, never sent
    assert c.renders.stats.blocked == {"deadline": 1}
    assert [f[2:] for f in c.batch.flags if f[2] == "render_blocked"] == [
        ("render_blocked", f"deadline: https://{HOSTS[0]}/")]
    c.store.close()


def test_a_subrequest_to_a_host_that_does_not_resolve_is_refused_unsent_with_the_dns_reason(tmp_path):
    from courtly.core.render import SubRequest
    from courtly.core.types import Reason
    from courtly.ports import ResolveFailed
    from courtly.runtime.render import SubrequestGate

    c, fetcher, _renderer, _web_ = _shell_crawler(tmp_path, share_max=1.0, burst=1)

    class _NoName:
        async def resolve(self, host: str) -> list[str]:
            raise ResolveFailed(Reason.DNS, f"{host}: no addresses")

    c.resolver = _NoName()
    url = f"https://{HOSTS[0]}/api"
    gate = SubrequestGate(c.renders, f"https://{HOSTS[0]}/")

    async def ask():
        return await gate(SubRequest(url, "GET", "fetch", {}, f"https://{HOSTS[0]}/", c.clock.now() + 5.0))

    assert asyncio.run(ask()) == "dns" and url not in fetcher.pages
    assert c.renders.stats.blocked == {"dns": 1}
    c.store.close()


def test_a_render_stage_for_a_watch_list_queues_none_of_the_rendered_dom_links(tmp_path):
    c, fetcher, renderer, web = _shell_crawler(tmp_path, share_max=1.0, burst=1)
    c.renders = PageRenders(c, renderer, c.cfg.replace("crawl", intent="monitor"))   # the render stage's intent
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    assert renderer.rendered   # shells were rendered, their DOMs read
    assert not [u for u in fetcher.pages if u.endswith("/only-rendered")]
    assert c.renders.stats.links_added == 0
    c.store.close()
