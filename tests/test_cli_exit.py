"""`courtly.cli.leave`: the program ends without the interpreter's teardown,
but with its atexit handlers, its buffered output and its live threads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_leave_keeps_the_status_the_atexit_handlers_and_buffered_output(tmp_path):
    done = _python(
        "import atexit, sys\n"
        "from courtly.cli import leave\n"
        "atexit.register(lambda: open('atexit-ran', 'w').close())\n"
        "sys.stdout.write('buffered, not flushed')\n"   # a pipe: block-buffered
        "sys.stderr.write('to stderr')\n"
        "leave(3)\n"
        "print('never')\n",
        tmp_path,
    )
    assert done.returncode == 3
    assert done.stdout == "buffered, not flushed"
    assert done.stderr == "to stderr"
    assert (tmp_path / "atexit-ran").exists()


def test_leave_waits_for_a_live_non_daemon_thread(tmp_path):
    done = _python(
        "import threading, time\n"
        "from courtly.cli import leave\n"
        "go = threading.Event()\n"
        "def work():\n"
        "    go.wait()\n"
        "    time.sleep(0.2)\n"
        "    open('thread-finished', 'w').close()\n"
        "threading.Thread(target=work).start()\n"
        "go.set()\n"
        "leave(0)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread-finished").exists()


def test_the_program_exits_through_leave_with_main_s_status(tmp_path):
    done = subprocess.run([sys.executable, "-m", "courtly", "stats", "--out", str(tmp_path / "absent")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.startswith("courtly: error:"), done.stderr


def test_leave_with_none_exits_zero_as_sys_exit_does(tmp_path):
    done = _python("from courtly.cli import leave\nprint('x')\nleave(None)\n", tmp_path)
    assert done.returncode == 0 and done.stdout == "x\n", done.stderr
