"""Judging one tenant's GPU workloads against its cards, current usage, per-pod limits and quota.

Errors are certain failures (HAMi would leave a pod Pending, or the API server would refuse it,
whatever the order); warnings are placements that depend on arrival order or card policy, and
questions the bounded search could not decide (said, never silently dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from hami.cards import (
    POLICIES,
    RESOURCE_QUOTA_NOT_FIT,
    CardSpec,
    ContainerFailure,
    NamespaceQuota,
    Node,
    PodRequest,
)
from policies.fit_orders import find_stranding, stranded_in_every_order
from policies.fit_search import SEARCH_BUDGET, Budget, search_placement
from policies.inventory import NamespaceUsage, TenantInventory
from policies.per_pod import per_pod_advisories, per_pod_refusals
from policies.workloads import Workload

Placement = TypeVar("Placement")  # a Node (one GPU node) or a Cluster (several)

EXCEEDED_QUOTA = "ExceededQuota"  # kube-apiserver's ResourceQuota admission
ORDER_DEPENDENT = "OrderDependentPlacement"
UNDECIDED = "PlacementUndecided"
NO_PLACEMENT = "NoPlacement"  # only if HAMi's walk and the search ever disagreed on why


@dataclass(frozen=True)
class Finding:
    severity: Literal["error", "warning"]
    tenant: str
    workload: str  # kind/namespace/name of the workload at fault
    reason: str  # HAMi's reason name where HAMi has one
    message: str
    card: str | None = None

    def line(self) -> str:
        card = f" on {self.card}" if self.card else ""
        return printable(f"{self.severity}: tenant {self.tenant}: {self.workload}{card}: {self.reason}: {self.message}")


def printable(text: str) -> str:
    """Text that any UTF-8 output (a terminal, the analyzer's protobuf) accepts: names from YAML can
    hold lone surrogates (escaped halves of a pair), which would crash the writer."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _workload_of(pod: PodRequest) -> str:
    return pod.workload.split("#", 1)[0]


def per_pod_findings(inventory: TenantInventory, workloads: Sequence[Workload]) -> tuple[list[Finding], set[str]]:
    """Refusals one pod decides alone (policies/per_pod.py, shared with the admission policy), once per
    workload, and the workloads they concern (left out of the placement analysis: admission refuses them)."""
    findings, refused = [], set()
    for workload in workloads:
        if not workload.pods:
            continue
        pod = workload.pods[0]  # replicas are identical
        for refusal in per_pod_refusals(inventory, pod):
            findings.append(
                Finding("error", inventory.name, workload.label, refusal.reason, refusal.message, refusal.cards)
            )
            refused.add(workload.label)
        for advisory in per_pod_advisories(pod):
            findings.append(Finding("warning", inventory.name, workload.label, advisory.reason, advisory.message))
    return findings, refused


def gpu_count_quota_findings(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[Finding]:
    """The native `requests.nvidia.com/gpu` quota, which the API server checks at creation, in order."""
    limit = inventory.quota.gpus if inventory.quota else None
    if limit is None:
        return []
    findings: list[Finding] = []
    used = {ns: usage.gpus for ns, usage in inventory.namespace_usage.items()}
    for pod in pods:
        if not inventory.quota_applies(pod.namespace):
            continue
        asks = sum(c.nums for c in pod.containers)
        total = used.get(pod.namespace, 0)
        if total + asks > limit:
            findings.append(
                Finding(
                    "error",
                    inventory.name,
                    pod.workload,
                    EXCEEDED_QUOTA,
                    f"namespace {pod.namespace} quota requests.nvidia.com/gpu={limit}: asks {asks} GPU(s), "
                    f"{limit - total} GPU(s) left",
                )
            )
        else:
            used[pod.namespace] = total + asks
    return findings


def tenant_node(inventory: TenantInventory, pods: Sequence[PodRequest]) -> Node:
    """The tenant's node as HAMi sees it now: cards, their current use, and quota per namespace."""
    quotas = {}
    quota = inventory.quota
    if quota is not None and (quota.gpumem or quota.gpucores):
        namespaces = set(inventory.namespaces) or {pod.namespace for pod in pods} | set(inventory.namespace_usage)
        quotas = {ns: NamespaceQuota(quota.gpumem, quota.gpucores) for ns in namespaces}
    usage = {ns: (u.gpumem, u.gpucores) for ns, u in inventory.namespace_usage.items()}
    return Node(inventory.cards, inventory.card_usage or None, quotas, usage)


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


def _undecided(inventory: TenantInventory, what: str) -> Finding:
    return Finding(
        "warning",
        inventory.name,
        what,
        UNDECIDED,
        f"the placement search ran out of its budget ({SEARCH_BUDGET} steps per tenant) without an answer; "
        "treated as fitting, and only HAMi's greedy order was checked",
    )


def pod_level_findings(
    inventory: TenantInventory, workloads: Sequence[Workload]
) -> tuple[list[Finding], list[PodRequest]]:
    """What is decided pod by pod, whatever the nodes (per-pod rules, the GPU-count quota), and the GPU pods
    left for the placement analysis: those of workloads no per-pod rule refused."""
    per_pod, refused = per_pod_findings(inventory, workloads)
    pods = [pod for w in workloads if w.label not in refused for pod in w.pods if pod.containers]
    return per_pod + gpu_count_quota_findings(inventory, pods), pods


def evaluate_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """Every finding for a tenant's workloads, certain ones first."""
    if inventory.nodes:  # several GPU nodes: HAMi's node selection too
        from policies.evaluate_nodes import evaluate_cluster

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
            _workload_of(pod),
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
        findings.append(_undecided(inventory, "(all GPU workloads)"))
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
        from hami.nodes import NodeFailure
        from policies.evaluate_nodes import tenant_cluster

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


def placeable_pods(
    inventory: TenantInventory,
    pods: Sequence[PodRequest],
    fits_alone: Callable[[PodRequest], bool | None],
    nowhere: Callable[[PodRequest], Finding],
) -> tuple[list[PodRequest], list[Finding]]:
    """The pods worth the set analysis, and the findings about the others, on one node or across several.

    A pod that fits nowhere even alone (next to what already runs) is said so plainly (`nowhere`), once per
    workload, and left out; one whose search ran out of budget is said undecided, once, and kept.
    Identical pods are decided once (`fits_alone`)."""
    placeable: list[PodRequest] = []
    findings: list[Finding] = []
    alone: dict[tuple, bool | None] = {}
    reported: set[str] = set()
    for pod in pods:
        if pod.shape() not in alone:
            alone[pod.shape()] = fits_alone(pod)
        fits = alone[pod.shape()]
        if fits is False:
            if _workload_of(pod) not in reported:
                reported.add(_workload_of(pod))
                findings.append(nowhere(pod))
            continue
        if fits is None and _workload_of(pod) not in reported:
            reported.add(_workload_of(pod))
            findings.append(_undecided(inventory, _workload_of(pod)))
        placeable.append(pod)
    return placeable, findings


def first_unplaceable(
    inventory: TenantInventory,
    pods: Sequence[PodRequest],
    start: Placement,
    fit_next: Callable[[Placement, PodRequest], Placement | None],
    search: Callable[[Sequence[PodRequest]], tuple[bool | None, Placement | None]],
    refuse: Callable[[Placement, PodRequest, list[str]], Finding],
) -> Finding:
    """The first pod (declared order) that no placement of it and the pods before it can hold, on one node
    or across several: the walk is the same, the placement (a Node, a Cluster) and its rules differ.

    Walks the declared order keeping one placement of the pods so far (`fit_next`: first fit, or None);
    only when the next pod does not fit next to it is the exhaustive `search` asked whether another
    placement makes room. `refuse` says why the pod fits nowhere next to a placement of the pods before it
    (given their workloads' names)."""
    placed = start
    for index, pod in enumerate(pods):
        if (after := fit_next(placed, pod)) is not None:
            placed = after
            continue
        fits, found = search(pods[: index + 1])
        if fits is None:
            return Finding(
                "error",
                inventory.name,
                "(all GPU workloads)",
                UNDECIDED,
                f"no placement holds all {len(pods)} pods, but the search ran out of its budget ({SEARCH_BUDGET} "
                "steps per tenant) before finding the first one that does not fit",
            )
        if fits:
            assert found is not None
            placed = found  # another placement of the pods so far makes room
            continue
        return refuse(placed, pod, sorted({_workload_of(other) for other in pods[:index]}))
    return Finding(  # pragma: no cover - the caller established that the whole set does not fit
        "error", inventory.name, "(all GPU workloads)", NO_PLACEMENT, f"no placement holds all {len(pods)} pods"
    )


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
