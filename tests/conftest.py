"""Suite-wide test settings.

Hypothesis: no per-example deadline anywhere (a deadline is a wall-clock
threshold, and CI runs on a loaded 2-core machine), and under CI=true a
derandomized profile with no example database, so a CI run draws the same
examples every time and a failure reproduces from the printed blob. Tests that
set their own `settings(...)` keep them; the profile fills in what they leave out.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
