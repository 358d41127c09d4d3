"""Views of a crawl folder: `courtly explain`, `stats`, `report`, `review`,
and the takedown commands `courtly purge` and `courtly export`.

The views never write, so they are safe to run while a crawl is going on
(SQLite WAL readers do not block the writer). `purge` writes one transaction
(the purge and the marks on the URL records in its scope) and takes no folder
lock, so it works while the crawl runs; the crawl takes the purge up at its
next commit (runtime/takedown.py). `export` reads only closed WARC files.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from courtly.runtime.abuse import complaint_lines, open_complaints
from courtly.runtime.crawlview import explain_data
from courtly.runtime.health_view import health_line, health_lines, unhealthy_hosts
from courtly.shell.store.sqlite import SqliteStore, StoreError

__all__ = ["explain", "stats", "dead_letters", "review", "daily_report", "purge", "purges", "export",
           "rewrite_purged_originals"]


def _open(out: Path) -> SqliteStore:
    db = out / "crawl.db"
    if not db.exists():
        raise StoreError(f"{out} is not a crawl folder (no crawl.db)")
    return SqliteStore(db)


open_store = _open   # for the other views (runtime/dups.py)


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _open_suspects(out: Path) -> int:
    import random

    from courtly.core.traps import TrapConfig, TrapGuard

    store = _open(out)
    try:
        raw = store.get_meta("traps")
    finally:
        store.close()
    if not raw:
        return 0
    return len(TrapGuard.restore(json.loads(raw), TrapConfig(), random.Random(0)).suspects())


def explain(out: Path, url: str, *, as_json: bool = False) -> tuple[str, bool]:
    """(text, found) for a URL: discovered from where, fetched when, status, or why not."""
    store = _open(out)
    try:
        d = explain_data(store, url)
        rec = d["record"]
        host = unhealthy_hosts({rec["key"]: store.hosts().get(rec["key"], {})}) if rec else []
    finally:
        store.close()
    rec = d["record"]
    fix = _fix(out, rec) if rec and rec["state"] in ("skipped", "failed") and rec["reason"] else ""
    if as_json:
        return json.dumps({**{k: v for k, v in d.items() if k != "found"}, "fix": fix,
                           "host_health": [asdict(r) for r in host]},
                          indent=2, default=str), d["found"]
    norm, note, fetches, chain = d["normalized"], d["note"], d["fetches"], d["via_chain"]
    children = d["links_sample"]
    flags = [(f["at"], f["flag"], f["detail"]) for f in d["flags"]]
    lines = [f"URL        {url}"]
    if norm != url:
        lines.append(f"normalized {norm}")
    if note:
        lines.append(f"note       {note}")
    if rec is None:
        lines.append("never seen by this crawl (not linked from any fetched page, not a seed)")
        return "\n".join(lines), False
    lines.append(f"state      {rec['state']}" + (f" ({rec['reason']}: {rec['detail']})" if rec["reason"] else ""))
    if fix:
        lines.append(f"fix        {fix}")
    lines.append(f"host key   {rec['key'] or '-'}   depth {rec['depth']}   band {rec['band']}"
                 f"   attempts {rec['attempts']}")
    lines += [f"host       {health_line(r)}" for r in host]
    lines.append(f"discovered {_when(rec['discovered_at'])}" + (f" on {rec['via']}" if rec["via"] else " (seed)"))
    for i, v in enumerate(chain[1:], 1):
        lines.append(f"{'':11}{'  ' * i}<- {v}")
    for f in fetches:
        what = f"status {f['status']}" if f["status"] else f"error {f['error']}"
        warc = f"  warc {f['warc']}" if f["warc"] else ""
        lines.append(f"fetched    {_when(f['at'])}  {what}  {f['bytes']} bytes  {f['elapsed_s']:.3f} s"
                     f"  ip {f['ip'] or '-'}{warc}")
    for at, flag, detail in flags:
        what = {"exact_dup": "exact duplicate of", "near_dup": "near-duplicate of",
                "soft404": "soft-404 (the error page of)",
                "noindex": "noindex (kept in WARC, left out of text exports):",
                "reconsidered": "queued again:",
                "rel_canonical": "declared rel=canonical (none if empty):"}.get(flag, flag)
        lines.append(f"flagged    {_when(at)}  {what} {detail}")
    if rec["state"] == "queued":
        lines.append("pending    queued, not fetched yet (run the crawl again to continue)")
    if children:
        lines.append(f"links to   {len(children)}{'+' if len(children) >= 20 else ''} URLs first found here, e.g. {children[0]}")
    return "\n".join(lines), True


DEAD_LETTERS_LISTED_MAX = 10_000


def dead_letters(out: Path, *, as_json: bool = False) -> str:
    """`courtly stats --dead-letters`: the pages whose extraction killed or hung
    a worker twice (raw bytes in the WARC files; links never extracted)."""
    store = _open(out)
    try:
        rows = store.dead_letters(DEAD_LETTERS_LISTED_MAX + 1)
        total = store.counts()["dead_letters"]
    finally:
        store.close()
    rows = rows[:DEAD_LETTERS_LISTED_MAX]
    if as_json:
        return json.dumps({"total": total, "listed": len(rows),
                           "dead_letters": [{"url": u, "at": at, "reason": r} for u, at, r in rows]}, indent=2)
    if not rows:
        return "no dead letters: every fetched page went through link extraction"
    lines = [f"{total} dead letter(s): pages whose link extraction failed twice (their raw bytes are in the WARC)"]
    lines += [f"  {_when(at)}  {u}\n      {r}" for u, at, r in rows]
    if total > len(rows):
        lines.append(f"  ... and {total - len(rows)} more, not listed")
    return "\n".join(lines)


def _fix(out: Path, rec: dict) -> str:
    """What to do about a refusal (runtime/refusal), under the scope of the crawl's last run."""
    from courtly.runtime.refusal import fix_for

    try:
        scope = json.loads((out / "config.json").read_text()).get("crawl", {}).get("scope", "any")
    except (OSError, ValueError, AttributeError):
        scope = "any"
    return fix_for(rec["url"], rec["reason"], rec["detail"] or "", scope, seed_stage=rec["depth"] == 0)


