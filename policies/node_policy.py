"""HAMi v2.8.3's node selection: which of a tenant's GPU nodes a pod goes to.

Pure logic on top of policies/gpu_fit.py (which places a pod's containers on one node's cards).
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
  simulation below follows every such choice.
- The namespace quota (HAMi's quota manager) counts a namespace's use over every node; so do the
  nodes here: they share one namespace-use table.
- A pod's `hami.io/node-scheduler-policy` annotation overrides the configured node policy.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from policies.gpu_fit import (
    Budget,
    CardUse,
    ContainerFailure,
    ContainerRequest,
    Node,
    PodRequest,
    _f32,
    _quota_allows,
    _search_order,
)

WEIGHT = 10  # pkg/util/types.go `Weight`
MAX_TIE_RUNS = 2_000  # greedy runs (ties branch) per simulated arrival order before giving up


def node_score(node: Node) -> float:
    """`ComputeDefaultScore` in float32: 10 x (used/total slots + cores + memory) over all cards."""
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
        """The reason names over all nodes (a pod that fits nowhere gets one event per reason)."""
        names = sorted({failure.reason for failure in self.failures.values()})
        return ", ".join(names)

    def events(self) -> list[str]:
        """HAMi's FilteringFailed events: `<n> nodes <Reason>(<node>,...)`, node names sorted."""
        by_reason: dict[str, list[str]] = {}
        for name, failure in self.failures.items():
            for reason in failure.reasons:
                by_reason.setdefault(reason, []).append(name)
        return [
            f"{len(found)} nodes {reason}({','.join(sorted(found))})" for reason, found in sorted(by_reason.items())
        ]

    def explain(self) -> str:
        return "; ".join(f"node {name}: {failure.explain()}" for name, failure in self.failures.items())

    @property
    def cards(self) -> tuple[str, ...]:
        return tuple(card for failure in self.failures.values() for card in failure.cards)


@dataclass(frozen=True)
class Choice:
    """Where HAMi may put a pod: a node and each container's cards (indexes on that node)."""

    node: int
    cards: tuple[tuple[int, ...], ...]
    score: float


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

    def filter(
        self, pod: PodRequest, gpu_policy: str, uses: tuple | None = None, quota: tuple | None = None
    ) -> tuple[list[Choice], dict[str, ContainerFailure]]:
        """Every node's verdict on `pod`, each from the usage before it (as calcScore's goroutines):
        the nodes that pass with the cards HAMi's card walk takes there, and why the others fail.
        `uses` and `quota` are this cluster's `uses()` and `quota_state()` when the caller has them."""
        uses = self.uses() if uses is None else uses
        quota = self.quota_state() if quota is None else quota
        shape = pod.shape()
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
    ) -> NodeFailure | tuple[list[Choice], dict[str, ContainerFailure]]:
        """The placements HAMi may choose for `pod` (several only on a score tie), or why none fits."""
        choices, failures = self.filter(pod, gpu_policy, uses, quota)
        if not choices:
            return NodeFailure(pod, failures)
        policy = node_policy_of(pod, node_policy)
        picked = best([choice.score for choice in choices], policy)
        return [choices[i] for i in picked], failures

    def commit(self, pod: PodRequest, choice: Choice) -> None:
        node = self.nodes[choice.node]
        for container, cards in zip(pod.containers, choice.cards, strict=True):
            for index in cards:
                node.allocate(index, container, pod.namespace)

    def card_ids(self, choice: Choice) -> list[list[str]]:
        node = self.nodes[choice.node]
        return [[node.cards[i].id for i in cards] for cards in choice.cards]


# --- advisory: HAMi's greedy walk, every tie followed ---------------------------------------------------


@dataclass
class ClusterStranding:
    order: tuple[PodRequest, ...]
    gpu_policy: str
    failure: NodeFailure
    placed: list[tuple[str, str]]  # (pod, node) before the failure, in order


