"""What the placement engine (placement/evaluate.py) decides about a tenant's GPU pods, before any wording:
one record per decision, carrying the pods, the order, the placements and HAMi's failure it rests on.
placement/wording.py says them as findings; nothing here knows how a tenant of one node or of several
reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hami.cards import NamespaceQuota, Node, PodRequest
from hami.nodes import NodeFailure


@dataclass(frozen=True)
class QuotaInUse:
    """A namespace's HAMi quota and what already counts against it, where HAMi's walk refused a pod."""

    namespace: str
    quota: NamespaceQuota
    used_mb: int
    used_cores: int

    @staticmethod
    def on(node: Node, namespace: str) -> QuotaInUse | None:
        """The quota as `node` sees it (the table is shared by a cluster's nodes); None without one."""
        quota = node.quotas.get(namespace)
        if quota is None:
            return None
        used_mb, used_cores = node.namespace_use.get(namespace, (0, 0))
        return QuotaInUse(namespace, quota, used_mb, used_cores)


@dataclass(frozen=True)
class Refused:
    """A pod that no node holds even alone, next to what already runs (certain: HAMi leaves it Pending)."""

    pod: PodRequest
    failure: NodeFailure | None  # HAMi's walk refusing it; None only if that walk and the search disagreed
    quota: QuotaInUse | None  # the pod's namespace quota, as the walk saw it

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
    quota: QuotaInUse | None = None  # the pod's namespace quota before any pod is placed

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
