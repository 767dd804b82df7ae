"""HAMi v2.8.3's card rules: whether a container fits a card, why not, and how a card scores
(hami/nodes.py walks one node's cards with them, and chooses among the nodes).

Every rule follows HAMi v2.8.3 (pkg/device/nvidia/device.go `Fit`, pkg/scheduler/score.go,
pkg/scheduler/policy/gpu_policy.go; the conformance table in hami/tests/test_conformance.py holds HAMi's own
unit-test vectors):

- a container request carries HAMi's fields as HAMi stores them (`Memreq`, `MemPercentagereq` with
  101 meaning "not given", `Coresreq`), so memory is computed per candidate card, exactly as `Fit` does;
- cards are scored with the request included, in float32 (`ComputeScore`), sorted stably (ascending
  for binpack, descending for spread) and walked from the end (`Fit`);
- per card, in `Fit`'s order: health, type, UUID, time slicing, cores clamped to 100, the namespace
  quota (on *this* card's memory), memory, cores, exclusive use, compute units.

The placement engine's search and arrival-order analysis (placement/) are built on these rules.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

# HAMi reason names (pkg/device/common/common.go).
CARD_NOT_HEALTH = "CardNotHealth"
CARD_TYPE_MISMATCH = "CardTypeMismatch"
CARD_UUID_MISMATCH = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
RESOURCE_QUOTA_NOT_FIT = "ResourceQuotaNotFit"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"

POLICIES = ("spread", "binpack")
NO_PERCENTAGE = 101  # HAMi's MemPercentagereq when gpumem-percentage is not given


@dataclass(frozen=True)
class CardSpec:
    id: str
    type: str
    memory_mb: int
    cores: int = 100
    split_count: int = 10
    healthy: bool = True


@dataclass(frozen=True)
class ContainerRequest:
    """One container's request as HAMi stores it (`ContainerDeviceRequest`, after the webhook)."""

    name: str
    nums: int  # distinct cards
    memreq: int = 0  # MB per card; 0 means "use the percentage"
    mem_percentage: int = 100  # percent of each card's memory; NO_PERCENTAGE (101) when not given
    cores: int = 0  # percent of each card's cores as asked (Fit clamps above 100)

    def memory_on(self, card: CardSpec) -> int:
        """MB this request takes on `card` (device.go `Fit`): Memreq, else a percentage of that card."""
        return self.memory_for(card.memory_mb)

    def memory_for(self, card_mb: int) -> int:
        """MB this request takes on a card of `card_mb` MB."""
        memory = self.memreq if self.memreq > 0 else 0
        if self.mem_percentage != NO_PERCENTAGE and self.memreq == 0:
            memory = card_mb * self.mem_percentage // 100
        return memory

    @property
    def fit_cores(self) -> int:
        return min(self.cores, 100)

    def score_memory(self, card: CardSpec) -> int:
        """MB the card score adds (gpu_policy.go `ComputeScore`: integer pct/100, so <100 % adds 0)."""
        if self.mem_percentage not in (0, NO_PERCENTAGE):
            return card.memory_mb * (self.mem_percentage // 100)
        return self.memreq

    def uses_percentage(self) -> bool:
        return self.memreq == 0 and self.mem_percentage != NO_PERCENTAGE

    def describe(self) -> str:
        if self.uses_percentage():
            memory = "all of each card's memory" if self.mem_percentage == 100 else f"{self.mem_percentage}% of memory"
        else:
            memory = f"{self.memreq} MB"
        cards = f"{self.nums} cards x " if self.nums > 1 else ""
        return f"{cards}{memory}, {self.cores}% cores"


@dataclass(frozen=True)
class PodRequest:
    """One pod (one replica) of a workload. Selectors are None when the annotation is absent."""

    workload: str  # e.g. Pod/gpu-workloads/trainer-1, or Deployment/ns/serve#2
    namespace: str
    containers: tuple[ContainerRequest, ...]
    # HAMi never places init containers (Resourcereqs reads spec.containers only); kept for limits
    # and so the pack can point them out.
    init_containers: tuple[ContainerRequest, ...] = ()
    use_types: tuple[str, ...] | None = None
    nouse_types: tuple[str, ...] | None = None
    use_uuids: tuple[str, ...] | None = None
    nouse_uuids: tuple[str, ...] | None = None
    gpu_policy: str | None = None  # the pod's hami.io/gpu-scheduler-policy annotation
    node_policy: str | None = None  # its hami.io/node-scheduler-policy (hami/nodes.py)

    @cached_property
    def shape(self) -> tuple:
        """Everything placement depends on (the workload name does not); computed once, the engine keys on it
        at every step."""
        return (
            self.namespace,
            self.containers,
            self.use_types,
            self.nouse_types,
            self.use_uuids,
            self.nouse_uuids,
            self.gpu_policy,
            self.node_policy,
        )

    @property
    def selects_uuids(self) -> bool:
        return self.use_uuids is not None or self.nouse_uuids is not None


@dataclass
class CardUse:
    slots: int = 0
    memory_mb: int = 0
    cores: int = 0


@dataclass(frozen=True)
class NamespaceQuota:
    """HAMi's quota of one namespace (`limits.nvidia.com/gpumem|gpucores`); None or 0 = no limit."""

    memory_mb: int | None = None
    cores: int | None = None


def _type_ok(card: CardSpec, pod: PodRequest) -> bool:
    # checkGPUtype: upper-cased substring match; the annotation is split on "," and not trimmed.
    card_type = card.type.upper()
    if pod.use_types is not None and not any(t.upper() in card_type for t in pod.use_types):
        return False
    return pod.nouse_types is None or not any(t.upper() in card_type for t in pod.nouse_types)


def _uuid_ok(card: CardSpec, pod: PodRequest) -> bool:
    # checkUUID: use-gpuuuid wins over nouse-gpuuuid; exact ids.
    if pod.use_uuids is not None:
        return card.id in pod.use_uuids
    if pod.nouse_uuids is not None:
        return card.id not in pod.nouse_uuids
    return True


def card_reason(
    card: CardSpec, use: CardUse, request: ContainerRequest, pod: PodRequest, quota_room: tuple[int | None, int | None]
) -> str | None:
    """Why `card` cannot take `request` now, in HAMi's `Fit` order; None if it can.

    `quota_room` is what the namespace quota still allows for this card (MB, cores), None = no limit."""
    if not card.healthy:
        return CARD_NOT_HEALTH
    if not _type_ok(card, pod):
        return CARD_TYPE_MISMATCH
    if not _uuid_ok(card, pod):
        return CARD_UUID_MISMATCH
    if card.split_count <= use.slots:
        return CARD_TIME_SLICING_EXHAUSTED
    cores = request.fit_cores
    memory = request.memory_on(card)
    memory_room, cores_room = quota_room
    if (memory_room is not None and memory > memory_room) or (cores_room is not None and cores > cores_room):
        return RESOURCE_QUOTA_NOT_FIT
    if card.memory_mb - use.memory_mb < memory:
        return CARD_INSUFFICIENT_MEMORY
    if card.cores - use.cores < cores:
        return CARD_INSUFFICIENT_CORE
    if card.cores == 100 and cores == 100 and use.slots > 0:
        return EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
    if card.cores != 0 and use.cores == card.cores and cores == 0:
        return CARD_COMPUTE_UNITS_EXHAUSTED
    return None


def reason_detail(card: CardSpec, use: CardUse, request: ContainerRequest, reason: str) -> str:
    memory = request.memory_on(card)
    return {
        CARD_NOT_HEALTH: "the card is unhealthy",
        CARD_TYPE_MISMATCH: f"type {card.type} is not selected",
        CARD_UUID_MISMATCH: f"card {card.id} is not selected",
        CARD_TIME_SLICING_EXHAUSTED: f"all {card.split_count} slots in use",
        RESOURCE_QUOTA_NOT_FIT: f"{memory} MB / {request.fit_cores}% cores on this card exceed the namespace quota",
        CARD_INSUFFICIENT_MEMORY: f"asks {memory} MB, {card.memory_mb - use.memory_mb} MB free of {card.memory_mb}",
        CARD_INSUFFICIENT_CORE: f"asks {request.fit_cores}% cores, {card.cores - use.cores}% free",
        EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: f"asks the whole card, {use.slots} already on it",
        CARD_COMPUTE_UNITS_EXHAUSTED: "no cores left for a 0% request",
    }.get(reason, reason)


_F32 = struct.Struct("f")


def _f32(value: float) -> float:
    """Round to float32, as Go does after each float32 operation."""
    return _F32.unpack(_F32.pack(value))[0]


def card_score(card: CardSpec, use: CardUse, requests: Sequence[ContainerRequest]) -> float:
    """HAMi's card score (gpu_policy.go `ComputeScore`), in float32 so that ties are Go's ties."""
    nums = sum(r.nums for r in requests)
    cores = sum(r.cores for r in requests)
    memory = sum(r.score_memory(card) for r in requests)
    used = _f32((nums + use.slots) / card.split_count)
    core = _f32((cores + use.cores) / card.cores)
    mem = _f32((memory + use.memory_mb) / card.memory_mb)
    return _f32(10.0 * _f32(_f32(used + core) + mem))
