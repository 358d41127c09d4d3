"""`courtly demo` as a user runs it: twice in the same folder, the second run resumes.

The demo's simulated web puts its port in every URL, so the second run must
start it on the first run's port; on another port the crawl would see a new
web and fetch every page again (the server-side check calls those duplicate
fetches and the demo exits 1).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def _demo(cwd, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "courtly", "demo", "--quiet", "--hosts", "4", *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=240)


def test_a_second_demo_run_resumes_on_the_same_urls(tmp_path):
    first = _demo(tmp_path, "--max-pages", "30")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "seeds into crawl-demo/crawl/ (Ctrl-C stops" in first.stderr   # the crawl folder, not its parent
    port = (tmp_path / "crawl-demo" / "simweb" / "port").read_text()
    second = _demo(tmp_path, "--max-pages", "60")
    assert second.returncode == 0, second.stderr[-3000:]
    assert (tmp_path / "crawl-demo" / "simweb" / "port").read_text() == port
    assert "simweb check: PASS" in second.stderr           # no page fetched twice over both runs
    assert "duplicate_fetch" not in second.stderr
