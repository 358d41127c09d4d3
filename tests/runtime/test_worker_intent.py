"""`courtly worker` crawls with every intent (archive, search, monitor): each gets
past the intent check to the database."""

from __future__ import annotations

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main

DSN = "postgresql://nobody@127.0.0.1:9/none"   # nothing listens there


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


@pytest.mark.parametrize("intent", ["search", "monitor"])
def test_a_worker_with_a_recrawling_intent_gets_past_the_intent_check_to_the_database(capsys, intent):
    assert main(["worker", "--db", DSN, "--intent", intent]) == 2
    err = capsys.readouterr().err
    assert "intent" not in err and "cannot reach PostgreSQL" in err, err
