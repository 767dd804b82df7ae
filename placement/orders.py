"""The order verdict (`order_verdict`): HAMi places pods one at a time, greedily, with its node and card
policies (hami/cluster.py), so a set that fits in some placement can still be stranded by an unlucky creation
order. HAMi's walk is simulated over the creation orders (all of them when there are few, as one search over
states; else a sample) and, on a tenant of several GPU nodes, over every node a score tie leaves open (one
node is a cluster of one, where no tie arises). Stranded in every order with the configured policies is
certain; in some order, or with the other card policy, advice."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from hami.cards import MUTEX, POLICIES, CardUse, PodRequest, card_reason, policy_names, policy_of, resolve_request
from hami.cluster import (
    MAX_TIE_RUNS,
    Choice,
    Cluster,
    NodeFailure,
    QuotaInUse,
    best,
    node_policy_of,
    node_score,
    pod_kind,
)
from hami.nodes import ContainerFailure, Node
from hami.releases import V2_8_3, Rules
from hami.webhook import quota_refusal
from placement.verdicts import Question, Stranded, Undecided

MAX_ORDERS = 720  # up to this many distinct creation orders (6 different pods) all are walked; above, a sample
MAX_ORDER_STATES = 20_000  # states of an every-order walk per card policy before it gives up (and says so)


def distinct_orders(pods: Sequence[PodRequest], rules: Rules = V2_8_3) -> int:
    """How many arrival orders differ for placement (identical pods swapped are the same order; under `rules` that
    place init containers, pods alike but for those differ)."""
    counts: dict = {}
    for pod in pods:
        kind = pod_kind(pod, rules)
        counts[kind] = counts.get(kind, 0) + 1
    total = math.factorial(len(pods))
    for count in counts.values():
        total //= math.factorial(count)
    return total


def sample_orders(pods: Sequence[PodRequest]) -> Iterable[tuple[PodRequest, ...]]:
    """The orders tried when there are too many to walk them all: the declared order, its reverse, and
    smallest and largest first."""
    size = lambda pod: sum(c.nums * (c.memreq or 10**6 * c.mem_percentage) for c in pod.containers)  # noqa: E731
    yield tuple(pods)
    yield tuple(reversed(pods))
    yield tuple(sorted(pods, key=size))
    yield tuple(sorted(pods, key=size, reverse=True))


def cannot_strand(cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str = "spread") -> bool:
    """A proof that no creation order, card or node policy strands any of `pods` (so no walk is needed).

    Pod p is stranded only when every card p may use rejects it. Blocking card k takes at least n_k
    card-placements of the other pods: enough slots, memory or cores to leave p too little (1 for a
    whole-card p on an empty card). The others make sum(nums) card-placements in all; if that is fewer
    than the cheapest way to block every card, p always finds a card. Quotas and multi-card pods are
    left to the simulation.

    The proof holds over the cards of every node at once: a pod is stranded only when every card of every
    node rejects it, and a node with a card that takes the pod passes HAMi's filter.

    Judged with the tenant's release (`cluster.rules`): its requests (hami/cards.py `resolve_request`), its card
    rules, the cards it looks up (v2.10.0: those of the request's type, score.go `getNodeResources` 43-52) and the
    card policy a pod gets (`gpu_policy`, the configured one, or its annotation where the release takes it): under
    v2.10.0's `mutex` one other pod on a card blocks it (device.go `Fit` 767-771). A release that places init
    containers (v2.10.0) leaves pods with init containers to the simulation, as quotas are."""
    rules = cluster.rules
    if cluster.nodes[0].quotas or any(len(pod.containers) != 1 or pod.containers[0].nums != 1 for pod in pods):
        return False
    if rules.init_containers_counted and any(pod.init_containers for pod in pods):
        return False
    cards = [card for node in cluster.nodes for card in node.cards]  # every card of every node, as one
    uses = [use for node in cluster.nodes for use in node.use]
    placements = len(pods) - 1  # card-placements of the pods other than p
    # Largest per-placement demand of any pod, wherever it lands.
    containers = {resolve_request(pod.containers[0], rules) for pod in pods}
    max_memory = max((c.memory_on(card) for c in containers for card in cards), default=0)
    max_cores = max((c.fit_cores for c in containers), default=0)
    for pod in {pod.shape: pod for pod in pods}.values():
        container = resolve_request(pod.containers[0], rules)
        looked_up = [i in set(node.typed(container)) for node in cluster.nodes for i in range(len(node.cards))]
        policy = policy_of(pod, gpu_policy, rules)
        mutex = rules.mutex_policy and policy_names(policy, MUTEX)
        needed = 0
        for card, use, walked in zip(cards, uses, looked_up, strict=True):
            if not walked or card_reason(card, use, container, pod, (None, None), rules, policy) is not None:
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
            if mutex:
                blockers.append(1)  # the card takes p only while nothing is on it
            needed += max(1, min(blockers))
        if needed == 0 or needed <= placements:
            return False
    return True


@dataclass
class Stranding:
    order: tuple[PodRequest, ...]
    gpu_policy: str
    failure: NodeFailure
    placed: list[tuple[str, str]]  # (pod, node) before the failure, in order
    quota: QuotaInUse | None = None  # the stranded pod's namespace quota as the walk saw it then


@dataclass(frozen=True)
class OrderWalk:
    """HAMi's walk over one creation order, every tie followed: the first run that strands a pod (None when
    no run does), and how many runs ended without stranding one."""

    stranding: Stranding | None
    runs: int

    @property
    def cut(self) -> bool:
        """No stranding found, but tie branches were left unfollowed (MAX_TIE_RUNS): not every run was checked."""
        return self.stranding is None and self.runs >= MAX_TIE_RUNS


def simulate(cluster: Cluster, order: Sequence[PodRequest], gpu_policy: str, node_policy: str) -> Stranding | None:
    """HAMi placing `order` one pod at a time; on a score tie every choice is followed. The first run
    that strands a pod, or None when no run does (within MAX_TIE_RUNS runs)."""
    return walk_order(cluster, order, gpu_policy, node_policy).stranding


def walk_order(cluster: Cluster, order: Sequence[PodRequest], gpu_policy: str, node_policy: str) -> OrderWalk:
    """`simulate`, saying how many runs it made (beyond MAX_TIE_RUNS the remaining tie branches are not
    followed)."""
    runs = 0
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

    # Depth-first with an explicit stack (a tenant may run more pods than Python's recursion allows). An
    # entry places order[position] by `choice` on `state` (on a copy when tied nodes share that state;
    # `number` counts the choice among them); the initial one has no choice.
    pending: list[tuple[Cluster, int, list[tuple[str, str]], Choice | None, int, bool]] = [
        (cluster.copy(), 0, [], None, 0, False)
    ]
    while pending:
        state, position, placed, choice, number, tied = pending.pop()
        if choice is not None:
            if number and runs >= MAX_TIE_RUNS:
                continue  # the tie branches beyond the bound are not followed
            pod = order[position]
            branch = state.copy() if tied else state
            branch.commit(pod, choice)
            state, position, placed = branch, position + 1, [*placed, (pod.workload, state.names[choice.node])]
        while True:  # on, pod by pod, until the run ends, strands a pod or meets a tie
            if position == len(order):
                runs += 1
                break
            pod = order[position]
            outcome = state.candidates(pod, gpu_policy, node_policy)
            if isinstance(outcome, NodeFailure):
                stranding = Stranding(tuple(order), gpu_policy, outcome, placed, state.quota_in_use(pod.namespace))
                return OrderWalk(stranding, runs)
            choices = outcome.choices
            if len(choices) > 1:
                choices = list({signature(state, c): c for c in reversed(choices)}.values())[::-1]
            if len(choices) == 1:
                state.commit(pod, choices[0])
                placed = [*placed, (pod.workload, state.names[choices[0].node])]
                position += 1
                continue
            # the first tied choice is followed first: pushed last
            pending.extend((state, position, placed, c, n, True) for n, c in reversed(list(enumerate(choices))))
            break
    return OrderWalk(None, runs)


@dataclass
class OrderSearch:
    """The every-order walk's outcome: a stranding, or none; `exhausted` when it stopped early."""

    stranding: Stranding | None
    exhausted: bool = False


