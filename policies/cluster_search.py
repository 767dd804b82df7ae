"""The certain verdict across a tenant's GPU nodes: is there any placement of the pods on the nodes'
cards? Exhaustive search, bounded by the same step budget as one node's (policies/fit_search.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hami.cards import ContainerRequest, PodRequest, quota_allows
from hami.nodes import Cluster
from policies.fit_search import Budget, _search_order


@dataclass
class _Search:
    exhausted: bool = False
    seen: set = field(default_factory=set)


class _ClusterSearcher:
    """Depth-first over (pod, container) items: a pod's first container picks the node (nodes equal in
    cards and use are tried once), every container its cards on that node (identical cards in identical
    states tried once). The nodes share the namespace quota, so a quota is counted across them."""

    def __init__(self, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget) -> None:
        self.cluster = cluster
        self.items: list[tuple[PodRequest, ContainerRequest, bool]] = []
        for pod in sorted(pods, key=_search_order):
            for number, container in enumerate(pod.containers):
                self.items.append((pod, container, number == 0))
        self.budget = budget
        self.search = _Search()
        by_id = any(pod.selects_uuids for pod in pods)
        self.groups = [
            [(c.id if by_id else "", c.type, c.memory_mb, c.cores, c.split_count, c.healthy) for c in node.cards]
            for node in cluster.nodes
        ]

    def run(self) -> bool | None:
        if self._search(0, -1):
            return True
        return None if self.search.exhausted else False

    def _node_state(self, index: int) -> tuple:
        node = self.cluster.nodes[index]
        uses = ((u.slots, u.memory_mb, u.cores) for u in node.use)
        return tuple(sorted(zip(self.groups[index], uses, strict=True)))

    def _state(self, index: int, current: int) -> tuple:
        states = [self._node_state(i) for i in range(len(self.cluster.nodes))]
        pinned = states[current] if current >= 0 and not self.items[index][2] else None
        return (
            index,
            pinned,
            tuple(sorted(states)),
            tuple(sorted((ns, tuple(v)) for ns, v in self.cluster.namespace_use.items())),
        )

    def _search(self, index: int, current: int) -> bool:
        if index == len(self.items):
            return True
        search = self.search
        self.budget.left -= 1
        if self.budget.left < 0:
            search.exhausted = True
            return False
        key = self._state(index, current)
        if key in search.seen:
            return False
        pod, container, first = self.items[index]
        if first:
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
            if container.nums > len(self.cluster.nodes[target].cards):
                continue  # NodeInsufficientDevice there
            if self._place(index, target, pod, container):
                return True
            if search.exhausted:
                return False
        search.seen.add(key)
        return False

    def _place(self, index: int, target: int, pod: PodRequest, container: ContainerRequest) -> bool:
        node = self.cluster.nodes[target]
        room = node.quota_room(pod.namespace)
        fits = [i for i in range(len(node.cards)) if node.reason(i, container, pod, room) is None]
        tried: set = set()
        for combination in itertools.combinations(fits, container.nums):
            signature = tuple(sorted((self.groups[target][i], repr(node.use[i])) for i in combination))
            if signature in tried:
                continue
            tried.add(signature)
            if container.nums > 1 and not quota_allows(node, pod, container, combination):
                continue
            for card in combination:
                node.allocate(card, container, pod.namespace)
            if self._search(index + 1, target):
                return True
            for card in combination:
                node.allocate(card, container, pod.namespace, sign=-1)
            if self.search.exhausted:
                return False
        return False


def first_fit(cluster: Cluster, pods: Iterable[PodRequest]) -> bool:
    """Some valid placement of every pod (each on the first node where HAMi's per-card rules take it;
    commits). Proves that a placement exists; it is not HAMi's choice."""
    return all(any(node.place_first_fit(pod) for node in cluster.nodes) for pod in pods)


@dataclass
class ClusterVerdict:
    """True: some placement across the nodes holds every pod (`cluster` holds one); False: none does;
    None: the search ran out of budget."""

    fits: bool | None
    cluster: Cluster | None = None


def search_cluster(cluster: Cluster, pods: Sequence[PodRequest], budget: Budget) -> ClusterVerdict:
    """Whether some placement across the nodes holds every pod (each pod on one node). `cluster` is
    left as it is; on True the verdict carries a copy with one such placement allocated."""
    trial = cluster.copy()
    if first_fit(trial, sorted(pods, key=_search_order)):
        return ClusterVerdict(True, trial)
    if any(insufficient_everywhere(cluster, pod) for pod in pods):
        return ClusterVerdict(False)
    if budget.left <= 0:
        return ClusterVerdict(None)
    trial = cluster.copy()
    fits = _ClusterSearcher(trial, pods, budget).run()
    return ClusterVerdict(fits, trial if fits else None)


def insufficient_everywhere(cluster: Cluster, pod: PodRequest) -> bool:
    """A container asks more cards than any node has: NodeInsufficientDevice on every node."""
    most = max(len(node.cards) for node in cluster.nodes)
    return any(container.nums > most for container in pod.containers)
