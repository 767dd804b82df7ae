"""The advisory verdict across a tenant's GPU nodes: HAMi's greedy walk (node policy of
policies/node_policy.py, card policy of policies/gpu_fit.py), every tie between nodes followed, over
the arrival orders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from policies.gpu_fit import CardUse, ContainerFailure, Node, PodRequest
from policies.node_policy import MAX_TIE_RUNS, Choice, Cluster, NodeFailure, best, node_policy_of, node_score


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