class _States:
    """HAMi's walk over every creation order and every tied node, as states: after any prefix, what
    matters is the nodes' use and which pods are left (pods of one kind, hami/cluster.py `pod_kind`, are
    interchangeable). States are plain tuples; a node's verdict on a pod kind in a given use is computed once (with
    `Node.place_hami` and the tenant's release, on a node rebuilt from the tuple) and remembered with the use it
    leaves."""

    def __init__(self, cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str) -> None:
        self.cluster, self.gpu_policy, self.node_policy = cluster, gpu_policy, node_policy
        kinds: dict = {}
        self.of_kind: list[list[PodRequest]] = []
        for pod in pods:
            kind = kinds.setdefault(pod_kind(pod, cluster.rules), len(kinds))
            if kind == len(self.of_kind):
                self.of_kind.append([])
            self.of_kind[kind].append(pod)
        by_id = any(pod.selects_uuids for pod in pods)
        self.quotas = cluster.nodes[0].quotas
        self.groups = [
            tuple((c.id if by_id else "", c.type, c.memory_mb, c.cores, c.split_count, c.healthy) for c in node.cards)
            for node in cluster.nodes
        ]
        self.verdicts: dict = {}
        self.uses = tuple(tuple((u.slots, u.memory_mb, u.cores) for u in node.use) for node in cluster.nodes)
        self.table = tuple(sorted((ns, tuple(v)) for ns, v in cluster.namespace_use.items()))
        self.left = [len(group) for group in self.of_kind]

    def verdict(self, index: int, use: tuple, namespaces: tuple, kind: int) -> tuple:
        """(score, failure or (cards, use after, namespace table after)) of node `index` for a pod of `kind`."""
        key = (index, use, namespaces if self.quotas else None, kind)
        found = self.verdicts.get(key)
        if found is None:
            node = Node(
                self.cluster.nodes[index].cards,
                [CardUse(*u) for u in use],
                self.quotas,
                {ns: tuple(v) for ns, v in namespaces},
                rules=self.cluster.rules,
            )
            score = node_score(node)
            placed = node.place_hami(self.of_kind[kind][0], self.gpu_policy)
            if isinstance(placed, ContainerFailure):
                found = (score, placed)
            else:
                after = tuple((u.slots, u.memory_mb, u.cores) for u in node.use)
                table = tuple(sorted((ns, tuple(v)) for ns, v in node.namespace_use.items()))
                found = (score, (tuple(tuple(cards) for cards in placed), after, table))
            self.verdicts[key] = found
        return found

    def moves(self, uses: tuple, namespaces: tuple, kind: int) -> tuple[list[tuple[int, tuple, tuple]], list[tuple]]:
        """Where HAMi may put the next pod of `kind`: (node, its use after, namespace table after) for every
        node tied for the best score (nodes equal in cards and use once: they lead to the same future),
        and every node's verdict. No moves when no node passes the filter."""
        outcomes = [self.verdict(i, use, namespaces, kind) for i, use in enumerate(uses)]
        passing = [i for i, (_, outcome) in enumerate(outcomes) if not isinstance(outcome, ContainerFailure)]
        if not passing:
            return [], outcomes
        pod = self.of_kind[kind][0]
        picked = [passing[i] for i in best([outcomes[i][0] for i in passing], node_policy_of(pod, self.node_policy))]
        picked = list({(self.groups[i], uses[i], outcomes[i][1][0]): i for i in reversed(picked)}.values())[::-1]
        moves = []
        for i in picked:
            _, after, table = outcomes[i][1]
            moves.append((i, (*uses[:i], after, *uses[i + 1 :]), table if self.quotas else namespaces))
        return moves, outcomes


