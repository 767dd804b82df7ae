"""The certain verdicts: can any placement hold a set of pods on a tenant's GPU nodes (one node is a
cluster of one)? When none can, HAMi strands at least one pod whatever the order. Exhaustive search
over hami/cards.py's card rules, each pod on one node, the namespace quota counted across the nodes;
bounded by a step budget, and running out is reported, never hidden.

The questions asked of it, in order: which pods fit nowhere even alone (`alone_verdicts`), whether the
others fit together (`search_placement`), and if not, which pod first does not (`first_unplaceable`); each
refusal carries HAMi's own walk for that pod (`hamis_refusal`).

Judged with the tenant's release (`cluster.rules`). Under v2.10.0 a pod's init containers are placed too, on the
pod's node: each on the node as it was before the pod (score.go `allocateInitContainers` 226-254), its quota
counting the pod's earlier init containers at their peak (device.go `fitQuota` 666-692), and the pod then holds
per card the larger of their peak and its app containers' sum (initContainer.go `CollapseInitContainerUsage`
36-113), as hami/nodes.py `Node.place_hami` does; the search tries every choice of cards for them as for app
containers. Only the cards a request's type looks up are tried (score.go `getNodeResources` 43-52)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from hami.cards import ContainerRequest, PodRequest, resolve_request
from hami.cluster import Cluster, NodeFailure, QuotaInUse, counted_init_containers, pod_kind
from hami.nodes import Entry, Node, collapsed_use, quota_allows
from hami.webhook import quota_refusal
from placement.verdicts import Question, Refused, Undecided, Unplaceable
from placement.workloads import workload_of

SEARCH_BUDGET = 20_000  # search steps per tenant evaluation before the exact answer is given up (and reported)


@dataclass
class Budget:
    """Search steps left; one budget is shared by every search of one evaluation, so that the whole
    evaluation is bounded, not each search."""

    left: int = SEARCH_BUDGET


class Fit(Enum):
    """The search's answer on a set of pods."""

    FITS = "fits"  # some placement holds every pod
    NO_PLACEMENT = "no placement"  # none does: HAMi strands one whatever the order
    UNDECIDED = "undecided"  # the step budget ran out first


@dataclass
class _Search:
    exhausted: bool = False
    seen: set = field(default_factory=set)


class _Item(NamedTuple):
    """One container to place: a pod's first container also picks the pod's node. Under v2.10.0 a pod's init
    containers come first (`init`); the pod's `last` item completes it (its init peak is then held)."""

    pod: PodRequest
    container: ContainerRequest
    picks_node: bool
    init: bool = False
    last: bool = True


_Spot = tuple[int, tuple[int, ...]]  # where a container goes: (node, its card indexes there)


@dataclass
class _Frame:
    """One item being tried on the search's stack."""

    index: int  # of the item
    key: tuple  # the state it is tried from (remembered as failing once every choice failed)
    choices: Iterator[_Spot]
    taken: _Spot | None = None  # allocated on the cluster until the next choice is tried


def _search_order(pod: PodRequest) -> tuple[bool, int, int]:
    """Pods asking 0 % cores first: HAMi refuses them on a card whose cores are all booked *by then*
    (CardComputeUnitsExhausted), so they fit in some arrival order iff they fit placed before the
    others. Then the largest first, which finds a placement fast when there is one."""
    memory = sum(c.nums * (c.memreq if not c.uses_percentage() else 10**9 * c.mem_percentage) for c in pod.containers)
    cores = sum(c.nums * c.fit_cores for c in pod.containers)
    return (cores > 0, -memory, -cores)


