"""courtly dups: near-duplicate clusters (canonical, members, Hamming
distances, whether rel=canonical agreed) and exact duplicates, read from the
flags and fingerprints a crawl recorded."""

from __future__ import annotations

import json

from courtly.cli import main
from courtly.core.fingerprint import to_signed64
from courtly.ports import Batch
from courtly.runtime.dups import ExactDup, NearMember, clusters
from courtly.shell.store.sqlite import SqliteStore

A, B, C, D = (f"http://site.test/{p}" for p in ("a.html", "near/a-ad.html", "near/a-ts.html", "near/a-nav.html"))
FP = 0x0F0F_0F0F_0F0F_0F0F
ROWS = [
    (B, 10.0, "near_dup", A), (B, 10.0, "rel_canonical", A),
    (C, 11.0, "near_dup", A), (C, 11.0, "rel_canonical", "http://site.test/other.html"),
    (D, 12.0, "near_dup", A), (D, 12.0, "rel_canonical", ""),
    ("http://site.test/dup/1.html", 13.0, "exact_dup", A),
    ("http://site.test/x.html", 14.0, "soft404", "http://site.test"),
]
PRINTS = {A: FP, B: FP ^ 0b1, C: FP ^ 0b11, D: FP ^ 0b111}


def test_clusters_give_each_member_its_distance_and_whether_rel_canonical_agreed():
    near, exact = clusters(ROWS, PRINTS)
    (cluster,) = near
    assert cluster.canonical == A
    assert cluster.members == (   # in URL order
        NearMember(B, 1, A, True),
        NearMember(D, 3, None, None),
        NearMember(C, 2, "http://site.test/other.html", False),
    )
    assert exact == [ExactDup("http://site.test/dup/1.html", A)]


def test_a_page_flagged_twice_counts_once_by_its_latest_flag():
    rows = [(B, 1.0, "near_dup", "http://site.test/old.html"), (B, 5.0, "near_dup", A)]
    near, _ = clusters(rows, {})
    assert [(c.canonical, [m.url for m in c.members]) for c in near] == [(A, [B])]
    assert near[0].members[0].distance is None   # no fingerprints kept: unknown, not 0


def _folder(tmp_path):
    store = SqliteStore(tmp_path / "crawl.db")
    store.apply(Batch(flags=list(ROWS), simhashes=[(u, to_signed64(fp), "site.test") for u, fp in PRINTS.items()]))
    store.close()
    return tmp_path


def test_courtly_dups_json_lists_clusters_and_exact_duplicates(tmp_path, capsys):
    out = _folder(tmp_path)
    assert main(["dups", "--out", str(out), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (cluster,) = data["near_duplicates"]
    assert cluster["canonical"] == A
    assert [(m["url"], m["distance"], m["agreed"]) for m in cluster["members"]] == [(B, 1, True), (D, 3, None),
                                                                                  (C, 2, False)]
    assert data["exact_duplicates"] == [{"url": "http://site.test/dup/1.html", "first_url": A}]


def test_courtly_dups_text_names_canonical_members_and_agreement(tmp_path, capsys):
    out = _folder(tmp_path)
    assert main(["dups", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("1 near-duplicate cluster(s) (3 page(s) beside their canonical), 1 exact duplicate(s)")
    assert f"{B}  distance 1  rel=canonical agrees" in text
    assert f"{C}  distance 2  rel=canonical names http://site.test/other.html" in text
    assert f"{D}  distance 3  no rel=canonical" in text
    assert f"http://site.test/dup/1.html -> {A}" in text


def test_courtly_dups_on_a_folder_that_is_no_crawl_exits_2_with_one_line(tmp_path, capsys):
    assert main(["dups", "--out", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a crawl folder" in err