def stats(out: Path, *, as_json: bool = False) -> str:
    store = _open(out)
    try:
        c = store.counts()
        unhealthy = unhealthy_hosts(store.hosts())
    finally:
        store.close()
    c["hosts_unhealthy"] = [asdict(r) for r in unhealthy]
    c["trap_suspects_open"] = _open_suspects(out)
    warcs = sorted((out / "warc").glob("*.warc.gz")) if (out / "warc").exists() else []
    c["warc_files"] = len(warcs)
    c["warc_bytes"] = sum(p.stat().st_size for p in warcs)
    if as_json:
        return json.dumps(c, indent=2)
    span = (c["last_at"] - c["first_at"]) if c["first_at"] else 0.0
    lines = [
        f"crawl folder   {out}",
        f"URLs known     {sum(c['states'].values())}  "
        + "  ".join(f"{k} {v}" for k, v in sorted(c["states"].items())),
        f"requests       {c['fetches']} ({c['robots_fetches']} robots.txt) over {span:.1f} s, "
        f"{c['bytes'] / 2**20:.1f} MiB",
        f"hosts (keys)   {c['hosts']}",
        "HTTP statuses  " + ("  ".join(f"{k}: {v}" for k, v in c["statuses"].items()) or "-"),
        f"WARC           {c['warc_files']} files, {c['warc_bytes'] / 2**20:.1f} MiB",
        f"dead letters   {c['dead_letters']}" + (" (courtly stats --dead-letters)" if c["dead_letters"] else ""),
        f"budget         exact duplicates {c['flags'].get('exact_dup', 0)} (stored as revisits), "
        f"near-duplicates {c['flags'].get('near_dup', 0)}, soft-404s {c['flags'].get('soft404', 0)}, "
        f"budget denials {c['reasons'].get('budget', 0)}, trap denials {c['reasons'].get('trap', 0)}, "
        f"open trap suspects {c['trap_suspects_open']} (courtly review)",
        f"noindex pages  {c['flags'].get('noindex', 0)} (kept in the WARC files, left out of text exports)",
        "not fetched, by reason:",
    ]
    if c["reasons"]:
        lines += [f"  {k:<20} {v}" for k, v in c["reasons"].items()]
    else:
        lines.append("  (none)")
    if unhealthy:
        lines += health_lines(unhealthy)
    return "\n".join(lines)