class _Searcher:
    """Depth-first over (pod, container) items: a pod's first container picks the node (nodes equal in
    cards and use are tried once), every container its cards on that node (identical cards in identical
    states tried once). Pruned by the room left on all nodes together against what the items left ask."""

    def __init__(self, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget) -> None:
        self.cluster = cluster
        self.rules = cluster.rules
        self.items: list[_Item] = []
        for pod in sorted(pods, key=_search_order):
            sequence = [(c, True) for c in counted_init_containers(pod, self.rules)] + [
                (c, False) for c in pod.containers
            ]
            for number, (container, init) in enumerate(sequence):
                self.items.append(_Item(pod, container, number == 0, init, number == len(sequence) - 1))
        # The pod being placed: its init containers' cards (on its node, not allocated until the pod is complete)
        # and its app containers' cards; for each pod completed, those and the extra use its init peak added.
        self.inits: list[Entry] = []
        self.apps: list[tuple[int, ContainerRequest]] = []
        self.done: list[tuple[list[Entry], list[tuple[int, ContainerRequest]], dict]] = []
        self.budget = budget
        self.search = _Search()
        by_id = any(pod.selects_uuids for pod in pods)
        # Cards equal here are interchangeable for every rule (UUID selectors make every card distinct).
        self.groups = [
            [(c.id if by_id else "", c.type, c.memory_mb, c.cores, c.split_count, c.healthy) for c in node.cards]
            for node in cluster.nodes
        ]
        # What the items from each index on ask at least: slots, cores, memory (on the smallest card), as the
        # release reads the requests. An init container adds nothing here: what the pod holds is at least its app
        # containers' sum on every card.
        smallest = min(card.memory_mb for node in cluster.nodes for card in node.cards)
        self.demand = [(0, 0, 0)]
        for item in reversed(self.items):
            slots, cores, memory = self.demand[-1]
            if item.init:
                self.demand.append((slots, cores, memory))
                continue
            container = resolve_request(item.container, self.rules)
            each = container.memory_for(smallest)
            self.demand.append(
                (slots + container.nums, cores + container.nums * container.fit_cores, memory + container.nums * each)
            )
        self.demand.reverse()

    def run(self) -> Fit:
        if self._walk():
            return Fit.FITS
        return Fit.UNDECIDED if self.search.exhausted else Fit.NO_PLACEMENT

    def _node_state(self, index: int) -> tuple:
        node = self.cluster.nodes[index]
        uses = ((u.slots, u.memory_mb, u.cores) for u in node.use)
        return tuple(sorted(zip(self.groups[index], uses, strict=True)))

    def _state(self, index: int, current: int) -> tuple:
        states = [self._node_state(i) for i in range(len(self.cluster.nodes))]
        pinned = states[current] if current >= 0 and not self.items[index].picks_node else None
        key: tuple = (
            index,
            pinned,
            tuple(sorted(states)),
            tuple(sorted((ns, tuple(v)) for ns, v in self.cluster.namespace_use.items())),
        )
        if self.inits and pinned is not None:  # the pod's own cards matter, card by card, until it is complete
            node = self.cluster.nodes[current]
            uses = tuple((u.slots, u.memory_mb, u.cores) for u in node.use)
            key += (uses, tuple(self.inits), tuple((i, c) for i, c in self.apps))
        return key

    def _room_left(self, index: int) -> bool:
        """Whether the room left on all nodes together can hold what the items from `index` on ask."""
        slots_free = cores_free = memory_free = 0
        for node in self.cluster.nodes:
            for card, use in zip(node.cards, node.use, strict=True):
                if card.healthy:  # a card used beyond its size (a declared usage may say so) has no room
                    slots_free += max(0, card.split_count - use.slots)
                    cores_free += max(0, card.cores - use.cores)
                    memory_free += max(0, card.memory_mb - use.memory_mb)
        slots, cores, memory = self.demand[index]
        return slots <= slots_free and cores <= cores_free and memory <= memory_free

    def _choices(self, index: int, current: int) -> Iterator[_Spot]:
        """Where item `index` may go, in the order tried: (node, cards). Computed lazily: each choice is
        drawn when the ones before it have been tried and taken back, so it sees the state they left."""
        pod, container, picks_node, init, _ = self.items[index]
        request = resolve_request(container, self.rules)
        if picks_node:  # the pod's first container picks the node; nodes equal in cards and use once
            tried_nodes: set = set()
            targets = []
            for i in range(len(self.cluster.nodes)):
                signature = self._node_state(i)
                if signature not in tried_nodes:
                    tried_nodes.add(signature)
                    targets.append(i)
        else:
            targets = [current]
        for target in targets:
            node = self.cluster.nodes[target]
            looked_up = node.typed(request)  # every card, but for v2.10.0's type lookup
            if container.nums > len(looked_up):
                continue  # NodeInsufficientDevice there
            if init:  # on the node before the pod; the quota counts the pod's earlier init containers at their peak
                fits = [
                    i
                    for i in looked_up
                    if node.reason(i, container, pod, self._init_room(node, pod, request, i)) is None
                ]
            else:
                room = node.quota_room(pod.namespace)
                fits = [i for i in looked_up if node.reason(i, container, pod, room) is None]
            tried: set = set()
            for combination in itertools.combinations(fits, container.nums):
                signature = tuple(
                    sorted((self.groups[target][i], repr(node.use[i]), self._pending_on(i)) for i in combination)
                )
                if signature in tried:  # identical cards in identical states: one try is enough
                    continue
                tried.add(signature)
                if container.nums > 1:
                    if init and not self._init_quota_allows(node, pod, request, combination):
                        continue
                    if not init and not quota_allows(node, pod, container, combination):
                        continue
                yield target, combination

    def _pending_on(self, card: int) -> tuple:
        """What the pod being placed holds on `card` of its node so far beyond its allocation: its init
        containers' entries there (they count per card at their peak once the pod is complete)."""
        return tuple(entry for entry in self.inits if entry[1] == card)

    def _init_entries(self, node: Node, request: ContainerRequest, cards: Sequence[int]) -> list[Entry]:
        return [(True, i, request.memory_on(node.cards[i]), request.fit_cores) for i in cards]

    def _init_room(self, node: Node, pod: PodRequest, request: ContainerRequest, card: int) -> tuple:
        """The quota room an init container's candidate card sees (hami/nodes.py `Node._init_room`)."""
        return node._init_room(pod.namespace, self.inits, [], request, card)

    def _init_quota_allows(self, node: Node, pod: PodRequest, request: ContainerRequest, cards: Sequence[int]) -> bool:
        """The namespace quota for an init container on all of `cards`: the pod's init containers at their peak per
        card within the room the namespace has left (device.go `fitQuota` over CollapseInitContainerUsage)."""
        held = collapsed_use([*self.inits, *self._init_entries(node, request, cards)]).values()
        room_mb, room_cores = node.quota_room(pod.namespace)
        if room_mb is not None and sum(h[1] for h in held) > room_mb:
            return False
        return room_cores is None or sum(h[2] for h in held) <= room_cores

    def _take(self, index: int, choice: _Spot, sign: int) -> None:
        """Place item `index` on `choice` (`sign` -1: take it back). An init container's cards are noted, not
        allocated; the pod's last item, once placed, adds what its init peak holds beyond its app containers."""
        item = self.items[index]
        target, cards = choice
        node = self.cluster.nodes[target]
        namespace = item.pod.namespace
        if sign < 0 and item.last:
            self.inits, self.apps, extra = self.done.pop()
            node.add_use(namespace, extra, sign=-1)
        if item.init:
            if sign > 0:
                self.inits = [
                    *self.inits,
                    *self._init_entries(node, resolve_request(item.container, self.rules), cards),
                ]
            else:
                self.inits = self.inits[: len(self.inits) - len(cards)]
        else:
            for card in cards:
                node.allocate(card, item.container, namespace, sign=sign)
            if sign > 0:
                self.apps = [*self.apps, *((card, item.container) for card in cards)]
            else:
                self.apps = self.apps[: len(self.apps) - len(cards)]
        if sign > 0 and item.last:
            extra = node.init_peak(self.inits, self.apps) if self.inits else {}
            node.add_use(namespace, extra)
            self.done.append((self.inits, self.apps, extra))
            self.inits, self.apps = [], []

    def _walk(self) -> bool:
        """Depth-first over the items with an explicit stack (a tenant may ask more containers than
        Python's recursion allows): True with a placement of every item allocated on the cluster."""
        search = self.search
        frames: list[_Frame] = []
        index, current = 0, -1
        while True:
            if index == len(self.items):
                return True
            self.budget.left -= 1
            if self.budget.left < 0:
                search.exhausted = True
                return False
            if self._room_left(index):
                key = self._state(index, current)
                if key not in search.seen:
                    frames.append(_Frame(index, key, self._choices(index, current)))
            while frames:  # the next choice of the innermost item, taking back the one it tried
                frame = frames[-1]
                if frame.taken is not None:
                    self._take(frame.index, frame.taken, -1)
                    frame.taken = None
                choice = next(frame.choices, None)
                if choice is None:
                    search.seen.add(frame.key)  # nothing from this state holds the items left
                    frames.pop()
                    continue
                frame.taken = choice
                self._take(frame.index, choice, 1)
                index, current = frame.index + 1, choice[0]
                break
            else:
                return False