def find_stranding(
    cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str, limit: int = MAX_ORDER_STATES
) -> OrderSearch:
    """HAMi's greedy walk over every creation order of `pods` and every node a score tie leaves open,
    as one search over states (`_States`), each explored once: the first run that strands a pod."""
    states = _States(cluster, pods, gpu_policy, node_policy)
    of_kind = states.of_kind
    seen: set = set()
    steps = [0]

    def onward(uses: tuple, namespaces: tuple, left: tuple, order: tuple, placed: tuple) -> Iterator:
        """From one state: a Stranding when the next pod of some kind fits nowhere, else each state HAMi
        may move to (drawn lazily: the kinds in order, each kind's moves in order)."""
        for kind, count in enumerate(left):
            if not count:
                continue
            pod = of_kind[kind][len(of_kind[kind]) - count]
            moves, outcomes = states.moves(uses, namespaces, kind)
            if not moves:
                failures = {
                    name: replace(outcome, pod=pod) for name, (_, outcome) in zip(cluster.names, outcomes, strict=True)
                }
                rest = [p for k, c in enumerate(left) for p in of_kind[k][len(of_kind[k]) - c :] if p is not pod]
                failure = NodeFailure(pod, failures)
                yield Stranding((*order, pod, *rest), gpu_policy, failure, list(placed), _quota(pod, namespaces))
                return
            fewer = (*left[:kind], count - 1, *left[kind + 1 :])
            for i, after, table in moves:
                yield after, table, fewer, (*order, pod), (*placed, (pod.workload, cluster.names[i]))

    def _quota(pod: PodRequest, namespaces: tuple) -> QuotaInUse | None:
        """The pod's namespace quota and its use in this state (None without a quota)."""
        quota = states.quotas.get(pod.namespace)
        if quota is None:
            return None
        used_mb, used_cores = dict(namespaces).get(pod.namespace, (0, 0))
        return QuotaInUse(pod.namespace, quota, used_mb, used_cores)

    stack: list[tuple[tuple, Iterator]] = []  # explicit: a tenant may run more pods than recursion allows

    def enter(uses: tuple, namespaces: tuple, left: tuple, order: tuple, placed: tuple) -> None:
        key = (uses, namespaces, left)
        if key in seen:
            return
        steps[0] += 1
        if steps[0] > limit:
            return
        stack.append((key, onward(uses, namespaces, left, order, placed)))

    enter(states.uses, states.table, tuple(states.left), (), ())
    while stack:
        key, moves = stack[-1]
        move = next(moves, None)
        if move is None:
            stack.pop()
            if steps[0] <= limit:
                seen.add(key)  # no run from here strands a pod
            continue
        if isinstance(move, Stranding):
            return OrderSearch(move)
        enter(*move)
    return OrderSearch(None, exhausted=steps[0] > limit)


