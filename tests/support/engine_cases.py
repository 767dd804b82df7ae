"""Generated tenants and GPU workloads, and everything the placement engine says about them, in a form
that can be stored and compared across commits.

`venv/bin/python -m tests.support.engine_cases OUT.json` (from the project folder) writes what today's code says
for CASES seeded cases: each tenant's findings (severity, workload, reason, message, cards), the usage once its
workloads run (`replay`, what the checker starts from) and the checker's placements (`--output json`). The stored
tests/snapshots/engine-findings.json was first written by the single-node and multi-node engines before
they became one, and the one engine said the same; tests/placement/test_engine_snapshot.py
proves today's code says exactly what it holds. A change that alters what users read on purpose
regenerates it with the command above and says so in its commit (once so far: cbaa79f, the use a
refused card's line tells).

The cases cover what the engine branches on: one GPU node or 2-3, card sizes and slot counts, usage
already on the cards, both card and node policies (and the per-pod annotations), namespace quotas
(memory, cores, GPU count), type and UUID selectors, 1-8 pods of 1-2 containers asking 1-3 cards by MB
or percentage, Deployments of several replicas, and sets that fit, strand in some order, strand in
every order, or fit nowhere.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from hami.cards import CardSpec, CardUse
from model.config import GpuQuota, PodLimits
from placement.inventory import NamespaceUsage, TenantInventory
from placement.replay import replay
from placement.wording import evaluate_tenant
from placement.workloads import Workload, read_workload
from policies.check_output import placements

CASES = 500
CARD_TYPES = (("NVIDIA-A100-SXM4-80GB", 81920), ("NVIDIA-L40S", 49152), ("NVIDIA-L4", 24576))
NAMESPACES = ("train", "serve")


def _cards(rng: random.Random, node: int) -> list[CardSpec]:
    """1-4 cards, of one type or (as on the nodes where HAMi's walk strands pods) of mixed types."""
    types = [rng.choice(CARD_TYPES)] if rng.random() < 0.6 else list(CARD_TYPES)
    split = rng.choice([10, 10, 2, 3])
    cards = []
    for i in range(rng.choice([1, 2, 2, 3, 4])):
        kind, memory = rng.choice(types)
        cards.append(CardSpec(f"n{node}-gpu-{i}", kind, memory, 100, split))
    return cards


def _usage(rng: random.Random, cards: list[CardSpec]) -> tuple[CardUse, ...]:
    use = []
    for card in cards:
        slots = rng.randint(0, min(2, card.split_count))
        use.append(
            CardUse(slots, rng.randint(0, card.memory_mb // 2) if slots else 0, rng.choice([0, 30, 60]) if slots else 0)
        )
    return tuple(use)


def _pod(rng: random.Random, name: str, cards: list[CardSpec]) -> dict[str, Any]:
    containers = []
    for c in range(rng.choice([1, 1, 1, 2])):
        limits: dict[str, Any] = {"nvidia.com/gpu": str(rng.choice([1, 1, 1, 1, 1, 2, 2, 3]))}
        draw = rng.random()
        if draw < 0.25:
            limits["nvidia.com/gpumem-percentage"] = str(rng.choice([10, 25, 50, 100]))
        elif draw < 0.95:
            limits["nvidia.com/gpumem"] = str(rng.choice([2000, 8000, 12000, 20000, 20000, 30000, 40000]))
        elif draw < 0.98:
            limits["nvidia.com/gpumem"] = "90000"  # more than any card
        # else no memory asked: the whole card (HAMi's webhook default)
        if rng.random() < 0.8:
            limits["nvidia.com/gpucores"] = str(rng.choice([0, 10, 30, 50, 100]))
        containers.append({"name": f"c{c}", "image": "busybox", "resources": {"limits": limits}})
    annotations: dict[str, str] = {}
    if rng.random() < 0.1:
        annotations["hami.io/gpu-scheduler-policy"] = rng.choice(["binpack", "spread"])
    if rng.random() < 0.1:
        annotations["hami.io/node-scheduler-policy"] = rng.choice(["binpack", "spread"])
    if rng.random() < 0.04:
        annotations["nvidia.com/use-gputype"] = rng.choice(["A100", "L4", "L40S"])
    if rng.random() < 0.05:
        annotations["nvidia.com/use-gpuuuid"] = rng.choice(cards).id
    return {
        "metadata": {"name": name, "namespace": rng.choice(NAMESPACES), "annotations": annotations},
        "spec": {"containers": containers},
    }


def _near_stranding(rng: random.Random, name: str) -> tuple[TenantInventory, list[Workload]]:
    """Sets near the ones HAMi's walk strands in every creation order (tests/placement/test_gpu_fit.py and
    tests/placement/test_node_stranding.py): mixed cards, whole-card pods next to MB-sized ones, card binpack."""
    one_node = rng.random() < 0.5
    kinds = [CARD_TYPES[2], CARD_TYPES[0]] if one_node else [CARD_TYPES[1], CARD_TYPES[0], CARD_TYPES[2]]
    cards = tuple(CardSpec(f"gpu-{i}", kind, memory) for i, (kind, memory) in enumerate(kinds))
    inventory = TenantInventory(
        name,
        cards,
        PodLimits(),
        None,
        (),
        rng.choice(["binpack", "binpack", "spread"]),
        nodes=() if one_node else (("a", 2), ("b", 1)),
        node_policy=rng.choice(["binpack", "spread"]),
    )
    asks = [("0", "30"), ("0", "100"), ("30000", "60"), ("20000", "30"), ("20000", "0"), ("12000", "0")]
    workloads = []
    for p in range(rng.randint(3, 5)):
        memory, cores = rng.choice(asks)
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": cores}
        if memory != "0":
            limits["nvidia.com/gpumem"] = memory
        manifest = {
            "metadata": {"name": f"p{p}", "namespace": "train"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
        }
        workloads.append(read_workload("Pod", manifest))
    return inventory, workloads


def case(seed: int) -> tuple[TenantInventory, list[Workload]]:
    """One tenant and its workloads, drawn from `seed`."""
    rng = random.Random(seed)
    if rng.random() < 0.15:
        return _near_stranding(rng, f"t{seed}")
    node_count = rng.choice([1, 1, 1, 2, 2, 3])
    per_node = [_cards(rng, n) for n in range(node_count)]
    cards = [card for node in per_node for card in node]
    listed = node_count > 1 or rng.random() < 0.05  # a one-entry node list, as a hand-written document may give
    quota = None
    if rng.random() < 0.35:
        quota = GpuQuota(
            gpumem=rng.choice([None, 30000, 60000, 100000]),
            gpucores=rng.choice([None, 60, 100, 150]),
            gpus=rng.choice([None, None, 2, 4]),
        )
    usage = _usage(rng, cards) if rng.random() < 0.3 else ()
    namespace_usage = {}
    if usage and rng.random() < 0.5:
        namespace_usage = {"train": NamespaceUsage(rng.choice([0, 10000]), rng.choice([0, 30]), rng.choice([0, 1]))}
    inventory = TenantInventory(
        name=f"t{seed}",
        cards=tuple(cards),
        limits=PodLimits(gpumem=rng.choice([None, None, None, 40000])),
        quota=quota,
        namespaces=NAMESPACES if rng.random() < 0.5 else (),
        gpu_policy=rng.choice(["binpack", "spread"]),
        card_usage=usage,
        namespace_usage=namespace_usage,
        nodes=tuple((f"node-{n}", len(node)) for n, node in enumerate(per_node)) if listed else (),
        node_policy=rng.choice(["binpack", "spread"]),
    )
    workloads = []
    for p in range(rng.randint(1, 8)):
        manifest = _pod(rng, f"p{p}", cards)
        if rng.random() < 0.15:
            manifest = {
                "metadata": {"name": f"d{p}", "namespace": manifest["metadata"]["namespace"]},
                "spec": {"replicas": rng.randint(2, 3), "template": manifest},
            }
            workload = read_workload("Deployment", manifest)
        else:
            workload = read_workload("Pod", manifest)
        if workload is not None:
            workloads.append(workload)
    return inventory, workloads


def said(seed: int) -> dict[str, Any]:
    """Everything the engine says about case `seed`."""
    inventory, workloads = case(seed)
    findings = [[f.severity, f.workload, f.reason, f.message, f.card] for f in evaluate_tenant(inventory, workloads)]
    run = replay(inventory, workloads, one_node="worker")
    after = run.inventory
    return {
        "findings": findings,
        "running": {
            "cards": [[u.slots, u.memory_mb, u.cores] for u in after.card_usage],
            "namespaces": {ns: [u.memory_mb, u.cores, u.gpus] for ns, u in sorted(after.namespace_usage.items())},
        },
        "placements": placements(run, workloads),
    }


def snapshot() -> dict[str, Any]:
    return {str(seed): said(seed) for seed in range(CASES)}


def write(path: Path) -> None:
    """One case per line, so that a change shows in `git diff` as the cases it touched."""
    lines = [f"{json.dumps(seed)}:{json.dumps(value, sort_keys=True)}" for seed, value in snapshot().items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]))
