"""Judging one tenant's GPU workloads against its GPU nodes, their current usage, per-pod limits and quota.
One evaluation for every tenant: a tenant with one GPU node is a cluster of one.

- certain (errors): a pod that no node can hold even alone (next to what already runs), and a set that
  no placement holds (each pod on one node, the namespace quota counted across the nodes), decided by
  exhaustive search (policies/search.py); the reason is HAMi's own walk for the first pod that does not
  fit; and a set that HAMi's walk, with the configured policies, strands in every creation order
  whichever tied node it picks (policies/orders.py; never when the walk was cut);
- advisory (warnings): HAMi's greedy walk, pod by pod in creation order, with the node policy and every
  card policy: a pod it strands in some order is reported with the order and policies (and, on several
  nodes, where the earlier pods went); and questions the bounded search could not decide (said, never
  silently dropped).

A tenant of one GPU node reads of cards (HAMi's reason on its one node); a tenant of several reads of
nodes, with HAMi's own events, which count the nodes per reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hami.cards import POLICIES, RESOURCE_QUOTA_NOT_FIT, CardSpec, ContainerFailure, NamespaceQuota, Node, PodRequest
from hami.nodes import MAX_TIE_RUNS, Cluster, NodeFailure
from policies.findings import (
    NO_PLACEMENT,
    ORDER_DEPENDENT,
    UNDECIDED,
    Finding,
    pod_level_findings,
    workload_of,
)
from policies.inventory import NamespaceUsage, TenantInventory
from policies.orders import (
    MAX_ORDER_STATES,
    MAX_ORDERS,
    cannot_strand,
    distinct_orders,
    every_order_strands,
    find_stranding,
    sample_orders,
    simulate,
)
from policies.search import SEARCH_BUDGET, Budget, first_fit, search_placement
from policies.workloads import Workload


def tenant_cluster(inventory: TenantInventory, pods: Sequence[PodRequest], one_node: str = "") -> Cluster:
    """The tenant's GPU nodes as HAMi sees them now: each node's cards and their use, and one quota table
    per namespace (HAMi's quota counts a namespace over every node). `one_node` names a tenant's only node."""
    quotas = {}
    quota = inventory.quota
    if quota is not None and (quota.gpumem or quota.gpucores):
        namespaces = set(inventory.namespaces) or {pod.namespace for pod in pods} | set(inventory.namespace_usage)
        quotas = {ns: NamespaceQuota(quota.gpumem, quota.gpucores) for ns in namespaces}
    usage = {ns: (u.gpumem, u.gpucores) for ns, u in inventory.namespace_usage.items()}
    use = list(inventory.card_usage) or None
    nodes, names, start = [], [], 0
    for name, cards in inventory.node_cards():
        nodes.append(Node(cards, use[start : start + len(cards)] if use else None, quotas, usage))
        names.append(name or one_node)
        start += len(cards)
    return Cluster(names, nodes)


def _several(inventory: TenantInventory) -> bool:
    """Whether the tenant is judged as several GPU nodes (its inventory lists them)."""
    return bool(inventory.nodes)


def evaluate_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """Every finding for a tenant's workloads, certain ones first."""
    findings, pods = pod_level_findings(inventory, workloads)
    if not pods:
        return findings
    cluster = tenant_cluster(inventory, pods)
    budget = Budget()  # shared by every search below: the whole evaluation is bounded

    now = " next to what already runs" if inventory.card_usage else " even alone"
    if _several(inventory):
        nowhere = f"fits on none of the tenant's {len(cluster.nodes)} GPU nodes{now}"
    else:
        nowhere = f"cannot fit on any of the tenant's {len(inventory.cards)} card(s){now}"
    placeable, alone = _placeable(inventory, cluster, pods, budget, nowhere)
    findings += alone
    if not placeable:
        return findings

    fits = search_placement(cluster, placeable, budget).fits
    if fits is False:
        findings.append(_first_unplaceable(inventory, cluster, placeable, budget))
        return findings
    if fits is None:
        findings.append(_undecided(inventory, "(all GPU workloads)"))
    stranding = _stranding(inventory, cluster, placeable, fits is True)
    if stranding is not None:
        findings.append(stranding)
    return findings


def _placeable(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget, nowhere: str
) -> tuple[list[PodRequest], list[Finding]]:
    """The pods worth the set analysis, and the findings about the others.

    A pod that fits nowhere even alone (next to what already runs) is said so plainly (`nowhere`, and
    HAMi's reason), once per workload, and left out; one whose search ran out of budget is said
    undecided, once, and kept. Identical pods are decided once."""
    placeable: list[PodRequest] = []
    findings: list[Finding] = []
    alone: dict[tuple, bool | None] = {}
    reported: set[str] = set()
    for pod in pods:
        if pod.shape() not in alone:
            alone[pod.shape()] = search_placement(cluster, [pod], budget).fits
        fits = alone[pod.shape()]
        if fits is False:
            if workload_of(pod) not in reported:
                reported.add(workload_of(pod))
                findings.append(_refusal(inventory, cluster, pod, nowhere, workload_of(pod)))
            continue
        if fits is None and workload_of(pod) not in reported:
            reported.add(workload_of(pod))
            findings.append(_undecided(inventory, workload_of(pod)))
        placeable.append(pod)
    return placeable, findings


def _undecided(inventory: TenantInventory, what: str) -> Finding:
    return Finding(
        "warning",
        inventory.name,
        what,
        UNDECIDED,
        f"the placement search ran out of its budget ({SEARCH_BUDGET} steps per tenant) without an answer; "
        "treated as fitting, and only HAMi's greedy order was checked",
    )


def _first_unplaceable(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget
) -> Finding:
    """The first pod (declared order) that no placement of it and the pods before it can hold; the reason
    is HAMi's own walk for that pod next to a placement of the pods before it.

    Walks the declared order keeping one placement of the pods so far (first fit); only when the next pod
    does not fit next to it is the exhaustive search asked whether another placement makes room."""
    placed = cluster.copy()
    for index, pod in enumerate(pods):
        if first_fit(placed, [pod]):  # commits only on success
            continue
        verdict = search_placement(cluster, pods[: index + 1], budget)
        if verdict.fits is None:
            return Finding(
                "error",
                inventory.name,
                "(all GPU workloads)",
                UNDECIDED,
                f"no placement holds all {len(pods)} pods, but the search ran out of its budget ({SEARCH_BUDGET} "
                "steps per tenant) before finding the first one that does not fit",
            )
        if verdict.fits:
            assert verdict.cluster is not None
            placed = verdict.cluster  # another placement of the pods so far makes room
            continue
        names = ", ".join(sorted({workload_of(other) for other in pods[:index]}))
        if _several(inventory):
            what = f"no placement across the nodes fits it next to {names or 'what runs'}"
        else:
            what = f"no placement fits it next to {names or 'what already runs'}"
        return _refusal(inventory, placed, pod, what, pod.workload)
    return Finding(  # pragma: no cover - the caller established that the whole set does not fit
        "error", inventory.name, "(all GPU workloads)", NO_PLACEMENT, f"no placement holds all {len(pods)} pods"
    )


def _refusal(inventory: TenantInventory, cluster: Cluster, pod: PodRequest, what: str, workload: str) -> Finding:
    """`what`, and why HAMi's walk refuses `pod` on `cluster` as it stands."""
    outcome = cluster.candidates(pod, inventory.gpu_policy, inventory.node_policy)
    if not isinstance(outcome, NodeFailure):  # only if HAMi's walk and the search ever disagreed
        return Finding("error", inventory.name, workload, NO_PLACEMENT, f"{what}: no placement exists")
    reason, why, cards = _why(inventory, cluster, outcome)
    return Finding("error", inventory.name, workload, reason, f"{what}: {why}", cards)


def _why(inventory: TenantInventory, cluster: Cluster, failure: NodeFailure) -> tuple[str, str, str | None]:
    """HAMi's reason, its explanation and the cards it names: on one node the node's own walk (and the
    namespace quota when it refused), on several each node's walk and HAMi's events."""
    if _several(inventory):
        events = "; ".join(failure.events())
        return failure.reason, f"{failure.explain()} [HAMi: {events}]", ", ".join(failure.cards) or None
    (only,) = failure.failures.values()
    return only.reason, f"{only.explain()}{_quota_note(cluster.nodes[0], only)}", ", ".join(only.cards) or None


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


def _stranding(inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], fits: bool) -> Finding | None:
    """The first creation order and card policy (the configured one first) under which HAMi's walk strands
    a pod: an error when, with the configured policies, every order strands one on every tie branch
    (`_certain`), else a warning; or a warning that the walk was cut before finding one."""
    if cannot_strand(cluster, pods):
        return None
    policies = (inventory.gpu_policy, *(p for p in POLICIES if p != inventory.gpu_policy))
    every, cut = distinct_orders(pods) <= MAX_ORDERS, False
    for gpu_policy in policies:
        if every:  # every creation order, as one search over states
            search = find_stranding(cluster, pods, gpu_policy, inventory.node_policy)
            stranded, cut = search.stranding, cut or search.exhausted
        else:  # too many orders: a sample of them (orders.sample_orders)
            stranded = None
            for order in sample_orders(pods):
                runs = [0]  # greedy runs of this order: every tie branch, up to MAX_TIE_RUNS
                stranded = simulate(cluster, order, gpu_policy, inventory.node_policy, runs)
                cut = cut or (stranded is None and runs[0] >= MAX_TIE_RUNS)
                if stranded is not None:
                    break
        if stranded is None:
            continue
        if gpu_policy == inventory.gpu_policy and (certain := _certain(inventory, cluster, pods, fits)) is not None:
            return certain
        configured = " (the configured card policy)" if gpu_policy == inventory.gpu_policy else ""
        sequence = _order_text(stranded.order)
        fitting = "fits in some placement, but " if fits else ""  # unproven when the search ran out
        failure = stranded.failure
        if _several(inventory):
            went = ", ".join(f"{pod} on {node}" for pod, node in stranded.placed) or "nothing before it"
            how = (
                f"with node policy {inventory.node_policy} and card policy {gpu_policy}{configured}, "
                f"HAMi can put {went} and then strands it"
            )
            shown: NodeFailure | ContainerFailure = failure
        else:
            how = f"with card policy {gpu_policy}{configured}, HAMi strands it"
            (shown,) = failure.failures.values()  # the one node's own walk
        return Finding(
            "warning",
            inventory.name,
            failure.pod.workload,
            ORDER_DEPENDENT,
            f"{fitting}created in the order {sequence} {how}: {shown.explain()} ({shown.reason})",
            ", ".join(shown.cards) or None,
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


def _order_text(order: Sequence[PodRequest], shown: int = 8) -> str:
    """A creation order as the message gives it: every pod of a short one, the ends of a long one."""
    names = [pod.workload for pod in order]
    if len(names) > 2 * shown + 1:
        names = [*names[:shown], f"... ({len(names) - 2 * shown} more)", *names[-shown:]]
    return " -> ".join(names)


def _certain(inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], fits: bool) -> Finding | None:
    """The error when HAMi's walk with the configured node and card policies strands a pod in every creation
    order, whichever tied node it picks at each step: then HAMi never places them all. Bounded (at most
    MAX_ORDERS distinct orders, MAX_ORDER_STATES states); a cut walk is never certain. The failure shown is
    the declared order's, taking the first tied node (every run strands, so that one does too)."""
    gpu_policy, node_policy = inventory.gpu_policy, inventory.node_policy
    if distinct_orders(pods) > MAX_ORDERS or every_order_strands(cluster, pods, gpu_policy, node_policy) is not True:
        return None
    declared = simulate(cluster, pods, gpu_policy, node_policy)
    assert declared is not None, "every run strands, the declared order's first one too"
    failure = declared.failure
    if _several(inventory):
        went = ", ".join(f"{pod} on {node}" for pod, node in declared.placed)
        went = f"it puts {went} and then strands {failure.pod.workload}" if went else "it strands the first pod"
        some = "some placement across the nodes would hold every pod, but " if fits else ""
        how = (
            f"with node policy {node_policy} and card policy {gpu_policy}, strands one in every creation order, "
            f"whichever tied node it picks; created as declared, {went}"
        )
    else:
        some = "some placement would hold every pod, but " if fits else ""
        how = f"with card policy {gpu_policy}, strands one in every creation order; created as declared"
    reason, why, cards = _why(inventory, cluster, failure)
    return Finding(
        "error",
        inventory.name,
        failure.pod.workload,
        reason,
        f"{some}HAMi places one pod at a time and, {how}: {why}",
        cards,
    )


