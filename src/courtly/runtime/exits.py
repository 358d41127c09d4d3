"""Exit statuses scripts can use, and the environment errors behind one of them.

What it owns: the `Exit` codes of the `courtly` command (documented in the
README and `courtly crawl --help`), the status a finished crawl run ends
with, and the recognition of an environment error (a full disk, a quota, a
read-only file system, an I/O error) anywhere in an exception's chain, with
the one line that names it.

How it works: `crawl_exit` looks at the run's stats (a signal stopped it?
anything fetched?) and at the seed stage of the whole crawl folder (was
every seed refused?). `environment_problem` walks `__cause__`/`__context__`
for an error marked `environment` (it names itself: runtime/group_commit's
StoreDown), an `OSError` with one of `ENVIRONMENT_ERRNOS` or an SQLite error whose
primary code is FULL, READONLY or IOERR; a crawl hit by one has stopped
with its state saved (the WARC writer is flushed before the store
acknowledges a page, so an unwritten page is fetched again), so the line
says to free space and resume.

Rules: every code is stable once documented; 2 stays "bad input" (it
predates this module); an exception that is not an environment error is
never swallowed here.
"""

from __future__ import annotations

import errno
import sqlite3
from enum import IntEnum

__all__ = ["Exit", "UsageError", "crawl_exit", "environment_problem", "environment_advice", "ENVIRONMENT_ERRNOS",
           "EXIT_HELP"]


class UsageError(Exception):
    """Bad command-line input (one-line message); the command exits with `Exit.BAD_INPUT` (2)."""


class Exit(IntEnum):
    FINISHED = 0         # the crawl ran to its end (nothing left, --max-pages or --duration-s reached)
    NOT_FOUND = 1        # `courtly explain`: this crawl never saw the URL
    BAD_INPUT = 2        # a configuration, seed or folder problem: nothing started
    SEEDS_REFUSED = 3    # nothing fetched: every seed was refused or failed (the lines above say why, and the fix)
    ENVIRONMENT = 4      # a full disk, quota, read-only file system, I/O error, store locked or down: state saved, resumable
    SIGINT = 130         # stopped by Ctrl-C (SIGINT): state saved, the same command resumes
    SIGTERM = 143        # stopped by SIGTERM: state saved, the same command resumes


EXIT_HELP = ("exit status: 0 finished; 2 bad input (nothing started); 3 nothing fetched, every seed "
             "refused or failed; 4 environment error (disk full, quota, read-only, I/O, crawl database locked "
             "by another process, or unwritable past store.down_s_max; state saved, resumable); "
             "130/143 stopped by SIGINT/SIGTERM (state saved, resumable)")

ENVIRONMENT_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
                      errno.EROFS: "read-only file system", errno.EFBIG: "file too large",
                      errno.EIO: "input/output error"}
_SQLITE_LOCKED = {5: "the crawl's database is locked by another process",      # SQLITE_BUSY past the busy timeout
                  6: "the crawl's database is locked by another connection"}   # SQLITE_LOCKED
_SQLITE_CODES = {13: "database or disk is full", 8: "database is read-only", 10: "disk I/O error", **_SQLITE_LOCKED}
_CHAIN_MAX = 16   # links of __cause__/__context__ followed


def crawl_exit(stopped_by: str, fetched: int, seed_states: dict[str, int]) -> Exit:
    """The status of a crawl run: stopped by a signal, else every seed refused
    (nothing fetched in this run, and no seed-stage URL of the folder was
    ever fetched or is still queued), else finished."""
    if stopped_by == "SIGINT":
        return Exit.SIGINT
    if stopped_by == "SIGTERM":
        return Exit.SIGTERM
    refused = seed_states.get("skipped", 0) + seed_states.get("failed", 0)
    if not fetched and refused and not seed_states.get("fetched") and not seed_states.get("queued"):
        return Exit.SEEDS_REFUSED
    return Exit.FINISHED


def _chain(exc: BaseException):
    """`exc` and the errors behind it (__cause__, else __context__), at most _CHAIN_MAX."""
    e: BaseException | None = exc
    for _ in range(_CHAIN_MAX):
        if e is None:
            return
        yield e
        e = e.__cause__ or e.__context__


def _sqlite_code(e: BaseException) -> int:
    """SQLite's primary result code of a driver error (0 for anything else)."""
    return (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF if isinstance(e, sqlite3.Error) else 0


def environment_problem(exc: BaseException) -> str:
    """One line naming the environment error in `exc`'s chain, or ""."""
    for e in _chain(exc):
        if getattr(e, "environment", False):   # an error that names its own cause (runtime/group_commit.StoreDown)
            return str(e)
        if isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS:
            where = f" writing {e.filename}" if e.filename else ""
            return f"{ENVIRONMENT_ERRNOS[e.errno]}{where} ({errno.errorcode[e.errno]})"
        if _sqlite_code(e) in _SQLITE_CODES:
            return f"{_SQLITE_CODES[_sqlite_code(e)]} (SQLite: {e})"
    return ""


def environment_advice(exc: BaseException) -> str:
    """What to do about the environment error in `exc`'s chain (the second half of the CLI's line)."""
    if any(_sqlite_code(e) in _SQLITE_LOCKED for e in _chain(exc)):
        return ("when the process holding it lets go (another courtly command on this folder, a backup, "
                "an open sqlite3 shell), run the same command again to resume")
    return "free space (or fix the file system) and run the same command again to resume"