def first_fit(cluster: Cluster, pods: Iterable[PodRequest]) -> bool:
    """Some valid placement of every pod (each on the first node where HAMi's per-card rules take it;
    commits). Proves that a placement exists; it is not HAMi's choice."""
    return all(any(node.place_first_fit(pod) for node in cluster.nodes) for pod in pods)


@dataclass(frozen=True)
class PlacementSearch:
    """The search's answer, and on FITS a copy of the cluster with one such placement allocated."""

    answer: Fit
    cluster: Cluster | None = None

    @property
    def fits(self) -> bool | None:
        """The answer as a bool, None when undecided: how the tests compare it with brute force."""
        return None if self.answer is Fit.UNDECIDED else self.answer is Fit.FITS


def search_placement(cluster: Cluster, pods: Sequence[PodRequest], budget: Budget | None = None) -> PlacementSearch:
    """Whether some placement holds `pods` on the cluster's nodes (`cluster` is left as it is); on FITS the
    verdict carries a copy with one such placement allocated.

    First a cheap first-fit attempt (any placement that passes HAMi's per-card rules proves one exists),
    then exhaustive depth-first search over which node each pod and which cards each container takes
    (pods in `_search_order`)."""
    trial = cluster.copy()
    if first_fit(trial, sorted(pods, key=_search_order)):
        return PlacementSearch(Fit.FITS, trial)
    if any(_insufficient_everywhere(cluster, pod) for pod in pods):
        return PlacementSearch(Fit.NO_PLACEMENT)
    budget = Budget() if budget is None else budget
    if budget.left <= 0:
        return PlacementSearch(Fit.UNDECIDED)
    trial = cluster.copy()
    answer = _Searcher(trial, pods, budget).run()
    return PlacementSearch(answer, trial if answer is Fit.FITS else None)


