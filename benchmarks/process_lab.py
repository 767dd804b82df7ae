"""The process lab's cost: time to start and stop N tenants of the reference stack, and memory per tenant.

Needs `make tools` (./bin, or GPULAB_BIN); with GPULAB_HAMI_SCHEDULER set, each tenant also runs HAMi.
Usage: venv/bin/python -m benchmarks.process_lab [--tenants 1 2 5]

Memory, read once every tenant is up (a steady lab, not a peak), per program of a tenant: its resident set (RSS)
and its proportional set (PSS, shared pages divided among their sharers: benchmarks/memory.py); and the machine's
MemAvailable before and after, the cost of the tenants as the machine sees it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.memory import available_kb, by_program, table
from model.config.loading import load_stack_file
from model.hami_releases import DEFAULT_VERSION as DEFAULT_HAMI_VERSION
from process_lab import hami_binary
from process_lab.control_plane import missing_programs
from process_lab.tenant import TenantLab

ROOT = Path(__file__).resolve().parent.parent


def measure(count: int, bin_dir: Path, hami: Path | None) -> None:
    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    template = lab.tenants[0]
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-lab-") as scratch:
        folder = Path(scratch)
        tenants = [
            TenantLab(template.model_copy(update={"name": f"bench-{i}"}), lab, bin_dir, folder / f"t{i}", hami)
            for i in range(count)
        ]
        before = available_kb(Path("/proc/meminfo").read_text())
        started = time.monotonic()
        try:
            for tenant in tenants:
                tenant.up()
            up = time.monotonic() - started
            memory = [by_program(folder / f"t{i}") for i in range(count)]
            taken_mb = (before - available_kb(Path("/proc/meminfo").read_text())) / 1024
        finally:
            stopping = time.monotonic()
            for tenant in tenants:
                tenant.down()
            down = time.monotonic() - stopping
        pss = [sum(u.pss_kb for u in usage.values()) / 1024 for usage in memory]
        print(
            f"{count} tenant(s){' with HAMi' if hami else ''}: up {up:.1f} s, down {down:.1f} s, "
            f"PSS per tenant {sum(pss) / count:.0f} MB (min {min(pss):.0f}, max {max(pss):.0f}), "
            f"MemAvailable down by {taken_mb:.0f} MB ({taken_mb / count:.0f} MB a tenant)",
            flush=True,
        )
        for line in table(memory):
            print(f"  {line}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, nargs="+", default=[1, 2, 5])
    args = parser.parse_args()
    bin_dir = Path(os.environ.get("GPULAB_BIN", ROOT / "bin"))
    missing = missing_programs(bin_dir)
    if missing:
        print(f"[gpulab] {', '.join(missing)} not in {bin_dir}: run `make tools` first", file=sys.stderr)
        return 2
    # HAMi's scheduler of the release the lab's stack files run (process_lab/hami_binary.py: never another's).
    hami = hami_binary.find(bin_dir, DEFAULT_HAMI_VERSION).path
    for count in args.tenants:
        measure(count, bin_dir, hami)
    return 0


if __name__ == "__main__":
    sys.exit(main())
