"""The status server against a fake source: /metrics equals the source, the host
table pages, sorts and searches on the server, bad parameters get 400.

`FakeSource` is also the realistic source of the browser test
(tests/e2e/test_status_browser.py). The adapter over a real Crawler:
test_status_observer.py."""

from __future__ import annotations

import asyncio
import json
import random
import re
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from courtly.runtime import observe
from courtly.runtime.observe import page_rows
from courtly.shell import metrics
from courtly.shell.resolver import DNS_LATENCY_BUCKETS_S
from courtly.shell.status import HOST_COLUMNS, StatusServer

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
T0 = 1_760_000_000.0
REASONS = ["robots", "scope", "depth", "nofollow", "error", "dns", "robots_unreachable", "non_public"]


class FakeSource:
    """A deterministic crawl-shaped source: `hosts_n` hosts, a snapshot that moves
    on every `step()`, a few decisions, one trap suspect, URL histories."""

    def __init__(self, hosts_n: int = 200, seed: int = 7) -> None:
        rng = random.Random(seed)
        words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "zeta"]
        self.rows: dict[str, dict] = {}
        for i in range(hosts_n):
            key = f"{words[i % len(words)]}-{i:06d}.example"
            backoff = i % 17 == 0
            self.rows[key] = {
                "key": key, "ip": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",
                "delay_s": round(1.0 + rng.random() * 4, 3),
                "backoff": "429 Retry-After 120" if backoff else "",
                "backoff_until": T0 + 120 if backoff else None,
                "robots": ["fresh", "fresh", "fresh", "failed", "fetching"][i % 5],
                "queued": rng.randrange(0, 500), "leased": i % 11 == 0,
                "next_fetch_at": T0 + rng.random() * 30, "budget_left": 50_000 - rng.randrange(0, 5000),
                "trap": "calendar" if i % 97 == 0 else "", "fetches": rng.randrange(0, 2000),
                "crawl_delay_s": 2.0 if i % 7 == 0 else None,
            }
        self.row_calls = 0
        self.frozen = False
        self.n = 0
        self.fail = False
        self._rng = rng
        self._decisions = [{"url": f"https://{k}/private/{j}", "reason": REASONS[j % len(REASONS)],
                            "detail": f"rule {j}", "at": T0 + j, "key": k}
                           for j, k in enumerate(list(self.rows)[:40])]
        self._snap = self._initial()

    def _initial(self) -> dict:
        return {
            "now": T0, "started_at": T0 - 600,
            "fetches": {"page": 12_000, "robots": 310}, "fetches_by_reason": {"discovery": 12_000},
            "http_responses": {"200": 10_500, "301": 700, "404": 520, "429": 80, "500": 40, "503": 60},
            "bytes_fetched": 812_000_000, "decisions": {"robots": 420, "scope": 1500, "depth": 33, "error": 12},
            "errors": 100, "retries": 90, "links_duplicate": 50_000, "extract_failures": 2, "in_flight": 37,
            "frontier": {"queued_urls": 230_000, "leased_urls": 700, "store_only_urls": 0, "hosts": {"ready": 120, "waiting": 70, "leased": 10}},
            "hosts_backing_off": 12, "host_delay_s": {"0.5": 1.2, "0.9": 3.5}, "ip_request_rate_max": 4.2,
            "dns_cache_hit_ratio": 0.93,
            "dns_latency_s": {"le": list(DNS_LATENCY_BUCKETS_S),
                              "counts": [0, 5, 20, 40, 60, 70, 75, 78, 79, 80, 80, 80, 80, 80],
                              "sum": 1.75, "count": 80},
            "dns_failures": {"failed": 3, "stale": 2},
            "host_failures": {"connect": 7, "5xx": 11},
            "hosts_health": {"failing": 2, "parked": 1, "down": 0},
            "fetch_latency_s": {"le": list(metrics.LATENCY_BUCKETS_S),
                                "counts": [0, 10, 300, 2500, 6000, 9800, 11500, 12100, 12250, 12300, 12305, 12310,
                                           12310, 12310],
                                "sum": 2100.5, "count": 12310},
            "seen": {"bloom_fill_ratio": 0.031, "lookups": 400_000, "false_positives": 17},
            "robots_origins": {"fresh": 180, "failed": 9, "fetching": 3},
            "dup_ratio": {"exact": 0.021, "near": 0.048}, "trap_suspects_open": 1, "soft404_ratio": 0.004,
            "freshness_age_s": {"1": {"0.5": 3600.0, "0.9": 7200.0}, "2": {"0.5": 86400.0, "0.9": 172800.0}},
            "frontier_disk_bytes": 123_456_789, "budget_left_pages": None,
        }

    def step(self) -> None:
        """Advance the fake crawl by 1.5 s of plausible activity."""
        s, r = self._snap, self._rng
        self.n += 1
        s["now"] += 1.5
        pages = r.randrange(20, 60)
        s["fetches"]["page"] += pages
        s["fetches_by_reason"]["discovery"] += pages
        s["fetches"]["robots"] += r.randrange(0, 3)
        s["http_responses"]["200"] += pages - 3
        s["http_responses"]["404"] += 3
        s["bytes_fetched"] += pages * r.randrange(20_000, 90_000)
        s["frontier"]["queued_urls"] += r.randrange(-300, 400)
        for state in ("ready", "waiting"):
            s["frontier"]["hosts"][state] = max(0, s["frontier"]["hosts"][state] + r.randrange(-5, 6))
        h = s["fetch_latency_s"]
        add = [0] * len(h["counts"])
        for _ in range(pages):
            add[min(len(add) - 1, 3 + int(r.random() * 5))] += 1
        acc = 0
        for i, a in enumerate(add):
            acc += a
            h["counts"][i] += acc
        h["count"] = h["counts"][-1]
        h["sum"] += pages * 0.15
        for tier in s["freshness_age_s"].values():
            tier["0.5"] += r.randrange(-100, 120)

    # ---- StatusSource ------------------------------------------------------------

    def snapshot(self, now: float) -> dict:
        if self.fail:
            raise RuntimeError("the crawl is gone")
        if not self.frozen:
            self.step()
        return json.loads(json.dumps(self._snap))

    def _row(self, key: str) -> dict:
        self.row_calls += 1
        return dict(self.rows[key])

    def hosts(self, offset: int, limit: int, sort: str, desc: bool, query: str) -> tuple[int, list[dict]]:
        q = query.lower()
        match = (lambda k: q in k or q in self.rows[k]["ip"]) if q else None

        def value(k):
            return self.rows[k][sort] if self.rows[k][sort] != "" else None

        return page_rows(self.rows, value, self._row, offset, limit, desc, match)

    def decisions(self, limit: int) -> list[dict]:
        return [dict(d) for d in reversed(self._decisions)][:limit]

    def review_queue(self) -> list[dict]:
        return [{"key": k, "rule": "calendar", "scope": "template:/calendar/{year}/{month}/",
                 "evidence": "3 URLs with dates outside 1990..2028", "since": T0 - 60}
                for k, r in self.rows.items() if r["trap"]][:5]

    def explain(self, url: str) -> dict:
        key = url.split("/")[2] if "://" in url else ""
        if key not in self.rows:
            return {"url": url, "normalized": url, "record": None, "fetches": [], "via_chain": [],
                    "links_sample": [], "note": "", "found": False}
        return {
            "url": url, "normalized": url, "found": True, "note": "",
            "record": {"url": url, "key": key, "state": "fetched", "band": 4, "depth": 2, "redirects": 0,
                       "via": f"https://{key}/", "discovered_at": T0 - 300, "attempts": 1, "fetched_at": T0 - 5,
                       "status": 200, "reason": None, "detail": None},
            "fetches": [
                {"url": url, "kind": "page", "at": T0 - 200, "status": 503, "bytes": 312, "elapsed_s": 0.08,
                 "ip": self.rows[key]["ip"], "warc": "courtly-00000.warc.gz:1024", "error": ""},
                {"url": url, "kind": "page", "at": T0 - 5, "status": 200, "bytes": 48_213, "elapsed_s": 0.21,
                 "ip": self.rows[key]["ip"], "warc": "courtly-00003.warc.gz:88812", "error": ""},
            ],
            "via_chain": [f"https://{key}/", f"https://{key}/index.html"],
            "links_sample": [f"https://{key}/a", f"https://{key}/b"],
        }


