"""The refusals decided by one pod alone, from the tenant's inventory: what the pack and the
in-tenant admission policy (model/admission_policy.py) must agree on, question for question and
in the same order (kubectl shows only the admission policy's first failing validation):

- NodeInsufficientDevice: a container asks for more cards than the node has (with several GPU nodes,
  than the node with the most cards has: a rule never refuses what some node can hold);
- CardTypeMismatch / CardUuidMismatch: the pod's selectors leave no card at all (a type selector with
  non-ASCII letters is left to HAMi: it upper-cases with Unicode rules, the admission CEL cannot);
- CardInsufficientMemory: a container asks more memory than the tenant's largest card holds
  (including a percentage above 100);
- InitContainerGpuRequest: an init container asks for a GPU resource (HAMi places app containers only);
- PodGpuLimitExceeded: the pod's app containers together exceed the tenant's per-pod `gpus`,
  `gpumem` (a percentage counted on the tenant's largest card) or `gpucores`.

Two advisories (the admission policy warns, the pack notes): cores above 100 (HAMi clamps them to
100) and a memory percentage of 0 (HAMi gives the container 0 MB).
"""

from __future__ import annotations

from dataclasses import dataclass

from hami.cards import (
    CARD_INSUFFICIENT_MEMORY,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    NODE_INSUFFICIENT_DEVICE,
    ContainerRequest,
    PodRequest,
    _type_ok,
    _uuid_ok,
)
from placement.inventory import TenantInventory

POD_LIMIT_EXCEEDED = "PodGpuLimitExceeded"
INIT_CONTAINER_GPU = "InitContainerGpuRequest"
CORES_CLAMPED = "CoresAbove100"
ZERO_MEMORY = "ZeroMemoryPercentage"


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str
    cards: str | None = None  # the cards concerned, when the refusal is about them


def pod_memory_mb(containers: tuple[ContainerRequest, ...], largest_mb: int) -> int:
    """What a pod's containers may take in all: a percentage counted on the largest card."""
    return sum(c.nums * c.memory_for(largest_mb) for c in containers)


def _non_ascii_type_selector(pod: PodRequest) -> bool:
    """HAMi upper-cases type selectors with Go's Unicode rules; the admission policy's CEL upperAscii()
    cannot, so a selector with other letters is left to HAMi (and to the placement check)."""
    return any(not value.isascii() for values in (pod.use_types, pod.nouse_types) if values for value in values)


def per_pod_refusals(inventory: TenantInventory, pod: PodRequest) -> list[Refusal]:
    """In the admission policy's order, which is HAMi's: cards the node has (fitInDevices), then per card
    type, UUID and memory (device.go Fit); gpulab's own rules after. The first is what kubectl shows."""
    cards = inventory.cards
    largest = max((card.memory_mb for card in cards), default=0)
    refusals = []
    most = max((len(on_node) for _, on_node in inventory.node_cards()), default=0)
    nodes = "the node has" if not inventory.nodes else f"the largest of its {len(inventory.nodes)} GPU nodes has"
    for c in pod.containers:
        if c.nums > most:
            refusals.append(
                Refusal(NODE_INSUFFICIENT_DEVICE, f"container {c.name} asks {c.nums} cards, {nodes} {most}")
            )
    if cards and pod.containers and not _non_ascii_type_selector(pod) and not any(_type_ok(c, pod) for c in cards):
        refusals.append(Refusal(CARD_TYPE_MISMATCH, "no card of the tenant matches the pod's GPU type selector"))
    if cards and pod.containers and not any(_uuid_ok(card, pod) for card in cards):
        refusals.append(Refusal(CARD_UUID_MISMATCH, "no card of the tenant matches the pod's card UUID selector"))
    for c in pod.containers:
        memory = c.memory_for(largest)
        if cards and memory > largest:
            listed = ", ".join(f"{card.id} ({card.type}, {card.memory_mb} MB)" for card in cards)
            refusals.append(
                Refusal(
                    CARD_INSUFFICIENT_MEMORY,
                    f"container {c.name} asks {memory} MB per card; the largest card has {largest} MB: {listed}",
                    ", ".join(card.id for card in cards),
                )
            )
    for init in pod.init_containers:
        refusals.append(
            Refusal(
                INIT_CONTAINER_GPU,
                f"init container {init.name} asks {init.describe()}, but HAMi assigns cards to app containers "
                "only; move the GPU work into an app container",
            )
        )
    asked = {
        "gpus": sum(c.nums for c in pod.containers),
        "gpumem": pod_memory_mb(pod.containers, largest),
        "gpucores": sum(c.nums * c.fit_cores for c in pod.containers),
    }
    for key, unit in (("gpus", " GPUs"), ("gpumem", " MB"), ("gpucores", "% cores")):
        limit = getattr(inventory.limits, key)
        if limit is not None and asked[key] > limit:
            refusals.append(
                Refusal(
                    POD_LIMIT_EXCEEDED,
                    f"each pod asks {asked[key]}{unit} in total; tenant {inventory.name} allows {limit}{unit} per pod",
                )
            )
    return refusals


def per_pod_advisories(pod: PodRequest) -> list[Refusal]:
    advisories = []
    for c in pod.containers:
        if c.cores > 100:
            advisories.append(
                Refusal(CORES_CLAMPED, f"container {c.name} asks {c.cores}% cores; HAMi clamps it to 100, write 100")
            )
        if c.memreq == 0 and c.mem_percentage == 0:
            advisories.append(
                Refusal(ZERO_MEMORY, f"container {c.name} asks 0% of the card's memory: HAMi gives it 0 MB")
            )
    return advisories
