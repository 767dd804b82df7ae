"""Multi-node tenants in `make bench` (called from benchmarks/policy_check.py): the same 10,000 pods on
50 tenants of 4 GPU nodes x 8 cards, and on 50 tenants of one node with the same 32 cards, timed in
the same run (the ratio is the cost of HAMi's node selection); and the slowest of 200 adversarial
small cases (2-3 nodes of 1-3 mixed cards, six pods of one or two containers)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from hami.cards import CardSpec
from model.config import GpuQuota, PodLimits
from placement.findings import UNDECIDED
from placement.inventory import TenantInventory
from placement.wording import evaluate_tenant
from placement.workloads import Workload, read_workload

A100 = ("NVIDIA-A100-SXM4-80GB", 81920)


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


def inventory(name: str, nodes: int, cards_per_node: int, node_policy: str = "binpack") -> TenantInventory:
    cards = tuple(CardSpec(f"{name}-n{n}-gpu-{i}", *A100) for n in range(nodes) for i in range(cards_per_node))
    layout = tuple((f"{name}-n{n}", cards_per_node) for n in range(nodes)) if nodes > 1 else ()
    return TenantInventory(
        name, cards, PodLimits(), GpuQuota(), ("gpu",), "spread", nodes=layout, node_policy=node_policy
    )


def run_bulk(tenants: int, pods: int, nodes: int, cards_per_node: int, seed: int) -> tuple[float, int]:
    """Seconds to evaluate every tenant (reading manifests not timed), and the error count."""
    rng = random.Random(seed)
    manifests: dict[int, list] = {t: [] for t in range(tenants)}
    for i in range(pods):
        manifests[i % tenants].append(read_workload("Pod", pod(f"p{i}", rng)))
    inputs = [(inventory(f"t{t}", nodes, cards_per_node), manifests[t]) for t in range(tenants)]
    started = time.perf_counter()
    findings = [f for inv, workloads in inputs for f in evaluate_tenant(inv, workloads)]
    return time.perf_counter() - started, sum(f.severity == "error" for f in findings)


def adversarial_pods(rng: random.Random) -> list:
    """Six pods of one or two containers with mixed card counts, memory (MB or percentage) and cores: the
    small cases where a search or an order walk is hardest (shared with policy_check's one-node cases)."""
    workloads = []
    for p in range(6):
        containers = []
        for c in range(rng.randint(1, 2)):
            limits = {"nvidia.com/gpu": str(rng.choice([1, 1, 2])), "nvidia.com/gpucores": str(rng.choice([0, 5, 20]))}
            if rng.random() < 0.4:
                limits["nvidia.com/gpumem-percentage"] = str(rng.choice([10, 25, 30, 50]))
            else:
                limits["nvidia.com/gpumem"] = str(rng.choice([2000, 5000, 8000, 12000, 20000]))
            containers.append({"name": f"c{c}", "resources": {"limits": limits}})
        manifest = {"metadata": {"name": f"p{p}", "namespace": "n"}, "spec": {"containers": containers}}
        workloads.append(read_workload("Pod", manifest))
    return workloads


def adversarial_case(rng: random.Random) -> tuple[TenantInventory, list]:
    sizes = [rng.randint(1, 3) for _ in range(rng.randint(2, 3))]
    cards = tuple(
        CardSpec(f"n{n}-g{i}", "NVIDIA-X", rng.choice([16384, 24576, 49152, 81920]))
        for n, size in enumerate(sizes)
        for i in range(size)
    )
    layout = tuple((f"n{n}", size) for n, size in enumerate(sizes))
    inv = TenantInventory(
        "t", cards, PodLimits(), None, (), "spread", nodes=layout, node_policy=rng.choice(["binpack", "spread"])
    )
    workloads = adversarial_pods(rng)
    return inv, workloads


def run_adversarial(
    cases: int,
    seed: int,
    make_case: Callable[[random.Random], tuple[TenantInventory, list[Workload]]] = adversarial_case,
    progress: Callable[[str], None] | None = None,
) -> tuple[float, int]:
    """The slowest evaluation of `cases` small cases `make_case` draws, and how many ran out of search budget."""
    rng = random.Random(seed)
    slowest, undecided = 0.0, 0
    for done in range(cases):
        if progress and done and done % 50 == 0:
            progress(f"{done} of {cases} adversarial cases")
        inventory, workloads = make_case(rng)
        started = time.perf_counter()
        findings = evaluate_tenant(inventory, workloads)
        slowest = max(slowest, time.perf_counter() - started)
        undecided += any(f.reason == UNDECIDED for f in findings)
    return slowest, undecided


def main(tenants: int = 50, pods: int = 10_000, nodes: int = 4, cards: int = 8, seed: int = 7, adversarial: int = 200):
    multi, multi_errors = run_bulk(tenants, pods, nodes, cards, seed)
    single, single_errors = run_bulk(tenants, pods, 1, nodes * cards, seed)
    print(
        f"{pods} pods across {tenants} tenants x {nodes} GPU nodes x {cards} cards: {multi:.2f} s "
        f"({1e6 * multi / pods:.0f} us/pod), {multi_errors} errors; one node of {nodes * cards} cards: {single:.2f} s, "
        f"{single_errors} errors; ratio {multi / single:.1f}x"
    )
    if adversarial:
        slowest, undecided = run_adversarial(adversarial, seed)
        print(
            f"{adversarial} adversarial small multi-node cases: slowest call {slowest:.2f} s, "
            f"search budget ran out in {undecided} (reported as {UNDECIDED})"
        )


if __name__ == "__main__":
    main()
