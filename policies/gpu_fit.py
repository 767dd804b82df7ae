"""HAMi's card-fit rules, and placement of a tenant's GPU pods on its cards.

Pure logic, no Pulumi: the policy pack and the offline checker both call it. The per-card checks
follow HAMi's `Fit` in order (pkg/device/nvidia/device.go; ../shared/notes/hami.md section 4) and
use its reason names, so a refusal here reads like the FilteringFailed event HAMi would post.

Two questions are answered for a set of pods:
- certain: can any placement hold them all? If not, HAMi will strand at least one, whatever order
  the pods arrive in. Decided by exhaustive search (bounded; see SEARCH_BUDGET).
- advisory: HAMi places pods one at a time, greedily, with its card policy (spread or binpack).
  A set that fits in some placement can still be stranded by an unlucky arrival order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# HAMi reason names (pkg/device/common/common.go).
CARD_TYPE_MISMATCH = "CardTypeMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
RESOURCE_QUOTA_NOT_FIT = "ResourceQuotaNotFit"

POLICIES = ("spread", "binpack")
SEARCH_BUDGET = 200_000  # search steps before the exact answer is given up (then only greedy is reported)
MAX_PERMUTED = 7  # up to this many pods every arrival order is simulated; above, a fixed sample


@dataclass(frozen=True)
class CardSpec:
    id: str
    type: str
    memory_mb: int
    cores: int = 100
    split_count: int = 10


@dataclass(frozen=True)
class ContainerRequest:
    """One container's GPU request, as HAMi normalises it (webhook defaults applied)."""

    name: str
    nums: int  # distinct cards
    memory_mb: int | None  # per card; None means a percentage of each card
    memory_percentage: int  # used when memory_mb is None
    cores: int  # percent of each card, 0..100

    def memory_on(self, card: CardSpec) -> int:
        if self.memory_mb is not None:
            return self.memory_mb
        return card.memory_mb * self.memory_percentage // 100

    def describe(self) -> str:
        memory = f"{self.memory_mb} MB" if self.memory_mb is not None else f"{self.memory_percentage}% of memory"
        cards = f"{self.nums} cards x " if self.nums > 1 else ""
        return f"{cards}{memory}, {self.cores}% cores"


@dataclass(frozen=True)
class PodRequest:
    """One pod (one replica) of a workload."""

    workload: str  # e.g. Pod/gpu-workloads/trainer-1, or Deployment/ns/serve#2
    namespace: str
    containers: tuple[ContainerRequest, ...]
    # HAMi never places init containers (Resourcereqs reads spec.containers only); kept for limits
    # and so the pack can point them out.
    init_containers: tuple[ContainerRequest, ...] = ()
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()


@dataclass
class CardUse:
    slots: int = 0
    memory_mb: int = 0
    cores: int = 0


@dataclass(frozen=True)
class Rejection:
    card: CardSpec
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.card.id} ({self.card.type}): {self.reason} ({self.detail})"


def card_rejection(card: CardSpec, use: CardUse, request: ContainerRequest, pod: PodRequest) -> Rejection | None:
    """Why `card` cannot take `request` now, checked in HAMi's order; None if it can."""
    card_type = card.type.lower()
    if pod.use_types and not any(t.lower() in card_type for t in pod.use_types):
        return Rejection(card, CARD_TYPE_MISMATCH, f"pod asks for type {','.join(pod.use_types)}")
    if pod.nouse_types and any(t.lower() in card_type for t in pod.nouse_types):
        return Rejection(card, CARD_TYPE_MISMATCH, f"pod excludes type {','.join(pod.nouse_types)}")
    if use.slots >= card.split_count:
        return Rejection(card, CARD_TIME_SLICING_EXHAUSTED, f"all {card.split_count} slots in use")
    memory = request.memory_on(card)
    free_memory = card.memory_mb - use.memory_mb
    if memory > free_memory:
        return Rejection(card, CARD_INSUFFICIENT_MEMORY, f"asks {memory} MB, {free_memory} MB free of {card.memory_mb}")
    free_cores = card.cores - use.cores
    if request.cores > free_cores:
        return Rejection(card, CARD_INSUFFICIENT_CORE, f"asks {request.cores}% cores, {free_cores}% free")
    if card.cores == 100 and request.cores == 100 and use.slots > 0:
        return Rejection(card, EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT, f"asks the whole card, {use.slots} already on it")
    if request.cores == 0 and use.cores >= card.cores:
        return Rejection(card, CARD_COMPUTE_UNITS_EXHAUSTED, "no cores left for a 0% request")
    return None


def _score(card: CardSpec, use: CardUse) -> float:
    # HAMi's device score (gpu_policy.go): how used a card already is.
    return use.slots / card.split_count + use.cores / card.cores + use.memory_mb / card.memory_mb


