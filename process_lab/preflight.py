"""What `make up` checks for a process-mode stack before `pulumi up`: every program it runs is built.

The control planes' programs and the Pulumi engine with its Python language host and the Kubernetes
provider come from `make tools` (./bin, or GPULAB_BIN); HAMi's scheduler from GPULAB_HAMI_SCHEDULER or
./bin/hami-scheduler, since the Go module proxy refuses HAMi (tools/README.md). One line per missing
fix, each saying what to do; exit 1 if any is missing. `--destroy` checks what `make down` runs: it
starts no HAMi, so a lab whose hami-scheduler is gone (or set in another shell) can still be taken down.
Usage: python -m process_lab.preflight [--destroy]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from process_lab.control_plane import missing_programs
from process_lab.hami_scheduler import find_hami_scheduler

ROOT = Path(__file__).resolve().parents[1]
# The engine, the language host that runs gpulab's Python program (and its two scripts), and the provider.
ENGINE = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-language-python-exec",
    "pulumi-resource-pulumi-python",
    "pulumi-resource-kubernetes",
)


def bin_dir() -> Path:
    return Path(os.environ.get("GPULAB_BIN") or ROOT / "bin").resolve()


def programs_missing(tools: Path) -> list[str]:
    """What `pulumi up` of a process-mode stack starts and does not find (the program checks the same)."""
    return missing_programs(tools) + (["hami-scheduler"] if find_hami_scheduler(tools) is None else [])


def problems(tools: Path, *, destroy: bool = False) -> list[str]:
    lines = []
    missing = [*missing_programs(tools), *(name for name in ENGINE if not os.access(tools / name, os.X_OK))]
    if missing:
        lines.append(f"not built in {tools}: {', '.join(missing)}: run `make tools` (from pinned Go modules)")
    if not destroy and find_hami_scheduler(tools) is None:
        lines.append(
            f"hami-scheduler is not in {tools} and GPULAB_HAMI_SCHEDULER is not set: build HAMi v2.8.3's "
            "cmd/scheduler (the Go module proxy refuses HAMi; docs/process-lab.md says how) and set "
            "GPULAB_HAMI_SCHEDULER to the binary"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--destroy"]):
        print("usage: python -m process_lab.preflight [--destroy]", file=sys.stderr)
        return 2
    found = problems(bin_dir(), destroy=args == ["--destroy"])
    for line in found:
        print(f"[gpulab] {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
