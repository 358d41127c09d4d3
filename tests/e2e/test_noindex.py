"""`noindex` is honoured in exports: a real crawl of a small simulated web
whose pages carry `<meta name=robots content=noindex>` (which ones: the
server's manifest, not the crawler), then `courtly export` as a user runs it.
Such pages stay in the WARC files, are flagged in the fetch log (`courtly
explain` shows it) and are left out of text exports unless --include-noindex.
"""

from __future__ import annotations

import json

import pytest

from crawl_support import crawl_args, db_rows, run_courtly, write_config
from courtly.runtime.demo import simweb_process

pytestmark = pytest.mark.slow

# seed 2: 6 of the 80 pages of its 4 hosts are noindex (courtly.sim.layout.HostLayout.meta)
SIM_ARGS = ["--profile", "demo", "--hosts", "4", "--pages-per-host", "20", "--seed", "2", "--special-share", "0"]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("noindex")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        manifest = json.loads(web.manifest_file.read_text())
        out = tmp / "crawl"
        proc = run_courtly(*crawl_args(web, out, write_config(tmp / "c.toml")), timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    port = manifest["port"]
    noindex = {f"http://{name}:{port}{path}" for name, h in manifest["hosts"].items()
               for path in h["paths"].get("meta_noindex", [])}
    return {"out": out, "noindex": noindex}


def _export(out, to, *extra: str) -> tuple[dict[str, dict], str]:
    proc = run_courtly("export", "text", "--out", str(out), "--to", str(to), *extra)
    assert proc.returncode == 0, proc.stderr
    return {r["url"]: r for r in map(json.loads, to.read_text().splitlines())}, proc.stdout


def test_the_noindex_pages_fetched_are_flagged_in_the_fetch_log_and_kept_in_the_warc(crawled, tmp_path):
    out, noindex = crawled["out"], crawled["noindex"]
    fetched = {u for (u,) in db_rows(out, "SELECT url FROM urls WHERE state='fetched' AND status=200")}
    flagged = {u for (u,) in db_rows(out, "SELECT url FROM flags WHERE flag='noindex'")}
    assert len(noindex & fetched) >= 3 and flagged == noindex & fetched
    proc = run_courtly("export", "cdxj", "--out", str(out), "--to", str(tmp_path / "all.cdxj"))
    assert proc.returncode == 0, proc.stderr
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in (tmp_path / "all.cdxj").read_text().splitlines()}
    assert flagged <= indexed
    proc = run_courtly("explain", sorted(flagged)[0], "--out", str(out))
    assert "noindex (kept in WARC, left out of text exports): meta robots" in proc.stdout
    proc = run_courtly("stats", "--out", str(out))
    assert f"noindex pages  {len(flagged)} (kept in the WARC files, left out of text exports)" in proc.stdout


def test_text_exports_leave_noindex_pages_out_unless_asked_to_keep_them(crawled, tmp_path):
    out, noindex = crawled["out"], crawled["noindex"]
    plain, said = _export(out, tmp_path / "plain.jsonl")
    kept, said_kept = _export(out, tmp_path / "kept.jsonl", "--include-noindex")
    in_text = noindex & set(kept)
    assert len(in_text) >= 3 and not noindex & set(plain)
    assert f"{len(in_text)} noindex page(s) left out (--include-noindex keeps them)" in said
    assert all(kept[u]["noindex"] is True for u in in_text) and "noindex" not in said_kept
    assert set(kept) - in_text == set(plain) and not any("noindex" in r for r in plain.values())
