"""HAMi's one run over a tenant's pods in creation order, the way a stack's own workloads and then a new
manifest land: each pod on the node HAMi's policies choose (the first node on a score tie, in declaration
order), with its cards, or why it stays Pending (the run goes on without it, as HAMi's does); and what the
tenant's cards and namespaces hold after.

`make check` judges a manifest next to what the stack's workloads hold once placed so (not next to whatever
placement would suit the manifest best), and says where HAMi would put the manifest's pods.

Each pod is created once the ones before it are placed, so under a release whose webhook checks the namespace
quota at create (v2.10.0; hami/webhook.py) a pod over it is refused then (`Denied`): it never exists, holds no card
and counts against no quota; so is a pod the release's webhook refuses whatever runs (`webhook_denial`: under v2.10.0
a gpumem-percentage outside 0-100, a privileged container; under both spec.nodeName). Under v2.10.0 a pod's init
containers are placed with it (hami/nodes.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from hami.cards import PodRequest
from hami.cluster import NodeFailure, counted_init_containers
from hami.webhook import quota_refusal, webhook_denial
from placement.inventory import NamespaceUsage, TenantInventory
from placement.workloads import Workload, quota_gpus


@dataclass(frozen=True)
class Placed:
    """Where one run of HAMi's walk put a pod: its node, each container's card ids, and the nodes that
    tied with it in HAMi's score (HAMi could have picked any of them; empty when none tied)."""

    pod: PodRequest
    node: str
    cards: list[list[str]]
    tied: tuple[str, ...]


@dataclass(frozen=True)
class Denied:
    """HAMi's webhook refused the pod when it was created: the API server's message."""

    pod: PodRequest
    message: str


@dataclass(frozen=True)
class Replay:
    """The run's outcome per pod, in order, and the tenant's inventory once it is over."""

    outcomes: list[Placed | NodeFailure | Denied]
    inventory: TenantInventory


def replay(inventory: TenantInventory, workloads: Sequence[Workload], one_node: str = "") -> Replay:
    """HAMi's run over the workloads' pods on the tenant as it stands. A pod HAMi leaves Pending holds no card,
    but counts against the GPU-count quota (the API server's quota counts Pending pods too). `one_node`
    names a tenant's only node in the outcomes."""
    pods = [pod for workload in workloads for pod in workload.pods]
    state = inventory.cluster(pods, one_node)
    outcomes: list[Placed | NodeFailure | Denied] = []
    namespaces = dict(inventory.namespace_usage)
    for pod in pods:
        refused = webhook_denial(pod.admission, state.rules)
        denial = refused[1] if refused else quota_refusal(pod, state.quota_in_use(pod.namespace), state.rules)
        if denial is not None:  # refused at create: it never exists
            outcomes.append(Denied(pod, denial))
            continue
        outcome = state.candidates(pod, inventory.gpu_policy, inventory.node_policy)
        held = (0, 0)  # MB and cores the pod holds once placed (none when Pending)
        if isinstance(outcome, NodeFailure):
            outcomes.append(outcome)
        else:
            choice = outcome.choices[0]  # the first node on a tie
            tied = tuple(state.names[c.node] for c in outcome.choices) if len(outcome.choices) > 1 else ()
            outcomes.append(Placed(pod, state.names[choice.node], state.card_ids(choice), tied))
            before = _held(state.nodes[choice.node].use)
            state.commit(pod, choice)  # its app containers, and under v2.10.0 its init containers' peak
            after = _held(state.nodes[choice.node].use)
            held = (after[0] - before[0], after[1] - before[1])
        inits = counted_init_containers(pod, state.rules)
        if pod.containers or inits:
            # The API server's quota counts Pending pods too, at the pod's effective request (Kubernetes'
            # PodRequests, native sidecars beside the app containers: placement/workloads.py `pod_gpus`).
            gpus = quota_gpus(pod, init=state.rules.init_containers_counted)
            namespaces[pod.namespace] = namespaces.get(pod.namespace, NamespaceUsage()) + NamespaceUsage(
                memory_mb=held[0], cores=held[1], gpus=gpus
            )
    usage = {ns: u for ns, u in namespaces.items() if u != NamespaceUsage()}
    card_usage = tuple(u for node in state.nodes for u in node.use)
    return Replay(outcomes, replace(inventory, card_usage=card_usage, namespace_usage=usage))


def _held(use: list) -> tuple[int, int]:
    """MB and cores in use on a node's cards."""
    return sum(u.memory_mb for u in use), sum(u.cores for u in use)
