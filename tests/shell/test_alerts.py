"""The shipped Prometheus alerting rules (src/courtly/shell/alerts.yml): valid for
Prometheus' own checker, every rule covered by `promtool test rules`
(tests/data/alerts.test.yml), and printed unchanged by `courtly alerts`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

RULES = Path(str(resources.files("courtly.shell").joinpath("alerts.yml")))
UNIT_TESTS = Path(__file__).parent.parent / "data" / "alerts.test.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package prometheus; "
                                                              ".ci/run installs it)")


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@needs_promtool
def test_shipped_rules_pass_promtool_check(tmp_path):
    proc = _promtool("check", "rules", str(RULES), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(_alerts(RULES.read_text()))} rules found" in proc.stdout


@needs_promtool
def test_every_rule_fires_and_stays_quiet_as_its_promtool_unit_tests_say(tmp_path):
    shutil.copy(RULES, tmp_path / "alerts.yml")
    shutil.copy(UNIT_TESTS, tmp_path / "alerts.test.yml")
    proc = _promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@needs_promtool
def test_a_broken_threshold_fails_the_unit_tests(tmp_path):
    (tmp_path / "alerts.yml").write_text(RULES.read_text().replace("courtly_seen_bloom_fill_ratio > 0.5",
                                                                   "courtly_seen_bloom_fill_ratio > 0.7"))
    shutil.copy(UNIT_TESTS, tmp_path / "alerts.test.yml")
    proc = _promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert proc.returncode != 0 and "CourtlyBloomFillPastAlarm" in proc.stdout + proc.stderr


def test_every_rule_has_unit_tests_and_the_seeds_alerts_are_all_there():
    rules = _alerts(RULES.read_text())
    tested = set(re.findall(r"^\s+alertname: (\w+)$", UNIT_TESTS.read_text(), re.M))
    assert set(rules) == tested
    seeds = ("Freshness", "IpOverRate", "HostDelay", "RobotsFailures", "TrapSuspects", "TakedownPropagation",
             "DiskNearlyFull", "BloomFill", "WithoutLeases")
    assert all(any(s in r for r in rules) for s in seeds), rules


def test_courtly_alerts_prints_the_shipped_rules():
    proc = subprocess.run([sys.executable, "-m", "courtly", "alerts"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == RULES.read_text()


def _alerts(text: str) -> list[str]:
    return re.findall(r"^\s+- alert: (\w+)$", text, re.M)
