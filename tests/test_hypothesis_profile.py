"""The suite's Hypothesis profile (tests/conftest.py) has no wall-clock deadline,
and under CI=true draws the same examples on every run."""

from __future__ import annotations

import os

from hypothesis import settings


def test_no_example_has_a_wall_clock_deadline():
    assert settings.default.deadline is None


def test_ci_runs_draw_the_same_examples_every_time():
    if not os.environ.get("CI") or os.environ.get("HYPOTHESIS_PROFILE"):
        settings.load_profile("ci")
        try:
            assert settings.default.derandomize and settings.default.database is None
        finally:
            settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "dev")
    else:
        assert settings.default.derandomize and settings.default.database is None
