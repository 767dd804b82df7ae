"""HAMi v2.8.3's card rules: whether a container fits a card, why not, and which cards it takes.

Every rule follows HAMi v2.8.3 (pkg/device/nvidia/device.go `Fit`, pkg/scheduler/score.go,
pkg/scheduler/policy/gpu_policy.go; the conformance table in hami/tests/test_conformance.py holds HAMi's own
unit-test vectors):

- a container request carries HAMi's fields as HAMi stores them (`Memreq`, `MemPercentagereq` with
  101 meaning "not given", `Coresreq`), so memory is computed per candidate card, exactly as `Fit` does;
- per container, asking for more cards than the node has is NodeInsufficientDevice (`fitInDevices`);
- cards are scored with the request included, in float32 (`ComputeScore`), sorted stably (ascending
  for binpack, descending for spread) and walked from the end (`Fit`);
- per card, in `Fit`'s order: health, type, UUID, time slicing, cores clamped to 100, the namespace
  quota (on *this* card's memory), memory, cores, exclusive use, compute units.

The policy pack's placement search and arrival-order analysis (policies/) are built on these rules.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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

    def shape(self) -> tuple:
        """Everything placement depends on (the workload name does not)."""
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


@dataclass
class ContainerFailure:
    """A container no card takes: HAMi's reason counts (`GenReason`) and a line per card."""

    pod: PodRequest
    container: ContainerRequest
    reasons: dict[str, int]
    lines: list[str]
    cards: tuple[str, ...]

    @property
    def reason(self) -> str:
        """Every reason HAMi names (GenReason: one FilteringFailed reason per key), the cards' own first:
        a partial multi-card fit adds AllocatedCardsInsufficientRequest to what stopped the other cards."""
        cards = sorted(r for r in self.reasons if r != ALLOCATED_CARDS_INSUFFICIENT_REQUEST)
        partial = [ALLOCATED_CARDS_INSUFFICIENT_REQUEST] if ALLOCATED_CARDS_INSUFFICIENT_REQUEST in self.reasons else []
        return ", ".join(cards + partial)

    def explain(self) -> str:
        what = f"container {self.container.name} asks {self.container.describe()}"
        return f"{what}; " + "; ".join(self.lines)


