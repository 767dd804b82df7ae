"""Time to judge 10,000 GPU pods across 50 tenants (16 to 32 A100s each) with the policy logic.

A benchmark, not a test: it prints timings. Run with `make bench`.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import GpuQuota, PodLimits  # noqa: E402
from policies.evaluate import evaluate_tenant  # noqa: E402
from policies.gpu_fit import CardSpec  # noqa: E402
from policies.inventory import TenantInventory  # noqa: E402
from policies.workloads import read_workload  # noqa: E402


def tenant(index: int, rng: random.Random) -> TenantInventory:
    count = rng.choice([16, 24, 32])
    cards = tuple(CardSpec(f"t{index}-gpu-{i}", "NVIDIA-A100-SXM4-80GB", 81920) for i in range(count))
    return TenantInventory(f"t{index}", cards, PodLimits(), GpuQuota(), ("gpu",), "spread")


def pod(name: str, rng: random.Random) -> dict:
    limits = {
        "nvidia.com/gpumem": str(rng.choice([1000, 2000, 4000])),
        "nvidia.com/gpucores": str(rng.choice([1, 2, 5])),
    }
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }


def main(tenants: int = 50, pods: int = 10_000, seed: int = 7) -> None:
    rng = random.Random(seed)
    inventories = [tenant(i, rng) for i in range(tenants)]
    workloads: dict[str, list] = {inv.name: [] for inv in inventories}
    for i in range(pods):
        inventory = inventories[i % tenants]
        workloads[inventory.name].append(read_workload("Pod", pod(f"p{i}", rng)))
    started = time.perf_counter()
    findings = [f for inv in inventories for f in evaluate_tenant(inv, workloads[inv.name])]
    elapsed = time.perf_counter() - started
    errors = sum(f.severity == "error" for f in findings)
    print(f"{pods} pods across {tenants} tenants: {elapsed:.2f} s ({1e6 * elapsed / pods:.0f} us/pod), {errors} errors")


if __name__ == "__main__":
    main()
