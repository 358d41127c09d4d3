"""A two-region cluster (issue 21): `us` and `eu` workers on one throwaway
PostgreSQL crawl the simulated web, each region connecting from its own
loopback source address, and are judged from the server's request log, the
database and the WARC files.

The web (sim/region.py): every host is near `us` except site0006.test and
site0007.test (near `eu`): the far region waits 0.5 s more for each answer,
so the RTT homing flips only if the median of three loopback answers from
the near region took over 0.4 s; site0006.test also geo-blocks `us` (451
only), which decides its home whatever the round trips.
The crawl is submitted with both regions and a storage folder per region;
`courtly probe` runs from each region (robots.txt probes) and homes the
keys; then two `us` workers and one `eu` worker crawl to the end.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict

import pytest

from courtly.core.urls import politeness_key
from courtly.runtime.demo import simweb_process
from courtly.shell.warc_index import iter_records
from courtly.sim.check import check_log
from courtly.sim.reqlog import load_log
from crawl_support import run_courtly
from dist_support import CRAWL_DELAY_S_MAX, DELAY_S, Cluster, agent_of, write_dist_config
from dist_support import db_rows as _db
from pg_support import pg_fixture

pytestmark = pytest.mark.slow

postgres = pg_fixture(scope="module")

SOURCE = {"us": "127.0.2.1", "eu": "127.0.2.2"}        # each region's egress
BLOCKED, NEAR_EU = "site0006.test", "site0007.test"
SIM_ARGS = ["--profile", "demo", "--hosts", "8", "--pages-per-host", "12", "--seed", "21",
            "--region", f"us={SOURCE['us']}", "--region", f"eu={SOURCE['eu']}",
            "--region-block", f"{BLOCKED}=us", "--region-near", f"{NEAR_EU}=eu", "--region-near", f"{BLOCKED}=eu",
            "--far-latency-s", "0.5"]
WORKERS = {"us1": "us", "us2": "us", "eu1": "eu"}


def _key(host: str) -> str:
    return politeness_key(host.rsplit(":", 1)[0], "domain")


@pytest.fixture(scope="module")
def crawl(postgres, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regions")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        dsn = postgres.create_database()
        config = write_dist_config(tmp / "dist.toml")
        storage = {r: tmp / f"storage-{r}" for r in SOURCE}
        allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
        net = [a for n in allowed for a in ("--allow-network", n)]
        sub = run_courtly("submit", "--db", dsn, "--partitions", "64", "--seeds-file", str(web.out / "seeds.txt"),
                          "--regions", "us,eu", *[a for r, p in storage.items()
                                                  for a in ("--region-storage", f"{r}={p}")])
        assert sub.returncode == 0, sub.stderr
        probes = {}
        for region in ("us", "eu"):
            p = run_courtly("probe", "--db", dsn, "--region", region, "--source-address", SOURCE[region],
                            "--config", str(config), "--hosts-file", str(web.hosts_file), *net,
                            "--user-agent", agent_of(f"probe-{region}"), "--json")
            assert p.returncode == 0, p.stderr
            probes[region] = json.loads(p.stdout)
        c = Cluster(dsn, web, tmp, config, "")
        started = time.time()
        for w, region in WORKERS.items():
            c.out = str(storage[region])
            c.start(w, "--region", region, "--source-address", SOURCE[region])
        codes = c.wait()
        elapsed = time.time() - started
        assert codes == {w: 0 for w in WORKERS}, {w: c.tail(w) for w in WORKERS}
        time.sleep(1.2)   # the server flushes its log every second
        homes = {r[0]: (r[1], r[2], r[3]) for r in _db(dsn, "SELECT key, region, reason, blocked FROM homes")}
        yield {"web": web, "dsn": dsn, "storage": storage, "probes": probes, "cluster": c, "homes": homes,
               "records": load_log(web.log_file), "elapsed_s": elapsed}
        c.stop_all()


def _worker_records(crawl) -> list:
    agents = {agent_of(w): w for w in WORKERS}
    return [(agents[r.agent], r) for r in crawl["records"] if r.agent in agents]


def test_a_geo_blocking_host_is_homed_in_the_region_it_serves(crawl):
    assert crawl["homes"][BLOCKED] == ("eu", "geo_block", "us")
    assert crawl["homes"][NEAR_EU][:2] == ("eu", "rtt")          # the nearer region, by more than the margin
    others = {k: h[0] for k, h in crawl["homes"].items() if k not in (BLOCKED, NEAR_EU)}
    assert others and set(others.values()) == {"us"}
    moved = {m["key"]: m["to"] for m in crawl["probes"]["eu"]["moved"]}
    assert moved == {BLOCKED: "eu", NEAR_EU: "eu"}
    # the probes themselves: us was refused with 451 (RFC 7725), eu was served
    probe_status = {(r.agent, r.status) for r in crawl["records"] if r.host.startswith(BLOCKED)
                    and r.agent.startswith("courtly-test/probe")}
    assert probe_status == {(agent_of("probe-us"), 451), (agent_of("probe-eu"), 200)}


def test_every_key_is_fetched_only_by_workers_of_its_home_region_from_its_egress(crawl):
    by_region = Counter()
    for worker, r in _worker_records(crawl):
        home = crawl["homes"][_key(r.host)][0]
        assert WORKERS[worker] == home, f"{worker} ({WORKERS[worker]}) fetched {r.host}{r.path}, homed in {home}"
        assert r.conn.rsplit(":", 1)[0] == SOURCE[home], r.conn
        assert r.status != 451, f"{r.host}{r.path} refused {worker}"
        by_region[worker] += 1
    assert by_region["us1"] + by_region["us2"] > 5 and by_region["eu1"] > 5, by_region
    # leases: a worker took partitions of its own region's range only, and both us workers took some
    c = crawl["cluster"]
    ranges = {"us": range(0, 32), "eu": range(32, 64)}
    for w, region in WORKERS.items():
        taken = {p for _t, p in c.acquisitions(w)}
        assert taken and taken <= set(ranges[region]), (w, sorted(taken))
    fetched_hosts = defaultdict(set)
    for worker, r in _worker_records(crawl):
        fetched_hosts[WORKERS[worker]].add(r.host.rsplit(":", 1)[0])
    assert {BLOCKED, NEAR_EU} <= fetched_hosts["eu"]


def test_links_across_regions_are_forwarded_and_nothing_is_left_or_dropped(crawl):
    dsn = crawl["dsn"]
    homes = crawl["homes"]
    rows = _db(dsn, "SELECT url, key, via, state FROM urls")
    assert not [r for r in rows if r["state"] == "queued"]
    crossed = [r for r in rows if r["via"] and homes[r["key"]][0] != homes[_key(r["via"].split("/")[2])][0]]
    assert crossed, "no link crossed regions: the web gives no evidence of forwarding"
    fetch_warc = {r[0]: r[1] for r in _db(dsn, "SELECT url, warc FROM fetches WHERE kind = 'page'")}
    for r in crossed:
        if r["state"] == "fetched":     # found in one region, fetched (and archived) in the key's home
            assert f"-{homes[r['key']][0]}-" in fetch_warc[r["url"]], (r["url"], fetch_warc[r["url"]])
    assert any(r["state"] == "fetched" for r in crossed)


def test_every_warc_file_sits_in_its_regions_storage_with_its_tag_and_no_content_crosses(crawl):
    homes = crawl["homes"]
    archived: dict[str, set[str]] = {}
    for region, folder in crawl["storage"].items():
        files = sorted((folder / "warc").glob("*.warc.gz"))
        assert files, f"no WARC file in {region}'s storage"
        for path in files:
            assert path.name.startswith(f"courtly-{region}-"), path.name
            assert WORKERS[path.name.split("-")[2]] == region, path.name
            infos = []
            for rec in iter_records(path):
                if rec.rec_type == "warcinfo":
                    infos.append(rec.payload.decode())
                elif rec.rec_type in ("response", "revisit", "request"):
                    uri = rec.warc_headers["WARC-Target-URI"]
                    assert rec.warc_headers["Courtly-Region"] == region, (path.name, uri)
                    assert homes[_key(uri.split("/")[2])][0] == region, f"{uri} archived in {region}"
                    archived.setdefault(region, set()).add(uri)
            assert infos and all(f"courtly-region: {region}" in i for i in infos), path.name
    fetched = {r[0]: r[1] for r in _db(crawl["dsn"], "SELECT url, key FROM urls WHERE state = 'fetched'")}
    for url, key in fetched.items():
        assert url in archived[homes[key][0]]
    # the fetch log names, for every request (pages and robots.txt), a file of the key's home region
    logged = _db(crawl["dsn"], "SELECT url, warc FROM fetches WHERE warc <> ''")
    assert logged
    for url, warc in logged:
        assert warc.startswith(f"courtly-{homes[_key(url.split('/')[2])][0]}-"), (url, warc)


def test_the_two_regions_are_polite_together_and_complete(crawl):
    web = crawl["web"]
    report = check_log(web.log_file, web.manifest_file, delay_s_min=DELAY_S, crawl_delay_s_max=CRAWL_DELAY_S_MAX,
                       duplicate_fetches_max=10**9, coverage_min=1.0)
    assert report.ok, report.render()
    pages = sum(1 for _w, r in _worker_records(crawl))
    print(f"\ntwo regions: {pages} worker requests in {crawl['elapsed_s']:.1f} s; "
          f"per worker {Counter(w for w, _r in _worker_records(crawl))}")


def test_a_worker_must_name_a_region_of_the_crawl_and_keep_its_bytes_home(crawl):
    dsn, us = crawl["dsn"], str(crawl["storage"]["us"])
    for args, message in ((("--out", us), "give the worker's --region"),
                          (("--region", "ap", "--out", us), "unknown region 'ap'"),
                          (("--region", "eu", "--out", us), "bytes never leave their region")):
        p = run_courtly("worker", "--db", dsn, *args, "--exit-when-done")
        last = p.stderr.strip().splitlines()[-1]
        assert p.returncode == 2 and message in last and "Traceback" not in p.stderr, p.stderr


def test_status_shows_each_regions_partitions_and_storage(crawl):
    p = run_courtly("status", "--db", crawl["dsn"], "--json")
    assert p.returncode == 0, p.stderr
    regions = json.loads(p.stdout)["regions"]
    assert regions == {r: {"partitions": 32, "storage": str(crawl["storage"][r])} for r in ("us", "eu")}
    text = run_courtly("status", "--db", crawl["dsn"]).stdout
    assert "region us: 32 partitions" in text and "region eu: 32 partitions" in text


def test_region_mistakes_end_with_one_line_and_exit_status_2(postgres, tmp_path):
    dsn = postgres.create_database()
    for args, message in ((("--regions", "us,eu", "--region-storage", "ap=/x"), "unknown region 'ap'"),
                          (("--regions", "us,eu", "--home", "a.test=ap"), "unknown region 'ap'"),
                          (("--region-storage", "us=/x"), "--region-storage needs --regions"),
                          (("--regions", "us,eu", "--home", "a.test"), "--home wants NAME=VALUE")):
        p = run_courtly("submit", "--db", dsn, "--partitions", "8", "http://a.test/", *args)
        last = p.stderr.strip().splitlines()[-1]
        assert p.returncode == 2 and message in last and "Traceback" not in p.stderr, p.stderr
    one = postgres.create_database()
    assert run_courtly("submit", "--db", one, "--partitions", "8", "http://a.test/").returncode == 0
    p = run_courtly("probe", "--db", one, "--region", "us")
    assert p.returncode == 2 and "needs a crawl submitted with --regions" in p.stderr, p.stderr
    p = run_courtly("simweb", "--region-block", "a.test=us", "--out", str(tmp_path / "sim"), "--duration-s", "1")
    assert p.returncode == 2 and "need --region" in p.stderr, p.stderr
