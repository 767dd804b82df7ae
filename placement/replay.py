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
from hami.nodes import NodeFailure
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
    outcomes: list[Placed | NodeFailure] = []
    namespaces = dict(inventory.namespace_usage)
    for pod in pods:
        outcome = state.candidates(pod, inventory.gpu_policy, inventory.node_policy)
        held: list[list[CardSpec]] = []
        if isinstance(outcome, NodeFailure):
            outcomes.append(outcome)
        else:
            choice = outcome.choices[0]  # the first node on a tie
            tied = tuple(state.names[c.node] for c in outcome.choices) if len(outcome.choices) > 1 else ()
            outcomes.append(Placed(pod, state.names[choice.node], state.card_ids(choice), tied))
            held = [[state.nodes[choice.node].cards[i] for i in cards] for cards in choice.cards]
            state.commit(pod, choice)
        if pod.containers:
            on_cards = list(zip(pod.containers, held, strict=False))  # none when Pending
            namespaces[pod.namespace] = namespaces.get(pod.namespace, NamespaceUsage()) + NamespaceUsage(
                memory_mb=sum(c.memory_on(card) for c, cards in on_cards for card in cards),
                cores=sum(c.fit_cores * len(cards) for c, cards in on_cards),
                gpus=sum(c.nums for c in pod.containers),  # the API server's quota counts Pending pods too
            )
    usage = {ns: u for ns, u in namespaces.items() if u != NamespaceUsage()}
    card_usage = tuple(u for node in state.nodes for u in node.use)
    return Replay(outcomes, replace(inventory, card_usage=card_usage, namespace_usage=usage))
