"""HAMi v2.8.3 on a tenant's GPU nodes: which cards of one node a pod's containers take (`Node`), and
which node a pod goes to (`Cluster`).

Pure logic on top of hami/cards.py's per-card rules. Facts, from HAMi tag v2.8.3 (read, not copied):

- On one node (`fitInDevices`, pkg/scheduler/score.go), per container: asking for more cards than the node
  has is NodeInsufficientDevice; else the cards are scored and sorted (hami/cards.py `card_score`; `rank` here)
  and walked from the end (device.go `Fit`), each checked by hami/cards.py `card_reason`.

- Filter (pkg/scheduler/scheduler.go `Filter`) asks `calcScore` (pkg/scheduler/score.go) about every
  node: per node, the containers are placed in order by `fitInDevices`, as on a single node; a
  container asking more cards than that node has is `NodeInsufficientDevice` there. A node passes the
  filter when every container fits; a pod fits nowhere when no node passes, and HAMi's event then
  counts the nodes per reason (`"%d nodes %s(%s)"`, node names sorted).
- The node score is `ComputeDefaultScore` (pkg/scheduler/policy/node_policy.go): Weight (10) times
  used/total slots + used/total cores + used/total memory over all the node's cards, in float32, from
  the usage *before* this pod; then `OverrideScore` adds each device's `ScoreNode`, which NVIDIA's
  returns 0 for (pkg/device/nvidia/device.go).
- The list is sorted (`NodeScoreList.Less`: spread descending, anything else ascending, so binpack is
  the default) and Filter takes the *last* node: binpack the most used, spread the least used.
- Ties: the list is built by one goroutine per node over a Go map, so its order before the sort is
  random, and `sort.Sort` is not stable: among nodes with the best score HAMi may pick any. The
  simulation below follows every such choice.
- The namespace quota (HAMi's quota manager) counts a namespace's use over every node; so do the
  nodes here: they share one namespace-use table.
- A pod's `hami.io/node-scheduler-policy` annotation overrides the configured node policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from hami.cards import (
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    NODE_INSUFFICIENT_DEVICE,
    POLICIES,
    CardSpec,
    CardUse,
    ContainerRequest,
    NamespaceQuota,
    PodRequest,
    _f32,
    card_reason,
    card_score,
    reason_detail,
)

WEIGHT = 10  # pkg/util/types.go `Weight`
MAX_TIE_RUNS = 2_000  # greedy runs (ties branch) per simulated arrival order before giving up


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


def node_score(node: Node) -> float:
    """`ComputeDefaultScore` in float32: 10 x (used/total slots + cores + memory) over all cards. A node
    without cards (an inventory may list one) passes no filter, so its score is never compared: 0."""
    if not node.cards:
        return 0.0
    used = sum(u.slots for u in node.use)
    used_cores = sum(u.cores for u in node.use)
    used_memory = sum(u.memory_mb for u in node.use)
    total = sum(c.split_count for c in node.cards)
    total_cores = sum(c.cores for c in node.cards)
    total_memory = sum(c.memory_mb for c in node.cards)
    use_score = _f32(used / total)
    core_score = _f32(used_cores / total_cores)
    memory_score = _f32(used_memory / total_memory)
    return _f32(WEIGHT * _f32(_f32(use_score + core_score) + memory_score))


def node_policy_of(pod: PodRequest, configured: str) -> str:
    """The node policy HAMi applies to `pod`: its annotation if set, else the configured one."""
    return pod.node_policy if pod.node_policy is not None else configured


def less(score_i: float, score_j: float, policy: str) -> bool:
    """`NodeScoreList.Less`: only the exact string "spread" sorts descending."""
    return score_i > score_j if policy == "spread" else score_i < score_j


def best(scores: Sequence[float], policy: str) -> list[int]:
    """Positions of the nodes Filter may pick (the last after the sort): every node no other sorts
    after. Ties are all returned; HAMi's choice among them is not determined."""
    return [i for i, score in enumerate(scores) if not any(less(score, other, policy) for other in scores)]


@dataclass
class NodeFailure:
    """No node passes the filter: each node's own first failing container (HAMi's reason for it)."""

    pod: PodRequest
    failures: dict[str, ContainerFailure]  # node name -> why

    @property
    def reason(self) -> str:
        """The reason names over all nodes, each once, as HAMi's events name them (one event per reason);
        NodeInsufficientDevice only when no node has another (HAMi then names none: `no available node`)."""
        names = sorted(self._by_reason()) or [NODE_INSUFFICIENT_DEVICE]
        return ", ".join(names)

    def _by_reason(self) -> dict[str, list[str]]:
        # HAMi keeps a node's reasons through ParseReason (`<n>/<m> <Reason>`); fitInDevices returns a bare
        # NodeInsufficientDevice, which it drops: no event names it (v2.8.3 pkg/scheduler/score.go:65-67,
        # 170-171; pkg/device/common/common.go:50-65).
        by_reason: dict[str, list[str]] = {}
        for name, failure in self.failures.items():
            for reason in failure.reasons:
                if reason != NODE_INSUFFICIENT_DEVICE:
                    by_reason.setdefault(reason, []).append(name)
        return by_reason

    def events(self) -> list[str]:
        """HAMi's FilteringFailed events: `<n> nodes <Reason>(<node>,...)`, node names sorted."""
        by_reason = self._by_reason()
        return [
            f"{len(found)} nodes {reason}({','.join(sorted(found))})" for reason, found in sorted(by_reason.items())
        ]

    def explain(self) -> str:
        return "; ".join(f"node {name}: {failure.explain()}" for name, failure in self.failures.items())

    @property
    def cards(self) -> tuple[str, ...]:
        return tuple(card for failure in self.failures.values() for card in failure.cards)


