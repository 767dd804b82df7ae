"""Judging one tenant's GPU workloads against its cards, per-pod limits and quota.

Errors are certain failures (HAMi would leave a pod Pending, or the quota would refuse it, whatever
the order); warnings are placements that depend on arrival order or card policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from policies.gpu_fit import (
    POLICIES,
    RESOURCE_QUOTA_NOT_FIT,
    ContainerFailure,
    PodRequest,
    find_stranding,
    first_unplaceable,
    search_placement,
)
from policies.inventory import TenantInventory
from policies.workloads import Workload

POD_LIMIT_EXCEEDED = "PodGpuLimitExceeded"
INIT_CONTAINER_GPU = "InitContainerGpuRequest"
EXCEEDED_QUOTA = "ExceededQuota"  # kube-apiserver's ResourceQuota admission
ORDER_DEPENDENT = "OrderDependentPlacement"
UNDECIDED = "PlacementUndecided"


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
        return f"{self.severity}: tenant {self.tenant}: {self.workload}{card}: {self.reason}: {self.message}"


def _workload_of(pod: PodRequest) -> str:
    return pod.workload.split("#", 1)[0]


def _failure_card(failure: ContainerFailure) -> str | None:
    cards = sorted({rejection.card.id for rejection in failure.rejections})
    return ", ".join(cards) if cards else None


def _memory_mb(pod: PodRequest, inventory: TenantInventory, containers=None) -> int:
    """Memory a pod asks per allocation (percentages resolved on the tenant's largest card)."""
    largest = max((card.memory_mb for card in inventory.cards), default=0)
    chosen = pod.containers if containers is None else containers
    return sum(
        c.nums * (c.memory_mb if c.memory_mb is not None else largest * c.memory_percentage // 100) for c in chosen
    )


def pod_limit_findings(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    findings = []
    limits = inventory.limits
    for workload in workloads:
        if not workload.pods:
            continue
        pod = workload.pods[0]  # replicas are identical
        groups = [pod.containers, *((init,) for init in pod.init_containers)]
        asked = {
            "gpus": max(sum(c.nums for c in group) for group in groups),
            "gpumem": max(_memory_mb(pod, inventory, group) for group in groups),
            "gpucores": max(sum(c.nums * c.cores for c in group) for group in groups),
        }
        for key, unit in (("gpus", " GPUs"), ("gpumem", " MB"), ("gpucores", "% cores")):
            limit = getattr(limits, key)
            if limit is not None and asked[key] > limit:
                findings.append(
                    Finding(
                        "error",
                        inventory.name,
                        workload.label,
                        POD_LIMIT_EXCEEDED,
                        f"each pod asks {asked[key]}{unit} in total; "
                        f"tenant {inventory.name} allows {limit}{unit} per pod",
                    )
                )
    return findings


def quota_findings(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[Finding]:
    """Quota in each of the tenant's workload namespaces, counted in declaration order.

    gpumem and gpucores are HAMi's (counted per allocated card, refused as ResourceQuotaNotFit;
    notes/hami.md section 5); the GPU count is the native `requests.nvidia.com/gpu`, which the API
    server refuses at creation (ExceededQuota)."""
    quota = inventory.quota
    if quota is None:
        return []
    findings: list[Finding] = []
    used: dict[str, dict[str, int]] = {}
    keys = (
        ("gpumem", " MB", RESOURCE_QUOTA_NOT_FIT, "limits.nvidia.com/gpumem"),
        ("gpucores", "% cores", RESOURCE_QUOTA_NOT_FIT, "limits.nvidia.com/gpucores"),
        ("gpus", " GPU(s)", EXCEEDED_QUOTA, "requests.nvidia.com/gpu"),
    )
    for pod in pods:
        if inventory.namespaces and pod.namespace not in inventory.namespaces:
            continue  # gpulab sets the quota in the tenant's workload namespaces only
        totals = used.setdefault(pod.namespace, {"gpumem": 0, "gpucores": 0, "gpus": 0})
        asks = {
            "gpumem": _memory_mb(pod, inventory),
            "gpucores": sum(c.nums * c.cores for c in pod.containers),
            "gpus": sum(c.nums for c in pod.containers),
        }
        refused = False
        for key, unit, reason, quota_key in keys:
            limit = getattr(quota, key)
            if limit is not None and totals[key] + asks[key] > limit:
                refused = True
                findings.append(
                    Finding(
                        "error",
                        inventory.name,
                        pod.workload,
                        reason,
                        f"namespace {pod.namespace} quota {quota_key}={limit}: asks {asks[key]}{unit}, "
                        f"{limit - totals[key]}{unit} left",
                    )
                )
        if not refused:
            for key in totals:
                totals[key] += asks[key]
    return findings


def init_container_findings(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """HAMi places only app containers (Resourcereqs reads spec.containers): an init container's GPU
    request gets no card. On real GPUs it runs without a device; on the mock the kubelet still counts
    it against the node's advertised totals."""
    findings = []
    for workload in workloads:
        for init in workload.pods[0].init_containers if workload.pods else ():
            findings.append(
                Finding(
                    "error",
                    inventory.name,
                    workload.label,
                    INIT_CONTAINER_GPU,
                    f"init container {init.name} asks {init.describe()}, but HAMi assigns cards to app containers "
                    "only; move the GPU work into an app container",
                )
            )
    return findings


def evaluate_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """Every finding for a tenant's workloads, certain ones first."""
    pods = [pod for workload in workloads for pod in workload.pods if pod.containers]
    findings = (
        pod_limit_findings(inventory, workloads)
        + init_container_findings(inventory, workloads)
        + quota_findings(inventory, pods)
    )
    if not pods:
        return findings
    cards = list(inventory.cards)

    # A pod that fits on no card even alone: say so plainly, and leave it out of the set analysis.
    placeable = []
    for pod in pods:
        verdict, _ = search_placement(cards, [pod])
        if verdict is False:
            failure = first_unplaceable(cards, [pod])
            assert failure is not None
            findings.append(
                Finding(
                    "error",
                    inventory.name,
                    pod.workload,
                    failure[1].reason,
                    f"cannot fit on any of the tenant's {len(cards)} card(s) even alone: {failure[1].explain()}",
                    _failure_card(failure[1]),
                )
            )
        else:
            placeable.append(pod)

    unplaceable = first_unplaceable(cards, placeable)
    if unplaceable is not None:
        index, failure = unplaceable
        before = sorted({_workload_of(pod) for pod in placeable[:index]})
        findings.append(
            Finding(
                "error",
                inventory.name,
                placeable[index].workload,
                failure.reason,
                f"no placement fits it next to {', '.join(before)}: {failure.explain()}",
                _failure_card(failure),
            )
        )
        return findings

    verdict, _ = search_placement(cards, placeable)
    if verdict is None:
        findings.append(
            Finding(
                "warning",
                inventory.name,
                "(all GPU workloads)",
                UNDECIDED,
                f"{len(placeable)} pods are too many to prove a placement exists; only HAMi's greedy order was checked",
            )
        )
    policies = (inventory.gpu_policy, *(p for p in POLICIES if p != inventory.gpu_policy))
    stranding = find_stranding(cards, placeable, policies)
    if stranding is not None:
        order = " -> ".join(pod.workload for pod in stranding.order)
        configured = " (the configured card policy)" if stranding.policy == inventory.gpu_policy else ""
        findings.append(
            Finding(
                "warning",
                inventory.name,
                stranding.failure.pod.workload,
                ORDER_DEPENDENT,
                f"fits in some placement, but created in the order {order} with card policy "
                f"{stranding.policy}{configured}, HAMi strands it: {stranding.failure.explain()} "
                f"({stranding.failure.reason})",
                _failure_card(stranding.failure),
            )
        )
    return findings
