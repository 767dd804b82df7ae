"""Judging one tenant's GPU workloads against its GPU nodes, their current usage, per-pod limits and quota.
One evaluation for every tenant: a tenant with one GPU node is a cluster of one.

- certain (errors): a pod that no node can hold even alone (next to what already runs), and a set that
  no placement holds (each pod on one node, the namespace quota counted across the nodes), decided by
  exhaustive search (placement/search.py); the reason is HAMi's own walk for the first pod that does not
  fit; and a set that HAMi's walk, with the configured policies, strands in every creation order
  whichever tied node it picks (placement/orders.py; never when the walk was cut);
- advisory (warnings): HAMi's greedy walk, pod by pod in creation order, with the node policy and every
  card policy: a pod it strands in some order is reported with the order and policies (and, on several
  nodes, where the earlier pods went); and questions the bounded search could not decide (said, never
  silently dropped).

The decisions are verdicts (placement/verdicts.py), each with its pods, order, placements and HAMi's
failure; the engine words nothing: placement/wording.py says them, as a tenant of one GPU node or of several
reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hami.cards import POLICIES, CardSpec, NamespaceQuota, PodRequest
from hami.nodes import Cluster, Node, NodeFailure
from placement.inventory import NamespaceUsage, TenantInventory
from placement.orders import (
    MAX_ORDERS,
    Stranding,
    cannot_strand,
    distinct_orders,
    every_order_strands,
    find_stranding,
    sample_orders,
    simulate,
    walk_order,
)
from placement.per_pod import pod_level
from placement.search import Budget, Fit, first_fit, search_placement
from placement.verdicts import (
    Judgement,
    PlacementVerdict,
    Question,
    QuotaInUse,
    Refused,
    Stranded,
    Undecided,
    Unplaceable,
)
from placement.workloads import Workload, workload_of


def tenant_cluster(inventory: TenantInventory, pods: Sequence[PodRequest], one_node: str = "") -> Cluster:
    """The tenant's GPU nodes as HAMi sees them now: each node's cards and their use, and one quota table
    per namespace (HAMi's quota counts a namespace over every node). `one_node` names a tenant's only node."""
    quotas = {}
    quota = inventory.quota
    if quota is not None and (quota.gpumem or quota.gpucores):
        namespaces = set(inventory.namespaces) or {pod.namespace for pod in pods} | set(inventory.namespace_usage)
        quotas = {ns: NamespaceQuota(quota.gpumem, quota.gpucores) for ns in namespaces}
    usage = {ns: (u.memory_mb, u.cores) for ns, u in inventory.namespace_usage.items()}
    use = list(inventory.card_usage) or None
    nodes, names, start = [], [], 0
    for name, cards in inventory.node_cards():
        nodes.append(Node(cards, use[start : start + len(cards)] if use else None, quotas, usage))
        names.append(name or one_node)
        start += len(cards)
    return Cluster(names, nodes)


def judge_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> Judgement:
    """Every verdict on a tenant's workloads: pod by pod, then the placement of the GPU pods that passed."""
    per_pod, quota, pods = pod_level(inventory, workloads)
    return Judgement(tuple(per_pod), tuple(quota), tuple(judge_placement(inventory, pods)) if pods else ())


def judge_placement(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[PlacementVerdict]:
    """The engine's verdicts on the tenant's GPU pods (the per-pod rules have passed them), certain ones first."""
    cluster = tenant_cluster(inventory, pods)
    budget = Budget()  # shared by every search below: the whole evaluation is bounded
    placeable, verdicts = _placeable(inventory, cluster, pods, budget)
    if not placeable:
        return verdicts
    answer = search_placement(cluster, placeable, budget).answer
    if answer is Fit.NO_PLACEMENT:
        verdicts.append(_first_unplaceable(inventory, cluster, placeable, budget))
        return verdicts
    if answer is Fit.UNDECIDED:
        verdicts.append(Undecided(Question.SET_FITS, tuple(placeable)))
    stranding = _stranding(inventory, cluster, placeable, answer is Fit.FITS)
    if stranding is not None:
        verdicts.append(stranding)
    return verdicts


def _placeable(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget
) -> tuple[list[PodRequest], list[PlacementVerdict]]:
    """The pods worth the set analysis, and the verdicts on the others.

    A pod that fits nowhere even alone (next to what already runs) is refused, once per workload, and
    left out; one whose search ran out of budget is undecided, once, and kept. Identical pods are decided
    once."""
    placeable: list[PodRequest] = []
    verdicts: list[PlacementVerdict] = []
    alone: dict[tuple, Fit] = {}
    reported: set[str] = set()
    for pod in pods:
        if pod.shape not in alone:
            alone[pod.shape] = search_placement(cluster, [pod], budget).answer
        answer = alone[pod.shape]
        if answer is Fit.NO_PLACEMENT:
            if workload_of(pod) not in reported:
                reported.add(workload_of(pod))
                verdicts.append(Refused(pod, *_hamis_refusal(inventory, cluster, pod)))
            continue
        if answer is Fit.UNDECIDED and workload_of(pod) not in reported:
            reported.add(workload_of(pod))
            verdicts.append(Undecided(Question.POD_FITS, (pod,)))
        placeable.append(pod)
    return placeable, verdicts


def _first_unplaceable(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], budget: Budget
) -> Unplaceable | Undecided:
    """The first pod (declared order) that no placement of it and the pods before it can hold, with HAMi's
    own walk for that pod next to a placement of the pods before it.

    Walks the declared order keeping one placement of the pods so far (first fit); only when the next pod
    does not fit next to it is the exhaustive search asked whether another placement makes room."""
    placed = cluster.copy()
    for index, pod in enumerate(pods):
        if first_fit(placed, [pod]):  # commits only on success
            continue
        search = search_placement(cluster, pods[: index + 1], budget)
        if search.answer is Fit.UNDECIDED:
            return Undecided(Question.FIRST_UNPLACEABLE, tuple(pods))
        if search.answer is Fit.FITS:
            assert search.cluster is not None
            placed = search.cluster  # another placement of the pods so far makes room
            continue
        return Unplaceable(pod, tuple(pods[:index]), *_hamis_refusal(inventory, placed, pod))
    return Unplaceable(None, tuple(pods), None, None)  # pragma: no cover - the caller found the set fits nowhere


def _hamis_refusal(
    inventory: TenantInventory, cluster: Cluster, pod: PodRequest
) -> tuple[NodeFailure | None, QuotaInUse | None]:
    """Why HAMi's walk refuses `pod` on `cluster` as it stands (None only if the walk and the search ever
    disagreed), and the pod's namespace quota as the walk saw it."""
    outcome = cluster.candidates(pod, inventory.gpu_policy, inventory.node_policy)
    failure = outcome if isinstance(outcome, NodeFailure) else None
    return failure, QuotaInUse.on(cluster.nodes[0], pod.namespace)


def _stranding(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], placement_exists: bool
) -> Stranded | Undecided | None:
    """The first creation order and card policy (the configured one first) under which HAMi's walk strands
    a pod: certain when, with the configured policies, every order strands one on every tie branch
    (`_every_order`), else advice; or undecided when the walk was cut before finding one."""
    if cannot_strand(cluster, pods):
        return None
    policies = (inventory.gpu_policy, *(p for p in POLICIES if p != inventory.gpu_policy))
    every, cut = distinct_orders(pods) <= MAX_ORDERS, False
    for gpu_policy in policies:
        stranded: Stranding | None = None
        if every:  # every creation order, as one search over states
            search = find_stranding(cluster, pods, gpu_policy, inventory.node_policy)
            stranded, cut = search.stranding, cut or search.exhausted
        else:  # too many orders: a sample of them (orders.sample_orders), every tie branch up to MAX_TIE_RUNS
            for order in sample_orders(pods):
                walk = walk_order(cluster, order, gpu_policy, inventory.node_policy)
                stranded, cut = walk.stranding, cut or walk.cut
                if stranded is not None:
                    break
        if stranded is None:
            continue
        configured = gpu_policy == inventory.gpu_policy
        if configured and (certain := _every_order(inventory, cluster, pods, placement_exists)) is not None:
            return certain
        return Stranded(
            stranded.order,
            tuple(stranded.placed),
            stranded.failure,
            gpu_policy,
            inventory.node_policy,
            configured,
            every_order=False,
            placement_exists=placement_exists,  # unproven when the search ran out
        )
    return Undecided(Question.ORDERS, tuple(pods)) if cut else None