def review(out: Path, *, resolve: tuple[str, str] | None = None, rule: str | None = None,
           now: float | None = None, as_json: bool = False) -> str:
    """The trap review queue; with `resolve=(key, "trap"|"legit")` close a suspicion.

    Resolving "legit" re-queues the URLs the rule had denied on that host (their
    decisions name the rule); "trap" keeps denying them for good. Resolving
    writes to the store, so it needs the crawl folder unlocked (no crawl running).
    """
    import random
    import time

    from courtly.core.traps import TrapConfig, TrapGuard
    from courtly.ports import Batch

    store = _open(out)
    try:
        raw = store.get_meta("traps")
        guard = TrapGuard.restore(json.loads(raw), TrapConfig(), random.Random(0)) if raw else None
        suspects = guard.suspects() if guard else []
        if resolve is None:
            if as_json:
                return json.dumps([{"key": s.key, "rule": s.rule, "scope": s.scope, "since": s.since,
                                    "evidence": s.evidence} for s in suspects], indent=2)
            if not suspects:
                return "review queue empty: no host is suspected of being a trap"
            lines = [f"{len(suspects)} suspected trap(s); resolve with: courtly review --out {out} "
                     f"--resolve KEY trap|legit [--rule RULE]"]
            for s in suspects:
                denied = store.count_denied(s.key, "trap")
                lines.append(f"  {s.key:<28} rule {s.rule:<20} since {_when(s.since)}  "
                             f"{denied} URLs denied  scope {s.scope or 'host'}\n      evidence: {s.evidence}")
            return "\n".join(lines)
        key, verdict = resolve
        if guard is None or not any(s.key == key for s in suspects):
            raise StoreError(f"{key} is not in the review queue")
        at = time.time() if now is None else now
        closed = guard.resolve_suspect(key, verdict, at, rule)
        requeued = store.requeue_denied(key, "trap", rule) if verdict == "legit" else 0
        store.apply(Batch(meta={"traps": json.dumps(guard.snapshot())}))
        return (f"{key}: {closed} suspicion(s) resolved as {verdict}"
                + (f"; {requeued} denied URLs queued again" if verdict == "legit" else ""))
    finally:
        store.close()


def daily_report(out: Path, *, as_json: bool = False) -> str:
    """Which fetches are we not doing today, and why: per day and tier, recrawls
    allocated and denied by budget, freshness age p50/p90; fetches by reason;
    hosts throttled by politeness; top reasons URLs were not fetched."""
    import time

    store = _open(out)
    try:
        raw = store.get_meta("recrawl_report")
        tiers = json.loads(raw) if raw else []
        raw = store.get_meta("recrawl_periods")
        periods = json.loads(raw) if raw else []
        by_day = store.fetches_by_day()
        counts = store.counts()
        complaints = open_complaints(store)
        hosts = store.hosts()
        throttled = _throttled(store, time.time())
        unhealthy = unhealthy_hosts(hosts)
        delays = {k: h["delay_s"] for k, h in hosts.items() if "delay_s" in h}
    finally:
        store.close()
    monitor_lines, monitor_rows = _monitor_section(out, delays)
    reasons = {"page": "discovery", "recrawl": "recrawl"}
    fetch_rows = [{"day": _day(d), "reason": reasons.get(k, k), "fetches": n} for d, k, n in by_day]
    data = {"tiers": tiers, "periods": periods, "fetches": fetch_rows, "throttled_hosts": [k for k, _ in throttled],
            "not_fetched": counts["reasons"], "abuse_complaints_open": complaints,
            "rendering": _rendering(counts["flags"]), "monitor": monitor_rows,
            "hosts_unhealthy": [asdict(r) for r in unhealthy]}
    if as_json:
        return json.dumps(data, indent=2)
    lines = ["fetches by day and reason"]
    lines += [f"  {r['day']}  {r['reason']:<14} {r['fetches']}" for r in fetch_rows] or ["  (none)"]
    lines.append("recrawl scheduler, per day and tier")
    if tiers:
        lines.append(f"  {'day':>10} {'tier':>4} {'allocated':>9} {'forced':>6} {'hinted':>6} "
                     f"{'denied:budget':>13} {'denied:min-interval':>19} {'age p50':>9} {'age p90':>9}")
        for t in tiers:
            lines.append(f"  {_day(t['day']):>10} {t['tier']:>4} {t['allocated']:>9} {t['forced']:>6} {t['hinted']:>6} "
                         f"{t['denied_budget']:>13} {t['denied_min_interval']:>19} "
                         f"{_age(t['age_p50_s']):>9} {_age(t['age_p90_s']):>9}")
    else:
        lines.append("  (no recrawl: intent archive, or no plan yet)")
    lines += _period_lines(periods)
    lines.append(f"hosts throttled by politeness (answered 429/503, backed off): {len(throttled)}")
    lines += [f"  {k}  {why}" for k, why in throttled[:20]]
    lines += health_lines(unhealthy)
    lines.append(f"open abuse complaints (their keys are slowed; courtly abuse --resolve ID): {len(complaints)}")
    lines += [line for r in complaints for line in complaint_lines(r)]
    lines.append("top reasons URLs were not fetched")
    lines += [f"  {k:<20} {v}" for k, v in list(counts["reasons"].items())[:10]] or ["  (none)"]
    lines.append("rendering (script shells, [render])")
    lines += [f"  {k.replace('_', ' '):<26} {v}" for k, v in data["rendering"].items()]
    return "\n".join(lines + monitor_lines)


