"""Judging a tenant with several GPU nodes: policies/evaluate.py's questions, asked across the nodes
with HAMi's node selection (hami/nodes.py).

- certain (errors): a pod no node can hold even alone, and a set that no placement across the nodes
  holds (each pod on one node; the namespace quota counted over all of them), decided by exhaustive
  search; the reason is each node's own, as HAMi reports it per node; and a set that HAMi's walk, with
  the configured policies, strands in every creation order whichever tied node it picks (as on one
  node, policies/fit_orders.stranded_in_every_order; never when the walk was cut);
- advisory (warnings): HAMi's greedy walk, pod by pod in creation order, with the node policy
  (binpack: the most used node that fits; spread: the least used) and every card policy, following
  every node a score tie leaves open; a stranded pod is reported with the order, policies and the
  nodes the earlier pods went to.
"""

from __future__ import annotations

from collections.abc import Sequence

from hami.cards import POLICIES, Node, PodRequest
from hami.nodes import MAX_TIE_RUNS, Cluster, NodeFailure
from policies.cluster_orders import (
    MAX_ORDER_STATES,
    every_order_strands,
    find_cluster_stranding,
    simulate_cluster,
)
from policies.cluster_search import first_fit, search_cluster
from policies.findings import (
    NO_PLACEMENT,
    ORDER_DEPENDENT,
    UNDECIDED,
    Finding,
    first_unplaceable,
    placeable_pods,
    pod_level_findings,
    tenant_node,
    undecided,
    workload_of,
)
from policies.fit_orders import MAX_ORDERS, arrival_orders, cannot_strand, distinct_orders
from policies.fit_search import Budget
from policies.inventory import TenantInventory
from policies.workloads import Workload

MAX_PERMUTED = 6  # up to this many pods every creation order is searched across the nodes; above, a sample


def tenant_cluster(inventory: TenantInventory, pods: Sequence[PodRequest]) -> Cluster:
    """The tenant's GPU nodes as HAMi sees them now: each node's cards and their use, one quota table."""
    whole = tenant_node(inventory, pods)  # quotas and namespace use, as on one node
    nodes, start = [], 0
    names = []
    for name, cards in inventory.node_cards():
        use = whole.use[start : start + len(cards)]
        start += len(cards)
        nodes.append(Node(cards, use, whole.quotas, {ns: tuple(v) for ns, v in whole.namespace_use.items()}))
        names.append(name)
    return Cluster(names, nodes)


def _failure(cluster: Cluster, pod: PodRequest, inventory: TenantInventory) -> NodeFailure | None:
    outcome = cluster.candidates(pod, inventory.gpu_policy, inventory.node_policy)
    return outcome if isinstance(outcome, NodeFailure) else None


def _nowhere(inventory: TenantInventory, cluster: Cluster, pod: PodRequest, what: str) -> Finding:
    failure = _failure(cluster, pod, inventory)
    if failure is None:
        return Finding("error", inventory.name, workload_of(pod), NO_PLACEMENT, f"{what}: no placement exists")
    events = "; ".join(failure.events())
    return Finding(
        "error",
        inventory.name,
        workload_of(pod),
        failure.reason,
        f"{what}: {failure.explain()} [HAMi: {events}]",
        ", ".join(failure.cards) or None,
    )


