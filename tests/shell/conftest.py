"""Shared setup for shell tests: put tests/ on sys.path so helpers that the
end-to-end tests reuse (pywb_support) import the same way everywhere."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from pg_support import pg_fixture  # noqa: E402

postgres = pg_fixture()   # one throwaway PostgreSQL for the session, shared by the store tests
