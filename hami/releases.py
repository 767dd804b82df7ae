"""What differs between the HAMi releases gpulab follows, as one frozen record per release (`Rules`).

hami/cards.py, hami/nodes.py and hami/cluster.py take a `Rules` and apply the selected release's rule wherever the
two releases part; everything not listed here is the same in both (read at the tags, not copied):

- v2.8.3 = github.com/Project-HAMi/HAMi tag v2.8.3, commit 8f039ad22bfc14970e2ea557f24c411c34203079;
- v2.10.0 = tag v2.10.0, commit 4707fb02c91c.

Each field names the upstream file and function (and the lines at v2.10.0) the difference comes from. The keys
are the version strings a tenant's `hamiVersion` names (model/hami_releases.py holds the same set).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rules:
    version: str
    # --- card score: pkg/scheduler/policy/gpu_policy.go `ComputeScore` (v2.10.0 lines 194-222) ---
    # A container's request counts in a card's score only when its Type equals the card's type (203-205; the
    # request's Type is "NVIDIA", a registered card's is e.g. "NVIDIA-A100-SXM4-80GB", so for such cards the
    # score is the card's use alone), and it counts 1 slot (207), not its card count (v2.8.3: `Nums`).
    score_type_matched_once: bool
    # A percentage adds Totalmem * pct / 100 MB (210); v2.8.3 adds Totalmem * (pct / 100) in integers, so
    # any percentage below 100 adds 0 MB.
    score_exact_percentage: bool
    # A card with Count, Totalcore or Totalmem 0 scores 0 (195-198); v2.8.3 divides by zero.
    score_zero_totals: bool
    # Per-pod slot/core/memory weights, annotation hami.io/device-scoring-weights (220;
    # pkg/util/device_scoring_weights.go `ParseDeviceScoringWeights`).
    scoring_weights: bool
    # --- card order: gpu_policy.go `Less` (77-127), `lessByChain` (132-167), `gpuSortKeyChain` (62-75) ---
    # Score first, NUMA only breaks ties (115-126); v2.8.3 groups by NUMA first, score within a NUMA node.
    score_before_numa: bool
    # A policy with a comma (or the bare "numa") is a chain of sort keys binpack/spread/numa in the order
    # written, then the card index (82-84, 132-167); mutex/topology-aware in a chain are Fit filters only.
    policy_chains: bool
    # The `mutex` policy: busy cards sort first (92-98) and Fit refuses a card in use
    # (pkg/device/nvidia/device.go `Fit` 723-725, 767-771: ExclusiveDeviceAllocateConflict).
    mutex_policy: bool
    # The values of a pod's hami.io/gpu-scheduler-policy the rules take; another value means the configured
    # policy. v2.8.3's: spread and binpack (as gpulab has always read v2.8.3). v2.10.0's: None, any value, as HAMi
    # takes it (pkg/util/util.go `GetGPUSchedulerPolicyByPod` 277-285): it acts on binpack, spread, numa (sort
    # keys), mutex and topology-aware (Fit filters; pkg/util/types.go `GPUSchedulerPolicy*`), and anything else
    # sorts as spread.
    gpu_policies: tuple[str, ...] | None
    # --- one node: pkg/scheduler/score.go `fitInDevices` (81-137) ---
    # The cards of the request's type are looked up first (`getNodeResources` 43-52: case-insensitive substring)
    # and the card-count check counts only them (98-103); v2.8.3 checks the count against every card of the node.
    type_lookup_before_count: bool
    # Init containers are placed too (`Resourcereqs`, pkg/device/devices.go 639-692; score.go
    # `allocateInitContainers` 226-254: each on the node as it was before the pod) and the pod holds, per card,
    # the larger of its init containers' peak and its app containers' sum (pkg/device/initContainer.go
    # `CollapseInitContainerUsage` 36-113; scheduler.go `Filter` 1133); v2.8.3 reads spec.containers only.
    init_containers_counted: bool
    # --- per card: pkg/device/nvidia/device.go `Fit` (715-876) ---
    # AllocatedCardsInsufficientRequest counts the cards taken (871-874; v2.8.3: `len(tmpDevs)`, the number of
    # device types, i.e. 1).
    partial_fit_counts_cards: bool
    # A card listed in the node annotation hami.io/device-cordon is CardCordoned (735-739; #2298).
    device_cordon: bool
    # use-/nouse-gputype and use-/nouse-gpuuuid: entries trimmed, empty entries and a blank annotation mean no
    # constraint, and use and nouse both apply (pkg/device/devices.go `CheckUUID` 693-713, `CheckType` 719-738);
    # v2.8.3 splits without trimming (an empty entry matches every type) and use-gpuuuid wins over nouse-gpuuuid.
    trimmed_selectors: bool
    # --- the request: device.go `GenerateResourceRequests` (520-600) ---
    # gpumem-percentage above 100 is clamped to 100, 0 or less is ignored (then the whole card when no gpumem)
    # (556-570); v2.8.3 keeps the value (0 % = 0 MB).
    clamp_memory_percentage: bool
    # --- node score: pkg/scheduler/policy/node_policy.go `ComputeDefaultScore` (106-130) ---
    # A node whose slot, core or memory total is 0 scores 0 (121-124); v2.8.3 divides by zero.
    node_score_zero_totals: bool
    # --- quota: pkg/device/quota.go `FitQuota` (62-95) ---
    # An explicit limit of 0 blocks (`LimitSet`, 27-36, 84, 90; #2313); v2.8.3 reads a limit of 0 as no limit.
    quota_zero_limit_blocks: bool
    # --- admission: pkg/scheduler/webhook.go `Handle` (114-116), `fitResourceQuota` (145-192) ---
    # The webhook refuses a pod over its namespace's quota at create (from v2.9.0, #1605): hami/webhook.py.
    quota_at_admission: bool
    # --- admission: what the webhook refuses before the quota (hami/webhook.py `webhook_denial`) ---
    # A gpumem-percentage outside 0-100 in any container, init containers first (#1997): pkg/device/nvidia/device.go
    # `MutateAdmission` 349-351, `validateMemoryPercentage` 389-396; webhook.go `Handle` 74-98 (admission.Errored).
    # v2.8.3's webhook takes any value (its scheduler keeps it).
    memory_percentage_range_checked: bool
    # A privileged container (init or app) in a pod the webhook finds a GPU resource in (#2139): webhook.go `Handle`
    # 71, 99-102, `privilegedContainerName` 125-137, `isPrivilegedContainer` 139-143. v2.8.3's skips a privileged
    # container instead (v2.8.3 webhook.go `Handle` 73-78: `continue`, no mutation, no `hasResource`).
    privileged_refused: bool
    # Both releases refuse a pod they find a GPU resource in when it has spec.nodeName: "pod has node assigned"
    # (v2.10.0 webhook.go `Handle` 104-112, v2.8.3 89-98; hami/webhook.py). Which pods that is differs in two ways.
    # `hasResource` is found in every container, init and privileged ones too (v2.10.0 `Handle` 74-98); v2.8.3 walks
    # spec.containers only and skips a privileged one (v2.8.3 `Handle` 70-87).
    webhook_resource_in_every_container: bool
    # The spec.schedulerName values of the pods the webhook handles at all, with the chart's
    # forceOverwriteDefaultScheduler true (charts/hami/values.yaml); None: any. v2.8.3's condition reads
    # `A && B || C && D`, so a pod naming any scheduler but default-scheduler, hami-scheduler included, is let through
    # untouched (v2.8.3 `Handle` 63-68): ("", "default-scheduler"). v2.10.0 handles hami-scheduler too (64-69) and lets
    # another name through, which gpulab does not model (its admission policy refuses such a GPU Pod anyway).
    webhook_scheduler_names: tuple[str, ...] | None
    # --- the request, again: device.go `GenerateResourceRequests` ---
    # A nvidia.com/gpumem that is not a plain integer within int32 turns the container's request into none at all
    # (#2285; device.go `GenerateResourceRequests` 531-543): HAMi allocates and accounts nothing for that container,
    # and what the node then does is outside HAMi's placement; gpulab says so (`GpumemNotReadByHami`, placement/
    # per_pod.py) rather than guess. v2.8.3 narrows the value to int32 (not modelled: gpulab reads it whole).
    gpumem_beyond_int32_dropped: bool


V2_8_3 = Rules(
    version="v2.8.3",
    score_type_matched_once=False,
    score_exact_percentage=False,
    score_zero_totals=False,
    scoring_weights=False,
    score_before_numa=False,
    policy_chains=False,
    mutex_policy=False,
    gpu_policies=("spread", "binpack"),
    type_lookup_before_count=False,
    init_containers_counted=False,
    partial_fit_counts_cards=False,
    device_cordon=False,
    trimmed_selectors=False,
    clamp_memory_percentage=False,
    node_score_zero_totals=False,
    quota_zero_limit_blocks=False,
    quota_at_admission=False,
    memory_percentage_range_checked=False,
    privileged_refused=False,
    webhook_resource_in_every_container=False,
    webhook_scheduler_names=("", "default-scheduler"),
    gpumem_beyond_int32_dropped=False,
)

V2_10_0 = Rules(
    version="v2.10.0",
    score_type_matched_once=True,
    score_exact_percentage=True,
    score_zero_totals=True,
    scoring_weights=True,
    score_before_numa=True,
    policy_chains=True,
    mutex_policy=True,
    gpu_policies=None,
    type_lookup_before_count=True,
    init_containers_counted=True,
    partial_fit_counts_cards=True,
    device_cordon=True,
    trimmed_selectors=True,
    clamp_memory_percentage=True,
    node_score_zero_totals=True,
    quota_zero_limit_blocks=True,
    quota_at_admission=True,
    memory_percentage_range_checked=True,
    privileged_refused=True,
    webhook_resource_in_every_container=True,
    webhook_scheduler_names=None,
    gpumem_beyond_int32_dropped=True,
)

RULES: dict[str, Rules] = {"v2.10.0": V2_10_0, "v2.8.3": V2_8_3}


def rules_for(version: str) -> Rules:
    """The rules of the HAMi release `version` names (a tenant's hamiVersion); ValueError for another."""
    try:
        return RULES[version]
    except (KeyError, TypeError):
        raise ValueError(f"HAMi {version!r} has no rules in hami/releases.py; known: {', '.join(RULES)}") from None
