"""The simulated web's model: deterministic, scalable, and consistent with its HTML."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from courtly.sim.change import change_times, epoch_at, last_change_s
from courtly.sim.layout import TRAP_ENTRIES
from courtly.sim.manifest import web_from_manifest
from courtly.sim.model import BAIT_IP, SimWeb
from courtly.sim.page import render_page
from courtly.sim.robotsfile import robots_body
from courtly.sim.robotsrule import ROBOTS_BYTES_MAX, RobotsRules, robots_allows
from courtly.sim.webconfig import BEHAVIOURS, ROBOTS_VARIANTS, SimWebConfig, profile_config

PORT = 8123


@pytest.fixture(scope="module")
def demo() -> SimWeb:
    return SimWeb(profile_config("demo"))


@pytest.fixture(scope="module")
def hostile() -> SimWeb:
    return SimWeb(profile_config("hostile", seed=7))


def test_same_seed_gives_same_web_and_manifest() -> None:
    a = SimWeb(profile_config("demo", seed=3)).manifest(PORT, 1000.0)
    b = SimWeb(profile_config("demo", seed=3)).manifest(PORT, 1000.0)
    c = SimWeb(profile_config("demo", seed=4)).manifest(PORT, 1000.0)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert json.dumps(a, sort_keys=True) != json.dumps(c, sort_keys=True)


def test_same_seed_gives_same_page_bytes() -> None:
    w1, w2 = SimWeb(profile_config("demo", seed=5)), SimWeb(profile_config("demo", seed=5))
    for spec in w1.hosts[:5]:
        lay1, lay2 = w1.layout(spec.name), w2.layout(spec.name)
        for k in (0, 1, lay1.first_article, lay1.n_pages - 1):
            assert render_page(lay1, k, "", 0, PORT) == render_page(lay2, k, "", 0, PORT)


def test_manifest_round_trips_to_the_same_model(demo: SimWeb) -> None:
    m = json.loads(json.dumps(demo.manifest(PORT, 1.0)))
    again = web_from_manifest(m)
    assert [s for s in again.hosts] == [s for s in demo.hosts]


def test_hostile_profile_shows_every_behaviour_and_robots_variant(hostile: SimWeb) -> None:
    m = hostile.manifest(PORT, 1.0)
    for b in BEHAVIOURS:
        if b == "spa":
            continue   # opt-in (spa_hosts): a crawl without a browser could not reach those pages
        assert m["behaviours"][b], f"no host shows {b}"
    for v in ROBOTS_VARIANTS:
        assert m["robots_variants"][v], f"no host has robots variant {v}"


def test_hosts_are_dot_test_on_loopback_and_some_share_an_ip(demo: SimWeb) -> None:
    names = [s.name for s in demo.hosts]
    assert len(set(names)) == len(names) == demo.config.hosts
    assert all(n.endswith(".test") for n in names)
    assert any(n.count(".") == 2 for n in names), "some hosts are subdomains of one registered domain"
    assert all(s.ip.startswith("127.") and s.ip != BAIT_IP for s in demo.hosts)
    assert set(demo.hosts_by_ip) == set(demo.ips)
    assert all(demo.hosts_by_ip[ip] for ip in demo.ips), "every IP serves a host"
    assert max(len(v) for v in demo.hosts_by_ip.values()) >= 5
    assert demo.hosts_map()["intranet.test"] == BAIT_IP


def test_bench_profile_scales_to_5000_hosts_and_a_million_pages() -> None:
    web = SimWeb(profile_config("bench"))
    m = web.manifest(PORT, 1.0)
    assert len(web.hosts) == 5000 and m["pages_total"] == 1_000_000
    assert max(len(v) for v in web.hosts_by_ip.values()) >= 20  # shared hosting
    assert not any(m["behaviours"][b] for b in BEHAVIOURS if b not in ("changing", "meta_robots", "sitemaps", "feeds"))
    last = web.hosts[-1]
    lay = web.layout(last.name)
    body = render_page(lay, lay.n_pages - 1, "", 0, PORT)
    assert 10_000 <= len(body) <= 60_000


def test_page_sizes_are_10_to_50_kb(demo: SimWeb) -> None:
    for spec in demo.hosts[:8]:
        lay = demo.layout(spec.name)
        for k in range(0, lay.n_pages, 3):
            n = len(render_page(lay, k, "", 0, PORT))
            assert 10_000 <= n <= 55_000, (spec.name, k, n)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.hrefs: list[tuple[str, bool]] = []
        self.meta: str | None = None
        self.canonical: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "base" and self.base is None:
            self.base = a.get("href")
        elif tag == "a" and a.get("href"):
            self.hrefs.append((a["href"] or "", "nofollow" in (a.get("rel") or "")))
        elif tag == "meta" and a.get("name") == "robots":
            self.meta = a.get("content")
        elif tag == "link" and a.get("rel") == "canonical":
            self.canonical = a.get("href")


def _parse(body: bytes) -> _Links:
    p = _Links()
    p.feed(body.decode("utf-8"))
    return p


def test_html_carries_exactly_the_model_links(hostile: SimWeb) -> None:
    for spec in hostile.hosts[:30]:
        lay = hostile.layout(spec.name)
        for k in range(lay.n_pages):
            model = lay.links(k, "", PORT)
            parsed = _parse(render_page(lay, k, "", 0, PORT))
            assert parsed.base == model.base_href
            assert parsed.hrefs == [(h, nf) for h, _t, nf in model.links]
            assert parsed.canonical == model.canonical


def test_every_link_of_an_article_resolves_to_something_real(hostile: SimWeb) -> None:
    """Relative, absolute, protocol-relative and <base>-relative links all land on real
    resources; only the deliberately broken /missing- links do not."""
    checked = 0
    for spec in hostile.hosts:
        lay = hostile.layout(spec.name)
        for k in range(lay.n_pages):
            page_url = f"http://{spec.name}:{PORT}{lay.path_of(k)}"
            model = lay.links(k, "", PORT)
            for href, _t, _nf in model.links:
                url = urljoin(model.base_href or page_url, href)
                parts = urlsplit(url)
                if parts.hostname not in hostile.by_name or "/missing-" in parts.path:
                    continue
                target = parts.path + (f"?{parts.query}" if parts.query else "")
                res = hostile.layout(parts.hostname).resolve(target)
                assert res.kind not in ("not_found", "soft404"), (page_url, href, url)
                checked += 1
    assert checked > 1000


def test_base_href_pages_break_naive_resolution(hostile: SimWeb) -> None:
    """Resolving the relative links of <base href> pages against the page URL instead
    of the base lands on nonexistent paths (a crawler that ignores <base> is caught)."""
    broken = 0
    for spec in hostile.hosts:
        lay = hostile.layout(spec.name)
        for k in (k for k in lay.articles if k % 5 == 2):
            model = lay.links(k, "", PORT)
            if model.base_href is None:
                continue
            page_url = f"http://{spec.name}:{PORT}{lay.path_of(k)}"
            for h, _t, _nf in model.links:
                if not h.startswith(("/", "http")):
                    kind = lay.resolve(urlsplit(urljoin(page_url, h)).path).kind
                    broken += kind in ("not_found", "soft404")
    assert broken > 10


def test_meta_robots_and_nofollow_links_are_rendered(hostile: SimWeb) -> None:
    spec = next(s for s in hostile.hosts if s.has("meta_robots"))
    lay = hostile.layout(spec.name)
    noindex = next(k for k in lay.articles if lay.meta(k)[0])
    nofollow = next(k for k in lay.articles if lay.meta(k)[1])
    assert _parse(render_page(lay, noindex, "", 0, PORT)).meta == "noindex"
    assert _parse(render_page(lay, nofollow, "", 0, PORT)).meta == "nofollow"
    k = next(k for k in lay.articles if k % 4 == 1)
    assert any(nf and "/hidden-" in h for h, nf in _parse(render_page(lay, k, "", 0, PORT)).hrefs)


def test_duplicates_are_exact_or_near_and_labelled(hostile: SimWeb) -> None:
    spec = next(s for s in hostile.hosts if s.has("duplicates"))
    lay = hostile.layout(spec.name)
    dups = hostile.manifest(PORT, 1.0)["hosts"][spec.name]["paths"]["duplicates"]
    for d in dups:
        src = lay.resolve(d["of"])
        res = lay.resolve(d["path"])
        assert res.kind == "page" and res.page == src.page
        a = render_page(lay, src.page, "", 0, PORT)
        b = render_page(lay, res.page, res.variant, 0, PORT)
        if d["kind"] == "exact":
            assert a == b
        elif d["kind"] == "near":
            assert a != b
            diff = sum(1 for x, y in zip(a.splitlines(), b.splitlines()) if x != y)
            assert 1 <= diff <= 3
        else:   # related: every other paragraph its own
            paragraphs = [set(x for x in page.splitlines() if x.startswith(b"<p>")) for page in (a, b)]
            shared = len(paragraphs[0] & paragraphs[1]) / len(paragraphs[0])
            assert d["kind"] == "related" and 0.3 <= shared <= 0.7, shared


# ---- robots ------------------------------------------------------------------

def test_robots_longest_match_wins_and_allow_wins_ties() -> None:
    rules = RobotsRules.parse("User-agent: *\nDisallow: /\nAllow: /p\nAllow: /folder\nDisallow: /folder\n")
    assert rules.allowed("/page")
    assert rules.allowed("/folder/x")
    assert not rules.allowed("/other")
    assert rules.allowed("/robots.txt")


def test_robots_wildcards_and_end_anchor() -> None:
    rules = RobotsRules.parse("User-agent: courtly\nDisallow: /*.pdf$\nDisallow: /*?print=\n")
    assert not rules.allowed("/files/a.pdf")
    assert rules.allowed("/files/a.pdf?download=1")
    assert not rules.allowed("/x/y.html?print=1")
    assert rules.allowed("/x/y.html")


def test_robots_groups_merge_and_specific_group_beats_star() -> None:
    text = ("User-agent: *\nDisallow: /news/\n\nUser-agent: Courtly/2.0\nDisallow: /a/\n\n"
            "User-agent: other\nDisallow: /\n\nUser-agent: COURTLY\nDisallow: /b/\nCrawl-delay: 2\n")
    rules = RobotsRules.parse(text)
    assert rules.allowed("/news/x") and not rules.allowed("/a/x") and not rules.allowed("/b/x")
    assert rules.crawl_delay_s == 2.0
    assert not robots_allows(text, "/news/x", token="somebot")


def test_robots_bom_garbage_and_size_cap() -> None:
    assert not robots_allows(b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n", "/x")
    assert robots_allows(bytes(range(256)) * 10, "/anything")
    big = b"User-agent: *\nDisallow: /a\n" + b"#" * ROBOTS_BYTES_MAX + b"\nUser-agent: *\nDisallow: /\n"
    assert not robots_allows(big, "/a") and robots_allows(big, "/b")


def test_rules_variant_disallows_print_pdf_private_but_allows_public(hostile: SimWeb) -> None:
    spec = next(s for s in hostile.hosts if s.robots == "rules")
    lay = hostile.layout(spec.name)
    rules = RobotsRules.parse(robots_body(hostile, spec, PORT))
    public = next(k for k in lay.articles if lay.slug(k).startswith("public-"))
    assert rules.allowed(lay.path_of(public))
    assert not rules.allowed("/private/")
    plain = next(k for k in lay.articles if lay.section_of(k) != "private")
    assert not rules.allowed(lay.path_of(plain) + "?print=1")
    assert rules.allowed(lay.path_of(public) + "?print=1"), "the longer Allow wins (RFC 9309)"
    assert not rules.allowed("/files/report-12.pdf")
    assert rules.allowed(f"/{lay.sections[0]}/"), "the * group's Disallow does not bind courtly"


def test_large_robots_is_over_500_kib_and_its_tail_is_ignored(hostile: SimWeb) -> None:
    spec = next(s for s in hostile.hosts if s.robots == "large")
    body = robots_body(hostile, spec, PORT)
    assert len(body) > ROBOTS_BYTES_MAX
    assert hostile.allowed(spec.name, "/")


# ---- reachability ---------------------------------------------------------------

def test_reachable_pages_obey_robots_and_skip_unreachable_robots(hostile: SimWeb) -> None:
    pages = hostile.reachable_pages(hostile.seeds(PORT))
    hosts = {urlsplit(u).hostname for u in pages}
    for spec in hostile.hosts:
        if spec.robots in ("error_500", "timeout", "disallow_all"):
            assert spec.name not in hosts
        if spec.robots in ("missing_404", "forbidden_403", "allow_all", "garbage", "redirect_too_long"):
            assert f"http://{spec.name}:{PORT}/" in pages
    for u in pages:
        parts = urlsplit(u)
        assert hostile.allowed(parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))
        assert "?print=" not in u and "/hidden-" not in u and "/orphan-" not in u
    assert len(pages) > 300


def test_reachable_pages_bounded_to_hosts(demo: SimWeb) -> None:
    two = [demo.hosts[0].name, demo.hosts[1].name]
    pages = demo.reachable_pages([f"http://{h}:{PORT}/" for h in two], hosts=two)
    assert pages and {urlsplit(u).hostname for u in pages} <= set(two)


def test_redirect_chain_longer_than_limit_is_not_followed(hostile: SimWeb) -> None:
    spec = next(s for s in hostile.hosts if s.has("redirects") and s.robots in ("rules", "allow_all"))
    chains = hostile.manifest(PORT, 1.0)["hosts"][spec.name]["paths"]["redirect_chains"]
    six = next(c for c in chains if c["hops"] == 6)
    three = next(c for c in chains if c["hops"] == 3)
    assert hostile.reachable_pages([six["start"]], hosts=[spec.name, spec.partner]) == set()
    assert three["final"] in hostile.reachable_pages([three["start"]], hosts=[spec.name, spec.partner])


def test_trap_entries_exist_on_trap_hosts(hostile: SimWeb) -> None:
    for trap, entry in TRAP_ENTRIES.items():
        spec = next(s for s in hostile.hosts if s.has(trap))
        res = hostile.layout(spec.name).resolve(entry)
        assert res.kind == "trap" and res.tag == trap


# ---- change process ---------------------------------------------------------------

def test_change_epochs_follow_their_event_times() -> None:
    for key in range(20):
        times = change_times(key, 0.05, 2000.0)
        assert times == sorted(times)
        for t in (0.0, 10.0, 333.3, 1999.0):
            assert epoch_at(key, 0.05, t) == sum(1 for x in times if x <= t)
        if times:
            assert last_change_s(key, 0.05, 2000.0) == times[-1]
    assert epoch_at(1, 0.0, 1e6) == 0


def test_change_counts_average_rate_times_duration() -> None:
    rate, until = 0.01, 10_000.0
    counts = [epoch_at(key, rate, until) for key in range(300)]
    mean = sum(counts) / len(counts)
    assert 0.9 * rate * until < mean < 1.1 * rate * until


def test_config_refuses_unknown_keys() -> None:
    with pytest.raises(ValueError):
        SimWebConfig.from_dict({"seed": 1, "nope": 2})
    with pytest.raises(ValueError):
        profile_config("nope")


def test_reachability_fast_href_join_agrees_with_urljoin(hostile: SimWeb) -> None:
    from courtly.sim.manifest import _join, _split

    n = 0
    for spec in hostile.hosts:
        lay = hostile.layout(spec.name)
        for k in range(lay.n_pages):
            links = lay.links(k, "", PORT)
            base = links.base_href or f"http://{spec.name}:{PORT}{lay.path_of(k)}"
            bp = _split(base)
            assert bp is not None and bp[1] is not None
            for href, _t, _nf in links.links:
                assert _join(base, bp[0], bp[1], href) == _split(urljoin(base, href)), href
                n += 1
    assert n > 1000
