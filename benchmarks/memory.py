"""Where a tenant's memory goes: per program of the tenant, its resident set (RSS) and its proportional set (PSS).

RSS counts every page a process maps, so pages shared by several processes (one binary's code in every tenant's
kube-apiserver, for instance) count once per process; PSS divides each shared page among its sharers, so the PSS of
all processes adds up to what the machine really holds (proc(5): /proc/PID/smaps_rollup). Both are read: RSS is
what earlier figures used, PSS is what a tenant costs the machine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The program a process of the lab is, by its command line (process_lab/control_plane.py, hami_scheduler.py and
# the bind-time role's `python -m process_lab.device_plugin`).
PYTHON_MODULES = {"process_lab.device_plugin": "bind-time role", "process_lab.forward": "API relay"}


@dataclass(frozen=True)
class Usage:
    rss_kb: int
    pss_kb: int


def program_of(argv: list[str]) -> str:
    """The program a command line runs: the binary's name, or for Python the module it was started with."""
    if not argv:
        return "?"
    name = Path(argv[0]).name
    if name.startswith("python"):
        for index, word in enumerate(argv[:-1]):
            if word == "-m":
                return PYTHON_MODULES.get(argv[index + 1], argv[index + 1])
    return name


def usage_of(smaps_rollup: str, status: str) -> Usage:
    """RSS from /proc/PID/status (VmRSS) and PSS from /proc/PID/smaps_rollup (Pss), in kB."""

    def field(text: str, key: str) -> int:
        for line in text.splitlines():
            if line.startswith(key):
                return int(line.split()[1])
        return 0

    return Usage(rss_kb=field(status, "VmRSS:"), pss_kb=field(smaps_rollup, "Pss:"))


def lab_processes(folder: Path, proc: Path = Path("/proc")) -> Iterator[tuple[Path, list[str]]]:
    """Each process whose command line names `folder` (a tenant's processes): its /proc entry and its argv."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [word.decode(errors="replace") for word in (entry / "cmdline").read_bytes().split(b"\0") if word]
        except OSError:  # the process ended while we looked
            continue
        if any(f"{folder}/" in word or word.endswith(str(folder)) for word in argv):  # not t1 for t10
            yield entry, argv


def by_program(folder: Path, proc: Path = Path("/proc")) -> dict[str, Usage]:
    """Summed usage per program of the processes whose command line names `folder` (a tenant's processes)."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for entry, argv in lab_processes(folder, proc):
        try:
            usage = usage_of((entry / "smaps_rollup").read_text(), (entry / "status").read_text())
        except OSError:  # the process ended while we looked, or is not ours to read
            continue
        total = totals[program_of(argv)]
        total[0] += usage.rss_kb
        total[1] += usage.pss_kb
    return {program: Usage(rss, pss) for program, (rss, pss) in sorted(totals.items())}


def available_kb(meminfo: str) -> int:
    """MemAvailable of /proc/meminfo: what the machine could still give without swapping."""
    return next(int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemAvailable:"))


def table(per_tenant: list[dict[str, Usage]]) -> list[str]:
    """One line per program: mean RSS and PSS per tenant in MB, then the tenant's total."""
    count = len(per_tenant)
    programs = sorted({program for usage in per_tenant for program in usage})
    lines = [f"{'program':<24} {'RSS MB':>8} {'PSS MB':>8}"]
    for program in [*programs, "per tenant"]:
        if program == "per tenant":
            rss = sum(u.rss_kb for usage in per_tenant for u in usage.values())
            pss = sum(u.pss_kb for usage in per_tenant for u in usage.values())
        else:
            rss = sum(usage[program].rss_kb for usage in per_tenant if program in usage)
            pss = sum(usage[program].pss_kb for usage in per_tenant if program in usage)
        lines.append(f"{program:<24} {rss / 1024 / count:>8.0f} {pss / 1024 / count:>8.0f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.memory FOLDER...`: the table for running tenants, one folder each (a lab made by
    `make up`: .state/process/<stack>/<tenant>)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=main.__doc__)
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    usages = [by_program(folder.resolve()) for folder in args.folders]
    if not all(usages):
        print("[gpulab] no running process names one of these folders", flush=True)
        return 1
    print("\n".join(table(usages)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