class Node:
    """The cards of one tenant node, what is allocated on them, and the namespaces' quota use."""

    def __init__(
        self,
        cards: Sequence[CardSpec],
        use: Sequence[CardUse] | None = None,
        quotas: Mapping[str, NamespaceQuota] | None = None,
        namespace_use: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        self.cards = list(cards)
        self.use = [CardUse(u.slots, u.memory_mb, u.cores) for u in use] if use else [CardUse() for _ in cards]
        self.quotas = dict(quotas or {})
        self.namespace_use = {ns: list(v) for ns, v in (namespace_use or {}).items()}

    def copy(self) -> Node:
        return Node(self.cards, self.use, self.quotas, {ns: tuple(v) for ns, v in self.namespace_use.items()})

    def quota_room(self, namespace: str, pending_mb: int = 0, pending_cores: int = 0) -> tuple[int | None, int | None]:
        """What HAMi's quota still allows in `namespace` (FitQuota: a limit of 0 is no limit)."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return None, None
        used_mb, used_cores = self.namespace_use.get(namespace, (0, 0))
        memory = quota.memory_mb - used_mb - pending_mb if quota.memory_mb else None
        cores = quota.cores - used_cores - pending_cores if quota.cores else None
        return memory, cores

    def reason(self, index: int, request: ContainerRequest, pod: PodRequest, room: tuple) -> str | None:
        return card_reason(self.cards[index], self.use[index], request, pod, room)

    def allocate(self, index: int, request: ContainerRequest, namespace: str, sign: int = 1) -> None:
        use = self.use[index]
        memory = request.memory_on(self.cards[index])
        use.slots += sign
        use.memory_mb += sign * memory
        use.cores += sign * request.fit_cores
        if namespace in self.quotas:
            totals = self.namespace_use.setdefault(namespace, [0, 0])
            totals[0] += sign * memory
            totals[1] += sign * request.fit_cores

    def place_hami(self, pod: PodRequest, policy: str) -> ContainerFailure | list[list[int]]:
        """Place one pod exactly as HAMi's Filter would; commit on success and return each container's cards."""
        policy = pod.gpu_policy if pod.gpu_policy in POLICIES else policy
        order = list(range(len(self.cards)))  # node order, rebuilt for every pod (getNodesUsage)
        placed: list[tuple[int, ContainerRequest]] = []
        chosen_all: list[list[int]] = []
        for container in pod.containers:
            if container.nums > len(self.cards):
                self._undo(placed, pod.namespace)
                line = f"asks {container.nums} cards, the node has {len(self.cards)}"
                return ContainerFailure(pod, container, {NODE_INSUFFICIENT_DEVICE: 1}, [line], ())
            scores = [card_score(card, use, (container,)) for card, use in zip(self.cards, self.use, strict=True)]
            order = rank(order, scores, policy)
            chosen, reasons, rejected = self.walk(order, container, pod)
            if len(chosen) < container.nums:
                # Each card's line tells the use HAMi's check saw: the pod's earlier containers included.
                lines = [
                    f"{self._card(i)}: {why} ({reason_detail(self.cards[i], self.use[i], container, why)})"
                    for i, why in rejected
                ]
                self._undo(placed, pod.namespace)
                if chosen:
                    lines.insert(0, f"only {len(chosen)} of the {container.nums} cards it needs fit")
                return ContainerFailure(pod, container, reasons, lines, tuple(self.cards[i].id for i, _ in rejected))
            for index in chosen:
                self.allocate(index, container, pod.namespace)
                placed.append((index, container))
            chosen_all.append(chosen)
        return chosen_all

    def walk(
        self, order: Sequence[int], container: ContainerRequest, pod: PodRequest
    ) -> tuple[list[int], dict[str, int], list[tuple[int, str]]]:
        """HAMi's `Fit`: walk `order` from the end, take the first `nums` cards that pass every check.
        Returns the cards taken, the reason counts (as `GenReason` reports them) and each rejection."""
        chosen: list[int] = []
        pending = [0, 0]
        reasons: dict[str, int] = {}
        rejected: list[tuple[int, str]] = []
        for index in reversed(order):
            room = self.quota_room(pod.namespace, pending[0], pending[1])
            why = self.reason(index, container, pod, room)
            if why is not None:
                reasons[why] = reasons.get(why, 0) + 1
                rejected.append((index, why))
                continue
            chosen.append(index)
            pending[0] += container.memory_on(self.cards[index])
            pending[1] += container.fit_cores
            if len(chosen) == container.nums:
                return chosen, {}, rejected
        if chosen:
            reasons[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = 1  # len(tmpDevs): one device type
        return chosen, reasons, rejected

    def _card(self, index: int) -> str:
        return f"{self.cards[index].id} ({self.cards[index].type})"

    def _undo(self, placed: list[tuple[int, ContainerRequest]], namespace: str) -> None:
        for index, container in reversed(placed):
            self.allocate(index, container, namespace, sign=-1)

    def place_first_fit(self, pod: PodRequest) -> bool:
        """Some valid placement of one pod (HAMi's per-card rules, first cards that pass); commit on success.
        Proves that a placement exists; it is not HAMi's choice of cards."""
        placed: list[tuple[int, ContainerRequest]] = []
        for container in pod.containers:
            # Full cards (CardTimeSlicingExhausted) are left out cheaply: they are the common case.
            open_cards = [
                i
                for i, (card, use) in enumerate(zip(self.cards, self.use, strict=True))
                if use.slots < card.split_count
            ]
            chosen, _, _ = self.walk(open_cards[::-1], container, pod)  # walk goes from the end
            if len(chosen) < container.nums:
                self._undo(placed, pod.namespace)
                return False
            for index in chosen:
                self.allocate(index, container, pod.namespace)
                placed.append((index, container))
        return True


def rank(order: Sequence[int], scores: Sequence[float], policy: str) -> list[int]:
    """HAMi's card sort (gpu_policy.go `Less`): binpack ascending, spread descending, stable. Go's
    sort.Sort is an insertion sort (stable) up to 12 elements; above 12 cards Go may order ties
    otherwise, which this does not model."""
    return sorted(order, key=scores.__getitem__, reverse=policy != "binpack")


def quota_allows(node: Node, pod: PodRequest, container: ContainerRequest, cards: Sequence[int]) -> bool:
    """HAMi's namespace quota for one container on the cards it would take: its memory on those cards and
    its cores times their count within the room the namespace has left (pkg/device/quota.go, FitQuota)."""
    memory = sum(container.memory_on(node.cards[i]) for i in cards)
    room_mb, room_cores = node.quota_room(pod.namespace)
    if room_mb is not None and memory > room_mb:
        return False
    return room_cores is None or container.fit_cores * len(cards) <= room_cores