class _Cut(Exception):
    """The every-order walk reached its state limit."""


def every_order_strands(
    cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str, limit: int = MAX_ORDER_STATES
) -> bool | None:
    """Whether HAMi strands some pod in every creation order on every choice among tied nodes (then it
    never places them all: the failure is certain). False as soon as one order and one choice of tied
    nodes place every pod; None when the walk stopped at `limit` states (not known: never certain).
    """
    states = _States(cluster, pods, gpu_policy, node_policy)
    failed: set = set()  # states from which no order and no tie choice places the pods left
    steps = [0]

    def onward(uses: tuple, namespaces: tuple, left: tuple) -> Iterator[tuple[tuple, tuple, tuple]]:
        """Each state HAMi may move to from this one (no move for a kind whose next pod is stranded here)."""
        for kind, count in enumerate(left):
            if count:
                fewer = (*left[:kind], count - 1, *left[kind + 1 :])
                moves, _ = states.moves(uses, namespaces, kind)
                for _, after, table in moves:
                    yield after, table, fewer

    stack: list[tuple[tuple, Iterator]] = []  # explicit: a tenant may run more pods than recursion allows

    def places_all(uses: tuple, namespaces: tuple, left: tuple) -> bool:
        """True when no pod is left; else the state is pushed to be walked (unless known to fail)."""
        if not any(left):
            return True
        key = (uses, namespaces, left)
        if key not in failed:
            steps[0] += 1
            if steps[0] > limit:
                raise _Cut
            stack.append((key, onward(uses, namespaces, left)))
        return False

    try:
        if places_all(states.uses, states.table, tuple(states.left)):
            return False
        while stack:
            key, moves = stack[-1]
            move = next(moves, None)
            if move is None:
                failed.add(key)  # no order and no tie choice from here places the pods left
                stack.pop()
            elif places_all(*move):
                return False  # one order and one choice of tied nodes place every pod
        return True
    except _Cut:
        return None


