"""`courtly worker` crawls with intent archive or search; a watch list is refused
with one line and exit 2 before anything starts (no database is reached)."""

from __future__ import annotations

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main

DSN = "postgresql://nobody@127.0.0.1:9/none"   # never reached: the intent check comes first


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def test_a_worker_refuses_the_monitor_intent_in_one_line(capsys):
    assert main(["worker", "--db", DSN, "--intent", "monitor"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["courtly: error: courtly worker crawls with intent 'archive' or 'search' "
                     "(a watch list is single-machine)"]


def test_a_worker_with_the_search_intent_gets_past_the_intent_check_to_the_database(capsys):
    assert main(["worker", "--db", DSN, "--intent", "search"]) == 2
    err = capsys.readouterr().err
    assert "intent" not in err and "cannot reach PostgreSQL" in err, err
