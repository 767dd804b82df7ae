"""A process-mode stack file of N copies of the reference tenant-a, to time `make up` of many tenants.

Each tenant is named `tenant-NN` with pod and service ranges of its own (the stack's validation refuses
overlapping ones), one A100 80 GB, the reference limits and quota, and no workloads (the density figure is
the control planes', not the pods'). The file is written beside the project's own stack files; remove it
after `make down`.

Usage: python3 benchmarks/many_tenants_stack.py N [--stack NAME]   (writes Pulumi.NAME.yaml, default many)
Then:  time make up STACK=NAME && make down STACK=NAME && rm Pulumi.NAME.yaml
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOST = 100  # 10.0-99.x pod ranges and 10.100-199.x service ranges below, one /16 each


def stack_file(count: int) -> str:
    lines = [
        f"# {count} tenants, written by benchmarks/many_tenants_stack.py: not a committed stack.",
        "config:",
        "  gpulab:runtime: process",
        "  gpulab:management:",
        "    name: gpulab",
        "  gpulab:scheduling:",
        "    gpuSchedulerPolicy: spread",
        "    nodeLockTimeout: 2s",
        "  gpulab:tenants:",
    ]
    for i in range(count):
        lines += [
            f"    - name: tenant-{i:02d}",
            "      kubernetesVersion: v1.36.4",
            f"      podCidr: 10.{i}.0.0/16",
            f"      serviceCidr: 10.{100 + i}.0.0/16",
            "      gpus: [{model: A100-80GB, count: 1}]",
            "      limits: {gpus: 1, gpumem: 81920, gpucores: 100}",
            "      quota: {gpus: 4}",
            "      namespaces: [gpu-workloads]",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", type=int, help=f"tenants, 1 to {MOST}")
    parser.add_argument("--stack", default="many", help="the stack's name: Pulumi.NAME.yaml is written")
    args = parser.parse_args()
    if not 1 <= args.count <= MOST:
        parser.error(f"count {args.count}: give 1 to {MOST} tenants")
    target = ROOT / f"Pulumi.{args.stack}.yaml"
    if target.exists() and "benchmarks/many_tenants_stack.py" not in target.read_text():
        parser.error(f"{target.name} exists and was not written by this script: pick another --stack")
    target.write_text(stack_file(args.count))
    print(f"wrote {target.name}: {args.count} tenants; make up STACK={args.stack}")


if __name__ == "__main__":
    main()
