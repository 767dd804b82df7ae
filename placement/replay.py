"""HAMi's one run over a tenant's pods in creation order, the way a stack's own workloads and then a new
manifest land: each pod on the node HAMi's policies choose (the first node on a score tie, in declaration
order), with its cards, or why it stays Pending (the run goes on without it, as HAMi's does); and what the
tenant's cards and namespaces hold after.

`make check` judges a manifest next to what the stack's workloads hold once placed so (not next to whatever
placement would suit the manifest best), and says where HAMi would put the manifest's pods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from hami.cards import CardSpec, PodRequest
from hami.nodes import Cluster, NodeFailure
from placement.inventory import NamespaceUsage, TenantInventory
from placement.workloads import Workload


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
    """One run of HAMi's walk, pod by pod, on `cluster` (left as it is): where each pod goes, or why not."""
    return [outcome for outcome, _ in _walk(cluster.copy(), order, gpu_policy, node_policy)]


def _walk(
    state: Cluster, order: Sequence[PodRequest], gpu_policy: str, node_policy: str
) -> list[tuple[Placed | NodeFailure, list[list[CardSpec]]]]:
    """The run itself, committing each placed pod on `state`: each outcome with the cards each container holds."""
    found: list[tuple[Placed | NodeFailure, list[list[CardSpec]]]] = []
    for pod in order:
        outcome = state.candidates(pod, gpu_policy, node_policy)
        if isinstance(outcome, NodeFailure):
            found.append((outcome, []))
            continue
        choices = outcome.choices
        choice = choices[0]
        tied = tuple(state.names[c.node] for c in choices) if len(choices) > 1 else ()
        node = state.nodes[choice.node]
        held = [[node.cards[i] for i in cards] for cards in choice.cards]
        found.append((Placed(pod, state.names[choice.node], state.card_ids(choice), tied), held))
        state.commit(pod, choice)
    return found


@dataclass(frozen=True)
class Replay:
    """The run's outcome per pod, in order, and the tenant's inventory once it is over."""

    outcomes: list[Placed | NodeFailure]
    inventory: TenantInventory


def replay(inventory: TenantInventory, workloads: Sequence[Workload], one_node: str = "") -> Replay:
    """HAMi's run over the workloads' pods on the tenant as it stands. A pod HAMi leaves Pending holds no card,
    but counts against the GPU-count quota (the API server's quota counts Pending pods too). `one_node`
    names a tenant's only node in the outcomes."""
    pods = [pod for workload in workloads for pod in workload.pods]
    state = inventory.cluster(pods, one_node)
    walked = _walk(state, pods, inventory.gpu_policy, inventory.node_policy)
    namespaces = dict(inventory.namespace_usage)
    for outcome, held in walked:
        pod = outcome.pod
        if not pod.containers:
            continue
        namespaces[pod.namespace] = namespaces.get(pod.namespace, NamespaceUsage()) + NamespaceUsage(
            memory_mb=sum(c.memory_on(card) for c, cards in zip(pod.containers, held, strict=False) for card in cards),
            cores=sum(c.fit_cores * len(cards) for c, cards in zip(pod.containers, held, strict=False)),
            gpus=sum(c.nums for c in pod.containers),
        )
    usage = {ns: u for ns, u in namespaces.items() if u != NamespaceUsage()}
    card_usage = tuple(u for node in state.nodes for u in node.use)
    return Replay([outcome for outcome, _ in walked], replace(inventory, card_usage=card_usage, namespace_usage=usage))
