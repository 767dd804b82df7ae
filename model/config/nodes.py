"""Where a tenant's cards are: the stack file's three spellings read into one list of nodes.

- `gpus`: the cards of the tenant's one GPU node: its container `<tenant>-worker`, or with workerMode ssh the
  worker marked `gpuNode: true` (else the first);
- `nodes`: several kindest/node containers, `<tenant>-<name>`, each with its cards;
- `workers[].gpus`: several SSH machines, each with its own cards.

`read_nodes` is the one place that tells them apart; everything else (node names, GPU nodes, cards, the
rules in model/config/rules.py) reads its list. Which spellings were given at once, and whether that is
allowed, is for the rules: read_nodes always answers (`nodes` first, then the tenant's `gpus`, then the
workers' own), so that the rules can read the list of a tenant they refuse."""

from __future__ import annotations

from typing import Literal, NamedTuple

from model.config.fields import GpuCards, GpuNode, SshWorker

# The key that declares a node's cards (or, for a node without cards, the node itself).
CardsKey = Literal["gpus", "nodes", "workers"]


class TenantNode(NamedTuple):
    """One worker node of a tenant, whichever spelling declared it."""

    name: str  # its Kubernetes node name
    gpus: tuple[GpuCards, ...]  # its cards as declared; none for a worker without cards
    # What its card ids carry (`GPU-MOCK-<stem>-<i>`): the tenant's name for the cards of `gpus`, the ids they
    # always had; the node's name for `nodes` and `workers[].gpus`, unique within the tenant.
    card_stem: str
    declared_in: CardsKey
    worker: SshWorker | None = None  # the machine behind it (workerMode ssh)


def read_nodes(
    tenant: str,
    worker_mode: Literal["container", "ssh"],
    gpus: list[GpuCards] | None,
    nodes: list[GpuNode] | None,
    workers: list[SshWorker],
) -> list[TenantNode]:
    """The tenant's worker nodes in order, each with its cards: a container per entry of `nodes` (else one,
    `<tenant>-worker`, with `gpus`), or with workerMode ssh a node per machine."""
    if worker_mode == "container":
        if nodes is not None:
            named = [(f"{tenant}-{node.name or f'worker-{i}'}", node) for i, node in enumerate(nodes)]
            return [TenantNode(name, tuple(node.gpus), name, "nodes") for name, node in named]
        return [TenantNode(f"{tenant}-worker", tuple(gpus or ()), tenant, "gpus")]
    names = [worker.name or f"{tenant}-worker-{i}" for i, worker in enumerate(workers)]
    if gpus is not None:  # the one GPU worker: the one marked gpuNode, else the first
        holder = next((i for i, worker in enumerate(workers) if worker.gpu_node), 0)
        return [
            TenantNode(name, tuple(gpus), tenant, "gpus", worker)
            if i == holder
            else TenantNode(name, (), name, "workers", worker)
            for i, (name, worker) in enumerate(zip(names, workers, strict=True))
        ]
    return [
        TenantNode(name, tuple(worker.gpus or ()), name, "workers", worker)
        for name, worker in zip(names, workers, strict=True)
    ]
