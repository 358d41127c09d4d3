"""Fixtures for the end-to-end tests; the helpers live in tests/crawl_support.py."""

from crawl_support import simweb_factory  # noqa: F401  (a fixture)
