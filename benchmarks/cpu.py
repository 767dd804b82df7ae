"""Where the CPU goes while a lab measures: CPU seconds per program of a tenant, and of the measuring process.

A process's CPU is its /proc/PID/stat `utime` and `stime` (proc(5), fields 14 and 15, in clock ticks); the
children a process waited for add theirs to its `cutime` and `cstime` (fields 16 and 17). A profile is two
samples, before and after: the tenant's processes (their command line names its folder: benchmarks/memory.py)
and the measuring process itself (its threads, such as the bind-time role's, and what it reaped, such as kubectl
runs). A process of the tenant that ended between the samples and was reaped elsewhere (kwokctl starts its
components in sessions of their own) is not counted; one that started between them counts whole.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from benchmarks.memory import lab_processes, program_of

TICKS = os.sysconf("SC_CLK_TCK")
OWN, REAPED = "the measuring process", "its reaped children"


def cpu_of(stat: str) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a /proc/PID/stat line. The command's name (field 2) may hold spaces
    and parentheses: the fields are counted from after its last `)`."""
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])  # fields 14-17, counted from 3
    return (utime + stime) / TICKS, (cutime + cstime) / TICKS


@dataclass(frozen=True)
class Sample:
    programs: dict[int, tuple[str, float]]  # pid -> (program, CPU seconds)
    own: float
    reaped: float


def sample(folder: Path, proc: Path = Path("/proc"), me: int | None = None) -> Sample:
    programs = {}
    for entry, argv in lab_processes(folder, proc):
        try:
            programs[int(entry.name)] = (program_of(argv), cpu_of((entry / "stat").read_text())[0])
        except (OSError, ValueError):  # ended while we looked
            continue
    own, reaped = cpu_of((proc / str(me or os.getpid()) / "stat").read_text())
    return Sample(programs, own, reaped)


def spent(before: Sample, after: Sample) -> dict[str, float]:
    """CPU seconds per program between the samples, most first; the measuring process and its reaped children
    under their own names."""
    totals: dict[str, float] = defaultdict(float)
    for pid, (program, seconds) in after.programs.items():
        earlier = before.programs.get(pid)
        totals[program] += seconds - (earlier[1] if earlier and earlier[0] == program else 0)
    totals[OWN] += after.own - before.own
    totals[REAPED] += after.reaped - before.reaped
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def table(per_program: dict[str, float], wall: float) -> list[str]:
    """A Markdown table: each program's CPU seconds and its share of the wall time (two cores: 200 % at most)."""
    lines = ["| program | CPU s | of the wall time |", "| --- | --- | --- |"]
    lines += [f"| {name} | {seconds:.1f} | {100 * seconds / wall:.0f} % |" for name, seconds in per_program.items()]
    total = sum(per_program.values())
    return [*lines, f"| all | {total:.1f} | {100 * total / wall:.0f} % |"]