# ---- helpers ---------------------------------------------------------------------------


@asynccontextmanager
async def serving(source, **kw):
    server = StatusServer(source, **kw)
    port = await server.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            yield http
    finally:
        await server.stop()


def run(coro):
    return asyncio.run(coro)


async def _get_json(http, path: str) -> tuple[int, dict]:
    async with http.get(path) as r:
        return r.status, await r.json()


def parse_metrics(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


# ---- /metrics ----------------------------------------------------------------------------


def test_metrics_equal_the_source_snapshot():
    src = FakeSource()
    src.frozen = True
    snap = src.snapshot(0)

    async def go():
        async with serving(src) as http:
            async with http.get("/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain; version=")
                return await r.text()

    m = parse_metrics(run(go()))
    assert m[("courtly_fetches_total", (("kind", "page"),))] == 12_000
    assert m[("courtly_fetches_total", (("kind", "robots"),))] == 310
    assert m[("courtly_fetches_by_reason_total", (("reason", "discovery"),))] == 12_000
    for status, n in snap["http_responses"].items():
        assert m[("courtly_http_responses_total", (("status", status),))] == n
    for reason, n in snap["decisions"].items():
        assert m[("courtly_decisions_total", (("reason", reason),))] == n
    assert m[("courtly_bytes_fetched_total", ())] == snap["bytes_fetched"]
    assert m[("courtly_errors_total", ())] == 100
    assert m[("courtly_frontier_queued_urls", ())] == 230_000
    for state, n in snap["frontier"]["hosts"].items():
        assert m[("courtly_frontier_hosts", (("state", state),))] == n
    assert m[("courtly_hosts_backing_off", ())] == 12
    assert m[("courtly_host_delay_seconds", (("quantile", "0.5"),))] == 1.2
    assert m[("courtly_ip_request_rate_max", ())] == 4.2
    assert m[("courtly_dns_cache_hit_ratio", ())] == 0.93
    assert m[("courtly_dns_latency_seconds_bucket", (("le", "0.25"),))] == 78
    assert m[("courtly_dns_latency_seconds_count", ())] == 80
    assert m[("courtly_dns_failures_total", (("outcome", "stale"),))] == 2
    assert m[("courtly_host_failures_total", (("kind", "5xx"),))] == 11
    assert m[("courtly_hosts_unhealthy", (("state", "parked"),))] == 1
    assert m[("courtly_seen_bloom_fill_ratio", ())] == 0.031
    for state, n in snap["robots_origins"].items():
        assert m[("courtly_robots_origins", (("state", state),))] == n
    assert m[("courtly_dup_ratio", (("kind", "exact"),))] == 0.021
    assert m[("courtly_dup_ratio", (("kind", "near"),))] == 0.048
    assert m[("courtly_trap_suspects_open", ())] == 1
    assert m[("courtly_soft404_ratio", ())] == 0.004
    assert m[("courtly_freshness_age_seconds", (("quantile", "0.9"), ("tier", "2")))] == 172800.0
    assert m[("courtly_frontier_disk_bytes", ())] == 123_456_789
    assert ("courtly_budget_left_pages", ()) not in m       # no page limit: absent
    h = snap["fetch_latency_s"]
    for le, c in zip(h["le"], h["counts"]):
        assert m[("courtly_fetch_latency_seconds_bucket", (("le", repr(float(le))),))] == c
    assert m[("courtly_fetch_latency_seconds_bucket", (("le", "+Inf"),))] == h["counts"][-1]
    assert m[("courtly_fetch_latency_seconds_count", ())] == h["count"]
    assert m[("courtly_fetch_latency_seconds_sum", ())] == h["sum"]


def test_metrics_are_computed_on_every_scrape():
    src = FakeSource()

    async def go():
        async with serving(src) as http:
            texts = []
            for _ in range(2):
                async with http.get("/metrics") as r:
                    texts.append(await r.text())
            return texts

    first, second = (parse_metrics(t) for t in run(go()))
    key = ("courtly_fetches_total", (("kind", "page"),))
    assert second[key] > first[key]
    assert second[key] == src._snap["fetches"]["page"]


def test_metric_names_follow_prometheus_conventions():
    names = [d.name for d in metrics.METRICS]
    assert len(names) == len(set(names))
    for d in metrics.METRICS:
        assert re.fullmatch(r"courtly_[a-z][a-z0-9_]*", d.name), d.name
        assert d.kind in ("counter", "gauge", "histogram", "summary")
        assert d.name.endswith("_total") == (d.kind == "counter"), d.name
        assert ("quantile" in d.labels) == (d.kind == "summary"), d.name   # a label reserved for summaries
        assert d.help.endswith("."), d.name
    assert "courtly_fetch_latency_seconds" in names


def test_every_metric_is_documented():
    text = DOCS.read_text()
    missing = [d.name for d in metrics.METRICS if f"`{d.name}`" not in text]
    assert not missing, f"docs/observability.md lacks {missing}"


def test_each_server_has_a_private_registry():
    src = FakeSource()

    async def go():
        async with serving(src):
            pass

    run(go())
    assert not [n for n in REGISTRY._names_to_collectors if n.startswith("courtly_")]


def test_missing_snapshot_parts_are_left_out_not_fatal():
    fams = metrics.families({"fetches": {"page": 3}, "fetch_latency_s": {"le": [1.0], "counts": [1]},
                             "frontier": "garbage", "dup_ratio": {"exact": "x"}})
    assert [f.name for f in fams] == ["courtly_fetches"]


def test_latency_buckets_agree_between_runtime_and_shell():
    assert observe.LATENCY_BUCKETS_S == metrics.LATENCY_BUCKETS_S
    assert observe.DNS_LATENCY_BUCKETS_S == DNS_LATENCY_BUCKETS_S


def test_histogram_quantile_interpolates_like_prometheus():
    le, counts = [0.1, 0.5, 1.0], [10, 60, 100, 100]
    assert metrics.histogram_quantile(0.5, le, counts) == pytest.approx(0.1 + 0.4 * 40 / 50)
    assert metrics.histogram_quantile(0.99, le, counts) == pytest.approx(0.5 + 0.5 * 39 / 40)
    assert metrics.histogram_quantile(0.5, le, [0, 0, 0, 0]) is None


# ---- host table ------------------------------------------------------------------------


def test_hosts_sort_search_and_page_on_the_server():
    src = FakeSource(hosts_n=300)

    async def go():
        async with serving(src) as http:
            pages = []
            for offset in range(0, 300, 70):
                status, d = await _get_json(http, f"/api/hosts?offset={offset}&limit=70&sort=queued&desc=1")
                assert status == 200
                pages.append(d)
            _, found = await _get_json(http, "/api/hosts?q=GAMMA&sort=key&limit=500")
            _, by_ip = await _get_json(http, "/api/hosts?q=10.0.1.&limit=500")
            _, asc = await _get_json(http, "/api/hosts?sort=trap&limit=500")
            return pages, found, by_ip, asc

    pages, found, by_ip, asc = run(go())
    rows = [r for p in pages for r in p["rows"]]
    assert all(p["total"] == 300 for p in pages)
    assert len(rows) == 300 and len({r["key"] for r in rows}) == 300
    expected = sorted(src.rows.values(), key=lambda r: (-r["queued"], r["key"]))
    assert [r["key"] for r in rows] == [r["key"] for r in expected]
    assert set(HOST_COLUMNS) <= set(rows[0])
    gammas = sorted(k for k in src.rows if "gamma" in k)
    assert found["total"] == len(gammas) and [r["key"] for r in found["rows"]] == gammas
    assert by_ip["total"] == len([r for r in src.rows.values() if "10.0.1." in r["ip"]]) > 0
    traps = [r["trap"] for r in asc["rows"]]
    assert traps[0] == "calendar" and traps[-1] == ""          # empty values sort last


def test_hosts_of_100k_keys_build_only_the_requested_page():
    src = FakeSource(hosts_n=100_000)

    async def go():
        async with serving(src) as http:
            first = await _get_json(http, "/api/hosts?offset=0&limit=50&sort=fetches&desc=1")
            calls_first = src.row_calls
            deep = await _get_json(http, "/api/hosts?offset=99990&limit=50&sort=delay_s")
            searched = await _get_json(http, "/api/hosts?q=omega-00&limit=20&sort=key")
            return first, calls_first, deep, searched

    (s1, first), calls_first, (s2, deep), (s3, searched) = run(go())
    assert s1 == s2 == s3 == 200
    assert first["total"] == 100_000 and len(first["rows"]) == 50
    assert calls_first == 50                                  # rows are built for the page only
    fetches = [r["fetches"] for r in first["rows"]]
    assert fetches == sorted(fetches, reverse=True) and fetches[0] == max(r["fetches"] for r in src.rows.values())
    assert len(deep["rows"]) == 10                            # the last page is short
    assert src.row_calls == 50 + 10 + 20
    assert all("omega-00" in r["key"] for r in searched["rows"])


def test_page_rows_puts_missing_values_last_both_ways():
    vals = {"a": 3, "b": None, "c": 1, "d": 3}
    for desc, want in ((False, ["c", "a", "d", "b"]), (True, ["a", "d", "c", "b"])):
        total, rows = page_rows(vals, vals.get, lambda k: {"key": k}, 0, 10, desc)
        assert total == 4 and [r["key"] for r in rows] == want
    # the heap path (page near the top of a long list) gives the same order as a full sort
    many = {f"k{i:05d}": (i * 7919) % 1000 for i in range(5000)}
    for desc in (False, True):
        _, top = page_rows(many, many.get, lambda k: k, 10, 20, desc)
        _, full = page_rows(many, many.get, lambda k: k, 0, 5000, desc)
        assert top == full[10:30]


def test_costly_aggregates_are_recomputed_at_most_once_per_twenty_times_their_cost():
    from courtly.runtime.observe import _Memo

    t = [0.0]
    calls = []

    def compute():
        calls.append(t[0])
        t[0] += 0.5            # this scan "costs" 0.5 s of the clock
        return len(calls)

    memo = _Memo(lambda: t[0])
    assert memo.get("k", compute) == 1          # computed at 0, costs 0.5: reused until 10.0
    t[0] = 9.9
    assert memo.get("k", compute) == 1
    t[0] = 10.0
    assert memo.get("k", compute) == 2
    assert memo.get("other", compute) == 3      # keys are separate
    cheap = _Memo(lambda: 0.0)                  # free scans are never reused
    assert [cheap.get("k", compute) for _ in range(2)] == [4, 5]


# ---- bad parameters and failures ---------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/api/hosts?offset=-1", "/api/hosts?offset=abc", "/api/hosts?limit=0", "/api/hosts?limit=501",
    "/api/hosts?limit=1e3", "/api/hosts?sort=password", "/api/hosts?desc=maybe", "/api/hosts?q=" + "x" * 201,
    "/api/decisions?limit=0", "/api/decisions?limit=100000", "/api/explain", "/api/explain?url=",
    "/api/explain?url=" + "a" * 5000,
])
def test_bad_parameters_get_400_with_a_message(path):
    async def go():
        async with serving(FakeSource()) as http:
            return await _get_json(http, path)

    status, body = run(go())
    assert status == 400
    assert isinstance(body["error"], str) and body["error"]