def _monitor_section(out: Path, delays: dict[str, float]) -> tuple[list[str], list[dict]]:
    """The watches the hosts' politeness makes impossible (runtime/watchlist),
    with the delay and key of the crawl's last run (config.json) by default."""
    from courtly.runtime.watchlist import politeness_lines

    try:
        last = json.loads((out / "config.json").read_text())
        delay_s, key_mode = float(last["politeness"]["delay_s"]), str(last["crawl"]["politeness_key"])
    except (OSError, ValueError, KeyError, TypeError):
        delay_s, key_mode = 1.0, "domain"
    return politeness_lines(out, delays, delay_s, key_mode)


def _rendering(flags: dict[str, int]) -> dict[str, int]:
    """What rendering did, from the flags runtime/render leaves (blocked subrequests:
    those flagged, at most 50 a render)."""
    return {"pages_rendered": flags.get("rendered", 0), "links_added": flags.get("render_link", 0),
            "shells_parsed_raw_budget": flags.get("render_budget", 0),
            "renders_failed": flags.get("render_failed", 0),
            "subrequests_blocked": flags.get("render_blocked", 0)}


def _throttled(store: SqliteStore, now: float) -> list[tuple[str, str]]:
    """(key, what) of every key that answered 429 or 503 (the fetch log; `stats`
    counts the same answers) or is backing off now: its answers by status, and
    the back-off in force, if any. A key that has recovered is still listed."""
    from courtly.core.urls import politeness_key, split_origin

    mode = store.get_meta("politeness_key") or "domain"
    answers: dict[str, dict[int, int]] = {}
    for origin, status, n in store.throttle_answers():
        try:
            key = politeness_key(split_origin(origin).host, mode)
        except ValueError:
            key = origin
        per = answers.setdefault(key, {})
        per[status] = per.get(status, 0) + n
    hosts = store.hosts()
    backing_off = {k: h.get("backoff_reason", "") for k, h in hosts.items() if h.get("backoff_until", 0) > now}
    out = []
    for key in sorted(set(answers) | set(backing_off)):
        what = ", ".join(f"{st} x{n}" for st, n in sorted(answers.get(key, {}).items()))
        if key in backing_off:
            what += f"{'; ' if what else ''}backing off now ({backing_off[key] or 'back-off'})"
        elif hosts.get(key, {}).get("backoff_reason"):
            what += f"{'; ' if what else ''}last back-off: {hosts[key]['backoff_reason']}"
        out.append((key, what))
    return out


def _period_lines(periods: list[dict], shown: int = 12) -> list[str]:
    """The fetch budget of the last `shown` recrawl periods: granted, spent, left, why."""
    if not periods:
        return []
    lines = [f"recrawl budget, last {min(shown, len(periods))} of {len(periods)} periods kept",
             f"  {'period start':<24} {'budget':>6} {'discovery':>9} {'recrawls':>8} {'flowed back':>11} "
             f"{'left':>5}  why"]
    for p in periods[-shown:]:
        lines.append(f"  {_when(p['at']):<24} {p['budget']:>6} {p['discovery_spent']:>9} {p['granted']:>8} "
                     f"{p['flowed_back']:>11} {p['left']:>5}  {p['why']}")
    return lines


def _day(day: int) -> str:
    return datetime.fromtimestamp(day * 86400, timezone.utc).strftime("%Y-%m-%d")


