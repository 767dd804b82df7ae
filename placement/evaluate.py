"""Judging one tenant's GPU workloads against its GPU nodes, their current usage, per-pod limits and quota.
One evaluation for every tenant: a tenant with one GPU node is a cluster of one.

The questions, in order, each answered by one module:

- pod by pod (placement/per_pod.py): the per-pod rules the admission policy shares, HAMi's webhook on the
  namespace quota at create (v2.10.0; hami/webhook.py), and the GPU-count quota;
- certain (errors), by exhaustive search (placement/search.py): a pod that no node can hold even alone
  (next to what already runs), and a set that no placement holds (each pod on one node, the namespace quota
  counted across the nodes), with HAMi's own walk for the first pod that does not fit;
- by creation order (placement/orders.py): a set that HAMi's walk, with the configured policies, strands in
  every creation order whichever tied node it picks (certain; never when the walk was cut); a pod it strands
  in some order or with the other card policy (advice); and questions the bounded searches could not
  decide (said, never silently dropped).

The decisions are verdicts (placement/verdicts.py), each with its pods, order, placements and HAMi's
failure; the engine words nothing: placement/wording.py says them, as a tenant of one GPU node or of several
reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from hami.cards import PodRequest
from placement.inventory import TenantInventory
from placement.orders import order_verdict
from placement.per_pod import pod_level
from placement.search import Budget, Fit, alone_verdicts, first_unplaceable, search_placement
from placement.verdicts import Judgement, PlacementVerdict, Question, Undecided
from placement.workloads import Workload


def judge_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> Judgement:
    """Every verdict on a tenant's workloads: pod by pod, then the placement of the GPU pods that passed."""
    per_pod, quota, pods, at_create = pod_level(inventory, workloads)
    placement = tuple(judge_placement(inventory, pods)) if pods else ()
    return Judgement(tuple(per_pod), tuple(quota), placement, tuple(at_create))


def judge_placement(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[PlacementVerdict]:
    """The engine's verdicts on the tenant's GPU pods (the per-pod rules have passed them), certain ones first."""
    cluster = inventory.cluster(pods)
    policies = inventory.gpu_policy, inventory.node_policy
    budget = Budget()  # shared by every search below: the whole evaluation is bounded
    placeable, alone = alone_verdicts(cluster, pods, budget, *policies)
    verdicts: list[PlacementVerdict] = [*alone]
    if not placeable:
        return verdicts
    answer = search_placement(cluster, placeable, budget).answer
    if answer is Fit.NO_PLACEMENT:
        return [*verdicts, first_unplaceable(cluster, placeable, budget, *policies)]
    if answer is Fit.UNDECIDED:
        verdicts.append(Undecided(Question.SET_FITS, tuple(placeable)))
    stranding = order_verdict(cluster, placeable, *policies, placement_exists=answer is Fit.FITS)
    return verdicts if stranding is None else [*verdicts, stranding]
