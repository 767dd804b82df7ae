"""HAMi's choice among a tenant's GPU nodes (`Cluster`): which node a pod goes to, and why none takes it
(`NodeFailure`), for the release a `Rules` (hami/releases.py) names; each node's own walk is hami/nodes.py's.

Facts, from HAMi tag v2.8.3 (read, not copied):

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
  simulation (placement/orders.py) follows every such choice.
- The namespace quota (HAMi's quota manager) counts a namespace's use over every node; so do the
  nodes here: they share one namespace-use table.
- A pod's `hami.io/node-scheduler-policy` annotation overrides the configured node policy.

What v2.10.0 changes here (tag v2.10.0, commit 4707fb02c91c; each a `Rules` field):
- a node whose totals are 0 scores 0 (node_policy.go 121-124);
- init containers are placed with the pod, on the node it goes to (hami/nodes.py `Node.place_hami`).
- Node ties are still broken by map and goroutine order (score.go `calcScoreWithOptions` 378-407): every tied
  node stays possible (`best`), as for v2.8.3.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from hami.cards import ContainerRequest, NamespaceQuota, PodRequest, _f32, resolve_request
from hami.nodes import ContainerFailure, Entry, Node
from hami.reasons import NODE_INSUFFICIENT_DEVICE
from hami.releases import Rules

WEIGHT = 10  # pkg/util/types.go `Weight`
MAX_TIE_RUNS = 2_000  # greedy runs (ties branch) per simulated arrival order before giving up


def pod_kind(pod: PodRequest, rules: Rules) -> Hashable:
    """What HAMi's placement of `pod` depends on under `rules` (pods of one kind are interchangeable): its `shape`,
    and its init containers where the release places them (v2.10.0: score.go `allocateInitContainers` 226-254)."""
    if rules.init_containers_counted and pod.init_containers:
        return (pod.shape, pod.init_containers)
    return pod.shape


def counted_init_containers(pod: PodRequest, rules: Rules) -> tuple[ContainerRequest, ...]:
    """The pod's init containers HAMi places under `rules`: all of them under v2.10.0's (devices.go `Resourcereqs`
    639-692), none under v2.8.3's (it reads spec.containers only)."""
    return pod.init_containers if rules.init_containers_counted else ()


def node_score(node: Node) -> float:
    """`ComputeDefaultScore` in float32: 10 x (used/total slots + cores + memory) over all cards. A node
    without cards (an inventory may list one) passes no filter, so its score is never compared: 0. Under
    v2.10.0 a node with a zero total scores 0 (node_policy.go 121-124)."""
    if not node.cards:
        return 0.0
    used = sum(u.slots for u in node.use)
    used_cores = sum(u.cores for u in node.use)
    used_memory = sum(u.memory_mb for u in node.use)
    total = sum(c.split_count for c in node.cards)
    total_cores = sum(c.cores for c in node.cards)
    total_memory = sum(c.memory_mb for c in node.cards)
    if node.rules.node_score_zero_totals and 0 in (total, total_cores, total_memory):
        return 0.0
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
    init_cards: tuple[tuple[int, ...], ...] = ()  # each init container's (v2.10.0's rules only)


class Candidates(NamedTuple):
    """Where HAMi may put a pod: the nodes it may pick (several only on a score tie, in node order), and
    why the other nodes failed the filter. A tuple, so that `choices, failures = ...` still unpacks."""

    choices: list[Choice]
    failures: dict[str, ContainerFailure]


class Cluster:
    """A tenant's GPU nodes, in order, sharing one namespace quota table (HAMi's quota is cluster-wide), judged
    with one HAMi release's rules: `rules`, else the nodes' own (v2.8.3 by default); every node gets them."""

    def __init__(
        self, names: Sequence[str], nodes: Sequence[Node], verdicts: dict | None = None, *, rules: Rules | None = None
    ) -> None:
        assert names and len(names) == len(nodes)
        self.names = list(names)
        self.nodes = list(nodes)
        self.rules = rules if rules is not None else self.nodes[0].rules
        # One node's verdict on a pod depends only on that node's use (and the quota table when it has
        # quotas): simulations revisit the same node states over and over, so verdicts are shared by
        # every copy of this cluster.
        self._verdicts: dict = {} if verdicts is None else verdicts
        shared = self.nodes[0].namespace_use
        for node in self.nodes:
            node.namespace_use = shared
            node.quotas = self.nodes[0].quotas
            node.rules = self.rules

    @property
    def namespace_use(self) -> dict:
        return self.nodes[0].namespace_use

    def copy(self) -> Cluster:
        shared = {ns: list(v) for ns, v in self.namespace_use.items()}
        nodes = []
        for node in self.nodes:
            twin = Node(node.cards, node.use, node.quotas, rules=self.rules)
            twin.namespace_use = shared
            nodes.append(twin)
        return Cluster(self.names, nodes, self._verdicts, rules=self.rules)

    def uses(self) -> tuple[tuple[tuple[int, int, int], ...], ...]:
        """Every node's card use, as a hashable value."""
        return tuple(tuple((u.slots, u.memory_mb, u.cores) for u in node.use) for node in self.nodes)

    def quota_state(self) -> tuple | None:
        """The shared namespace-use table, as a hashable value (None when no namespace has a quota). A namespace that
        uses nothing is left out: an entry of zeros (left by a placement undone) is the same state as none."""
        if not self.nodes[0].quotas:
            return None
        return tuple(sorted((ns, tuple(v)) for ns, v in self.namespace_use.items() if any(v)))

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
        shape = pod_kind(pod, self.rules)
        choices, failures = [], {}
        for index, (name, node) in enumerate(zip(self.names, self.nodes, strict=True)):
            key = (index, uses[index], quota, shape, gpu_policy)
            verdict = self._verdicts.get(key)
            if verdict is None:
                score = node_score(node)  # before the pod: ComputeDefaultScore runs before fitInDevices
                placed = node.copy().place_hami(pod, gpu_policy)
                init: tuple[tuple[int, ...], ...] = ()
                if not isinstance(placed, ContainerFailure):
                    init = tuple(tuple(cards) for cards in placed.init)
                    placed = tuple(tuple(cards) for cards in placed)
                verdict = self._verdicts[key] = (score, placed, init)
            score, placed, init = verdict
            if isinstance(placed, ContainerFailure):
                failures[name] = replace(placed, pod=pod) if placed.pod is not pod else placed
            else:
                choices.append(Choice(index, placed, score, init))
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
        placed = []
        for container, cards in zip(pod.containers, choice.cards, strict=True):
            for index in cards:
                node.allocate(index, container, pod.namespace)
                placed.append((index, container))
        if choice.init_cards:  # v2.10.0: the pod holds its init containers' peak where it is larger
            entries: list[Entry] = []
            for init, cards in zip(pod.init_containers, choice.init_cards, strict=True):
                request = resolve_request(init, node.rules)
                entries += [(True, i, request.memory_on(node.cards[i]), request.fit_cores) for i in cards]
            node.hold_init_peak(pod.namespace, entries, placed)

    def card_ids(self, choice: Choice) -> list[list[str]]:
        node = self.nodes[choice.node]
        return [[node.cards[i].id for i in cards] for cards in choice.cards]
