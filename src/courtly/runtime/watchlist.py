"""The `courtly watch` commands: manage a crawl folder's watch list.

    courtly watch add URL --out DIR [--every S] [--target S] [--webhook URL]
                      [--select CSS]... [--exclude CSS]... [--ignore REGEX]...
                      [--trigger TEXT [--trigger-on appear|disappear]] [--keep MASK]... [--paused]
    courtly watch list --out DIR            the watches, what each learned, its counts
    courtly watch remove ID|URL --out DIR
    courtly watch pause ID|URL --out DIR [--resume]
    courtly watch changes --out DIR [--id N] [--limit N] [--jsonl]   the newest change events
    courtly watch dead --out DIR            webhook deliveries that gave up (dead letters)
    courtly watch feed --out DIR [--id N]   the Atom feed of the changes
    courtly watch add|list|remove|pause|changes|dead|feed --db DSN ...   a distributed crawl's list

`changes --jsonl` prints the events as `DIR/changes.jsonl` holds them (oldest
first, one JSON object a line, shell/webhook.change_line): a cluster writes no
such file, so this is how its change log is read.

What it owns: the argument parser of `watch`, its commands, and the monitor
lines of `courtly report` (`politeness_lines`: watches the host's politeness
makes impossible, with the best time-to-detect the host allows). Each command
opens the folder's watch list (shell/store/watch_sqlite) directly, like
`courtly purge`: no lock, so it works while a crawl runs, which picks the
change up at its next commit. Every command takes --json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from courtly.core.change import MASK_NAMES
from courtly.core.urls import UrlError, normalize_url, politeness_key, split_origin
from courtly.core.watch import EVERY_S_DEFAULT, Watch, WatchRuleError, host_verdicts
from courtly.shell.feed import atom_feed
from courtly.shell.store.watch_sqlite import SqliteWatchStore
from courtly.shell.webhook import change_line

__all__ = ["add_parser", "run", "politeness_lines", "feed"]


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    w = sub.add_parser("watch", help="manage the watch list of a monitor crawl (courtly watch --help)")
    ws = w.add_subparsers(dest="watch_command", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default="crawl-out", help="crawl folder (default: crawl-out)")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_argument("--db", metavar="DSN", help="the watch list of a distributed crawl in PostgreSQL "
                                                   "(every action; default: --out's)")
    a = ws.add_parser("add", parents=[common], help="watch a URL")
    a.add_argument("url")
    a.add_argument("--every", type=float, default=EVERY_S_DEFAULT, metavar="S",
                   help="check interval in seconds (default: %(default)s; at least 1)")
    a.add_argument("--target", type=float, default=0.0, metavar="S",
                   help="longest time-to-detect you accept; quiet pages are checked less often, "
                        "up to this (default: 0 = --every, a fixed interval)")
    a.add_argument("--webhook", default="", metavar="URL", help="POST each change event here as JSON (default: none)")
    a.add_argument("--select", action="append", default=[], metavar="CSS",
                   help="compare only these elements (repeatable; default: the main content)")
    a.add_argument("--exclude", action="append", default=[], metavar="CSS", help="leave these elements out (repeatable)")
    a.add_argument("--ignore", action="append", default=[], metavar="REGEX",
                   help="mask text matching this, case-insensitive (repeatable)")
    a.add_argument("--keep", action="append", default=[], choices=MASK_NAMES, metavar="MASK",
                   help=f"do not apply this mask ({', '.join(MASK_NAMES)}; repeatable; e.g. --keep date "
                        "when a date is the content; default: all masks apply)")
    a.add_argument("--trigger", default="", metavar="TEXT",
                   help="report only when this text appears (or disappears: --trigger-on) (default: any change)")
    a.add_argument("--trigger-on", choices=["appear", "disappear"], default="appear",
                   help="with --trigger (default: %(default)s)")
    a.add_argument("--paused", action="store_true", help="add it paused")
    ws.add_parser("list", parents=[common], help="the watches, their counts and learned noise")
    r = ws.add_parser("remove", parents=[common], help="stop watching (its changes are kept)")
    r.add_argument("ref", metavar="ID|URL")
    p = ws.add_parser("pause", parents=[common], help="pause a watch (--resume to resume it)")
    p.add_argument("ref", metavar="ID|URL")
    p.add_argument("--resume", action="store_true", help="resume instead")
    c = ws.add_parser("changes", parents=[common], help="the newest change events")
    c.add_argument("--id", type=int, help="of this watch only (default: all)")
    c.add_argument("--limit", type=int, default=20, help="how many (default: %(default)s, at most 1000)")
    c.add_argument("--jsonl", action="store_true",
                   help="print them as changes.jsonl lines, oldest first (the change log of a --db crawl)")
    ws.add_parser("dead", parents=[common], help="webhook deliveries that gave up (dead letters)")
    f = ws.add_parser("feed", parents=[common], help="print the Atom feed of the changes")
    f.add_argument("--id", type=int, help="of this watch only (default: the whole crawl)")


def _open(out: Path) -> SqliteWatchStore:
    return SqliteWatchStore(out / "crawl.db")


def run(args: argparse.Namespace, usage_error: type[Exception], now: float) -> int:
    out = Path(args.out)
    cmd = args.watch_command
    if args.db:
        import asyncio

        return asyncio.run(_run_db(args, usage_error, now))   # a few statements: no uvloop needed
    if cmd != "add" and not (out / "crawl.db").exists():
        raise usage_error(f"{out} has no watch list (no crawl.db): courtly watch add URL --out {out}")
    store = _open(out)
    try:
        if cmd == "add":
            w = _add(store, args, usage_error, now)
            print(json.dumps(w.to_json()) if args.json else f"watch {w.id}: {w.url} every {w.every_s:g} s")
        elif cmd == "list":
            rows = store.rows()
            print(json.dumps(rows, indent=2) if args.json else _render_list(rows))
        elif cmd in ("remove", "pause"):
            w = store.remove(args.ref) if cmd == "remove" else store.set_paused(args.ref, not args.resume)
            verb = "removed" if cmd == "remove" else ("resumed" if args.resume else "paused")
            print(json.dumps({**w.to_json(), "done": verb}) if args.json else f"watch {w.id} {verb}: {w.url}")
        elif cmd == "changes":
            print(_changes_text(store.changes(limit=args.limit, watch_id=args.id), args))
        elif cmd == "dead":
            rows = [r.to_json() for r in store.dead_letters()]
            print(json.dumps(rows, indent=2) if args.json else _render_changes(rows) or "no dead letters")
        elif cmd == "feed":
            print(feed(store, watch_id=args.id, self_url=f"file://{out.resolve()}/crawl.db", now=now).decode())
    finally:
        store.close()
    return 0


async def _run_db(args: argparse.Namespace, usage_error: type[Exception], now: float) -> int:
    """The same commands on a distributed crawl's PostgreSQL (async store)."""
    from courtly.shell.store.watch_postgres import PostgresWatchStore

    store = await PostgresWatchStore.open(args.db)
    try:
        cmd = args.watch_command
        if cmd == "add":
            w = await store.add(_watch(args, usage_error, now))
            print(json.dumps(w.to_json()) if args.json else f"watch {w.id}: {w.url} every {w.every_s:g} s")
        elif cmd == "list":
            rows = await store.rows()
            print(json.dumps(rows, indent=2) if args.json else _render_list(rows))
        elif cmd in ("remove", "pause"):
            w = await (store.remove(args.ref) if cmd == "remove" else store.set_paused(args.ref, not args.resume))
            print(json.dumps(w.to_json()) if args.json else f"watch {w.id} {cmd}: {w.url}")
        elif cmd == "changes":
            print(_changes_text(await store.changes(limit=args.limit, watch_id=args.id), args))
        elif cmd == "dead":
            rows = [r.to_json() for r in await store.dead_letters()]
            print(json.dumps(rows, indent=2) if args.json else _render_changes(rows) or "no dead letters")
        elif cmd == "feed":
            rows = await store.changes(limit=100, watch_id=args.id)
            name = _db_name(args.db)
            print(_feed(rows, watch_id=args.id, feed_id=name, self_url=name, now=now).decode())
    finally:
        await store.close()
    return 0