def simulate_cluster(
    cluster: Cluster, order: Sequence[PodRequest], gpu_policy: str, node_policy: str, runs: list[int] | None = None
) -> ClusterStranding | None:
    """HAMi placing `order` one pod at a time; on a score tie every choice is followed. The first run
    that strands a pod, or None when no run does. `runs` counts the runs (bounded by MAX_TIE_RUNS:
    beyond it the remaining tie branches are not followed)."""
    runs = runs if runs is not None else [0]
    by_id = any(pod.selects_uuids for pod in order)

    def signature(state: Cluster, choice: Choice) -> tuple:
        """Tied nodes equal in cards and use lead to the same future: one of them is followed."""
        node = state.nodes[choice.node]
        cards = tuple(
            (
                c.id if by_id else "",
                c.type,
                c.memory_mb,
                c.cores,
                c.split_count,
                c.healthy,
                (u.slots, u.memory_mb, u.cores),
            )
            for c, u in zip(node.cards, node.use, strict=True)
        )
        return cards, choice.cards

    def walk(state: Cluster, position: int, placed: list[tuple[str, str]]) -> ClusterStranding | None:
        if position == len(order):
            runs[0] += 1
            return None
        pod = order[position]
        outcome = state.candidates(pod, gpu_policy, node_policy)
        if isinstance(outcome, NodeFailure):
            return ClusterStranding(tuple(order), gpu_policy, outcome, placed)
        choices, _ = outcome
        if len(choices) > 1:
            choices = list({signature(state, choice): choice for choice in reversed(choices)}.values())[::-1]
        for number, choice in enumerate(choices):
            if number and runs[0] >= MAX_TIE_RUNS:
                break
            branch = state.copy() if len(choices) > 1 else state
            branch.commit(pod, choice)
            found = walk(branch, position + 1, [*placed, (pod.workload, state.names[choice.node])])
            if found is not None:
                return found
        return None

    return walk(cluster.copy(), 0, [])


MAX_ORDER_STATES = 20_000  # states of the every-order walk per card policy before it gives up (and says so)


@dataclass
class OrderSearch:
    """The every-order walk's outcome: a stranding, or none; `exhausted` when it stopped early."""

    stranding: ClusterStranding | None
    exhausted: bool = False