def _insufficient_everywhere(cluster: Cluster, pod: PodRequest) -> bool:
    """A container (or, where the release places them, an init container) asks more cards than any node has (or
    there are none): NodeInsufficientDevice on every node."""
    most = max(len(node.cards) for node in cluster.nodes)
    containers = (*counted_init_containers(pod, cluster.rules), *pod.containers)
    return any(container.nums > most for container in containers)


def alone_verdicts(
    cluster: Cluster, pods: Sequence[PodRequest], budget: Budget, gpu_policy: str, node_policy: str
) -> tuple[list[PodRequest], list[Refused | Undecided]]:
    """The pods worth the set analysis, and the verdicts on the others.

    A pod that fits nowhere even alone (next to what already runs) is refused, once per workload, with HAMi's
    refusal, and left out; one whose search ran out of budget is undecided, once, and kept. Identical pods
    are decided once."""
    placeable: list[PodRequest] = []
    verdicts: list[Refused | Undecided] = []
    alone: dict = {}
    reported: set[str] = set()
    for pod in pods:
        kind = pod_kind(pod, cluster.rules)
        if kind not in alone:
            alone[kind] = search_placement(cluster, [pod], budget).answer
        answer = alone[kind]
        if answer is Fit.NO_PLACEMENT:
            if workload_of(pod) not in reported:
                reported.add(workload_of(pod))
                verdicts.append(Refused(pod, *hamis_refusal(cluster, pod, gpu_policy, node_policy)))
            continue
        if answer is Fit.UNDECIDED and workload_of(pod) not in reported:
            reported.add(workload_of(pod))
            verdicts.append(Undecided(Question.POD_FITS, (pod,)))
        placeable.append(pod)
    return placeable, verdicts


def first_unplaceable(
    cluster: Cluster, pods: Sequence[PodRequest], budget: Budget, gpu_policy: str, node_policy: str
) -> Unplaceable | Undecided:
    """The first pod (declared order) that no placement of it and the pods before it can hold, with HAMi's
    own walk for that pod next to a placement of the pods before it (the set is known to fit nowhere).

    Walks the declared order keeping one placement of the pods so far (first fit); only when the next pod
    does not fit next to it is the exhaustive search asked whether another placement makes room."""
    placed = cluster.copy()
    for index, pod in enumerate(pods):
        if first_fit(placed, [pod]):  # commits only on success
            continue
        search = search_placement(cluster, pods[: index + 1], budget)
        if search.answer is Fit.UNDECIDED:
            return Undecided(Question.FIRST_UNPLACEABLE, tuple(pods))
        if search.answer is Fit.FITS:
            assert search.cluster is not None
            placed = search.cluster  # another placement of the pods so far makes room
            continue
        return Unplaceable(pod, tuple(pods[:index]), *hamis_refusal(placed, pod, gpu_policy, node_policy))
    return Unplaceable(None, tuple(pods), None, None)  # pragma: no cover - the caller found the set fits nowhere


def hamis_refusal(
    cluster: Cluster, pod: PodRequest, gpu_policy: str, node_policy: str
) -> tuple[NodeFailure | None, QuotaInUse | None, str | None]:
    """Why HAMi's walk refuses `pod` on `cluster` as it stands (None only if the walk and the search ever
    disagreed), the pod's namespace quota as the walk saw it, and the API server's message when the release's
    webhook refuses the pod at create against that quota use (hami/webhook.py; None under v2.8.3)."""
    outcome = cluster.candidates(pod, gpu_policy, node_policy)
    failure = outcome if isinstance(outcome, NodeFailure) else None
    quota = cluster.quota_in_use(pod.namespace)
    return failure, quota, quota_refusal(pod, quota, cluster.rules)
