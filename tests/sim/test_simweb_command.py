"""`python -m courtly.sim.command`: help, subprocess mode with ready.json, and `check`."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from courtly.sim.command import main
from courtly.sim.webconfig import BEHAVIOURS, HOSTILE_BODIES, ROBOTS_VARIANTS

CMD = [sys.executable, "-m", "courtly.sim.command"]


def test_help_documents_every_behaviour(capsys: object) -> None:
    out = subprocess.run([*CMD, "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    for name in [*BEHAVIOURS, *ROBOTS_VARIANTS, *HOSTILE_BODIES, "--seed", "--hosts", "--pages-per-host",
                 "--ips", "--port", "--out", "--profile", "--duration-s", "ready.json"]:
        assert name in out, name
    check_help = subprocess.run([*CMD, "check", "--help"], capture_output=True, text=True, timeout=60,
                                check=True).stdout
    assert "--manifest" in check_help and "--delay-s-min" in check_help


def _wait_ready(out: Path, proc: subprocess.Popen[bytes]) -> dict[str, int]:
    for _ in range(600):  # bounded: 60 s
        if (out / "ready.json").exists():
            return json.loads((out / "ready.json").read_text())
        assert proc.poll() is None, "simweb exited before it was ready"
        time.sleep(0.1)
    raise AssertionError("simweb never wrote ready.json")


def _get(ip: str, port: int, host: str, path: str) -> int:
    conn = http.client.HTTPConnection(ip, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_subprocess_mode_writes_files_logs_and_stops_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "web"
    proc = subprocess.Popen([*CMD, "--profile", "hostile", "--seed", "3", "--out", str(out),
                             "--duration-s", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = _wait_ready(out, proc)
        assert ready["pid"] == proc.pid and ready["port"] > 0
        hosts = json.loads((out / "hosts.json").read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        seeds = (out / "seeds.txt").read_text().split()
        assert manifest["port"] == ready["port"] and len(seeds) == len(manifest["hosts"])
        assert set(manifest["hosts"]) <= set(hosts)
        port = ready["port"]
        host = next(h for h, v in manifest["hosts"].items() if v["robots"] == "rules" and not v["latency_s"]
                    and not any(b.startswith("throttle") for b in v["behaviours"]))
        # impolite on purpose: no robots.txt first, then a disallowed path at once
        assert _get(hosts[host], port, host, "/") == 200
        assert _get(hosts[host], port, host, "/private/") == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    assert not (out / "ready.json").exists()
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert [json.loads(x)["path"] for x in lines] == ["/", "/private/"]
    res = subprocess.run([*CMD, "check", str(out / "requests.jsonl"), "--no-coverage"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "robots_first" in res.stdout and "robots_disallowed" in res.stdout and "line 2" in res.stdout
    as_json = subprocess.run([*CMD, "check", str(out / "requests.jsonl"), "--json", "--no-coverage"],
                             capture_output=True, text=True, timeout=120)
    assert json.loads(as_json.stdout)["ok"] is False
    polite_robots = json.loads(lines[0])
    polite_robots["path"] = "/robots.txt"
    (out / "one.jsonl").write_text(json.dumps(polite_robots) + "\n")
    assert main(["check", str(out / "one.jsonl"), "--manifest", str(out / "manifest.json"), "--no-coverage"]) == 0


def test_duration_bounds_a_run(tmp_path: Path) -> None:
    out = tmp_path / "web"
    res = subprocess.run([*CMD, "--hosts", "12", "--ips", "3", "--out", str(out), "--duration-s", "0.5"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "stopped" in res.stdout
    assert (out / "manifest.json").exists() and (out / "requests.jsonl").exists()


def _one_error_line(argv: list[str], capsys) -> str:
    import pytest

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_check_of_a_missing_or_foreign_log_is_one_line(tmp_path: Path, capsys) -> None:
    line = _one_error_line(["check", str(tmp_path / "requests.jsonl")], capsys)
    assert line.startswith("courtly simweb check: error: cannot read manifest") and "--manifest" in line, line
    (tmp_path / "manifest.json").write_text("{}")
    line = _one_error_line(["check", str(tmp_path / "requests.jsonl")], capsys)
    assert "cannot read manifest" in line and "not a" in line, line


def test_serve_errors_are_one_line_before_any_socket(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("x")
    line = _one_error_line(["--out", str(tmp_path / "file" / "web"), "--duration-s", "1"], capsys)
    assert line.startswith("courtly simweb: error: cannot write to --out"), line
    line = _one_error_line(["--port", "99999", "--duration-s", "1"], capsys)
    assert "--port must be in 0..65535" in line, line


def test_a_taken_port_is_one_line(tmp_path: Path, capsys) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.1.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = _one_error_line(["--hosts", "2", "--port", str(port), "--duration-s", "1"], capsys)
    assert line.startswith("courtly simweb: error: could not bind") and "in use" in line, line


def test_fewer_hosts_than_the_profile_s_ips_get_one_ip_each() -> None:
    from courtly.sim.webconfig import profile_config

    assert profile_config("demo", hosts=3).ips == 3              # was: "ips must not exceed hosts"
    assert profile_config("demo").ips == 8 and profile_config("demo", hosts=3, ips=2).ips == 2
