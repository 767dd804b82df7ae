"""benchmarks/cpu.py: CPU seconds per program of a tenant while a benchmark measures.

Boundary: /proc/PID/stat as the Linux kernel writes it (proc(5)): a hand-made line with a command name that holds
spaces and parentheses, and the real /proc of this test's own children (one that runs, one reaped).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import cpu

BURN = "import os, sys\nwhile sum(os.times()[:2]) < 0.3: pass\nsys.stdout.write('done\\n'); sys.stdout.flush()\n"


def stat_line(pid: int, comm: str, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # Fields 3-13 (state .. majflt), then 14-17, then the rest, as proc(5) lists them.
    return f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 5 0 0"


def test_a_stat_line_is_read_after_the_command_name_whatever_it_holds() -> None:
    own, reaped = cpu.cpu_of(stat_line(7, "kube (api) server", 250, 50, 30, 10))
    assert (own, reaped) == (300 / cpu.TICKS, 40 / cpu.TICKS)


@pytest.mark.integration
def test_a_tenants_programs_and_the_measuring_process_are_each_counted_from_the_real_proc(tmp_path: Path) -> None:
    folder = tmp_path / "lab"
    folder.mkdir()
    before = cpu.sample(folder)
    # A program of the tenant (its command line names the folder), still running at the second sample.
    running = subprocess.Popen(
        [sys.executable, "-c", BURN + "sys.stdin.read()\n", f"--data-dir={folder}/etcd"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert running.stdout is not None and running.stdout.readline() == "done\n"
        # A child this process waits for: its CPU moves to our reaped children's.
        subprocess.run([sys.executable, "-c", BURN], check=True, capture_output=True)
        spent = cpu.spent(before, cpu.sample(folder))
    finally:
        running.kill()
        running.wait()
    program = Path(sys.executable).name
    assert spent[program] >= 0.3 - 2 / cpu.TICKS, spent
    assert spent[cpu.REAPED] >= 0.3 - 2 / cpu.TICKS, spent
    assert cpu.OWN in spent and set(spent) == {program, cpu.OWN, cpu.REAPED}, spent
    lines = cpu.table(spent, wall=10.0)
    assert lines[0] == "| program | CPU s | of the wall time |" and lines[-1].startswith("| all | ")


def test_a_pid_reused_by_another_program_counts_from_zero() -> None:
    before = cpu.Sample({10: ("etcd", 5.0), 11: ("kubectl", 2.0)}, own=1.0, reaped=0.5)
    after = cpu.Sample({10: ("etcd", 7.5), 11: ("hami-scheduler", 1.0)}, own=1.5, reaped=2.5)
    assert cpu.spent(before, after) == {"etcd": 2.5, cpu.REAPED: 2.0, "hami-scheduler": 1.0, cpu.OWN: 0.5}
    assert os.sysconf("SC_CLK_TCK") == cpu.TICKS


@pytest.mark.integration
def test_a_commands_tree_and_the_programs_it_leaves_in_the_lab_are_each_counted(tmp_path: Path, capsys) -> None:
    """benchmarks/command_cpu.py on a command that burns CPU itself and leaves a program of the lab running."""
    from benchmarks import command_cpu

    folder = tmp_path / "lab"
    folder.mkdir()
    left = folder / "left.pid"
    leave = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BURN + 'import time; time.sleep(600)'!r}, '{folder}/x'],"
        " stdout=subprocess.PIPE, start_new_session=True)\n"
        f"open({str(left)!r}, 'w').write(str(child.pid)); child.stdout.readline()\n" + BURN
    )
    try:
        assert command_cpu.main(["--folder", str(folder), "--", sys.executable, "-c", leave]) == 0
    finally:
        if left.exists():
            os.kill(int(left.read_text()), 9)
    out = capsys.readouterr().out
    table = [line.split("|") for line in out.splitlines() if line.startswith("| ")]
    rows = {cells[1].strip(): float(cells[2]) for cells in table[2:]}  # after the header and its rule
    program = Path(sys.executable).name
    assert rows[program] >= 0.3 - 2 / cpu.TICKS, out  # the lab's program, still running
    assert rows[f"the command's tree ({sys.executable})"] >= 0.3 - 2 / cpu.TICKS, out