@dataclass(frozen=True)
class QuotaInUse:
    """A namespace's HAMi quota and what already counts against it (HAMi's quota manager, shared by the nodes)."""

    namespace: str
    quota: NamespaceQuota
    used_mb: int
    used_cores: int


@dataclass(frozen=True)
class Choice:
    """Where HAMi may put a pod: a node and each container's cards (indexes on that node)."""

    node: int
    cards: tuple[tuple[int, ...], ...]
    score: float


class Candidates(NamedTuple):
    """Where HAMi may put a pod: the nodes it may pick (several only on a score tie, in node order), and
    why the other nodes failed the filter. A tuple, so that `choices, failures = ...` still unpacks."""

    choices: list[Choice]
    failures: dict[str, ContainerFailure]


class Cluster:
    """A tenant's GPU nodes, in order, sharing one namespace quota table (HAMi's quota is cluster-wide)."""

    def __init__(self, names: Sequence[str], nodes: Sequence[Node], verdicts: dict | None = None) -> None:
        assert names and len(names) == len(nodes)
        self.names = list(names)
        self.nodes = list(nodes)
        # One node's verdict on a pod depends only on that node's use (and the quota table when it has
        # quotas): simulations revisit the same node states over and over, so verdicts are shared by
        # every copy of this cluster.
        self._verdicts: dict = {} if verdicts is None else verdicts
        shared = self.nodes[0].namespace_use
        for node in self.nodes:
            node.namespace_use = shared
            node.quotas = self.nodes[0].quotas

    @property
    def namespace_use(self) -> dict:
        return self.nodes[0].namespace_use

    def copy(self) -> Cluster:
        shared = {ns: list(v) for ns, v in self.namespace_use.items()}
        nodes = []
        for node in self.nodes:
            twin = Node(node.cards, node.use, node.quotas)
            twin.namespace_use = shared
            nodes.append(twin)
        return Cluster(self.names, nodes, self._verdicts)

    def uses(self) -> tuple[tuple[tuple[int, int, int], ...], ...]:
        """Every node's card use, as a hashable value."""
        return tuple(tuple((u.slots, u.memory_mb, u.cores) for u in node.use) for node in self.nodes)

    def quota_state(self) -> tuple | None:
        """The shared namespace-use table, as a hashable value (None when no namespace has a quota)."""
        if not self.nodes[0].quotas:
            return None
        return tuple(sorted((ns, tuple(v)) for ns, v in self.namespace_use.items()))

    def quota_in_use(self, namespace: str) -> QuotaInUse | None:
        """The namespace's quota and its use now; None without a quota."""
        quota = self.nodes[0].quotas.get(namespace)
        if quota is None:
            return None
        used_mb, used_cores = self.namespace_use.get(namespace, (0, 0))
        return QuotaInUse(namespace, quota, used_mb, used_cores)

    def filter(
        self, pod: PodRequest, gpu_policy: str, uses: tuple | None = None, quota: tuple | None = None
    ) -> tuple[list[Choice], dict[str, ContainerFailure]]:
        """Every node's verdict on `pod`, each from the usage before it (as calcScore's goroutines):
        the nodes that pass with the cards HAMi's card walk takes there, and why the others fail.
        `uses` and `quota` are this cluster's `uses()` and `quota_state()` when the caller has them."""
        uses = self.uses() if uses is None else uses
        quota = self.quota_state() if quota is None else quota
        shape = pod.shape
        choices, failures = [], {}
        for index, (name, node) in enumerate(zip(self.names, self.nodes, strict=True)):
            key = (index, uses[index], quota, shape, gpu_policy)
            verdict = self._verdicts.get(key)
            if verdict is None:
                score = node_score(node)  # before the pod: ComputeDefaultScore runs before fitInDevices
                placed = node.copy().place_hami(pod, gpu_policy)
                if not isinstance(placed, ContainerFailure):
                    placed = tuple(tuple(cards) for cards in placed)
                verdict = self._verdicts[key] = (score, placed)
            score, placed = verdict
            if isinstance(placed, ContainerFailure):
                failures[name] = replace(placed, pod=pod) if placed.pod is not pod else placed
            else:
                choices.append(Choice(index, placed, score))
        return choices, failures

    def candidates(
        self, pod: PodRequest, gpu_policy: str, node_policy: str, uses: tuple | None = None, quota: tuple | None = None
    ) -> NodeFailure | Candidates:
        """The placements HAMi may choose for `pod` (several only on a score tie), or why none fits."""
        choices, failures = self.filter(pod, gpu_policy, uses, quota)
        if not choices:
            return NodeFailure(pod, failures)
        policy = node_policy_of(pod, node_policy)
        picked = best([choice.score for choice in choices], policy)
        return Candidates([choices[i] for i in picked], failures)

    def commit(self, pod: PodRequest, choice: Choice) -> None:
        node = self.nodes[choice.node]
        for container, cards in zip(pod.containers, choice.cards, strict=True):
            for index in cards:
                node.allocate(index, container, pod.namespace)

    def card_ids(self, choice: Choice) -> list[list[str]]:
        node = self.nodes[choice.node]
        return [[node.cards[i].id for i in cards] for cards in choice.cards]
