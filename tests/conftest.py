"""Suite-wide test settings.

Hypothesis: no per-example deadline anywhere (a deadline is a wall-clock
threshold, and CI runs on a loaded 2-core machine), and under CI=true a
derandomized profile with no example database, so a CI run draws the same
examples every time and a failure reproduces from the printed blob. Tests that
set their own `settings(...)` keep them; the profile fills in what they leave out.

WARC files: every closed WARC file a passing test leaves in its tmp_path is
checked with warcio from the project's environment (tests/warc_support.py).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from warc_support import check_warcs, closed_warcs

settings.register_profile("dev", deadline=None)
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


def pytest_configure(config):
    config.addinivalue_line("markers", "warcio_unreadable(why): the test's WARC files are not given to warcio "
                                       "check, for the reason given (damaged on purpose; a br-coded response)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.courtly_call_passed = report.passed


@pytest.fixture(autouse=True)
def _warc_files_pass_warcio(request):
    # only tests that have a tmp_path (directly or through their fixtures) can leave WARC files in it
    tmp_path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp_path is None or request.node.get_closest_marker("warcio_unreadable"):
        return
    if getattr(request.node, "courtly_call_passed", False):
        check_warcs(closed_warcs(tmp_path))