def find_cluster_stranding(
    cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str, limit: int = MAX_ORDER_STATES
) -> OrderSearch:
    """HAMi's greedy walk over every creation order of `pods` and every node a score tie leaves open,
    as one search over states: after any prefix, what matters is the nodes' use and which pods are
    left (pods of one shape are interchangeable), so a state explored once is not explored again.
    States are plain tuples; a node's verdict on a pod kind in a given use is computed once (with
    `Node.place_hami`, on a node rebuilt from the tuple) and remembered with the use it leaves."""
    kinds: dict[tuple, int] = {}
    of_kind: list[list[PodRequest]] = []
    for pod in pods:
        kind = kinds.setdefault(pod.shape(), len(kinds))
        if kind == len(of_kind):
            of_kind.append([])
        of_kind[kind].append(pod)
    by_id = any(pod.selects_uuids for pod in pods)
    quotas = cluster.nodes[0].quotas
    groups = [
        tuple((c.id if by_id else "", c.type, c.memory_mb, c.cores, c.split_count, c.healthy) for c in node.cards)
        for node in cluster.nodes
    ]
    verdicts: dict = {}
    seen: set = set()
    steps = [0]

    def verdict(index: int, use: tuple, namespaces: tuple, kind: int) -> tuple:
        """(score, failure or (cards, use after, namespace table after)) of node `index` for a pod of `kind`."""
        key = (index, use, namespaces if quotas else None, kind)
        found = verdicts.get(key)
        if found is None:
            node = Node(
                cluster.nodes[index].cards,
                [CardUse(*u) for u in use],
                quotas,
                {ns: tuple(v) for ns, v in namespaces},
            )
            score = node_score(node)
            placed = node.place_hami(of_kind[kind][0], gpu_policy)
            if isinstance(placed, ContainerFailure):
                found = (score, placed)
            else:
                after = tuple((u.slots, u.memory_mb, u.cores) for u in node.use)
                table = tuple(sorted((ns, tuple(v)) for ns, v in node.namespace_use.items()))
                found = (score, (tuple(tuple(cards) for cards in placed), after, table))
            verdicts[key] = found
        return found

    def walk(uses: tuple, namespaces: tuple, left: list[int], order: list, placed: list) -> ClusterStranding | None:
        key = (uses, namespaces, tuple(left))
        if key in seen:
            return None
        steps[0] += 1
        if steps[0] > limit:
            return None
        for kind, count in enumerate(left):
            if not count:
                continue
            pod = of_kind[kind][len(of_kind[kind]) - count]
            outcomes = [verdict(i, use, namespaces, kind) for i, use in enumerate(uses)]
            passing = [i for i, (_, outcome) in enumerate(outcomes) if not isinstance(outcome, ContainerFailure)]
            if not passing:
                failures = {
                    name: replace(outcome, pod=pod) for name, (_, outcome) in zip(cluster.names, outcomes, strict=True)
                }
                rest = [p for k, c in enumerate(left) for p in of_kind[k][len(of_kind[k]) - c :] if p is not pod]
                return ClusterStranding(tuple([*order, pod, *rest]), gpu_policy, NodeFailure(pod, failures), placed)
            picked = [passing[i] for i in best([outcomes[i][0] for i in passing], node_policy_of(pod, node_policy))]
            # Tied nodes equal in cards and use lead to the same future: one of them is followed.
            picked = list({(groups[i], uses[i], outcomes[i][1][0]): i for i in reversed(picked)}.values())[::-1]
            left[kind] -= 1
            try:
                for i in picked:
                    _, after, table = outcomes[i][1]
                    found = walk(
                        (*uses[:i], after, *uses[i + 1 :]),
                        table if quotas else namespaces,
                        left,
                        [*order, pod],
                        [*placed, (pod.workload, cluster.names[i])],
                    )
                    if found is not None:
                        return found
            finally:
                left[kind] += 1
        if steps[0] <= limit:
            seen.add(key)
        return None

    start_uses = tuple(tuple((u.slots, u.memory_mb, u.cores) for u in node.use) for node in cluster.nodes)
    start_table = tuple(sorted((ns, tuple(v)) for ns, v in cluster.namespace_use.items()))
    found = walk(start_uses, start_table, [len(group) for group in of_kind], [], [])
    return OrderSearch(found, exhausted=found is None and steps[0] > limit)


@dataclass(frozen=True)
class Placed:
    """Where one run of HAMi's walk put a pod: its node, each container's card ids, and the nodes that
    tied with it in HAMi's score (HAMi could have picked any of them; empty when none tied)."""

    pod: PodRequest
    node: str
    cards: list[list[str]]
    tied: tuple[str, ...]


def greedy_placements(
    cluster: Cluster, order: Sequence[PodRequest], gpu_policy: str, node_policy: str
) -> list[Placed | NodeFailure]:
    """One run of HAMi's walk, pod by pod (on a tie, the first tied node in declaration order): where
    each pod goes, or why it stays Pending (the run goes on without it, as HAMi's does)."""
    state = cluster.copy()
    found: list[Placed | NodeFailure] = []
    for pod in order:
        outcome = state.candidates(pod, gpu_policy, node_policy)
        if isinstance(outcome, NodeFailure):
            found.append(outcome)
            continue
        choices, _ = outcome
        choice = choices[0]
        tied = tuple(state.names[c.node] for c in choices) if len(choices) > 1 else ()
        found.append(Placed(pod, state.names[choice.node], state.card_ids(choice), tied))
        state.commit(pod, choice)
    return found


# --- certain: is there any placement across the nodes? ---------------------------------------------------


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
            if container.nums > 1 and not _quota_allows(node, pod, container, combination):
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
