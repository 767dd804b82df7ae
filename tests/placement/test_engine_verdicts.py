"""The placement engine's verdicts as records (placement/verdicts.py), before any wording: what each one
carries, the search's tri-state, HAMi's candidates, and that the wording (placement/wording.py) is told
its context instead of the engine choosing phrases. tests/placement/test_engine_snapshot.py guards the words."""

from __future__ import annotations

import functools
from dataclasses import replace

from hami.cards import (
    CARD_INSUFFICIENT_MEMORY,
    NO_PERCENTAGE,
    RESOURCE_QUOTA_NOT_FIT,
    CardSpec,
    ContainerRequest,
    PodRequest,
)
from hami.cluster import Candidates, Cluster, NodeFailure
from hami.nodes import Node
from model.config import GpuQuota, PodLimits
from placement import evaluate, orders, wording
from placement.evaluate import judge_placement
from placement.findings import ORDER_DEPENDENT, UNDECIDED
from placement.inventory import TenantInventory
from placement.orders import MAX_TIE_RUNS, walk_order
from placement.search import Budget, Fit, search_placement
from placement.verdicts import Question, Refused, Stranded, Undecided, Unplaceable

A100 = CardSpec("GPU-0", "NVIDIA-A100-SXM4-80GB", 81920)
L4 = CardSpec("GPU-L4", "NVIDIA-L4", 24576)
L4_THEN_A100 = (CardSpec("GPU-0", "NVIDIA-L4", 24576), CardSpec("GPU-1", "NVIDIA-A100-SXM4-80GB", 81920))


def pod(name: str, memory: int | None, cores: int = 0) -> PodRequest:
    """A one-card pod asking `memory` MB (None: the whole card) and `cores` %."""
    if memory is None:
        container = ContainerRequest("c", 1, 0, 100, cores)
    else:
        container = ContainerRequest("c", 1, memory, NO_PERCENTAGE, cores)
    return PodRequest(f"Pod/ns/{name}", "ns", (container,))


# Some placement holds them (the whole card on the L4, 32000 MB on the A100), but card binpack strands one
# pod whatever the creation order (tests/placement/test_gpu_fit.py).
STRANDED_EVERY_ORDER = (pod("whole", None, 30), pod("a", 20000), pod("b", 12000))


def tenant(
    cards: tuple[CardSpec, ...],
    gpu_policy: str = "binpack",
    quota: GpuQuota | None = None,
    namespaces: tuple = (),
    **kw,
) -> TenantInventory:
    return TenantInventory("t", cards, PodLimits(), quota, namespaces, gpu_policy, **kw)


def test_a_pod_too_large_for_every_card_is_refused_with_its_pod_and_hamis_failure() -> None:
    large = pod("large", 90000)
    (verdict,) = judge_placement(tenant((A100,)), [large])
    assert isinstance(verdict, Refused)
    assert verdict.pod is large and verdict.certain
    assert isinstance(verdict.failure, NodeFailure) and verdict.failure.pod == large
    assert verdict.failure.reason == CARD_INSUFFICIENT_MEMORY
    assert verdict.quota is None, "no quota in the namespace"


def test_the_first_pod_no_placement_holds_is_unplaceable_next_to_the_pods_before_it() -> None:
    first, second = pod("first", 20000), pod("second", 20000)
    (verdict,) = judge_placement(tenant((L4,)), [first, second])
    assert isinstance(verdict, Unplaceable)
    assert verdict.pod is second and verdict.before == (first,)
    assert verdict.failure is not None and verdict.failure.reason == CARD_INSUFFICIENT_MEMORY
    assert verdict.certain


def test_a_set_stranded_in_every_order_carries_the_declared_order_and_placements() -> None:
    (verdict,) = judge_placement(tenant(L4_THEN_A100, "binpack"), list(STRANDED_EVERY_ORDER))
    assert isinstance(verdict, Stranded)
    assert verdict.every_order and verdict.certain and verdict.configured
    assert verdict.order == STRANDED_EVERY_ORDER, "the declared order"
    assert verdict.pod.workload == "Pod/ns/b"
    assert [pod for pod, _ in verdict.placed] == ["Pod/ns/whole", "Pod/ns/a"]
    assert verdict.placement_exists and verdict.gpu_policy == "binpack"


def test_a_set_stranded_in_every_order_by_the_quota_says_the_quota_in_use_when_the_pod_was_refused() -> None:
    """50 % of an A100 is 40960 MB: whichever card HAMi gives it, the pod of 20000 MB after it meets the 60000 MB
    quota on every card (both on the L4 would fit: 12288 + 20000). The note says what the namespace held when
    HAMi refused the pod, not what it held before the first pod was placed."""
    cards = (A100, replace(L4, id="GPU-1"), replace(A100, id="GPU-2"))
    half = PodRequest("Pod/ns/half", "ns", (ContainerRequest("c", 1, 0, 50, 0),))
    fixed = pod("fixed", 20000)
    inventory = tenant(cards, "binpack", quota=GpuQuota(gpumem=60000), namespaces=("ns",))
    (verdict,) = judge_placement(inventory, [half, fixed])
    assert isinstance(verdict, Stranded) and verdict.every_order and verdict.pod is fixed
    assert verdict.quota is not None and (verdict.quota.used_mb, verdict.quota.quota.memory_mb) == (40960, 60000)
    (finding,) = wording.findings(inventory, [verdict])
    assert finding.reason == RESOURCE_QUOTA_NOT_FIT
    assert "limits.nvidia.com/gpumem=60000 (40960 MB in use)" in finding.message