def order_verdict(
    cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str, placement_exists: bool
) -> Stranded | Undecided | None:
    """The first creation order and card policy (the configured one first) under which HAMi's walk strands
    a pod: certain when, with the configured policies, every order strands one on every tie branch
    (`_every_order`), else advice; or undecided when the walk was cut before finding one.
    `placement_exists`: the search proved that some placement holds every pod."""
    if cannot_strand(cluster, pods, gpu_policy):
        return None
    policies = (gpu_policy, *(p for p in POLICIES if p != gpu_policy))
    every, cut = distinct_orders(pods, cluster.rules) <= MAX_ORDERS, False
    for policy in policies:
        stranded: Stranding | None = None
        if every:  # every creation order, as one search over states
            search = find_stranding(cluster, pods, policy, node_policy)
            stranded, cut = search.stranding, cut or search.exhausted
        else:  # too many orders: a sample of them (sample_orders), every tie branch up to MAX_TIE_RUNS
            for order in sample_orders(pods):
                walk = walk_order(cluster, order, policy, node_policy)
                stranded, cut = walk.stranding, cut or walk.cut
                if stranded is not None:
                    break
        if stranded is None:
            continue
        configured = policy == gpu_policy
        if configured and (certain := _every_order(cluster, pods, gpu_policy, node_policy, placement_exists)):
            return certain
        return Stranded(
            stranded.order,
            tuple(stranded.placed),
            stranded.failure,
            policy,
            node_policy,
            configured,
            every_order=False,
            placement_exists=placement_exists,  # unproven when the search ran out
            quota=stranded.quota,
            webhook=quota_refusal(stranded.failure.pod, stranded.quota, cluster.rules),
        )
    return Undecided(Question.ORDERS, tuple(pods)) if cut else None


def _every_order(
    cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str, placement_exists: bool
) -> Stranded | None:
    """The certain verdict when HAMi's walk with the configured node and card policies strands a pod in
    every creation order, whichever tied node it picks at each step: then HAMi never places them all.
    Bounded (at most MAX_ORDERS distinct orders, MAX_ORDER_STATES states); a cut walk is never certain.
    The failure kept is the declared order's, taking the first tied node (every run strands, so that one
    does too)."""
    if (
        distinct_orders(pods, cluster.rules) > MAX_ORDERS
        or every_order_strands(cluster, pods, gpu_policy, node_policy) is not True
    ):
        return None
    declared = simulate(cluster, pods, gpu_policy, node_policy)
    assert declared is not None, "every run strands, the declared order's first one too"
    return Stranded(
        declared.order,
        tuple(declared.placed),
        declared.failure,
        gpu_policy,
        node_policy,
        configured=True,
        every_order=True,
        placement_exists=placement_exists,
        quota=declared.quota,
        webhook=quota_refusal(declared.failure.pod, declared.quota, cluster.rules),
    )
