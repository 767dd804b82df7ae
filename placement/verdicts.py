"""What the placement engine decides about a tenant's GPU pods, before any wording: one record per decision.

Pod by pod (placement/per_pod.py): the refusals and advisories one pod decides alone, and the GPU-count quota.
Across the pods (placement/search.py, placement/orders.py): each record carries the pods, the order, the
placements and HAMi's failure it rests on. placement/wording.py says them as findings; nothing here knows how a
tenant of one node or of several reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Literal

from hami.cards import CardSpec, ContainerRequest, PodRequest
from hami.cluster import NodeFailure, QuotaInUse
from hami.reasons import (
    CARD_INSUFFICIENT_MEMORY,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    CORES_ABOVE_100,
    EXCEEDED_QUOTA,
    EXCEEDING_RESOURCE_QUOTA,
    GPUMEM_NOT_READ_BY_HAMI,
    INIT_CONTAINER_GPU_REQUEST,
    INVALID_DEVICE_SCORING_WEIGHTS,
    NODE_INSUFFICIENT_DEVICE,
    POD_GPU_LIMIT_EXCEEDED,
    ZERO_MEMORY_PERCENTAGE,
)


@dataclass(frozen=True)
class TooManyCards:
    """A container asks more cards than the tenant's node with the most cards has."""

    container: str
    asks: int
    most: int
    init: bool = False  # an init container's (where the release places them: v2.10.0)
    reason: ClassVar[str] = NODE_INSUFFICIENT_DEVICE


@dataclass(frozen=True)
class NoCardMatches:
    """The pod's GPU type selector, or its card UUID selector, leaves no card of the tenant."""

    selector: Literal["type", "uuid"]

    @property
    def reason(self) -> str:
        return CARD_TYPE_MISMATCH if self.selector == "type" else CARD_UUID_MISMATCH


@dataclass(frozen=True)
class CardTooSmall:
    """A container asks more memory per card than the tenant's largest card holds."""

    container: str
    asks_mb: int
    cards: tuple[CardSpec, ...]
    init: bool = False  # an init container's (where the release places them: v2.10.0)
    reason: ClassVar[str] = CARD_INSUFFICIENT_MEMORY

    @property
    def largest_mb(self) -> int:
        return max(card.memory_mb for card in self.cards)


@dataclass(frozen=True)
class InitContainerAsks:
    """An init container asks for a GPU resource, and the tenant's HAMi release assigns cards to app containers
    only (v2.8.3: `Resourcereqs` reads spec.containers; v2.10.0 places init containers, and this is never said)."""

    container: ContainerRequest
    reason: ClassVar[str] = INIT_CONTAINER_GPU_REQUEST


@dataclass(frozen=True)
class BadScoringWeights:
    """The pod's hami.io/device-scoring-weights does not parse, and the tenant's release reads it (v2.10.0): HAMi's
    scheduler fails the pod's filter with `error`, so it stays Pending."""

    error: str
    reason: ClassVar[str] = INVALID_DEVICE_SCORING_WEIGHTS


@dataclass(frozen=True)
class RefusedByWebhook:
    """HAMi's admission webhook refuses the pod when it is created, whatever else runs (hami/webhook.py
    `webhook_denial`): a gpumem-percentage outside 0-100, a privileged container (v2.10.0), spec.nodeName (both)."""

    reason: str  # gpulab's name for it (hami/reasons.py INVALID_GPUMEM_PERCENTAGE, ...): HAMi gives none
    message: str  # the API server's


@dataclass(frozen=True)
class GpumemNotRead:
    """The tenant's release cannot read a container's nvidia.com/gpumem (v2.10.0: above int32) and drops its GPU
    request: no card is allocated or accounted for it, and what the node then does gpulab cannot predict."""

    container: str
    gpumem: int
    reason: ClassVar[str] = GPUMEM_NOT_READ_BY_HAMI


@dataclass(frozen=True)
class OverPodLimit:
    """The pod asks more of `resource` than the tenant allows per pod: its app containers together, or under v2.10.0
    its largest init container if that asks more (placement/per_pod.py `pod_asks`)."""

    resource: Literal["gpus", "gpumem", "gpucores"]
    asked: int
    limit: int
    reason: ClassVar[str] = POD_GPU_LIMIT_EXCEEDED


@dataclass(frozen=True)
class CoresAbove100:
    """Advice: a container asks more than 100% cores, which HAMi clamps to 100."""

    container: str
    cores: int
    reason: ClassVar[str] = CORES_ABOVE_100


@dataclass(frozen=True)
class ZeroMemory:
    """Advice: a container asks 0% of the card's memory. v2.8.3 gives it 0 MB; v2.10.0 reads 0 (or less) as not
    given and, without nvidia.com/gpumem, gives it the whole card (device.go `GenerateResourceRequests` 556-570):
    `whole_card`."""

    container: str
    whole_card: bool = False
    reason: ClassVar[str] = ZERO_MEMORY_PERCENTAGE


