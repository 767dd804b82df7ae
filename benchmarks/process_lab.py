"""The process lab's cost: time to start and stop N tenants of the reference stack, and memory per tenant.

Needs `make tools` (./bin, or GPULAB_BIN); with GPULAB_HAMI_SCHEDULER set, each tenant also runs HAMi.
Usage: venv/bin/python benchmarks/process_lab.py [--tenants 1 2 5]

Memory is the resident set (VmRSS in /proc) of every process whose command line names the tenant's folder,
read once every tenant is up: a steady lab, not a peak.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from model.config.loading import load_stack_file  # noqa: E402
from process_lab.control_plane import missing_programs  # noqa: E402
from process_lab.tenant import TenantLab  # noqa: E402


def resident_mb(folder: Path) -> float:
    """Summed VmRSS of the processes started from `folder` (their command lines name it)."""
    total_kb = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if str(folder) not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            status = (entry / "status").read_text()
        except OSError:  # the process ended while we looked
            continue
        total_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total_kb / 1024


def measure(count: int, bin_dir: Path, hami: Path | None) -> None:
    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    template = lab.tenants[0]
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-lab-") as scratch:
        folder = Path(scratch)
        tenants = [
            TenantLab(template.model_copy(update={"name": f"bench-{i}"}), lab, bin_dir, folder / f"t{i}", hami)
            for i in range(count)
        ]
        started = time.monotonic()
        try:
            for tenant in tenants:
                tenant.up()
            up = time.monotonic() - started
            memory = [resident_mb(folder / f"t{i}") for i in range(count)]
        finally:
            stopping = time.monotonic()
            for tenant in tenants:
                tenant.down()
            down = time.monotonic() - stopping
        print(
            f"{count} tenant(s){' with HAMi' if hami else ''}: up {up:.1f} s, down {down:.1f} s, "
            f"memory per tenant {sum(memory) / count:.0f} MB (min {min(memory):.0f}, max {max(memory):.0f})",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, nargs="+", default=[1, 2, 5])
    args = parser.parse_args()
    bin_dir = Path(os.environ.get("GPULAB_BIN", ROOT / "bin"))
    missing = missing_programs(bin_dir)
    if missing:
        print(f"[gpulab] {', '.join(missing)} not in {bin_dir}: run `make tools` first", file=sys.stderr)
        return 2
    given = os.environ.get("GPULAB_HAMI_SCHEDULER")
    hami = Path(given) if given else None
    for count in args.tenants:
        measure(count, bin_dir, hami)
    return 0


if __name__ == "__main__":
    sys.exit(main())