def _age(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s:.0f} s"


# ---- takedowns and exports ------------------------------------------------------


def _purge_list(store: SqliteStore):
    from courtly.core.purge import Purge, PurgeList, Scope

    return PurgeList(tuple(Purge(Scope(sc), v, r, i, at) for i, sc, v, r, at, _ in store.purges(0)))


def _keep_originals(out: Path) -> bool:
    """[warc] keep_purged_originals of the crawl's last run (config.json)."""
    try:
        cfg = json.loads((out / "config.json").read_text())
        return bool(cfg.get("warc", {}).get("keep_purged_originals", True))
    except (OSError, ValueError):
        return True


def purge(out: Path, scope: str, value: str, reason: str = "", *, now: float | None = None,
          as_json: bool = False) -> str:
    """Record a purge: one transaction marks every URL record in its scope
    skipped/purged (queued ones are thereby dropped). With
    keep_purged_originals = false the closed WARC files are rewritten too."""
    import time

    from courtly.core.purge import purge_of

    wanted = purge_of(scope, value, reason=reason)   # PurgeError (a ValueError) names the problem
    store = _open(out)
    try:
        at = time.time() if now is None else now
        stored, counts = store.add_purge(wanted, at)
        crawl_id = store.get_meta("crawl_id") or ""
    finally:
        store.close()
    rewritten = rewrite_purged_originals(out) if not _keep_originals(out) else ""
    return purge_report(stored, counts, at, crawl_id, rewritten, f"--out {out}", as_json=as_json)


def purge_report(stored, counts: dict[str, int], at: float, crawl_id: str, rewritten: str, where: str, *,
                 as_json: bool = False) -> str:
    """What `courtly purge` prints about a purge just recorded (`where`:
    the store's option, `--out DIR` or `--db DSN`)."""
    data = {"purge_id": stored.id, "scope": str(stored.scope), "value": stored.value,
            "reason": stored.reason, "recorded_at": at, "crawl_id": crawl_id,
            "queued_dropped": counts["queued"], "records_marked": counts["queued"] + counts["other"],
            "originals_rewritten": rewritten}
    if as_json:
        return json.dumps(data)
    lines = [f"{stored.describe()} recorded at {_when(at)} ({at:.3f})",
             f"  {counts['queued']} queued URLs dropped, {counts['other']} other URL records marked purged",
             "  a running crawl takes it up at its next commit (store.commit_interval_s) and fetches "
             "nothing in its scope from then on; exports leave it out",
             f"  when it took effect: courtly purge --list {where}"]
    if rewritten:
        lines.append(f"  {rewritten}")
    return "\n".join(lines)


def purges(out: Path, *, as_json: bool = False) -> str:
    """The purges of a crawl folder, with the time each took to take effect."""
    store = _open(out)
    try:
        rows = store.purges(0)
    finally:
        store.close()
    return purges_report(rows, as_json=as_json)


def purges_report(rows: list[tuple], *, as_json: bool = False) -> str:
    """`courtly purge --list` of the store's purge rows."""
    data = [{"purge_id": i, "scope": sc, "value": v, "reason": r, "recorded_at": at, "applied_at": ap,
             "effect_s": (ap - at) if ap is not None else None} for i, sc, v, r, at, ap in rows]
    if as_json:
        return json.dumps(data, indent=2)
    if not data:
        return "no purges"
    lines = [f"{'#':>3} {'scope':<10} {'value':<40} {'recorded':<24} {'applied by a crawl':<24} effect"]
    for d in data:
        effect = f"{d['effect_s']:.3f} s" if d["effect_s"] is not None else "store marked at once; no crawl has taken it up yet"
        lines.append(f"{d['purge_id']:>3} {d['scope']:<10} {d['value']:<40} {_when(d['recorded_at']):<24} "
                     f"{_when(d['applied_at']):<24} {effect}" + (f"  ({d['reason']})" if d["reason"] else ""))
    return "\n".join(lines)


