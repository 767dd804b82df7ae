"""The advisory verdict on one GPU node: HAMi places pods one at a time, greedily, with its card policy
(hami/cards.py), so a set that fits in some placement can still be stranded by an unlucky arrival
order. Simulates the arrival orders (all of them up to MAX_ORDERS, else a sample)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hami.cards import POLICIES, ContainerFailure, Node, PodRequest, card_reason

MAX_ORDERS = 720  # up to this many distinct arrival orders (6 different pods) all are simulated; above, a sample


@dataclass
class Stranding:
    """A greedy run that left a pod unplaced."""

    order: tuple[PodRequest, ...]
    policy: str
    failure: ContainerFailure


def simulate(node: Node, order: Iterable[PodRequest], policy: str) -> ContainerFailure | None:
    """HAMi placing `order` one pod at a time on a copy of `node`; the first failure, if any."""
    trial = node.copy()
    for pod in order:
        placed = trial.place_hami(pod, policy)
        if isinstance(placed, ContainerFailure):
            return placed
    return None


def distinct_orders(pods: Sequence[PodRequest]) -> int:
    """How many arrival orders differ for placement (identical pods swapped are the same order)."""
    counts: dict[tuple, int] = {}
    for pod in pods:
        counts[pod.shape()] = counts.get(pod.shape(), 0) + 1
    total = math.factorial(len(pods))
    for count in counts.values():
        total //= math.factorial(count)
    return total


def _every_order(pods: Sequence[PodRequest]) -> Iterable[tuple[PodRequest, ...]]:
    """Every distinct arrival order (identical pods keep their relative order)."""
    shapes: dict[tuple, list[PodRequest]] = {}
    for pod in pods:
        shapes.setdefault(pod.shape(), []).append(pod)
    left = {shape: len(group) for shape, group in shapes.items()}
    declared = [pod.shape() for pod in pods]
    order: list[tuple] = []

    def extend() -> Iterable[tuple[PodRequest, ...]]:
        if len(order) == len(pods):
            taken = {shape: 0 for shape in shapes}
            result = []
            for shape in order:
                result.append(shapes[shape][taken[shape]])
                taken[shape] += 1
            yield tuple(result)
            return
        for shape in dict.fromkeys(declared):
            if left[shape]:
                left[shape] -= 1
                order.append(shape)
                yield from extend()
                order.pop()
                left[shape] += 1

    yield from extend()


def arrival_orders(pods: Sequence[PodRequest]) -> Iterable[tuple[PodRequest, ...]]:
    """Every distinct order when there are at most MAX_ORDERS (identical pods are not permuted among
    themselves); above, the declared order, its reverse, and smallest/largest first."""
    if distinct_orders(pods) <= MAX_ORDERS:
        yield from _every_order(pods)
        return
    size = lambda pod: sum(c.nums * (c.memreq or 10**6 * c.mem_percentage) for c in pod.containers)  # noqa: E731
    yield tuple(pods)
    yield tuple(reversed(pods))
    yield tuple(sorted(pods, key=size))
    yield tuple(sorted(pods, key=size, reverse=True))


def cannot_strand(node: Node, pods: Sequence[PodRequest]) -> bool:
    """A proof that no arrival order or card policy strands any of `pods` (so greedy runs are not needed).

    Pod p is stranded only when every card p may use rejects it. Blocking card k takes at least n_k
    card-placements of the other pods: enough slots, memory or cores to leave p too little (1 for a
    whole-card p on an empty card). The others make sum(nums) card-placements in all; if that is fewer
    than the cheapest way to block every card, p always finds a card. Quotas and multi-card pods are
    left to the simulation."""
    if node.quotas or any(len(pod.containers) != 1 or pod.containers[0].nums != 1 for pod in pods):
        return False
    placements = len(pods) - 1  # card-placements of the pods other than p
    # Largest per-placement demand of any pod, wherever it lands.
    containers = {pod.containers[0] for pod in pods}
    max_memory = max((c.memory_on(card) for c in containers for card in node.cards), default=0)
    max_cores = max((c.fit_cores for c in containers), default=0)
    for pod in {pod.shape(): pod for pod in pods}.values():
        container = pod.containers[0]
        needed = 0
        for card, use in zip(node.cards, node.use, strict=True):
            if card_reason(card, use, container, pod, (None, None)) is not None:
                continue  # rejected already: contributes nothing to p's chances
            blockers = [card.split_count - use.slots]
            memory_gap = card.memory_mb - use.memory_mb - container.memory_on(card) + 1
            if max_memory:
                blockers.append(-(-memory_gap // max_memory))
            cores_gap = card.cores - use.cores - container.fit_cores + 1
            if max_cores:
                blockers.append(-(-cores_gap // max_cores))
            if container.fit_cores == 100 and card.cores == 100:
                blockers.append(1)
            if container.fit_cores == 0 and max_cores:
                blockers.append(-(-(card.cores - use.cores) // max_cores))
            needed += max(1, min(blockers))
        if needed == 0 or needed <= placements:
            return False
    return True


def stranded_in_every_order(node: Node, pods: Sequence[PodRequest], policy: str) -> ContainerFailure | None:
    """HAMi's failure in the declared order when every arrival order strands a pod with card policy
    `policy` (each pod's own annotation still wins): then HAMi never places them all, whatever some other
    placement could do. None when some order succeeds, or when there are too many orders to try them all."""
    if distinct_orders(pods) > MAX_ORDERS:
        return None
    declared = simulate(node, pods, policy)
    if declared is None or any(simulate(node, order, policy) is None for order in _every_order(pods)):
        return None
    return declared


def find_stranding(node: Node, pods: Sequence[PodRequest], policies: Sequence[str] = POLICIES) -> Stranding | None:
    """The first arrival order and card policy under which HAMi's greedy placement strands a pod."""
    if cannot_strand(node, pods):
        return None
    for policy in policies:
        for order in arrival_orders(pods):
            failure = simulate(node, order, policy)
            if failure is not None:
                return Stranding(order, policy, failure)
    return None