def _add(store: SqliteWatchStore, args, usage_error, now: float) -> Watch:  # type: ignore[no-untyped-def]
    return store.add(_watch(args, usage_error, now))


def _watch(args, usage_error, now: float) -> Watch:  # type: ignore[no-untyped-def]
    try:
        url = normalize_url(args.url)
    except (UrlError, ValueError) as e:
        raise usage_error(f"cannot watch {args.url!r}: {e}") from None
    try:
        w = Watch(url=url, every_s=args.every, target_s=args.target, webhook=args.webhook,
                  select=tuple(args.select), exclude=tuple(args.exclude), ignore=tuple(args.ignore),
                  trigger=args.trigger, trigger_on=args.trigger_on, keep=tuple(args.keep), paused=args.paused,
                  added_at=now).check()
    except WatchRuleError as e:
        raise usage_error(str(e)) from None
    return w


def feed(store: SqliteWatchStore, *, watch_id: int | None, self_url: str, now: float) -> bytes:
    return _feed(store.changes(limit=100, watch_id=watch_id), watch_id=watch_id,
                 feed_id=f"urn:courtly:{store.path.resolve()}", self_url=self_url, now=now)


def _feed(rows, *, watch_id: int | None, feed_id: str, self_url: str, now: float) -> bytes:  # type: ignore[no-untyped-def]
    title = "courtly: changes" + (f" of watch {watch_id}" if watch_id is not None else "")
    feed_id += f"/watch/{watch_id}" if watch_id is not None else ""
    return atom_feed(rows, feed_id=feed_id, title=title, self_url=self_url, updated_at=now)