def _every_order(
    inventory: TenantInventory, cluster: Cluster, pods: Sequence[PodRequest], placement_exists: bool
) -> Stranded | None:
    """The certain verdict when HAMi's walk with the configured node and card policies strands a pod in
    every creation order, whichever tied node it picks at each step: then HAMi never places them all.
    Bounded (at most MAX_ORDERS distinct orders, MAX_ORDER_STATES states); a cut walk is never certain.
    The failure kept is the declared order's, taking the first tied node (every run strands, so that one
    does too)."""
    gpu_policy, node_policy = inventory.gpu_policy, inventory.node_policy
    if distinct_orders(pods) > MAX_ORDERS or every_order_strands(cluster, pods, gpu_policy, node_policy) is not True:
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
        quota=QuotaInUse.on(cluster.nodes[0], declared.failure.pod.namespace),
    )


def running(inventory: TenantInventory, workloads: Sequence[Workload]) -> TenantInventory:
    """The inventory once `workloads` run: HAMi places their pods one at a time, in this order, with the
    tenant's card and node policies (the first node on a tie): what a stack's own workloads hold when a
    new manifest arrives. A pod HAMi would leave Pending holds no card, but counts against the GPU-count
    quota."""
    pods = [pod for workload in workloads for pod in workload.pods if pod.containers]
    namespaces = dict(inventory.namespace_usage)

    def count(pod: PodRequest, placed: Sequence[Sequence[CardSpec]]) -> None:
        held = list(zip(pod.containers, placed, strict=False))
        namespaces[pod.namespace] = namespaces.get(pod.namespace, NamespaceUsage()) + NamespaceUsage(
            memory_mb=sum(container.memory_on(card) for container, cards in held for card in cards),
            cores=sum(container.fit_cores * len(cards) for container, cards in held),
            gpus=sum(c.nums for c in pod.containers),  # the API server's quota counts Pending pods too
        )

    cluster = tenant_cluster(inventory, pods)
    for pod in pods:
        outcome = cluster.candidates(pod, inventory.gpu_policy, inventory.node_policy)
        if isinstance(outcome, NodeFailure):
            count(pod, ())
            continue
        choice = outcome.choices[0]  # the first node on a tie
        node = cluster.nodes[choice.node]
        count(pod, [[node.cards[i] for i in cards] for cards in choice.cards])
        cluster.commit(pod, choice)
    usage = {ns: u for ns, u in namespaces.items() if u != NamespaceUsage()}
    return replace(inventory, card_usage=tuple(u for node in cluster.nodes for u in node.use), namespace_usage=usage)