def running(inventory: TenantInventory, workloads: Sequence[Workload]) -> TenantInventory:
    """The inventory once `workloads` run: HAMi places their pods one at a time, in this order, with the
    tenant's card and node policies (the first node on a tie): what a stack's own workloads hold when a
    new manifest arrives. A pod HAMi would leave Pending holds no card, but counts against the GPU-count
    quota."""
    pods = [pod for workload in workloads for pod in workload.pods if pod.containers]
    namespaces = {ns: [u.gpumem, u.gpucores, u.gpus] for ns, u in inventory.namespace_usage.items()}

    def count(pod: PodRequest, placed: Sequence[Sequence[CardSpec]] | None) -> None:
        totals = namespaces.setdefault(pod.namespace, [0, 0, 0])
        totals[2] += sum(c.nums for c in pod.containers)  # the API server's quota counts Pending pods too
        for container, cards in zip(pod.containers, placed or (), strict=False):
            totals[0] += sum(container.memory_on(card) for card in cards)
            totals[1] += container.fit_cores * len(cards)

    cluster = tenant_cluster(inventory, pods)
    for pod in pods:
        outcome = cluster.candidates(pod, inventory.gpu_policy, inventory.node_policy)
        if isinstance(outcome, NodeFailure):
            count(pod, None)
            continue
        choice = outcome[0][0]
        node = cluster.nodes[choice.node]
        count(pod, [[node.cards[i] for i in cards] for cards in choice.cards])
        cluster.commit(pod, choice)
    usage = {ns: NamespaceUsage(*totals) for ns, totals in namespaces.items() if any(totals)}
    return replace(inventory, card_usage=tuple(u for node in cluster.nodes for u in node.use), namespace_usage=usage)
