"""HAMi's card rules: whether a container fits a card, why not, and how a card scores (hami/nodes.py walks one
node's cards with them, hami/cluster.py chooses among the nodes).

Every rule follows HAMi v2.8.3 (pkg/device/nvidia/device.go `Fit`, pkg/scheduler/score.go,
pkg/scheduler/policy/gpu_policy.go; the conformance table in hami/tests/test_conformance.py holds HAMi's own
unit-test vectors), and, where a function takes `rules=V2_10_0` (hami/releases.py), HAMi v2.10.0 (its vectors:
hami/tests/test_conformance_v2_10_0.py). The v2.8.3 rules:

- a container request carries HAMi's fields as HAMi stores them (`Memreq`, `MemPercentagereq` with
  101 meaning "not given", `Coresreq`), so memory is computed per candidate card, exactly as `Fit` does;
- cards are scored with the request included, in float32 (`ComputeScore`), sorted stably (ascending
  for binpack, descending for spread) and walked from the end (`Fit`);
- per card, in `Fit`'s order: health, type, UUID, time slicing, cores clamped to 100, the namespace
  quota (on *this* card's memory), memory, cores, exclusive use, compute units.

What v2.10.0 changes (each difference is a field of hami/releases.py `Rules`, cited there): the score counts a
request only on a card of its exact type and as one slot, with exact percentages and per-pod weights; a card in
use is refused under the `mutex` policy; a cordoned card is refused; selector lists are trimmed; a memory
percentage is clamped to 100 and 0 or less is ignored.

The placement engine's search and arrival-order analysis (placement/) are built on these rules.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from hami.annotations import DEVICE_CORDON, DEVICE_SCORING_WEIGHTS
from hami.reasons import (
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_CORDONED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_NOT_HEALTH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    RESOURCE_QUOTA_NOT_FIT,
)
from hami.releases import V2_8_3, Rules

POLICIES = ("spread", "binpack")  # the card policies gpulab configures (and v2.8.3's rules accept from a pod)
NO_PERCENTAGE = 101  # HAMi's MemPercentagereq when gpumem-percentage is not given
NVIDIA = "NVIDIA"  # the Type of every request for nvidia.com/gpu (device.go `NvidiaGPUDevice`)
MUTEX = "mutex"


@dataclass(frozen=True)
class CardSpec:
    id: str
    type: str
    memory_mb: int
    cores: int = 100
    split_count: int = 10
    healthy: bool = True
    numa: int = 0  # the register annotation's `numa` (gpulab writes 0)
    cordoned: bool = False  # listed in the node's hami.io/device-cordon annotation (v2.10.0)


@dataclass(frozen=True)
class ContainerRequest:
    """One container's request as HAMi stores it (`ContainerDeviceRequest`, after the webhook)."""

    name: str
    nums: int  # distinct cards
    memreq: int = 0  # MB per card; 0 means "use the percentage"
    mem_percentage: int = 100  # percent of each card's memory; NO_PERCENTAGE (101) when not given
    cores: int = 0  # percent of each card's cores as asked (Fit clamps above 100)
    device_type: str = NVIDIA  # the request's Type (HAMi's conformance vectors use others)

    def memory_on(self, card: CardSpec) -> int:
        """MB this request takes on `card` (device.go `Fit`): Memreq, else a percentage of that card."""
        return self.memory_for(card.memory_mb)

    def memory_for(self, card_mb: int) -> int:
        """MB this request takes on a card of `card_mb` MB."""
        memory = self.memreq if self.memreq > 0 else 0
        if self.mem_percentage != NO_PERCENTAGE and self.memreq == 0:
            memory = card_mb * self.mem_percentage // 100
        return memory

    @property
    def fit_cores(self) -> int:
        return min(self.cores, 100)

    def score_memory(self, card: CardSpec) -> int:
        """MB the card score adds (gpu_policy.go `ComputeScore`: integer pct/100, so <100 % adds 0)."""
        if self.mem_percentage not in (0, NO_PERCENTAGE):
            return card.memory_mb * (self.mem_percentage // 100)
        return self.memreq

    def uses_percentage(self) -> bool:
        return self.memreq == 0 and self.mem_percentage != NO_PERCENTAGE

    def describe(self) -> str:
        if self.uses_percentage():
            memory = "all of each card's memory" if self.mem_percentage == 100 else f"{self.mem_percentage}% of memory"
        else:
            memory = f"{self.memreq} MB"
        cards = f"{self.nums} cards x " if self.nums > 1 else ""
        return f"{cards}{memory}, {self.cores}% cores"


@dataclass(frozen=True)
class PodAdmission:
    """What HAMi's admission webhook (hami/webhook.py) reads of a pod besides its requests: placement/workloads.py
    `pod_admission` fills it from the pod spec, init containers first, as `Handle` walks them."""

    # (container, gpumem-percentage) of every container that gives one: its limit, else its request, as
    # `Quantity.Value()` reads it (device.go `resourceValue` 452-463).
    percentages: tuple[tuple[str, int], ...] = ()
    privileged: str | None = None  # the first privileged container (`privilegedContainerName`)
    # `MutateAdmission` found a GPU resource in some container (`hasResource`: a card count, gpumem,
    # gpumem-percentage or gpucores limit, or a card count request it makes exclusive; device.go 398-450).
    has_resource: bool = False
    node_name: str | None = None  # spec.nodeName, when set
    # v2.8.3's `hasResource`: found in a container of spec.containers that is not privileged (v2.8.3 `Handle` 70-87).
    app_resource: bool = False
    scheduler_name: str = ""  # spec.schedulerName ("" when absent)


@dataclass(frozen=True)
class PodRequest:
    """One pod (one replica) of a workload. Selectors are None when the annotation is absent."""

    workload: str  # e.g. Pod/gpu-workloads/trainer-1, or Deployment/ns/serve#2
    namespace: str
    containers: tuple[ContainerRequest, ...]
    # HAMi v2.8.3 never places init containers (Resourcereqs reads spec.containers only); kept for limits
    # and so the pack can point them out. v2.10.0 places them (hami/nodes.py). Not part of `shape`: the engine
    # adds them to its keys where the rules count them (hami/cluster.py `pod_kind`).
    init_containers: tuple[ContainerRequest, ...] = ()
    # Per init container above, whether it is a native sidecar (restartPolicy: Always, Kubernetes KEP-753), which the
    # API server's ResourceQuota counts beside the app containers (placement/workloads.py `quota_gpus`). HAMi v2.10.0
    # reads no restartPolicy (its docs/develop/sidecarsContainer-design.md 5-11; pkg/device/initContainer.go 64-65),
    # so nothing of hami/ reads this. Not part of `shape`; shorter than `init_containers` (built by hand): not one.
    init_sidecars: tuple[bool, ...] = ()
    use_types: tuple[str, ...] | None = None
    nouse_types: tuple[str, ...] | None = None
    use_uuids: tuple[str, ...] | None = None
    nouse_uuids: tuple[str, ...] | None = None
    gpu_policy: str | None = None  # the pod's hami.io/gpu-scheduler-policy annotation
    node_policy: str | None = None  # its hami.io/node-scheduler-policy (hami/nodes.py)
    # Its hami.io/device-scoring-weights (slot, core, memory), parsed by `parse_scoring_weights`; v2.10.0 only.
    scoring_weights: tuple[int, int, int] | None = None
    # Why that annotation does not parse (`parse_scoring_weights`' words), when it does not: v2.10.0 then fails
    # the pod's filter (placement/per_pod.py says so); v2.8.3 ignores the annotation.
    scoring_weights_error: str | None = None
    # What HAMi's webhook reads of the pod besides its requests (hami/webhook.py; placement/workloads.py reads it);
    # None: not read. Not part of `shape`: what it refuses never reaches placement.
    admission: PodAdmission | None = None

    @cached_property
    def shape(self) -> tuple:
        """Everything placement depends on (the workload name does not); computed once, the engine keys on it
        at every step."""
        return (
            self.namespace,
            self.containers,
            self.use_types,
            self.nouse_types,
            self.use_uuids,
            self.nouse_uuids,
            self.gpu_policy,
            self.node_policy,
            self.scoring_weights,
        )

    @property
    def selects_uuids(self) -> bool:
        return self.use_uuids is not None or self.nouse_uuids is not None


@dataclass
class CardUse:
    slots: int = 0
    memory_mb: int = 0
    cores: int = 0


@dataclass(frozen=True)
class NamespaceQuota:
    """HAMi's quota of one namespace (`limits.nvidia.com/gpumem|gpucores`); None = no limit, 0 = no limit under
    v2.8.3's rules and a limit that blocks under v2.10.0's (hami/releases.py `quota_zero_limit_blocks`)."""

    memory_mb: int | None = None
    cores: int | None = None


CORDON_ANNOTATION = DEVICE_CORDON  # a node annotation (v2.10.0)


def cordoned_ids(annotation: str | None) -> frozenset[str]:
    """The card ids a node's hami.io/device-cordon annotation names (v2.10.0 device.go `cordonedDevices` 698-713:
    comma-separated, trimmed, empty entries skipped; absent or blank: none). Set `CardSpec.cordoned` from it."""
    return frozenset(entry.strip() for entry in (annotation or "").split(",") if entry.strip())


def _type_ok(card: CardSpec, pod: PodRequest, rules: Rules = V2_8_3) -> bool:
    card_type = card.type.upper()
    if rules.trimmed_selectors:
        # v2.10.0 pkg/device/devices.go `CheckType` (719-738): entries trimmed, empty ones skipped, a blank
        # annotation is no constraint.
        def named(selector: tuple[str, ...]) -> bool:
            return any(t.strip() and t.strip().upper() in card_type for t in selector)

        if _given(pod.use_types) and not named(pod.use_types):
            return False
        return not (_given(pod.nouse_types) and named(pod.nouse_types))
    # v2.8.3 checkGPUtype: upper-cased substring match; the annotation is split on "," and not trimmed.
    if pod.use_types is not None and not any(t.upper() in card_type for t in pod.use_types):
        return False
    return pod.nouse_types is None or not any(t.upper() in card_type for t in pod.nouse_types)


def _given(selector: tuple[str, ...] | None) -> bool:
    """A selector annotation that constrains (v2.10.0): present and not blank once re-joined."""
    return selector is not None and bool(",".join(selector).strip())


def _uuid_ok(card: CardSpec, pod: PodRequest, rules: Rules = V2_8_3) -> bool:
    if rules.trimmed_selectors:
        # v2.10.0 pkg/device/devices.go `CheckUUID` (693-713): trimmed exact ids, a blank annotation is no
        # constraint, and use-gpuuuid and nouse-gpuuuid both apply.
        if _given(pod.use_uuids) and not any(u.strip() == card.id for u in pod.use_uuids):
            return False
        return not (_given(pod.nouse_uuids) and any(u.strip() == card.id for u in pod.nouse_uuids))
    # v2.8.3 checkUUID: use-gpuuuid wins over nouse-gpuuuid; exact ids.
    if pod.use_uuids is not None:
        return card.id in pod.use_uuids
    if pod.nouse_uuids is not None:
        return card.id not in pod.nouse_uuids
    return True


def policy_of(pod: PodRequest, configured: str | None, rules: Rules = V2_8_3) -> str:
    """The card policy HAMi applies to `pod`: its hami.io/gpu-scheduler-policy when the rules take that value
    (`Rules.gpu_policies`: v2.8.3's only spread and binpack, as gpulab always has; v2.10.0's any value, as
    util.go `GetGPUSchedulerPolicyByPod` 277-285 does), else the configured policy."""
    taken = rules.gpu_policies is None or pod.gpu_policy in rules.gpu_policies
    return pod.gpu_policy if pod.gpu_policy is not None and taken else (configured or "spread")


def policy_names(policy: str, name: str) -> bool:
    """v2.10.0 util.go `PolicyContains` (290-298): `name` is one of the comma-separated entries, trimmed."""
    return any(entry.strip() == name for entry in policy.split(","))


def resolve_request(request: ContainerRequest, rules: Rules = V2_8_3) -> ContainerRequest:
    """The request as the release's `GenerateResourceRequests` stores it, from one read with v2.8.3's rules
    (placement/workloads.py): v2.10.0 clamps gpumem-percentage above 100 to 100 and ignores 0 or less, then asks
    the whole card when no gpumem is given (device.go 556-577). An explicit 101 cannot be told from "not given"
    (HAMi's own sentinel), so it stays "not given". Under v2.8.3 the request is returned as it is."""
    percentage = request.mem_percentage
    if not rules.clamp_memory_percentage or percentage == NO_PERCENTAGE or 0 < percentage <= 100:
        return request
    if percentage > 100:
        return replace(request, mem_percentage=100)
    return replace(request, mem_percentage=100 if request.memreq == 0 else NO_PERCENTAGE)


GPUMEM_INT32_MAX = 2**31 - 1  # math.MaxInt32 over the memoryFactor (gpulab keeps 1)


def gpumem_read(request: ContainerRequest, rules: Rules = V2_8_3) -> bool:
    """Whether the release reads the container's request at all: v2.10.0's `GenerateResourceRequests` (device.go
    531-543, #2285) returns no request when nvidia.com/gpumem is beyond int32 (`Rules.gpumem_beyond_int32_dropped`);
    v2.8.3 reads every value (and narrows it, which gpulab does not model)."""
    return not (rules.gpumem_beyond_int32_dropped and request.memreq > GPUMEM_INT32_MAX)


def card_reason(
    card: CardSpec,
    use: CardUse,
    request: ContainerRequest,
    pod: PodRequest,
    quota_room: tuple[int | None, int | None],
    rules: Rules = V2_8_3,
    policy: str | None = None,
) -> str | None:
    """Why `card` cannot take `request` now, in HAMi's `Fit` order; None if it can.

    `quota_room` is what the namespace quota still allows for this card (MB, cores), None = no limit. `policy` is
    the card policy in force for the pod (`policy_of`); it matters to v2.10.0's `mutex` only."""
    if not card.healthy:
        return CARD_NOT_HEALTH
    if rules.device_cordon and card.cordoned:  # v2.10.0 device.go `Fit` 735-739
        return CARD_CORDONED
    if request.device_type != NVIDIA or not _type_ok(card, pod, rules):  # device.go `checkType`
        return CARD_TYPE_MISMATCH
    if not _uuid_ok(card, pod, rules):
        return CARD_UUID_MISMATCH
    if card.split_count <= use.slots:
        return CARD_TIME_SLICING_EXHAUSTED
    # v2.10.0 device.go `Fit` 767-771: under `mutex` (alone or in a chain) a card already in use is refused.
    if rules.mutex_policy and use.slots > 0 and policy is not None and policy_names(policy, MUTEX):
        return EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
    cores = request.fit_cores
    memory = request.memory_on(card)
    memory_room, cores_room = quota_room
    if (memory_room is not None and memory > memory_room) or (cores_room is not None and cores > cores_room):
        return RESOURCE_QUOTA_NOT_FIT
    if card.memory_mb - use.memory_mb < memory:
        return CARD_INSUFFICIENT_MEMORY
    if card.cores - use.cores < cores:
        return CARD_INSUFFICIENT_CORE
    if card.cores == 100 and cores == 100 and use.slots > 0:
        return EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
    if card.cores != 0 and use.cores == card.cores and cores == 0:
        return CARD_COMPUTE_UNITS_EXHAUSTED
    return None


def reason_detail(card: CardSpec, use: CardUse, request: ContainerRequest, reason: str) -> str:
    memory = request.memory_on(card)
    return {
        CARD_NOT_HEALTH: "the card is unhealthy",
        CARD_CORDONED: f"the card is cordoned ({CORDON_ANNOTATION})",
        CARD_TYPE_MISMATCH: f"type {card.type} is not selected",
        CARD_UUID_MISMATCH: f"card {card.id} is not selected",
        CARD_TIME_SLICING_EXHAUSTED: f"all {card.split_count} slots in use",
        RESOURCE_QUOTA_NOT_FIT: f"{memory} MB / {request.fit_cores}% cores on this card exceed the namespace quota",
        CARD_INSUFFICIENT_MEMORY: f"asks {memory} MB, {card.memory_mb - use.memory_mb} MB free of {card.memory_mb}",
        CARD_INSUFFICIENT_CORE: f"asks {request.fit_cores}% cores, {card.cores - use.cores}% free",
        EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: f"asks the whole card, {use.slots} already on it"
        if request.fit_cores == 100
        else f"the mutex policy takes only idle cards, {use.slots} already on it",
        CARD_COMPUTE_UNITS_EXHAUSTED: "no cores left for a 0% request",
    }.get(reason, reason)


_F32 = struct.Struct("f")


def _f32(value: float) -> float:
    """Round to float32, as Go does after each float32 operation."""
    return _F32.unpack(_F32.pack(value))[0]


DEFAULT_WEIGHTS = (1, 1, 1)  # slot, core, memory (util `DefaultDeviceScoringWeights`)


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def card_score(
    card: CardSpec,
    use: CardUse,
    requests: Sequence[ContainerRequest],
    rules: Rules = V2_8_3,
    weights: tuple[int, int, int] | None = None,
) -> float:
    """HAMi's card score (gpu_policy.go `ComputeScore`), in float32 so that ties are Go's ties. `weights` (slot,
    core, memory) are a pod's hami.io/device-scoring-weights, v2.10.0 only (None: 1, 1, 1)."""
    if not rules.score_type_matched_once:
        nums = sum(r.nums for r in requests)
        cores = sum(r.cores for r in requests)
        memory = sum(r.score_memory(card) for r in requests)
        used = _f32((nums + use.slots) / card.split_count)
        core = _f32((cores + use.cores) / card.cores)
        mem = _f32((memory + use.memory_mb) / card.memory_mb)
        return _f32(10.0 * _f32(_f32(used + core) + mem))
    # v2.10.0 gpu_policy.go `ComputeScore` (194-222).
    if rules.score_zero_totals and (card.split_count == 0 or card.cores == 0 or card.memory_mb == 0):
        return 0.0
    slots = cores = memory = 0
    for r in requests:
        if r.device_type != card.type:  # only requests of the card's own type (203-205)
            continue
        slots += 1  # a container is one slot, whatever its card count (207)
        cores += r.cores
        if r.mem_percentage not in (0, NO_PERCENTAGE):
            if rules.score_exact_percentage:  # exact percentage (209-211)
                memory += _go_div(card.memory_mb * r.mem_percentage, 100)
            else:
                memory += card.memory_mb * (r.mem_percentage // 100)
        else:
            memory += r.memreq
    slot_w, core_w, memory_w = weights if weights is not None and rules.scoring_weights else DEFAULT_WEIGHTS
    used = _f32(_f32(slots + use.slots) / _f32(card.split_count))
    core = _f32(_f32(cores + use.cores) / _f32(card.cores))
    mem = _f32(_f32(memory + use.memory_mb) / _f32(card.memory_mb))
    weighted = _f32(_f32(_f32(_f32(slot_w) * used) + _f32(_f32(core_w) * core)) + _f32(_f32(memory_w) * mem))
    return _f32(10.0 * weighted)


WEIGHTS_ANNOTATION = DEVICE_SCORING_WEIGHTS
_GO_INT = re.compile(r"[+-]?[0-9]+")


def parse_scoring_weights(value: str) -> tuple[int, int, int]:
    """A pod's hami.io/device-scoring-weights as (slot, core, memory), checked as v2.10.0's
    pkg/util/device_scoring_weights.go `ParseDeviceScoringWeights` checks it; ValueError with its words otherwise
    (HAMi's calcScore then fails the pod's filter: it is never scheduled)."""
    where = f"invalid {WEIGHTS_ANNOTATION} annotation {value!r}"
    parts = value.split(",")
    if len(parts) != 3:
        raise ValueError(f"{where}: expected slot, core, and memory weights")
    found: dict[str, int] = {}
    for part in parts:
        key, sep, text = part.strip().partition("=")
        if not sep:
            raise ValueError(f"{where}: expected key=value entries")
        key, text = key.strip(), text.strip()
        if key in found:
            raise ValueError(f'{where}: duplicate "{key}" weight')
        if not _GO_INT.fullmatch(text) or not -(2**63) <= int(text) < 2**63:
            raise ValueError(f'{where}: "{key}" weight must be an integer')
        if int(text) < 0:
            raise ValueError(f'{where}: "{key}" weight must not be negative')
        if key not in ("slot", "core", "memory"):
            raise ValueError(f'{where}: unknown weight "{key}"')
        found[key] = int(text)
    if not any(found.values()):
        raise ValueError(f"{where}: at least one weight must be positive")
    return found.get("slot", 0), found.get("core", 0), found.get("memory", 0)
