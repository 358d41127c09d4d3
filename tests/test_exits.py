"""The exit status of a crawl run (runtime/exits): scripts tell a finished
crawl from one stopped by a signal and from one whose every seed was refused."""

from __future__ import annotations

import pytest

from courtly.runtime.exits import Exit, crawl_exit


@pytest.mark.parametrize("stopped_by, fetched, seeds, status", [
    ("", 10, {"fetched": 3}, Exit.FINISHED),
    ("", 0, {"fetched": 3}, Exit.FINISHED),                     # a resume with nothing left to do
    ("", 0, {}, Exit.FINISHED),                                 # no seed at all (a recrawl-only run)
    ("", 0, {"skipped": 2}, Exit.SEEDS_REFUSED),
    ("", 0, {"skipped": 1, "failed": 1}, Exit.SEEDS_REFUSED),   # refused or failed
    ("", 0, {"skipped": 1, "queued": 1}, Exit.FINISHED),        # one seed still to fetch (--max-pages 0 ...)
    ("", 0, {"skipped": 1, "fetched": 1}, Exit.FINISHED),       # not every seed was refused
    ("SIGINT", 0, {"skipped": 2}, Exit.SIGINT),                 # a signal says more than the seeds
    ("SIGTERM", 5, {"fetched": 1}, Exit.SIGTERM),
])
def test_a_run_s_exit_status(stopped_by, fetched, seeds, status):
    assert crawl_exit(stopped_by, fetched, seeds) is status


def test_signal_statuses_follow_the_shell_convention():
    import signal

    assert Exit.SIGINT == 128 + signal.SIGINT and Exit.SIGTERM == 128 + signal.SIGTERM