def evaluate_cluster(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """Every finding for a tenant with several GPU nodes, certain ones first."""
    findings, pods = pod_level_findings(inventory, workloads)
    if not pods:
        return findings
    cluster = tenant_cluster(inventory, pods)
    budget = Budget()
    count = len(cluster.nodes)

    now = " next to what already runs" if inventory.card_usage else " even alone"
    placeable, alone = placeable_pods(
        inventory,
        pods,
        lambda pod: search_cluster(cluster, [pod], budget).fits,
        lambda pod: _nowhere(inventory, cluster, pod, f"fits on none of the tenant's {count} GPU nodes{now}"),
    )
    findings += alone
    if not placeable:
        return findings

    fits = search_cluster(cluster, placeable, budget).fits
    if fits is False:
        findings.append(_first_unplaceable(inventory, cluster, placeable, budget))
        return findings
    if fits is None:
        findings.append(undecided(inventory, "(all GPU workloads)"))
    stranding = _stranding(inventory, cluster, placeable, fits is True)
    if stranding is not None:
        findings.append(stranding)
    return findings


def _stranding(inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], fits: bool) -> Finding | None:
    """The first creation order and card policy under which HAMi's walk across the nodes strands a pod: an
    error when, with the configured policies, every order strands one on every tie branch (`_certain`)."""
    # The pigeonhole proof of fit_orders.cannot_strand holds over the cards of every node at once: a pod is
    # stranded only when every card of every node rejects it, and blocking them all takes more
    # placements than the other pods make; and a node with a card that takes the pod passes HAMi's filter.
    everything = Node(
        [card for node in cluster.nodes for card in node.cards],
        [use for node in cluster.nodes for use in node.use],
        cluster.nodes[0].quotas,
        cluster.namespace_use,
    )
    if cannot_strand(everything, pods):
        return None
    policies = (inventory.gpu_policy, *(p for p in POLICIES if p != inventory.gpu_policy))
    cut = False
    for gpu_policy in policies:
        if len(pods) <= MAX_PERMUTED:  # every creation order, as one search over states
            search = find_cluster_stranding(cluster, pods, gpu_policy, inventory.node_policy)
            stranded, cut = search.stranding, cut or search.exhausted
        else:  # the declared order, its reverse, smallest and largest first (as on one node)
            stranded = None
            for order in arrival_orders(pods):
                runs = [0]  # greedy runs of this order: every tie branch, up to MAX_TIE_RUNS
                stranded = simulate_cluster(cluster, order, gpu_policy, inventory.node_policy, runs)
                cut = cut or (stranded is None and runs[0] >= MAX_TIE_RUNS)
                if stranded is not None:
                    break
        if stranded is None:
            continue
        if gpu_policy == inventory.gpu_policy and (certain := _certain(inventory, cluster, pods, fits)) is not None:
            return certain
        failure = stranded.failure
        sequence = " -> ".join(pod.workload for pod in stranded.order)
        went = ", ".join(f"{pod} on {node}" for pod, node in stranded.placed) or "nothing before it"
        configured = " (the configured card policy)" if gpu_policy == inventory.gpu_policy else ""
        return Finding(
            "warning",
            inventory.name,
            failure.pod.workload,
            ORDER_DEPENDENT,
            f"fits in some placement, but created in the order {sequence} with node policy "
            f"{inventory.node_policy} and card policy {gpu_policy}{configured}, HAMi can put {went} and then "
            f"strands it: {failure.explain()} ({failure.reason})",
            ", ".join(failure.cards) or None,
        )
    if cut:
        return Finding(
            "warning",
            inventory.name,
            "(all GPU workloads)",
            UNDECIDED,
            f"the creation-order simulation stopped (after {MAX_ORDER_STATES} states, or {MAX_TIE_RUNS} runs of one "
            "order's score ties) without finding a stranded pod; not every order or tie was checked",
        )
    return None


def _certain(inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], fits: bool) -> Finding | None:
    """The error when HAMi's walk with the configured node and card policies strands a pod in every creation
    order, whichever tied node it picks at each step: then HAMi never places them all. Bounded as on one node
    (at most MAX_ORDERS distinct orders, MAX_ORDER_STATES states); a cut walk is never certain. The failure
    shown is the declared order's, taking the first tied node (every run strands, so that one does too)."""
    gpu_policy, node_policy = inventory.gpu_policy, inventory.node_policy
    if distinct_orders(pods) > MAX_ORDERS or every_order_strands(cluster, pods, gpu_policy, node_policy) is not True:
        return None
    declared = simulate_cluster(cluster, pods, gpu_policy, node_policy)
    assert declared is not None, "every run strands, the declared order's first one too"
    failure = declared.failure
    went = ", ".join(f"{pod} on {node}" for pod, node in declared.placed)
    went = f"it puts {went} and then strands {failure.pod.workload}" if went else "it strands the first pod"
    some = "some placement across the nodes would hold every pod, but " if fits else ""
    return Finding(
        "error",
        inventory.name,
        failure.pod.workload,
        failure.reason,
        f"{some}HAMi places one pod at a time and, with node policy {node_policy} and card policy {gpu_policy}, "
        f"strands one in every creation order, whichever tied node it picks; created as declared, {went}: "
        f"{failure.explain()} [HAMi: {'; '.join(failure.events())}]",
        ", ".join(failure.cards) or None,
    )


def _first_unplaceable(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget
) -> Finding:
    """The first pod (declared order) that no placement across the nodes of it and the pods before it can hold."""

    def fit_next(placed: Cluster, pod: PodRequest) -> Cluster | None:
        trial = placed.copy()
        return trial if first_fit(trial, [pod]) else None

    def search(some: Sequence[PodRequest]) -> tuple[bool | None, Cluster | None]:
        verdict = search_cluster(cluster, some, budget)
        return verdict.fits, verdict.cluster

    def refuse(placed: Cluster, pod: PodRequest, names: list[str]) -> Finding:
        why = f"no placement across the nodes fits it next to {', '.join(names) or 'what runs'}"
        finding = _nowhere(inventory, placed, pod, why)
        return Finding(finding.severity, finding.tenant, pod.workload, finding.reason, finding.message, finding.card)

    return first_unplaceable(inventory, pods, cluster.copy(), fit_next, search, refuse)
