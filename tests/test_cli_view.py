"""`courtly hosts` and `courtly urls`: a crawl folder's hosts and URLs in the
terminal, read-only (runtime/crawlview.py, runtime/listing.py).

The folder is written through the store's own `apply`, as a crawl writes it;
every expected figure is derived from that one batch."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main
from courtly.ports import Batch
from courtly.runtime.crawlview import CrawlView
from courtly.shell.store.sqlite import SqliteStore

NOW = 2_000_000_000.0
A, B = "a.example", "b.example"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _batch() -> Batch:
    b = Batch()
    queued = [f"http://www.{A}/q{i}" for i in range(3)] + [f"http://{B}/q{i}" for i in range(2)]
    fetched = [f"http://www.{A}/", f"http://{B}/", f"http://{B}/f1"]
    for u in queued + fetched:
        b.new_urls.append((u, A if A in u else B, 4, 1, 0, "", NOW - 100))
    for i, u in enumerate(fetched):
        b.fetched.append((NOW - 50 + i, 200, u))
        b.fetches.append((u, "page", NOW - 50 + i, 200, 1000 + i, 0.01, "127.0.0.9", f"f.warc.gz:{100 * i}", ""))
    b.fetches.append((f"http://www.{A}/q0", "page", NOW - 40, 0, 0, 3.0, "127.0.0.9", "", "timeout"))
    # skipped: robots for A (keyed), nofollow for B (recorded before it had a key, as the crawler does)
    for i in range(4):
        b.decisions.append((f"http://www.{A}/private/{i}", A, "", NOW - 30, "skipped", "robots", "robots.txt", 1))
    b.decisions.append((f"http://{B}/hidden", "", "", NOW - 30, "skipped", "nofollow", "page nofollow", 1))
    b.hosts = {A: {"delay_s": 2.0, "next_fetch_at": NOW + 60, "crawl_delay_s": None, "last_response_s": 0.01,
                   "backoff_until": NOW + 600, "backoff_reason": "429", "fetches": 5},
               B: {"delay_s": 1.0, "next_fetch_at": NOW - 10, "crawl_delay_s": None, "last_response_s": 0.01,
                   "backoff_until": 0.0, "backoff_reason": "", "fetches": 2}}
    b.meta = {"politeness_key": "domain"}
    return b


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "crawl"
    out.mkdir()
    store = SqliteStore(out / "crawl.db")
    store.apply(_batch())
    store.close()
    return out


def _expected_counts() -> dict[str, Counter]:
    b = _batch()
    fetched_urls = {u for _at, _s, u in b.fetched}
    skipped = {u: (reason, u.split("/")[2].removeprefix("www.")) for u, _k, _v, _at, _st, reason, *_ in b.decisions}
    counts: dict[str, Counter] = {}
    for u, key, *_ in b.new_urls:
        counts.setdefault(key, Counter())["fetched" if u in fetched_urls else "queued"] += 1
    for reason, key in skipped.values():
        counts.setdefault(key, Counter())[f"denied:{reason}"] += 1
    return counts


def test_hosts_json_counts_every_key_by_state_and_skip_reason(folder, capsys):
    assert main(["hosts", "--out", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["key"]: r for r in data["rows"]}
    want = _expected_counts()
    assert set(rows) == set(want) and data["total"] == len(want)
    for key, c in want.items():
        r = rows[key]
        assert (r["fetched"], r["queued"]) == (c["fetched"], c["queued"])
        assert r["denied"] == {k.split(":")[1]: n for k, n in c.items() if k.startswith("denied:")}
        assert r["denied_total"] == sum(r["denied"].values())
    assert rows[A]["errors"] == 1 and rows[B]["errors"] == 0    # the timeout of www.a.example/q0
    assert rows[A]["ip"] == "127.0.0.9"
    assert rows[A]["delay_s"] == 2.0 and rows[A]["fetches"] == 5


def test_host_state_names_a_running_back_off_then_work_due(folder):
    with CrawlView(folder) as view:
        now = {r.key: r for r in view.host_rows(NOW)}
        later = {r.key: r for r in view.host_rows(NOW + 700)}   # A's back-off ended at NOW + 600
    assert now[A].state == "backing off" and now[A].backoff == "429" and now[A].backoff_until == NOW + 600
    assert now[B].state == "ready" and now[B].queued == 2          # next fetch was due at NOW - 10
    assert later[A].state == "ready" and later[A].backoff == "" and later[A].backoff_until is None
    with CrawlView(folder) as view:
        assert {r.key: r.state for r in view.host_rows(NOW - 20)}[B] == "waiting"


def test_hosts_text_has_one_line_per_key_and_sorts_by_a_count(folder, capsys):
    assert main(["hosts", "--out", str(folder), "--sort", "denied"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("host key") and lines[-1] == "2 of 2 host keys"
    assert lines[1].startswith(A) and "robots 4" in lines[1]
    assert lines[2].startswith(B) and "nofollow 1" in lines[2]
    assert main(["hosts", "--out", str(folder), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 host keys (raise --limit" in out


def test_urls_filters_by_reason_host_and_state_as_json(folder, capsys):
    assert main(["urls", "--out", str(folder), "--reason", "robots", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == 4 and {r["reason"] for r in data["rows"]} == {"robots"}
    # a host name selects its politeness key; the unkeyed nofollow decision counts under it
    assert main(["urls", "--out", str(folder), "--host", f"www.{B}", "--state", "skipped", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["host_key"] == B and [r["url"] for r in data["rows"]] == [f"http://{B}/hidden"]
    assert main(["urls", "--out", str(folder), "--host", A, "--state", "queued", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(r["url"] for r in data["rows"]) == [f"http://www.{A}/q{i}" for i in range(3)]
    assert main(["urls", "--out", str(folder), "--state", "fetched", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["url"]: r["warc"] for r in rows} == {u: w for u, _k, _at, _s, _b, _e, _ip, w, _err in _batch().fetches
                                                  if w}


def test_urls_pages_with_offset_and_says_how_to_go_on(folder, capsys):
    assert main(["urls", "--out", str(folder), "--limit", "3"]) == 0
    first = capsys.readouterr().out.splitlines()
    total = len(_batch().new_urls) + len(_batch().decisions)
    assert first[-1] == f"1-3 of {total} URLs (next page: --offset 3)"
    assert main(["urls", "--out", str(folder), "--limit", "3", "--offset", "3"]) == 0
    second = capsys.readouterr().out.splitlines()
    assert not set(first[:-1]) & set(second[:-1])


@pytest.mark.parametrize("args, says", [
    (["urls", "--reason", "robot"], "--reason must be one of"),
    (["urls", "--limit", "0"], "limit must be in 1..1000"),
    (["hosts", "--limit", "-1"], "--limit must be >= 0"),
])
def test_bad_filters_are_one_line_errors_with_status_2(folder, capsys, args, says):
    assert main([*args, "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("courtly: error: ") and says in err and err.count("\n") == 1, err


def test_a_folder_without_a_crawl_is_a_one_line_error(tmp_path, capsys):
    for cmd in ("hosts", "urls", "serve"):
        assert main([cmd, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err == f"courtly: error: {tmp_path} is not a crawl folder (no crawl.db)\n"
    (tmp_path / "crawl.db").write_bytes(b"not a database, just sixteen+ bytes of text")
    assert main(["hosts", "--out", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_the_view_reads_beside_a_writer_and_writes_nothing(folder):
    writer = sqlite3.connect(folder / "crawl.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")   # a crawl in the middle of a commit
    writer.execute("UPDATE urls SET state = 'fetched' WHERE state = 'queued'")
    with CrawlView(folder) as view:
        assert view.states()["queued"] == 5   # the last committed state
        with pytest.raises(sqlite3.OperationalError):
            view._db.execute("DELETE FROM urls")
    writer.execute("COMMIT")
    with CrawlView(folder) as view:
        assert "queued" not in view.states()
    writer.close()


def test_serve_says_in_one_line_why_it_cannot_listen(folder, capsys):
    import socket

    assert main(["serve", "--out", str(folder), "--listen", "nonsense"]) == 2
    assert capsys.readouterr().err == "courtly: error: --listen wants HOST:PORT, not 'nonsense'\n"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--out", str(folder), "--listen", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"courtly: error: --listen 127.0.0.1:{port}: ") and err.count("\n") == 1, err
