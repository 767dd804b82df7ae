"""The one bounded runner (boundary/bounded_run.py), used by diagnose and the process lab: at its deadline the
whole process group is stopped, even a program that ignores TERM and a child that keeps the pipes open, and
otherwise the output and the exit code come back. Checked on the processes themselves (/proc), not on time."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from boundary import bounded_run
from process_lab.commands import ProcessLabError, run

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration

# Ignores TERM, forks a child that ignores it too and sleeps holding stdout and stderr, and sleeps itself.
STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if len(sys.argv) > 1:
    open(sys.argv[1], "w").write(str(os.getpid()))
print("started", flush=True)
if os.fork() == 0:
    time.sleep(3600)
time.sleep(3600)
"""

# Starts a child in a session of its own (outside the group) that keeps stdout open, says its pid, and exits 0.
ESCAPED = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    time.sleep(3600)
    os._exit(0)
print("parent done", flush=True)
"""


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def group_gone(pgid: int, bound: float = 30) -> bool:
    """No process answers in the group, or only zombies that a non-reaping init has not collected. A process
    KILLed is gone once the kernel has run its exit, which on a loaded machine may come a moment after the
    signal: polled until then, within `bound` seconds (a bound, not a measurement)."""
    deadline = time.monotonic() + bound
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if group_members(pgid) == [] or time.monotonic() > deadline:
            return group_members(pgid) == []
        time.sleep(0.05)


@pytest.fixture
def leftovers():
    pgids: list[int] = []
    yield pgids
    for pgid in pgids:  # only when a test fails: never leave a sleeper behind
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def test_a_program_that_ignores_term_is_stopped_at_its_deadline_with_its_whole_group(leftovers) -> None:
    proc = bounded_run.start([sys.executable, "-c", STUBBORN])
    leftovers.append(proc.pid)
    result = bounded_run.finish(proc, 0.5, grace=0.2)
    assert result.timed_out and not result.ok
    assert result.waited == 0.5
    assert result.returncode == -signal.SIGKILL, "TERM is ignored: KILL ended it, and it was reaped"
    assert b"started" in result.stdout, "what it wrote before the deadline is kept"
    assert group_gone(proc.pid), group_members(proc.pid)


def test_a_child_outside_the_group_holding_the_pipes_cannot_hang_the_runner(leftovers) -> None:
    proc = bounded_run.start([sys.executable, "-c", ESCAPED])
    leftovers.append(proc.pid)
    result = bounded_run.finish(proc, 0.5, grace=0.2)
    leftovers.extend(escaped_sleepers())
    assert result.timed_out, "the output never ended: the escaped child still holds it"
    assert result.returncode == 0, "the program itself ended and was reaped"
    assert b"parent done" in result.stdout
    assert group_gone(proc.pid)


def escaped_sleepers() -> list[int]:
    """The children ESCAPED left running, by their command line (their parent is gone)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if b"os.setsid()" in cmdline.read_bytes() and int(cmdline.parent.name) != os.getpid():
                found.append(int(cmdline.parent.name))
    return found


def test_output_exit_code_and_input_come_back() -> None:
    script = "import sys; data = sys.stdin.read(); print(data.upper()); print('to err', file=sys.stderr); sys.exit(3)"
    result = bounded_run.run_bounded([sys.executable, "-c", script], 60, stdin=b"hello")
    assert not result.timed_out and result.returncode == 3 and not result.ok
    assert result.stdout == b"HELLO\n" and result.stderr == b"to err\n"
    assert bounded_run.run_bounded(["true"], 60).ok


def test_without_input_the_program_reads_end_of_file_not_the_caller_s_stdin() -> None:
    result = bounded_run.run_bounded([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"], 60)
    assert result.stdout == b"''\n"


def test_a_program_that_cannot_start_raises_oserror() -> None:
    with pytest.raises(FileNotFoundError):
        bounded_run.run_bounded(["gpulab-no-such-program"], 5)


# --- the process lab's run() on it ---------------------------------------------------------------


def test_process_lab_run_stops_the_group_at_its_deadline_and_names_the_step(
    tmp_path: Path, leftovers, monkeypatch
) -> None:
    monkeypatch.setattr("process_lab.commands.STOP_GRACE", 0.2)
    pid_file = tmp_path / "pid"
    # 3 s: room for a Python to start and write its pid file on a loaded machine (at 0.6 s, under a parallel
    # suite, it sometimes had not yet).
    with pytest.raises(ProcessLabError, match=r"^waiting for the stubborn one: no answer within 3 s \(python"):
        run([sys.executable, "-c", STUBBORN, pid_file], env=os.environ, what="waiting for the stubborn one", timeout=3)
    pgid = int(pid_file.read_text())
    leftovers.append(pgid)
    assert group_gone(pgid), group_members(pgid)


def test_process_lab_run_returns_text_and_raises_on_failure() -> None:
    script = "import sys; print(sys.stdin.read() + '\\r'); sys.exit(int(sys.argv[1]))"
    result = run([sys.executable, "-c", script, "0"], env=os.environ, what="echo", stdin="hi")
    assert result.returncode == 0 and result.stdout == "hi\n" and result.stderr == ""
    assert result.args == [sys.executable, "-c", script, "0"]
    with pytest.raises(ProcessLabError, match=r"^echo failed \(exit 3\): hi$"):
        run([sys.executable, "-c", script, "3"], env=os.environ, what="echo", stdin="hi")
    unchecked = run([sys.executable, "-c", script, "4"], env=os.environ, what="echo", stdin="x", check=False)
    assert unchecked.returncode == 4
