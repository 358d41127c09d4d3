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


def empty_crawl_folder(out):
    """A crawl folder as a first run leaves it before any fetch: crawl.db with
    its schema, an empty warc/ and config.json (for export and view commands)."""
    from courtly.shell.store.sqlite import SqliteStore

    (out / "warc").mkdir(parents=True)
    SqliteStore(out / "crawl.db").close()
    (out / "config.json").write_text("{}")
    return out
