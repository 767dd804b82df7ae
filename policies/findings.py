"""What every evaluation of a tenant shares, on one GPU node or across several: the findings and their
reasons, the rules decided pod by pod (per-pod limits, the GPU-count quota), the tenant's cards as one
node with its quotas, which pods are worth the set analysis, and the walk to the first pod that fits
nowhere. policies/evaluate.py (one node) and policies/evaluate_nodes.py (several) build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from hami.cards import NamespaceQuota, Node, PodRequest
from policies.fit_search import SEARCH_BUDGET
from policies.inventory import TenantInventory
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


def workload_of(pod: PodRequest) -> str:
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


def undecided(inventory: TenantInventory, what: str) -> Finding:
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
            if workload_of(pod) not in reported:
                reported.add(workload_of(pod))
                findings.append(nowhere(pod))
            continue
        if fits is None and workload_of(pod) not in reported:
            reported.add(workload_of(pod))
            findings.append(undecided(inventory, workload_of(pod)))
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
        return refuse(placed, pod, sorted({workload_of(other) for other in pods[:index]}))
    return Finding(  # pragma: no cover - the caller established that the whole set does not fit
        "error", inventory.name, "(all GPU workloads)", NO_PLACEMENT, f"no placement holds all {len(pods)} pods"
    )