def test_a_set_stranded_in_some_orders_only_is_advice_with_the_order_that_strands() -> None:
    verdicts = judge_placement(tenant(L4_THEN_A100, "spread"), list(STRANDED_EVERY_ORDER))
    (verdict,) = verdicts
    assert isinstance(verdict, Stranded)
    assert not verdict.every_order and not verdict.certain
    assert (verdict.gpu_policy, verdict.configured) == ("spread", True)
    assert sorted(verdict.order, key=str) == sorted(STRANDED_EVERY_ORDER, key=str), "a creation order of the set"
    position = verdict.order.index(verdict.failure.pod)
    assert [pod for pod, _ in verdict.placed] == [p.workload for p in verdict.order[:position]]
    (finding,) = wording.findings(tenant(L4_THEN_A100, "spread"), verdicts)
    assert (finding.severity, finding.reason) == ("warning", ORDER_DEPENDENT)


def test_a_budget_that_runs_out_is_undecided_about_the_pods_it_asked(monkeypatch) -> None:
    small, first, second = pod("small", 2000), pod("first", 20000), pod("second", 20000)
    # No step left: each pod fits alone by first fit (no step needed), the set is not known to fit.
    monkeypatch.setattr(evaluate, "Budget", lambda: Budget(left=0))
    undecided, stranded = judge_placement(tenant((L4,)), [small, first, second])
    assert undecided == Undecided(Question.SET_FITS, (small, first, second)) and not undecided.certain
    assert isinstance(stranded, Stranded) and not stranded.placement_exists, "unproven: the search ran out"
    # One step: the set is known to fit nowhere, but not which pod is the first that does not.
    monkeypatch.setattr(evaluate, "Budget", lambda: Budget(left=1))
    (verdict,) = judge_placement(tenant((L4,)), [small, first, second])
    assert verdict == Undecided(Question.FIRST_UNPLACEABLE, (small, first, second)) and verdict.certain
    (finding,) = wording.findings(tenant((L4,)), [verdict])
    assert (finding.severity, finding.reason) == ("error", UNDECIDED)


def test_an_order_walk_cut_short_is_undecided_and_not_certain(monkeypatch) -> None:
    cut = functools.partial(orders.find_stranding, limit=1)
    monkeypatch.setattr(orders, "find_stranding", cut)
    verdicts = judge_placement(tenant(L4_THEN_A100, "binpack"), list(STRANDED_EVERY_ORDER))
    (verdict,) = verdicts
    assert isinstance(verdict, Undecided) and verdict.question is Question.ORDERS
    assert verdict.pods == STRANDED_EVERY_ORDER and not verdict.certain
    (finding,) = wording.findings(tenant(L4_THEN_A100, "binpack"), verdicts)
    assert (finding.severity, finding.reason) == ("warning", UNDECIDED)


def test_the_search_answers_one_of_three_named_states() -> None:
    cluster = Cluster(["node"], [Node([L4])])
    fits = search_placement(cluster, [pod("a", 10000), pod("b", 10000)])
    assert fits.answer is Fit.FITS and fits.cluster is not None and fits.fits is True
    none = search_placement(cluster, [pod("a", 20000), pod("b", 20000)])
    assert none.answer is Fit.NO_PLACEMENT and none.cluster is None and none.fits is False
    undecided = search_placement(cluster, [pod("a", 20000), pod("b", 20000)], Budget(left=0))
    assert undecided.answer is Fit.UNDECIDED and undecided.fits is None
    assert cluster.nodes[0].use[0].slots == 0, "the cluster searched is left as it was"


def test_hamis_candidates_are_named_choices_or_a_node_failure() -> None:
    cluster = Cluster(["a", "b"], [Node([replace(L4, id="GPU-a")]), Node([replace(L4, id="GPU-b")])])
    outcome = cluster.candidates(pod("p", 1000), "binpack", "binpack")
    assert isinstance(outcome, Candidates)
    assert [cluster.names[c.node] for c in outcome.choices] == ["a", "b"], "equal nodes tie"
    assert outcome.failures == {}
    refused = cluster.candidates(pod("p", 90000), "binpack", "binpack")
    assert isinstance(refused, NodeFailure) and set(refused.failures) == {"a", "b"}


def test_an_order_walk_counts_its_runs_instead_of_filling_a_list() -> None:
    cluster = Cluster(["node"], [Node([L4])])
    placed = walk_order(cluster, [pod("a", 10000)], "binpack", "binpack")
    assert (placed.stranding, placed.runs, placed.cut) == (None, 1, False)
    stranded = walk_order(cluster, [pod("a", 20000), pod("b", 20000)], "binpack", "binpack")
    assert stranded.stranding is not None and stranded.stranding.failure.pod.workload == "Pod/ns/b"
    assert not stranded.cut and stranded.runs < MAX_TIE_RUNS


def test_the_wording_is_told_whether_the_tenant_has_one_node_or_several() -> None:
    large = pod("large", 90000)
    one = tenant((A100,))
    several = tenant((A100, replace(A100, id="GPU-1")), nodes=(("n0", 1), ("n1", 1)))
    (alone,) = wording.findings(one, judge_placement(one, [large]))
    (across,) = wording.findings(several, judge_placement(several, [large]))
    assert alone.message.startswith("cannot fit on any of the tenant's 1 card(s) even alone: ")
    assert across.message.startswith("fits on none of the tenant's 2 GPU nodes even alone: ")
    assert "[HAMi: " in across.message and "[HAMi: " not in alone.message
