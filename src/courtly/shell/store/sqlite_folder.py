"""Is a folder's crawl.db courtly's own? Checked before a crawl or a
read-only command touches it (one line, exit 2 when it is not).

How it works: reads only; an absent file is fine (a new crawl), an empty
file or another program's SQLite database is refused, because it would
otherwise become a new crawl written beside an older crawl's WARC files or
into another program's tables. A courtly database is told by the columns of
the tables it has, since a browser's history also has `urls` and `meta`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["StoreError", "refuse_foreign"]


class StoreError(Exception):
    """The crawl folder's database cannot be used (one-line message)."""


# Tables a courtly crawl.db has, by columns that tell them from another
# program's tables of the same name (a browser's history has `urls` and `meta`
# too); one is enough, so folders of every schema shape are recognised.
_OWN_COLUMNS = {"urls": {"url", "key", "state", "via", "depth"}, "meta": {"k", "v"},
                "digests": {"digest", "url", "record_id"},
                "watches": {"id", "url", "spec", "paused", "removed"},   # `courtly watch add` before a crawl
                "consumer_submissions": {"consumer", "url", "priority", "intent"}}   # `courtly submit --consumer`


def refuse_foreign(path: Path) -> None:
    """Raise StoreError unless `path` is absent or a courtly crawl database:
    an empty file (0 bytes) or someone else's SQLite database would otherwise
    become a new crawl, written beside an older crawl's WARC files or into
    another program's tables. Reads only."""
    try:
        size = path.stat().st_size
    except OSError:   # absent, or under a file: opening it says what is wrong
        return
    if size == 0:
        raise StoreError(f"{path} is empty (0 bytes), not a courtly crawl database: move it away, "
                         "or use another --out")
    try:
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)   # as_uri: %-escapes "?", "#"
        try:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            ours = any(wanted <= {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                       for table, wanted in _OWN_COLUMNS.items())
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a courtly crawl database (not SQLite: {e}): move it away, "
                         "or use another --out") from e
    if tables and not ours:
        raise StoreError(f"{path} is an SQLite database of another program (tables "
                         f"{', '.join(sorted(tables)[:5])}), not a courtly crawl: use another --out")