def test_unknown_api_path_is_a_json_404():
    async def go():
        async with serving(FakeSource()) as http:
            return await _get_json(http, "/api/nothing")

    status, body = run(go())
    assert status == 404 and body["error"]


def test_a_failing_source_gets_500_and_the_server_keeps_serving():
    src = FakeSource()

    async def go():
        async with serving(src) as http:
            src.fail = True
            bad = await _get_json(http, "/api/snapshot")
            async with http.get("/metrics") as r:
                metrics_status = r.status
            src.fail = False
            good = await _get_json(http, "/api/snapshot")
            return bad, metrics_status, good

    (s1, b1), metrics_status, (s2, b2) = run(go())
    assert s1 == 500 and "the crawl is gone" in b1["error"]
    assert metrics_status == 500
    assert s2 == 200 and b2["fetches"]["page"] > 0


def test_loopback_server_refuses_foreign_host_names():
    async def go():
        async with serving(FakeSource()) as http:
            async with http.get("/api/snapshot", headers={"Host": "evil.example:8080"}) as r:
                foreign = r.status
            async with http.get("/api/snapshot", headers={"Host": "localhost:8080"}) as r:
                local = r.status
            return foreign, local

    assert run(go()) == (403, 200)


def test_non_finite_numbers_become_null_in_json():
    src = FakeSource()
    src.frozen = True
    src._snap["ip_request_rate_max"] = float("nan")

    async def go():
        async with serving(src) as http:
            async with http.get("/api/snapshot") as r:
                return json.loads(await r.text())   # strict JSON: NaN would not parse in a browser

    assert run(go())["ip_request_rate_max"] is None