@dataclass
class ContainerFailure:
    pod: PodRequest
    container: ContainerRequest
    rejections: list[Rejection]
    shortfall: str = ""  # set when some cards fit but fewer than the container asks for

    @property
    def reason(self) -> str:
        if self.shortfall:
            return ALLOCATED_CARDS_INSUFFICIENT_REQUEST
        reasons = {rejection.reason for rejection in self.rejections}
        return reasons.pop() if len(reasons) == 1 else ", ".join(sorted(reasons))

    def explain(self) -> str:
        what = f"container {self.container.name} asks {self.container.describe()}"
        if self.shortfall:
            return f"{what}: {self.shortfall}"
        return f"{what}; no card fits: " + "; ".join(str(rejection) for rejection in self.rejections)


class Node:
    """The cards of one tenant node and what is allocated on them."""

    def __init__(self, cards: Sequence[CardSpec]) -> None:
        self.cards = list(cards)
        self.use = [CardUse() for _ in self.cards]

    def copy(self) -> Node:
        other = Node(self.cards)
        other.use = [CardUse(u.slots, u.memory_mb, u.cores) for u in self.use]
        return other

    def fitting(self, request: ContainerRequest, pod: PodRequest) -> tuple[list[int], list[Rejection]]:
        fits, rejections = [], []
        for index, card in enumerate(self.cards):
            rejection = card_rejection(card, self.use[index], request, pod)
            if rejection is None:
                fits.append(index)
            else:
                rejections.append(rejection)
        return fits, rejections

    def allocate(self, index: int, request: ContainerRequest, sign: int = 1) -> None:
        use = self.use[index]
        use.slots += sign
        use.memory_mb += sign * request.memory_on(self.cards[index])
        use.cores += sign * request.cores

    def place_greedy(self, pod: PodRequest, policy: str) -> ContainerFailure | None:
        """Place one pod the way HAMi would (containers in order, cards by policy); commit on success."""
        trial = self.copy()
        for container in pod.containers:
            chosen = trial._choose(container, pod, policy)
            if isinstance(chosen, ContainerFailure):
                return chosen
            for index in chosen:
                trial.allocate(index, container)
        self.use = trial.use
        return None

    def _choose(self, container: ContainerRequest, pod: PodRequest, policy: str) -> list[int] | ContainerFailure:
        fits, rejections = self.fitting(container, pod)
        if container.nums > len(self.cards):
            return ContainerFailure(
                pod, container, rejections, f"asks {container.nums} cards, the node has {len(self.cards)}"
            )
        if len(fits) < container.nums:
            if fits:
                return ContainerFailure(
                    pod,
                    container,
                    rejections,
                    f"only {len(fits)} of the {container.nums} cards it needs fit: "
                    + "; ".join(str(r) for r in rejections),
                )
            return ContainerFailure(pod, container, rejections)
        ranked = sorted(fits, key=lambda i: (_score(self.cards[i], self.use[i]), i), reverse=policy == "binpack")
        return ranked[: container.nums]


def _interchangeable(card: CardSpec) -> CardSpec:
    """A card without its id: two cards equal here are interchangeable for fitting."""
    return CardSpec("", card.type, card.memory_mb, card.cores, card.split_count)


def _canonical(node: Node) -> tuple:
    """Usage state with identical cards made interchangeable (they are, for fitting)."""
    groups: dict[CardSpec, list[tuple[int, int, int]]] = {}
    for card, use in zip(node.cards, node.use, strict=True):
        groups.setdefault(_interchangeable(card), []).append((use.slots, use.memory_mb, use.cores))
    return tuple(sorted((repr(key), tuple(sorted(values))) for key, values in groups.items()))


@dataclass
class Search:
    steps: int = 0
    exhausted: bool = False
    seen: set = field(default_factory=set)


@dataclass(frozen=True)
class _Item:
    """One step of the search: place one container of a pod."""

    pod: PodRequest
    container: ContainerRequest


def _items(pods: Sequence[PodRequest]) -> list[_Item]:
    return [_Item(pod, container) for pod in pods for container in pod.containers]


def _demand(items: list[_Item], cards: Sequence[CardSpec]) -> list[tuple[int, int, int]]:
    """Suffix sums of (slots, cores, memory lower bound) still to place from each item on."""
    smallest = min(card.memory_mb for card in cards)
    suffix = [(0, 0, 0)]
    for item in reversed(items):
        slots, cores, memory = suffix[-1]
        container = item.container
        memory_each = (
            container.memory_mb if container.memory_mb is not None else smallest * container.memory_percentage // 100
        )
        slots += container.nums
        cores += container.nums * container.cores
        memory += container.nums * memory_each
        suffix.append((slots, cores, memory))
    return list(reversed(suffix))


def _room(node: Node) -> tuple[int, int, int]:
    slots = sum(max(0, card.split_count - use.slots) for card, use in zip(node.cards, node.use, strict=True))
    cores = sum(card.cores - use.cores for card, use in zip(node.cards, node.use, strict=True))
    memory = sum(card.memory_mb - use.memory_mb for card, use in zip(node.cards, node.use, strict=True))
    return slots, cores, memory