@dataclass(frozen=True)
class GpuQuotaExceeded:
    """The API server's `requests.nvidia.com/gpu` quota refuses the pod at creation, in order."""

    pod: PodRequest
    limit: int
    asks: int
    used: int  # by the namespace's pods created before it
    reason: ClassVar[str] = EXCEEDED_QUOTA


@dataclass(frozen=True)
class RefusedAtCreate:
    """HAMi's admission webhook refuses the pod when it is created: next to what already counts against its
    namespace's HAMi quota, it asks more than the quota leaves (hami/webhook.py; v2.9.0 and later). Certain in
    every order: what counts only grows. The pod never exists, so nothing places it or counts it."""

    pod: PodRequest
    quota: QuotaInUse
    message: str  # the API server's, hami/webhook.py QUOTA_DENIAL
    reason: ClassVar[str] = EXCEEDING_RESOURCE_QUOTA


PodRefusal = (
    RefusedByWebhook
    | GpumemNotRead
    | TooManyCards
    | NoCardMatches
    | CardTooSmall
    | InitContainerAsks
    | OverPodLimit
    | BadScoringWeights
)
PodAdvisory = CoresAbove100 | ZeroMemory


@dataclass(frozen=True)
class PodVerdicts:
    """What one workload's pods decide alone (its replicas are identical)."""

    workload: str  # kind/namespace/name
    refusals: tuple[PodRefusal, ...]
    advisories: tuple[PodAdvisory, ...]


@dataclass(frozen=True)
class Refused:
    """A pod that no node holds even alone, next to what already runs (certain: HAMi leaves it Pending)."""

    pod: PodRequest
    failure: NodeFailure | None  # HAMi's walk refusing it; None only if that walk and the search disagreed
    quota: QuotaInUse | None  # the pod's namespace quota, as the walk saw it
    # The API server's message when the tenant's release's webhook refuses the pod at create against that quota
    # use (hami/webhook.py `quota_refusal`; v2.10.0); None when it lets it through (always under v2.8.3).
    webhook: str | None = None

    @property
    def certain(self) -> bool:
        return True


@dataclass(frozen=True)
class Unplaceable:
    """The first pod (declared order) that no placement of it and the pods before it can hold (certain)."""

    pod: PodRequest | None  # None only if the searches disagreed and no single pod is the first
    before: tuple[PodRequest, ...]  # the pods placed before it (the whole set when `pod` is None)
    failure: NodeFailure | None  # HAMi's walk next to one placement of `before`; None as in Refused
    quota: QuotaInUse | None  # the pod's namespace quota next to that placement
    # As in Refused, against that quota use: the webhook refuses the pod when it is created after `before` is placed.
    webhook: str | None = None

    @property
    def certain(self) -> bool:
        return True


@dataclass(frozen=True)
class Stranded:
    """HAMi's greedy walk, created in `order` with these policies, puts the pods of `placed` and then finds
    no node for `failure.pod`. Certain (`every_order`) when, with the configured policies, every creation
    order and every choice among tied nodes strands one; else advice."""

    order: tuple[PodRequest, ...]
    placed: tuple[tuple[str, str], ...]  # (pod, node) before the failure, in order
    failure: NodeFailure
    gpu_policy: str
    node_policy: str
    configured: bool  # `gpu_policy` is the tenant's own card policy (the others are tried after it)
    every_order: bool
    placement_exists: bool  # the search proved that some placement holds every pod
    quota: QuotaInUse | None = None  # the pod's namespace quota as the walk that strands it saw it
    # As in Refused, against that quota use: created after the pods placed before it, the webhook refuses it.
    webhook: str | None = None

    @property
    def pod(self) -> PodRequest:
        return self.failure.pod

    @property
    def certain(self) -> bool:
        return self.every_order


class Question(Enum):
    """What a bounded search stopped short of answering."""

    POD_FITS = "whether the pod fits alone"  # the placement search's budget ran out
    SET_FITS = "whether the set fits"  # the same, for every pod together
    FIRST_UNPLACEABLE = "which pod no placement holds first"  # the set fits nowhere, that much is known
    ORDERS = "whether some creation order strands a pod"  # the order walk hit its state or tie-run bound


@dataclass(frozen=True)
class Undecided:
    """A question the engine's bounds left open: said, never silently dropped."""

    question: Question
    pods: tuple[PodRequest, ...]  # the pods asked about (one for POD_FITS)

    @property
    def certain(self) -> bool:
        """Only the first unplaceable pod is open: that no placement holds the set is known."""
        return self.question is Question.FIRST_UNPLACEABLE


PlacementVerdict = Refused | Unplaceable | Stranded | Undecided


@dataclass(frozen=True)
class Judgement:
    """Every verdict on a tenant's workloads: pod by pod (the per-pod rules, the GPU-count quota), then across
    the pods that passed them (certain ones first)."""

    per_pod: tuple[PodVerdicts, ...]
    quota: tuple[GpuQuotaExceeded, ...]
    placement: tuple[PlacementVerdict, ...]
    admission: tuple[RefusedAtCreate, ...] = ()  # HAMi's webhook at create, once per workload (v2.10.0)
