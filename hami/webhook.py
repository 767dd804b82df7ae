"""HAMi's admission webhook on a pod's namespace quota: whether the release refuses the pod when it is created.

From v2.9.0 (PR #1605) the webhook refuses a pod that would take its namespace over its HAMi quota
(`limits.nvidia.com/gpumem`, `limits.nvidia.com/gpucores`); v2.8.3 only refuses it later, at scheduling
(ResourceQuotaNotFit, hami/cards.py). The arithmetic, from v2.10.0 pkg/scheduler/webhook.go (read, not copied):

- `Handle` (53-123) asks `fitResourceQuota` after mutating the containers (so a GPU-only container already
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

Not modelled: a pod naming another scheduler (the webhook lets it through before the quota check), the
memoryFactor (gpulab keeps 1) and other device vendors' quotas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hami.cards import PodRequest
from hami.releases import Rules

if TYPE_CHECKING:
    from hami.cluster import QuotaInUse

WEBHOOK_NAME = "vgpu.hami.io"  # charts/hami/templates/scheduler/webhook.yaml
QUOTA_DENIAL = f'admission webhook "{WEBHOOK_NAME}" denied the request: exceeding resource quota'


def quota_request(pod: PodRequest) -> tuple[int, int]:
    """(MB, cores) the webhook counts for `pod` (webhook.go `fitResourceQuota` 157-180)."""
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