def _db_name(dsn: str) -> str:
    """The feed's id for a --db crawl: its server and database, never a password."""
    from urllib.parse import urlsplit

    u = urlsplit(dsn)
    return f"urn:courtly:{u.hostname or 'localhost'}:{u.port or 5432}{u.path}"


def _changes_text(rows, args: argparse.Namespace) -> str:  # type: ignore[no-untyped-def]
    """`watch changes`: --jsonl lines (oldest first), --json, or text (newest first)."""
    if args.jsonl:
        return "\n".join(change_line(r.event) for r in reversed(rows))
    out = [r.to_json() for r in rows]
    return json.dumps(out, indent=2) if args.json else _render_changes(out)


def _render_list(rows: list[dict]) -> str:
    if not rows:
        return "no watches (courtly watch add URL --out DIR)"
    lines = []
    for r in rows:
        state = "paused" if r["paused"] else ("learning" if r["learning"] else f"every {r['interval_s']:g} s")
        lines.append(f"{r['id']:>4}  {r['url']}  [{state}]  {r['checks']} checks, {r['changes']} changes"
                     + (f"  webhook {r['webhook']}" if r["webhook"] else ""))
        for s in r["noise_learned"]:
            lines.append(f"        learned noise: {s}")
    return "\n".join(lines)


def _render_changes(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        d = r["diff"]
        why = f": {r['last_error']}" if r["last_error"] else ""
        lines.append(f"#{r['seq']} {r['detected_at']} {r['url']} (+{len(d['added'])} -{len(d['removed'])} "
                     f"~{len(d['changed'])}) delivery {r['delivery']}{why}")
    return "\n".join(lines) if lines else "no changes"


def politeness_lines(out: Path, delay_s: dict[str, float], default_delay_s: float,
                     key_mode: str) -> tuple[list[str], list[dict]]:
    """`courtly report`'s monitor section: per host with watches, the best
    time-to-detect its politeness allows and the watches it makes impossible."""
    if not (out / "crawl.db").exists():
        return [], []
    store = _open(out)
    try:
        watches = store.watches()
    finally:
        store.close()
    if not watches:
        return [], []
    pairs = [(w, politeness_key(split_origin(w.url).host, key_mode)) for w in watches]
    verdicts = host_verdicts(pairs, delay_s, default_delay_s)
    lines = ["monitor: best time-to-detect per host (n watches x the host's delay)"]
    rows = []
    for v in verdicts:
        lines.append(f"  {v.key}: {v.watches} watches x {v.delay_s:g} s = {v.best_detect_s:g} s")
        for url, target in v.impossible:
            lines.append(f"    IMPOSSIBLE: {url} wants {target:g} s; the host allows {v.best_detect_s:g} s at best")
        rows.append({"key": v.key, "delay_s": v.delay_s, "watches": v.watches, "best_detect_s": v.best_detect_s,
                     "impossible": [{"url": u, "target_s": t} for u, t in v.impossible]})
    return lines, rows