# ---- page and assets -------------------------------------------------------------------


def test_page_and_assets_are_served_from_package_data_without_external_urls():
    async def go():
        async with serving(FakeSource()) as http:
            out = {}
            for path in ("/", "/assets/app.js", "/assets/charts.js", "/assets/style.css", "/favicon.ico"):
                async with http.get(path) as r:
                    out[path] = (r.status, r.headers.get("Content-Security-Policy", ""), await r.text())
            async with http.get("/assets/../status.py") as r:
                out["traversal"] = r.status
            return out

    out = run(go())
    assert out["traversal"] == 404
    for path in ("/", "/assets/app.js", "/assets/charts.js", "/assets/style.css"):
        status, csp, text = out[path]
        assert status == 200 and "default-src 'none'" in csp, path
        assert not re.search(r"(?:src|href|url)\s*[=(]\s*[\"']?(?:https?:)?//", text), path
        if path != "/":
            assert "http://" not in text and "https://" not in text, path
    assert 'id="host-table"' in out["/"][2] and "assets/app.js" in out["/"][2]


def test_explain_and_decisions_and_review_pass_through():
    src = FakeSource()
    key = next(iter(src.rows))

    async def go():
        async with serving(src) as http:
            return (await _get_json(http, f"/api/explain?url=https://{key}/x"),
                    await _get_json(http, "/api/decisions?limit=5"),
                    await _get_json(http, "/api/review"))

    (s1, ex), (s2, dec), (s3, rev) = run(go())
    assert s1 == s2 == s3 == 200
    assert ex["found"] and [f["status"] for f in ex["fetches"]] == [503, 200]
    assert len(dec["rows"]) == 5 and dec["rows"][0]["at"] > dec["rows"][1]["at"]
    assert rev["rows"] and rev["rows"][0]["rule"] == "calendar"


def test_server_stops_and_frees_its_port():
    async def go():
        server = StatusServer(FakeSource())
        port = await server.start()
        await server.stop()
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as http:
                await http.get(f"http://127.0.0.1:{port}/metrics")
        return port

    assert run(go()) > 0