def find_placement(cards: Sequence[CardSpec], pods: Sequence[PodRequest], budget: int = SEARCH_BUDGET) -> bool | None:
    """True if some placement holds every pod, False if none does, None if the search budget ran out."""
    return search_placement(cards, pods, budget)[0]


def _search_order(pod: PodRequest) -> tuple[bool, int, int]:
    """Pods asking 0 % cores first: HAMi refuses them on a card whose cores are all booked *by then*
    (CardComputeUnitsExhausted), so they fit in some arrival order iff they fit placed before the
    others. Then the largest first, which finds a placement fast when there is one."""
    memory = sum(
        c.nums * (c.memory_mb if c.memory_mb is not None else 10**9 * c.memory_percentage) for c in pod.containers
    )
    cores = sum(c.nums * c.cores for c in pod.containers)
    return (cores > 0, -memory, -cores)


def search_placement(
    cards: Sequence[CardSpec], pods: Sequence[PodRequest], budget: int = SEARCH_BUDGET
) -> tuple[bool | None, Node | None]:
    """The verdict of find_placement, and on True the node with that placement allocated.

    Exhaustive depth-first search over which cards each container takes (pods in `_search_order`),
    pruned by the aggregate room left on the cards and by treating identical cards in identical
    states as one."""
    node = Node(cards)
    if not pods:
        return True, node
    if not cards:
        return False, None
    items = _items(sorted(pods, key=_search_order))
    search = Search()
    if _search(node, items, _demand(items, cards), 0, search, budget):
        return True, node
    return (None if search.exhausted else False), None


def _search(
    node: Node, items: list[_Item], demand: list[tuple[int, int, int]], index: int, search: Search, budget: int
) -> bool:
    if index == len(items):
        return True
    search.steps += 1
    if search.steps > budget:
        search.exhausted = True
        return False
    room = _room(node)
    if any(need > free for need, free in zip(demand[index], room, strict=True)):
        return False
    key = (index, _canonical(node))
    if key in search.seen:
        return False
    item = items[index]
    container = item.container
    fits, _ = node.fitting(container, item.pod)
    tried: set = set()
    for combination in itertools.combinations(fits, container.nums):
        signature = tuple(sorted(repr((_interchangeable(node.cards[i]), node.use[i])) for i in combination))
        if signature in tried:  # identical cards in identical states: one try is enough
            continue
        tried.add(signature)
        for card_index in combination:
            node.allocate(card_index, container)
        if _search(node, items, demand, index + 1, search, budget):
            return True
        for card_index in combination:
            node.allocate(card_index, container, sign=-1)
        if search.exhausted:
            return False
    search.seen.add(key)
    return False


@dataclass
class Stranding:
    """A greedy run that left a pod unplaced."""

    order: tuple[PodRequest, ...]
    policy: str
    failure: ContainerFailure


def simulate(cards: Sequence[CardSpec], order: Iterable[PodRequest], policy: str) -> ContainerFailure | None:
    node = Node(cards)
    for pod in order:
        failure = node.place_greedy(pod, policy)
        if failure is not None:
            return failure
    return None


def arrival_orders(pods: Sequence[PodRequest]) -> Iterable[tuple[PodRequest, ...]]:
    if len(pods) <= MAX_PERMUTED:
        yield from itertools.permutations(pods)
        return
    yield tuple(pods)
    yield tuple(reversed(pods))
    size = lambda pod: sum(c.memory_mb or 0 for c in pod.containers)  # noqa: E731
    yield tuple(sorted(pods, key=size))
    yield tuple(sorted(pods, key=size, reverse=True))


def find_stranding(
    cards: Sequence[CardSpec], pods: Sequence[PodRequest], policies: Sequence[str] = POLICIES
) -> Stranding | None:
    """The first arrival order and card policy under which HAMi's greedy placement strands a pod."""
    for policy in policies:
        for order in arrival_orders(pods):
            failure = simulate(cards, order, policy)
            if failure is not None:
                return Stranding(order, policy, failure)
    return None


def first_unplaceable(cards: Sequence[CardSpec], pods: Sequence[PodRequest]) -> tuple[int, ContainerFailure] | None:
    """The first pod (declared order) that no placement of it and the pods before it can hold, with why
    it fails next to a placement of those pods. None if all fit, or if the search could not decide.

    Walks the declared order keeping one placement of the pods so far; only when the next pod does not
    fit next to it is the exhaustive search asked whether another placement would make room."""
    if find_placement(cards, pods) is not False:
        return None  # all fit, or undecidable
    node = Node(cards)
    for index, pod in enumerate(pods):
        for policy in POLICIES:
            trial = node.copy()
            if trial.place_greedy(pod, policy) is None:
                node = trial
                break
        else:
            verdict, found = search_placement(cards, pods[: index + 1])
            if verdict is None:
                return None
            if verdict is False:
                # No placement of the earlier pods leaves room for this one, so this one shows why.
                failure = node.place_greedy(pod, "spread")
                assert failure is not None, "exhaustive search and greedy placement disagree"
                return index, failure
            assert found is not None
            node = found
    return None  # pragma: no cover - the whole set was proven not to fit
