"""The refusals decided by one pod alone, from the tenant's inventory: what the pack and the
in-tenant admission policy (model/admission_policy.py) must agree on, question for question and
in the same order (kubectl shows only the admission policy's first failing validation):

- NodeInsufficientDevice: a container asks for more cards than the node has (with several GPU nodes,
  than the node with the most cards has: a rule never refuses what some node can hold);
- CardTypeMismatch / CardUuidMismatch: the pod's selectors leave no card at all (a type selector with
  non-ASCII letters is left to HAMi: it upper-cases with Unicode rules, the admission CEL cannot);
- CardInsufficientMemory: a container asks more memory than the tenant's largest card holds
  (including a percentage above 100);
- InitContainerGpuRequest: an init container asks for a GPU resource (HAMi places app containers only);
- PodGpuLimitExceeded: the pod's app containers together exceed the tenant's per-pod `gpus`,
  `gpumem` (a percentage counted on the tenant's largest card) or `gpucores`.

Two advisories (the admission policy warns, the pack notes): cores above 100 (HAMi clamps them to
100) and a memory percentage of 0 (HAMi gives the container 0 MB).
"""

from __future__ import annotations

from collections.abc import Sequence

from hami.cards import ContainerRequest, PodRequest, _type_ok, _uuid_ok
from placement.inventory import TenantInventory
from placement.verdicts import (
    CardTooSmall,
    CoresAbove100,
    GpuQuotaExceeded,
    InitContainerAsks,
    NoCardMatches,
    OverPodLimit,
    PodAdvisory,
    PodRefusal,
    PodVerdicts,
    TooManyCards,
    ZeroMemory,
)
from placement.workloads import Workload


def pod_memory_mb(containers: tuple[ContainerRequest, ...], largest_mb: int) -> int:
    """What a pod's containers may take in all: a percentage counted on the largest card."""
    return sum(c.nums * c.memory_for(largest_mb) for c in containers)


def _non_ascii_type_selector(pod: PodRequest) -> bool:
    """HAMi upper-cases type selectors with Go's Unicode rules; the admission policy's CEL upperAscii()
    cannot, so a selector with other letters is left to HAMi (and to the placement check)."""
    return any(not value.isascii() for values in (pod.use_types, pod.nouse_types) if values for value in values)


def per_pod_refusals(inventory: TenantInventory, pod: PodRequest) -> list[PodRefusal]:
    """In the admission policy's order, which is HAMi's: cards the node has (fitInDevices), then per card
    type, UUID and memory (device.go Fit); gpulab's own rules after. The first is what kubectl shows."""
    cards = inventory.cards
    largest = max((card.memory_mb for card in cards), default=0)
    refusals: list[PodRefusal] = []
    most = max((len(on_node) for _, on_node in inventory.node_cards()), default=0)
    refusals += [TooManyCards(c.name, c.nums, most) for c in pod.containers if c.nums > most]
    if cards and pod.containers and not _non_ascii_type_selector(pod) and not any(_type_ok(c, pod) for c in cards):
        refusals.append(NoCardMatches("type"))
    if cards and pod.containers and not any(_uuid_ok(card, pod) for card in cards):
        refusals.append(NoCardMatches("uuid"))
    for c in pod.containers:
        memory = c.memory_for(largest)
        if cards and memory > largest:
            refusals.append(CardTooSmall(c.name, memory, tuple(cards)))
    refusals += [InitContainerAsks(init) for init in pod.init_containers]
    asked = {
        "gpus": sum(c.nums for c in pod.containers),
        "gpumem": pod_memory_mb(pod.containers, largest),
        "gpucores": sum(c.nums * c.fit_cores for c in pod.containers),
    }
    for key in ("gpus", "gpumem", "gpucores"):
        limit = getattr(inventory.limits, key)
        if limit is not None and asked[key] > limit:
            refusals.append(OverPodLimit(key, asked[key], limit))
    return refusals


def per_pod_advisories(pod: PodRequest) -> list[PodAdvisory]:
    advisories: list[PodAdvisory] = []
    for c in pod.containers:
        if c.cores > 100:
            advisories.append(CoresAbove100(c.name, c.cores))
        if c.memreq == 0 and c.mem_percentage == 0:
            advisories.append(ZeroMemory(c.name))
    return advisories


def gpu_count_quota(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[GpuQuotaExceeded]:
    """The native `requests.nvidia.com/gpu` quota, which the API server checks at creation, in order."""
    limit = inventory.quota.gpus if inventory.quota else None
    if limit is None:
        return []
    refused: list[GpuQuotaExceeded] = []
    used = {ns: usage.gpus for ns, usage in inventory.namespace_usage.items()}
    for pod in pods:
        if not inventory.quota_applies(pod.namespace):
            continue
        asks = sum(c.nums for c in pod.containers)
        total = used.get(pod.namespace, 0)
        if total + asks > limit:
            refused.append(GpuQuotaExceeded(pod, limit, asks, total))
        else:
            used[pod.namespace] = total + asks
    return refused


def pod_level(
    inventory: TenantInventory, workloads: Sequence[Workload]
) -> tuple[list[PodVerdicts], list[GpuQuotaExceeded], list[PodRequest]]:
    """What is decided pod by pod, whatever the nodes, once per workload (the per-pod rules, shared with the
    admission policy; then the GPU-count quota), and the GPU pods left for the placement analysis: those of
    workloads no per-pod rule refused (admission refuses those)."""
    per_workload = []
    for workload in workloads:
        if workload.pods:
            pod = workload.pods[0]  # replicas are identical
            verdicts = PodVerdicts(
                workload.label, tuple(per_pod_refusals(inventory, pod)), tuple(per_pod_advisories(pod))
            )
            if verdicts.refusals or verdicts.advisories:
                per_workload.append(verdicts)
    refused = {verdicts.workload for verdicts in per_workload if verdicts.refusals}
    pods = [pod for w in workloads if w.label not in refused for pod in w.pods if pod.containers]
    return per_workload, gpu_count_quota(inventory, pods), pods
