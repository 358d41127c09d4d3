"""For tests that run `courtly.cli.main` in this process: `main` sets up the
`courtly` logger (its own stderr handler, no propagation), which would
outlive the test: later tests' caplog would see nothing, and the handler
would write to pytest's closed capture stream. Each such test module has

    @pytest.fixture(autouse=True)
    def _courtly_logger():
        yield from courtly_logger_restored()
"""

from __future__ import annotations

import logging
from typing import Iterator


def courtly_logger_restored() -> Iterator[None]:
    log = logging.getLogger("courtly")
    saved = (list(log.handlers), log.propagate, log.level)
    yield
    log.handlers[:] = saved[0]
    log.propagate, log.level = saved[1], saved[2]
