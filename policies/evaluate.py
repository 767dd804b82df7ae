"""Judging one tenant's GPU workloads against its cards, current usage, per-pod limits and quota.

Errors are certain failures (HAMi would leave a pod Pending, or the API server would refuse it,
whatever the order); warnings are placements that depend on arrival order or card policy, and
questions the bounded search could not decide (said, never silently dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hami.cards import (
    POLICIES,
    RESOURCE_QUOTA_NOT_FIT,
    CardSpec,
    ContainerFailure,
    Node,
    PodRequest,
)
from hami.nodes import NodeFailure
from policies.evaluate_nodes import evaluate_cluster, tenant_cluster
from policies.findings import (
    NO_PLACEMENT,
    ORDER_DEPENDENT,
    Finding,
    first_unplaceable,
    placeable_pods,
    pod_level_findings,
    tenant_node,
    undecided,
    workload_of,
)
from policies.fit_orders import find_stranding, stranded_in_every_order
from policies.fit_search import Budget, search_placement
from policies.inventory import NamespaceUsage, TenantInventory
from policies.workloads import Workload


def _quota_note(node: Node, failure: ContainerFailure) -> str:
    if RESOURCE_QUOTA_NOT_FIT not in failure.reasons:
        return ""
    quota = node.quotas[failure.pod.namespace]
    used_mb, used_cores = node.namespace_use.get(failure.pod.namespace, (0, 0))
    keys = []
    if quota.memory_mb:
        keys.append(f"limits.nvidia.com/gpumem={quota.memory_mb} ({used_mb} MB in use)")
    if quota.cores:
        keys.append(f"limits.nvidia.com/gpucores={quota.cores} ({used_cores}% in use)")
    return f" [namespace {failure.pod.namespace} quota {', '.join(keys)}]"


def _explain(node: Node, pod: PodRequest, policy: str) -> ContainerFailure | None:
    """Why HAMi refuses `pod` on `node` (HAMi's own walk and reason names); None if it would not."""
    trial = node.copy()
    placed = trial.place_hami(pod, policy)
    return placed if isinstance(placed, ContainerFailure) else None


def evaluate_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """Every finding for a tenant's workloads, certain ones first."""
    if inventory.nodes:  # several GPU nodes: HAMi's node selection too
        return evaluate_cluster(inventory, workloads)
    findings, pods = pod_level_findings(inventory, workloads)
    if not pods:
        return findings
    node = tenant_node(inventory, pods)
    policy = inventory.gpu_policy
    budget = Budget()  # shared by every search below: the whole evaluation is bounded

    def nowhere(pod: PodRequest) -> Finding:
        failure = _explain(node, pod, policy)
        now = " next to what already runs" if inventory.card_usage else " even alone"
        return Finding(
            "error",
            inventory.name,
            workload_of(pod),
            failure.reason if failure else NO_PLACEMENT,
            f"cannot fit on any of the tenant's {len(node.cards)} card(s){now}: "
            + (f"{failure.explain()}{_quota_note(node, failure)}" if failure else "no placement exists"),
            (", ".join(failure.cards) or None) if failure else None,
        )

    placeable, alone = placeable_pods(inventory, pods, lambda pod: search_placement(node, [pod], budget).fits, nowhere)
    findings += alone
    if not placeable:
        return findings

    verdict = search_placement(node, placeable, budget)
    if verdict.fits is False:
        findings.append(_first_unplaceable(inventory, node, placeable, budget))
        return findings
    if verdict.fits is None:
        findings.append(undecided(inventory, "(all GPU workloads)"))
    policies = (policy, *(p for p in POLICIES if p != policy))
    stranding = find_stranding(node, placeable, policies)
    certain = stranded_in_every_order(node, placeable, policy) if stranding is not None else None
    if certain is not None:
        findings.append(
            Finding(
                "error",
                inventory.name,
                certain.pod.workload,
                certain.reason,
                f"some placement would hold every pod, but HAMi places one pod at a time and, with card policy "
                f"{policy}, strands one in every creation order; created as declared: {certain.explain()}"
                f"{_quota_note(node, certain)}",
                ", ".join(certain.cards) or None,
            )
        )
    elif stranding is not None:
        order = " -> ".join(pod.workload for pod in stranding.order)
        configured = " (the configured card policy)" if stranding.policy == policy else ""
        findings.append(
            Finding(
                "warning",
                inventory.name,
                stranding.failure.pod.workload,
                ORDER_DEPENDENT,
                f"fits in some placement, but created in the order {order} with card policy "
                f"{stranding.policy}{configured}, HAMi strands it: {stranding.failure.explain()} "
                f"({stranding.failure.reason})",
                ", ".join(stranding.failure.cards) or None,
            )
        )
    return findings


def running(inventory: TenantInventory, workloads: Sequence[Workload]) -> TenantInventory:
    """The inventory once `workloads` run: HAMi places their pods one at a time, in this order, with the
    tenant's card policy (what a stack's own workloads hold when a new manifest arrives). A pod HAMi
    would leave Pending holds no card, but counts against the GPU-count quota."""
    pods = [pod for workload in workloads for pod in workload.pods if pod.containers]
    namespaces = {ns: [u.gpumem, u.gpucores, u.gpus] for ns, u in inventory.namespace_usage.items()}

    def count(pod: PodRequest, placed: Sequence[Sequence[CardSpec]] | None) -> None:
        totals = namespaces.setdefault(pod.namespace, [0, 0, 0])
        totals[2] += sum(c.nums for c in pod.containers)  # the API server's quota counts Pending pods too
        for container, cards in zip(pod.containers, placed or (), strict=False):
            totals[0] += sum(container.memory_on(card) for card in cards)
            totals[1] += container.fit_cores * len(cards)

    if inventory.nodes:  # several GPU nodes: HAMi's node policy picks the node (first on a tie)
        cluster = tenant_cluster(inventory, pods).copy()
        for pod in pods:
            outcome = cluster.candidates(pod, inventory.gpu_policy, inventory.node_policy)
            if isinstance(outcome, NodeFailure):
                count(pod, None)
                continue
            choice = outcome[0][0]
            node = cluster.nodes[choice.node]
            count(pod, [[node.cards[i] for i in cards] for cards in choice.cards])
            cluster.commit(pod, choice)
        use = tuple(u for node in cluster.nodes for u in node.use)
    else:
        single = tenant_node(inventory, pods)
        for pod in pods:
            placed = single.place_hami(pod, inventory.gpu_policy)
            count(pod, None if isinstance(placed, ContainerFailure) else [[single.cards[i] for i in c] for c in placed])
        use = tuple(single.use)
    usage = {ns: NamespaceUsage(*totals) for ns, totals in namespaces.items() if any(totals)}
    return replace(inventory, card_usage=use, namespace_usage=usage)


def _first_unplaceable(inventory: TenantInventory, node: Node, pods: Sequence[PodRequest], budget: Budget) -> Finding:
    """The first pod that does not fit on the tenant's one GPU node; the reason is HAMi's own walk for that
    pod next to a placement of the pods before it."""

    def fit_next(placed: Node, pod: PodRequest) -> Node | None:
        return placed if placed.place_first_fit(pod) else None

    def search(some: Sequence[PodRequest]) -> tuple[bool | None, Node | None]:
        verdict = search_placement(node, some, budget)
        return verdict.fits, verdict.node

    def refuse(placed: Node, pod: PodRequest, names: list[str]) -> Finding:
        failure = _explain(placed, pod, inventory.gpu_policy)
        why = f"{failure.explain()}{_quota_note(placed, failure)}" if failure else "no placement exists"
        return Finding(
            "error",
            inventory.name,
            pod.workload,
            failure.reason if failure else NO_PLACEMENT,
            f"no placement fits it next to {', '.join(names) or 'what already runs'}: {why}",
            (", ".join(failure.cards) or None) if failure else None,
        )

    return first_unplaceable(inventory, pods, node.copy(), fit_next, search, refuse)
