"""What the evaluation of a tenant (placement/evaluate.py) reports, and what it decides pod by pod: the
findings and their reasons, and the rules of one pod alone (per-pod limits, the GPU-count quota).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hami.cards import PodRequest
from placement.inventory import TenantInventory
from placement.per_pod import per_pod_advisories, per_pod_refusals
from placement.workloads import Workload

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
    """Refusals one pod decides alone (placement/per_pod.py, shared with the admission policy), once per
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


def pod_level_findings(
    inventory: TenantInventory, workloads: Sequence[Workload]
) -> tuple[list[Finding], list[PodRequest]]:
    """What is decided pod by pod, whatever the nodes (per-pod rules, the GPU-count quota), and the GPU pods
    left for the placement analysis: those of workloads no per-pod rule refused."""
    per_pod, refused = per_pod_findings(inventory, workloads)
    pods = [pod for w in workloads if w.label not in refused for pod in w.pods if pod.containers]
    return per_pod + gpu_count_quota_findings(inventory, pods), pods
