"""Every reason name gpulab reports, each defined once: the engine's verdicts (hami/, placement/), the pack's and the
checker's findings (policies/), the messages of the tenants' admission policies (model/kube_objects/admission_policy.py
and model/kube_objects/admission_v2_10_0.py build them from these), the report and `make diagnose` all take them from
here. A name a user reads is the same wherever it is read, and grep finds its one definition.

Three kinds, by who gives the name:

- HAMi's own: its scheduler's reasons why a card or node does not fit, in its FilteringFailed events (pkg/device/
  common/common.go, the const block, read at tags v2.8.3 and v2.10.0; `HAMI_REASONS` lists every one of them, the
  ones gpulab never produces too, so that a tool reading HAMi's events knows them all);
- gpulab's names for what HAMi refuses or cannot read without naming it (its webhook's words, a filter error);
- gpulab's own rules (the per-pod limits, what HAMi quietly changes, what the API server's quota refuses).

The names stand here because hami/ is the floor every reader stands on: it imports nothing, and model/ may import
this module (tests/test_layout.py).
"""

from __future__ import annotations

# --- HAMi's (pkg/device/common/common.go) ------------------------------------------------------------------------
CARD_TYPE_MISMATCH = "CardTypeMismatch"
CARD_UUID_MISMATCH = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
CARD_NOT_HEALTH = "CardNotHealth"
CARD_CORDONED = "CardCordoned"  # v2.10.0
NUMA_NOT_FIT = "NumaNotFit"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
CARD_NOT_FOUND_CUSTOM_FILTER_RULE = "CardNotFoundCustomFilterRule"
CARD_MIG_TOPOLOGY_INFEASIBLE = "CardMigTopologyInfeasible"  # v2.10.0
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
NODE_UNFIT_POD = "NodeUnfitPod"
NODE_FIT_POD = "NodeFitPod"
RESOURCE_QUOTA_NOT_FIT = "ResourceQuotaNotFit"
MODE_NOT_FIT = "ModeNotFit"  # v2.10.0

HAMI_REASONS = (
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_INSUFFICIENT_MEMORY,
    CARD_INSUFFICIENT_CORE,
    CARD_NOT_HEALTH,
    CARD_CORDONED,
    NUMA_NOT_FIT,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    CARD_NOT_FOUND_CUSTOM_FILTER_RULE,
    CARD_MIG_TOPOLOGY_INFEASIBLE,
    NODE_INSUFFICIENT_DEVICE,
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    NODE_UNFIT_POD,
    NODE_FIT_POD,
    RESOURCE_QUOTA_NOT_FIT,
    MODE_NOT_FIT,
)

# --- gpulab's names for what HAMi refuses or cannot read, unnamed ----------------------------------------------
# v2.10.0's webhook (pkg/scheduler/webhook.go `Handle`; hami/webhook.py words them as the API server shows them):
# a gpumem-percentage outside 0-100, a privileged container in a GPU pod, a GPU pod with spec.nodeName, and (from
# v2.9.0) a pod over its namespace's HAMi quota: `exceeding resource quota` (114-116).
INVALID_GPUMEM_PERCENTAGE = "InvalidGpumemPercentage"
PRIVILEGED_CONTAINER = "PrivilegedContainer"
POD_HAS_NODE_ASSIGNED = "PodHasNodeAssigned"
EXCEEDING_RESOURCE_QUOTA = "ExceedingResourceQuota"
# A pod's hami.io/device-scoring-weights that v2.10.0 cannot parse: its Filter fails (score.go
# `calcScoreWithOptions` 361-364), so the pod is never scheduled.
INVALID_DEVICE_SCORING_WEIGHTS = "InvalidDeviceScoringWeights"
# A nvidia.com/gpumem v2.10.0 cannot read (beyond int32): its request becomes none (device.go
# `GenerateResourceRequests` 531-543); what follows is not HAMi's placement, and gpulab cannot predict it.
GPUMEM_NOT_READ_BY_HAMI = "GpumemNotReadByHami"

# --- gpulab's own rules ---------------------------------------------------------------------------------------
GPU_QUANTITY_OUT_OF_RANGE = "GpuQuantityOutOfRange"  # a quantity beyond int64: neither HAMi nor a quota counts it
POD_GPU_LIMIT_EXCEEDED = "PodGpuLimitExceeded"  # the tenant's per-pod limits
INIT_CONTAINER_GPU_REQUEST = "InitContainerGpuRequest"  # a GPU init container where HAMi places app containers only
CORES_ABOVE_100 = "CoresAbove100"  # advice: HAMi clamps it to 100
ZERO_MEMORY_PERCENTAGE = "ZeroMemoryPercentage"  # advice: 0 MB (v2.8.3) or the whole card (v2.10.0)
EXCEEDED_QUOTA = "ExceededQuota"  # kube-apiserver's ResourceQuota admission

GPULAB_REASONS = (
    INVALID_GPUMEM_PERCENTAGE,
    PRIVILEGED_CONTAINER,
    POD_HAS_NODE_ASSIGNED,
    EXCEEDING_RESOURCE_QUOTA,
    INVALID_DEVICE_SCORING_WEIGHTS,
    GPUMEM_NOT_READ_BY_HAMI,
    GPU_QUANTITY_OUT_OF_RANGE,
    POD_GPU_LIMIT_EXCEEDED,
    INIT_CONTAINER_GPU_REQUEST,
    CORES_ABOVE_100,
    ZERO_MEMORY_PERCENTAGE,
    EXCEEDED_QUOTA,
)