def rewrite_purged_originals(out: Path) -> str:
    """Rewrite the crawl's closed WARC files without purged records (and point
    the fetch log at the new offsets). "" when there was nothing to do."""
    from courtly.ports import Batch
    from courtly.shell.export import rewrite_originals

    store = _open(out)
    try:
        plist = _purge_list(store)
        if not plist:
            return ""
        checked = json.loads(store.get_meta("warc_purges_checked") or "{}")
        report = rewrite_originals(out / "warc", plist, store.update_warc_refs, checked)
        store.apply(Batch(meta={"warc_purges_checked": json.dumps(checked, sort_keys=True)}))
    finally:
        store.close()
    if not report.records_dropped:
        return ""
    return (f"WARC originals rewritten without purged records: {report.files_out} file(s), "
            f"{report.records_dropped} record(s) removed"
            + (f" ({report.open_files_skipped} open file(s) follow when the crawl ends)"
               if report.open_files_skipped else ""))


def export(out: Path, kind: str, to: Path, *, as_json: bool = False,
           include_noindex: bool = False, mix_regions: bool = False) -> tuple[str, list[str]]:
    """`courtly export warc|cdxj|text`: never emits purged content (nor, in
    text, noindex pages unless `include_noindex`), nor content of two home
    regions together unless `mix_regions` (core/region.check_mix: RegionError,
    a ValueError). Returns the summary and one warning per WARC file that
    could be read only in part."""
    from courtly.core.region import check_mix
    from courtly.shell import export as ex

    store = _open(out)
    try:
        if kind != "warc":
            _not_a_crawl_file(out, to)
        plist = _purge_list(store)
    finally:
        store.close()
    warc_dir = out / "warc"
    tags = {tag for tag in ex.region_tags(warc_dir) if tag}
    check_mix(tags, allow_mixed=mix_regions)
    if kind == "warc":
        report = ex.export_warc(warc_dir, plist, to)
    elif kind == "cdxj":
        report = ex.export_cdxj(warc_dir, plist, to)
    elif kind == "text":
        decoded_max, ratio_max = _fetch_limits(out)
        report = ex.export_text(warc_dir, plist, to, decoded_bytes_max=decoded_max, decode_ratio_max=ratio_max,
                                include_noindex=include_noindex, token=_robots_token(out))
    else:
        raise ValueError(f"export kind must be warc, cdxj or text, not {kind!r}")
    warnings = [d.message() for d in report.damaged]
    if as_json:
        return json.dumps({"kind": kind, "purges": len(plist), "files_in": report.files_in,
                           "files_out": report.files_out, "records_kept": report.records_kept,
                           "records_dropped": report.records_dropped, "lines": report.lines,
                           "open_files_skipped": report.open_files_skipped, "outputs": report.outputs,
                           "noindex_left_out": report.noindex_left_out,
                           "damaged": [{"file": d.file, "records_read": d.records_read,
                                        "captures_read": d.captures_read, "captures_indexed": d.captures_indexed,
                                        "intact_bytes": d.intact_bytes, "size": d.size, "detail": d.detail}
                                       for d in report.damaged]}), warnings
    return report.render(f"export {kind} to {to} ({len(plist)} purge(s) honoured)"), warnings


CRAWL_FILES = ("crawl.db", "crawl.db-wal", "crawl.db-shm", "config.json", "lock")


def _not_a_crawl_file(out: Path, to: Path) -> None:
    """An export file is written beside `to` and renamed over it: `to` must
    not be the crawl's database, its config, its lock or a file of its WARC folder."""
    target, folder = to.resolve(), out.resolve()
    if target in {folder / name for name in CRAWL_FILES} or folder / "warc" in target.parents:
        raise ValueError(f"--to {to} would replace a file of the crawl folder {out}; "
                         "choose a path outside its database and WARC files")


def _robots_token(out: Path) -> str:
    """robots.token of the crawl's last run (X-Robots-Tag may name it), else the default."""
    from courtly.config import RobotsSection

    try:
        token = json.loads((out / "config.json").read_text()).get("robots", {}).get("token")
    except (OSError, ValueError, AttributeError):
        token = None
    return token if isinstance(token, str) and token else RobotsSection().token


def _fetch_limits(out: Path) -> tuple[int, float]:
    """(decoded_bytes_max, decode_ratio_max) of the crawl's last run, else the defaults."""
    from courtly.config import FetchSection

    d = FetchSection()
    try:
        f = json.loads((out / "config.json").read_text()).get("fetch", {})
        return int(f.get("decoded_bytes_max", d.decoded_bytes_max)), float(f.get("decode_ratio_max", d.decode_ratio_max))
    except (OSError, ValueError, TypeError, AttributeError):
        return d.decoded_bytes_max, d.decode_ratio_max
