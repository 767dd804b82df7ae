"""HAMi's admission webhook: whether the release refuses a pod when it is created.

What v2.10.0's webhook refuses (pkg/scheduler/webhook.go `Handle` 53-123, tag v2.10.0, read, not copied), in its order;
only the first refusal reaches the user, as the API server's `admission webhook "vgpu.hami.io" denied the request: ...`
(the apiserver's webhook errors.go `ToStatusErr`; a refusal, not a failed call, so the chart's `failurePolicy: Ignore`
does not let it through):

1. a nvidia.com/gpumem-percentage outside 0-100 in any container, init containers first (#1997, `webhook_denial`):
   pkg/device/nvidia/device.go `MutateAdmission` 349-351, `validateMemoryPercentage` 389-396 read the limit, else
   the request, as `Quantity.Value()` and answer `admission.Errored` with "invalid nvidia.com/gpumem-percentage value
   N in container C: must be an integer between 0 and 100" (Handle 74-98);
2. a privileged container, init or app, in a pod where `MutateAdmission` found a GPU resource (#2139): "container C
   is privileged" (Handle 71, 99-102; `privilegedContainerName` 125-137: init containers first);
3. such a pod with spec.nodeName set: "pod has node assigned" (Handle 104-112; the chart names the scheduler);
4. a pod that would take its namespace over its HAMi quota (from v2.9.0, PR #1605; `quota_refusal` below).

v2.8.3's webhook (tag v2.8.3, pkg/scheduler/webhook.go `Handle` 52-105) checks none of 1, 2 or 4; it refuses 3 in
the same words (89-98), with two differences, each a field of hami/releases.py `Rules` as 1, 2 and 4 are: it finds a
GPU resource in spec.containers only, skipping a privileged container (70-87: `continue`, where v2.10.0 refuses
it), and it lets a pod naming any scheduler but default-scheduler through untouched, hami-scheduler included (63-68:
`A && B || C && D` binds as `(A && B) || (C && D)`). Its device's `MutateAdmission` (pkg/device/nvidia/device.go
342-379) returns no error, so nothing comes before 3.

The quota arithmetic, from v2.10.0 pkg/scheduler/webhook.go:

- `Handle` asks `fitResourceQuota` after mutating the containers (so a GPU-only container already
  carries gpucores 100, as gpulab's requests do, placement/workloads.py), and answers
  `admission.Denied("exceeding resource quota")` (114-116); the API server reports it as
  `admission webhook "vgpu.hami.io" denied the request: exceeding resource quota`.
- `fitResourceQuota` (145-192) asks `GenerateResourceRequests` for each container: its memory is `Memreq`, so a
  gpumem-percentage (or a GPU asked without gpumem: 100 %) counts 0 MB, and cores are taken as asked (not clamped
  to 100). Per container it counts memory x cards and cores x cards; app containers add up, init containers
  count their largest (they run one after the other); the pod asks the larger of the two, for memory and for
  cores separately. A pod asking 0 MB and 0 cores is not checked.
- `FitQuota` (pkg/device/quota.go 62-95) refuses when a limit is set and used + asked exceeds it; a limit of 0
  is set (it blocks, v2.10.0 `LimitSet`), an absent one is not. `used` is the scheduler's own count of the
  namespace's placed pods (its quota manager; a pod whose init containers still run counts their peak).

Not modelled: a pod v2.10.0's webhook does not handle (another schedulerName, Handle 64-69; under either release the
label or a namespace selector `hami.io/webhook: ignore`): gpulab's admission policy refuses such a GPU pod anyway
(model/kube_objects/admission_policy.py); v2.8.3 lets one naming hami-scheduler through too, which that policy does not
refuse and gpulab models (`Rules.webhook_scheduler_names`); a pod without containers ("pod has no containers": no GPU
pod); a negative or fractional percentage, which gpulab's reader refuses as bad input first (the API server refuses it
as well, after the webhook's words); the memoryFactor (gpulab keeps 1) and other device vendors' quotas.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hami.cards import PodAdmission, PodRequest
from hami.reasons import (
    EXCEEDING_RESOURCE_QUOTA,
    INVALID_GPUMEM_PERCENTAGE,
    POD_HAS_NODE_ASSIGNED,
    PRIVILEGED_CONTAINER,
)
from hami.releases import Rules

if TYPE_CHECKING:
    from hami.cluster import QuotaInUse

WEBHOOK_NAME = "vgpu.hami.io"  # charts/hami/templates/scheduler/webhook.yaml
PERCENTAGE_RESOURCE = "nvidia.com/gpumem-percentage"  # the chart's resourceMemoryPercentage


# What `Handle` answers for each refusal, by gpulab's name for it ({container}: a container's name, {value}: the
# percentage as an integer); the writers below and `refusal_reason`, their reader, share these words.
WORDS = {
    # device.go `validateMemoryPercentage` 389-396
    INVALID_GPUMEM_PERCENTAGE: f"invalid {PERCENTAGE_RESOURCE} value {{value}} in container {{container}}: "
    "must be an integer between 0 and 100",
    PRIVILEGED_CONTAINER: "container {container} is privileged",  # Handle 99-102
    POD_HAS_NODE_ASSIGNED: "pod has node assigned",  # Handle 107-112
    EXCEEDING_RESOURCE_QUOTA: "exceeding resource quota",  # Handle 114-116
}


def denied(text: str) -> str:
    """The API server's message for the webhook's refusal `text` (apiserver webhook errors.go `ToStatusErr`)."""
    return f'admission webhook "{WEBHOOK_NAME}" denied the request: {text}'


QUOTA_DENIAL = denied(WORDS[EXCEEDING_RESOURCE_QUOTA])


def percentage_denial(container: str, value: int) -> str:
    """device.go `validateMemoryPercentage` 389-396, as the API server shows it."""
    return denied(WORDS[INVALID_GPUMEM_PERCENTAGE].format(value=value, container=container))


def _pattern(words: str) -> re.Pattern[str]:
    """`denied(words)`, each {field} read as any text without a space (a container's name is a DNS label)."""
    return re.compile(r"\S+".join(re.escape(part) for part in re.split(r"\{\w+\}", denied(words))))


_READ = {reason: _pattern(words) for reason, words in WORDS.items()}


def refusal_reason(text: str) -> str | None:
    """gpulab's reason name for the webhook's refusal shown in `text` (the API server's message, e.g. in kubectl's
    stderr), as `webhook_denial` and `quota_refusal` word it; None when `text` shows none of them."""
    return next((reason for reason, pattern in _READ.items() if pattern.search(text)), None)


def webhook_denial(admission: PodAdmission | None, rules: Rules) -> tuple[str, str] | None:
    """(gpulab's reason name, the API server's message) when the release's webhook refuses a pod whatever else runs
    (the module's 1-3, in `Handle`'s order; v2.8.3's: 3 alone); None when it lets the pod on to the quota
    (`quota_refusal`). `admission` None: not read (a PodRequest built by hand)."""
    if admission is None:
        return None
    names = rules.webhook_scheduler_names
    if names is not None and admission.scheduler_name not in names:
        return None  # let through untouched (v2.8.3 `Handle` 63-68)
    if rules.memory_percentage_range_checked:
        for container, value in admission.percentages:
            if not 0 <= value <= 100:
                return INVALID_GPUMEM_PERCENTAGE, percentage_denial(container, value)
    if not (admission.has_resource if rules.webhook_resource_in_every_container else admission.app_resource):
        return None
    if rules.privileged_refused and admission.privileged is not None:
        return PRIVILEGED_CONTAINER, denied(WORDS[PRIVILEGED_CONTAINER].format(container=admission.privileged))
    if admission.node_name:
        return POD_HAS_NODE_ASSIGNED, denied(WORDS[POD_HAS_NODE_ASSIGNED])
    return None


def quota_request(pod: PodRequest) -> tuple[int, int]:
    """(MB, cores) the webhook counts for `pod` (webhook.go `fitResourceQuota` 157-180): a native sidecar
    (restartPolicy: Always) as one more init container, since v2.10.0 reads no restartPolicy (167-177 walk
    spec.initContainers as they are; its docs/develop/sidecarsContainer-design.md 5-11), where the API server's own
    quota adds it to the app containers (placement/workloads.py `pod_gpus`)."""
    app_memory = sum(c.memreq * c.nums for c in pod.containers)
    app_cores = sum(c.cores * c.nums for c in pod.containers)
    init_memory = max((c.memreq * c.nums for c in pod.init_containers), default=0)
    init_cores = max((c.cores * c.nums for c in pod.init_containers), default=0)
    return max(app_memory, init_memory), max(app_cores, init_cores)


def quota_refusal(pod: PodRequest, quota_in_use: QuotaInUse | None, rules: Rules) -> str | None:
    """The API server's message when the release's webhook refuses `pod` at create over its namespace's quota
    (`quota_in_use`: the quota and what already counts against it, e.g. hami.cluster `Cluster.quota_in_use`;
    None: the namespace has none); None when the webhook lets it through (always, for a release whose webhook
    does not check quotas: v2.8.3)."""
    if not rules.quota_at_admission or quota_in_use is None:
        return None
    memory, cores = quota_request(pod)
    if memory == 0 and cores == 0:
        return None
    quota = quota_in_use.quota

    def over(limit: int | None, used: int, asked: int) -> bool:
        if limit is None or (limit == 0 and not rules.quota_zero_limit_blocks):
            return False
        return used + asked > limit

    if over(quota.memory_mb, quota_in_use.used_mb, memory) or over(quota.cores, quota_in_use.used_cores, cores):
        return QUOTA_DENIAL
    return None
