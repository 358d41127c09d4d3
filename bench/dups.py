"""Benchmark: precision and recall of `courtly dups` on the simulated web's labelled duplicates.

    python bench/dups.py                                   # hostile profile, 60 hosts, seed 1
    python bench/dups.py --hosts 120 --seed 7 --max-pages 6000

Crawls a simulated hostile web with `python -m courtly crawl` (default
budget defence), then builds the clusters with `courtly.runtime.dups`
(what `courtly dups` prints) from the crawl's own records.

Truth comes from the model, never from the crawler: two fetched URLs of one
host are duplicates when `HostLayout.resolve` maps both to the same page
and neither is a different page that merely shares text -- the article,
its /dup/ byte copy, its /near/ copies (an ad, a timestamp or the nav order
changed) and its ?print=1 view are one page; /related/K.html (every other
paragraph shared) and everything else are not. Predicted pairs are the
pairs inside each near-duplicate cluster (canonical and members, with the
exact duplicates joined to their first capture's cluster). Precision =
true predicted pairs / predicted pairs; recall = true pairs predicted /
true pairs among the pages fetched. Prints both; asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from courtly.runtime.demo import simweb_process  # noqa: E402
from courtly.runtime.dups import clusters  # noqa: E402
from courtly.shell.store.sqlite import SqliteStore  # noqa: E402
from courtly.core.fingerprint import from_signed64  # noqa: E402

SAME_PAGE = ("", "dup", "near_ad", "near_ts", "near_nav", "print")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="simulated web seed (default 1)")
    ap.add_argument("--hosts", type=int, default=60, help="hosts (default 60)")
    ap.add_argument("--pages-per-host", type=int, default=20, help="pages per host (default 20)")
    ap.add_argument("--max-pages", type=int, default=4000, help="crawl page limit (default 4000)")
    ap.add_argument("--keep", action="store_true", help="keep the crawl folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="courtly-dups-"))
    try:
        sim_args = ["--profile", "hostile", "--seed", str(args.seed), "--hosts", str(args.hosts),
                    "--pages-per-host", str(args.pages_per_host), "--robots-hang-s", "4"]
        with simweb_process(tmp / "sim", sim_args, ready_s=120) as web:
            manifest = json.loads(web.manifest_file.read_text())
            config = tmp / "crawl.toml"
            config.write_text(
                "[crawl]\ncontact = \"bench@example.invalid\"\nfetch_tasks = 64\n"
                "[politeness]\ndelay_s = 0.02\ncrawl_delay_s_max = 0.02\nresponse_factor = 2.0\n"
                "ip_rate = 50.0\nip_concurrency = 8\n[fetch]\ntotal_s = 3.0\nconnect_s = 2.0\n"
                f"[network]\nallow = {json.dumps(manifest['allowed_networks'])}\n"
                f"hosts_file = \"{web.hosts_file}\"\n")
            out = tmp / "crawl"
            cmd = [sys.executable, "-m", "courtly", "crawl", "--config", str(config), "--seeds-file",
                   str(web.out / "seeds.txt"), "--out", str(out), "--max-pages", str(args.max_pages), "--quiet"]
            proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-3000:])
        _score(out, manifest)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _score(out: Path, manifest: dict) -> None:
    from courtly.sim.manifest import web_from_manifest

    web = web_from_manifest(manifest)
    store = SqliteStore(out / "crawl.db")
    try:
        rows = list(store.iter_flags(("exact_dup", "near_dup", "rel_canonical")))
        prints = {d: from_signed64(fp) for d, fp, _ in store.iter_simhashes()}
    finally:
        store.close()
    db = sqlite3.connect(f"file:{out / 'crawl.db'}?mode=ro", uri=True)
    try:
        fetched = [u for (u,) in db.execute("SELECT DISTINCT url FROM fetches WHERE status = 200 AND kind = 'page'")]
    finally:
        db.close()
    near, exact = clusters(rows, prints)
    groups: dict[str, set[str]] = {}
    for c in near:
        groups.setdefault(c.canonical, {c.canonical}).update(m.url for m in c.members)
    member_of = {u: g for g, us in groups.items() for u in us}
    for e in exact:
        g = member_of.get(e.first_url, e.first_url)
        groups.setdefault(g, {g}).update((e.url, e.first_url))
        member_of[e.url] = member_of[e.first_url] = g
    predicted = {frozenset(p) for us in groups.values() for p in itertools.combinations(sorted(us), 2)}
    identity = {url: _page_of(web, url) for url in fetched}
    by_page: dict[tuple[str, object], list[str]] = {}
    for url, ident in identity.items():
        if ident is not None:
            by_page.setdefault(ident, []).append(url)
    truth = {frozenset(p) for us in by_page.values() for p in itertools.combinations(sorted(us), 2)}
    related = sum(1 for u in fetched if "/related/" in u)
    related_wrong = sum(1 for p in predicted if any("/related/" in u for u in p))
    print(f"pages fetched (200): {len(fetched)}; near-duplicate clusters {len(near)}, exact duplicates {len(exact)}")
    print(f"related pages fetched {related}, in a predicted pair {related_wrong}")
    for name, keep in (("all duplicates", lambda p: True),
                       ("pairs with a /near/ or /related/ page", lambda p: any("/near/" in u or "/related/" in u
                                                                               for u in p))):
        t = {p for p in truth if keep(p)}
        d = {p for p in predicted if keep(p)}
        precision = len(d & t) / len(d) if d else float("nan")
        recall = len(d & t) / len(t) if t else float("nan")
        print(f"{name}: true pairs {len(t)}, predicted {len(d)}, both {len(d & t)}; "
              f"precision {precision:.3f}  recall {recall:.3f}")
    for name, pairs in (("predicted, not true", predicted - truth), ("true, not predicted", truth - predicted)):
        for pair in sorted(sorted(p) for p in pairs)[:5]:
            print(f"  {name}: {' '.join(pair)}")


def _page_of(web, url: str) -> tuple[str, object] | None:
    """(host, page) when `url` is a rendering of one page of the model (article,
    copy, print view; a PDF report: (host, -1 - its number); a hostile body,
    byte-identical wherever it is served: ("*", its name))."""
    rest = url.split("://", 1)[1]
    hostport, _, target = rest.partition("/")
    host = hostport.rsplit(":", 1)[0]
    if host not in web.by_name:
        return None
    res = web.layout(host).resolve("/" + target)
    if res.kind == "pdf":
        return host, -1 - res.page   # a report and its ?download=1 copy
    if res.kind == "hostile":
        return "*", res.variant      # the same bytes on every host that serves it
    if res.kind not in ("page", "extra") or res.variant not in SAME_PAGE:
        return None
    return host, res.page


if __name__ == "__main__":
    raise SystemExit(main())
