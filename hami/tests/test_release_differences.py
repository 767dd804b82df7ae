"""The two releases' rules really differ (hami/releases.py): on the same input v2.10.0 and v2.8.3 choose other cards
or give other reasons, and each difference is load-bearing: put v2.8.3's value back into v2.10.0's rules for one
field and that field's scenario no longer gives v2.10.0's answer.

The expected answers are v2.10.0's as its source and tests give them (hami/tests/test_conformance_v2_10_0.py,
test_node_conformance_v2_10_0.py); the scenarios use gpulab's own card types (model/catalog.py) where they can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace

import pytest

from hami.cards import (
    NO_PERCENTAGE,
    CardSpec,
    CardUse,
    ContainerRequest,
    NamespaceQuota,
    PodRequest,
    card_score,
    gpumem_read,
)
from hami.cluster import Cluster, QuotaInUse, node_score
from hami.nodes import CardKey, ContainerFailure, Node, rank_cards
from hami.reasons import INVALID_GPUMEM_PERCENTAGE, POD_HAS_NODE_ASSIGNED, PRIVILEGED_CONTAINER
from hami.releases import RULES, V2_8_3, V2_10_0, Rules, rules_for
from hami.webhook import (
    QUOTA_DENIAL,
    PodAdmission,
    denied,
    quota_refusal,
    webhook_denial,
)

A100 = "NVIDIA-A100-SXM4-80GB"
L4 = "NVIDIA-L4"


def ask(memreq: int = 0, pct: int = NO_PERCENTAGE, cores: int = 0, nums: int = 1, name: str = "c") -> ContainerRequest:
    return ContainerRequest(name, nums, memreq, pct, cores)


def pod(*containers: ContainerRequest, namespace: str = "ns", **kw) -> PodRequest:
    return PodRequest("Pod/ns/p", namespace, containers, **kw)


def place(rules: Rules, cards, p: PodRequest, policy: str = "spread", use=None, quotas=None) -> object:
    """Where the pod goes on one node (card ids per container), or its reasons."""
    n = Node(cards, use, quotas, rules=rules)
    placed = n.place_hami(p, policy)
    if isinstance(placed, ContainerFailure):
        return placed.reasons
    return [[n.cards[i].id for i in c] for c in placed]


def guarded(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except ZeroDivisionError:
        return "division by zero"


SIZES = [CardSpec("a100", A100, 81920), CardSpec("l4", L4, 24576)]
BUSY = [CardSpec("busy", "NVIDIA", 8000), CardSpec("idle", "NVIDIA", 8000)]
BUSY_USE = [CardUse(1, 1000, 10), CardUse()]
NUMA = [CardSpec("n0", "NVIDIA", 8000, numa=0), CardSpec("n1", "NVIDIA", 8000, numa=1)]
WEIGHTED = [CardSpec("gpu-a", "NVIDIA", 100), CardSpec("gpu-b", "NVIDIA", 100)]
WEIGHTED_USE = [CardUse(1, 10, 90), CardUse(7, 20, 10)]
FOUR = [CardSpec(f"g{i}", A100, 81920) for i in range(4)]


# Each field of `Rules`: a scenario (rules -> outcome) and v2.10.0's outcome.
SCENARIOS: dict[str, tuple[Callable[[Rules], object], object]] = {
    # A request of type NVIDIA never matches a registered card's type (NVIDIA-...): v2.10.0 scores the cards by
    # their use alone, an empty-node tie kept in node order, the last (L4) taken; v2.8.3 adds the request, which
    # weighs more on the small card, so spread takes the A100.
    "score_type_matched_once": (lambda r: place(r, SIZES, pod(ask(20000, cores=30))), [["l4"]]),
    "score_exact_percentage": (
        lambda r: card_score(CardSpec("gpu", "NVIDIA", 10000, 10), CardUse(), [ask(0, 50, 2)], r),
        8.0,  # gpu_policy_test.go TestComputeScore "MemPercentagereq calculation evaluates correctly"
    ),
    "score_zero_totals": (
        lambda r: guarded(lambda: card_score(CardSpec("z", "NVIDIA", 0, 0, 0), CardUse(), [], r)),
        0.0,
    ),
    "scoring_weights": (
        lambda r: place(r, WEIGHTED, pod(ask(0, 40), scoring_weights=(1, 1, 3)), "binpack", WEIGHTED_USE),
        [["gpu-b"]],  # score_test.go TestCalcScoreUsesPodDeviceScoringWeights
    ),
    # Binpack, card 1 (NUMA 1) scores higher: v2.10.0's score decides and Fit takes card 1 (the sorted list's
    # last); v2.8.3 sorts by NUMA first (the higher NUMA first for binpack), so card 0 comes last.
    "score_before_numa": (
        lambda r: rank_cards([0, 1], [CardKey(10.0, 0), CardKey(20.0, 1)], "binpack", r)[-1],
        1,
    ),
    # "binpack,spread" is a chain whose first key is binpack; without chains it is simply not "binpack": spread.
    "policy_chains": (
        lambda r: place(r, BUSY, pod(ask(100, cores=10), gpu_policy="binpack,spread"), "spread", BUSY_USE),
        [["busy"]],
    ),
    "mutex_policy": (
        lambda r: place(r, BUSY[:1], pod(ask(100, cores=10), gpu_policy="mutex"), "spread", BUSY_USE[:1]),
        {"ExclusiveDeviceAllocateConflict": 1},
    ),
    # v2.8.3's rules take only spread/binpack from the pod: "mutex" falls back to the configured policy.
    "gpu_policies": (
        lambda r: place(r, BUSY[:1], pod(ask(100, cores=10), gpu_policy="mutex"), "binpack", BUSY_USE[:1]),
        {"ExclusiveDeviceAllocateConflict": 1},
    ),
    # Two cards on the node, one of them not NVIDIA: v2.10.0 counts only the NVIDIA one.
    "type_lookup_before_count": (
        lambda r: place(
            r, [CardSpec("gpu", A100, 81920), CardSpec("npu", "Ascend910B", 65536)], pod(ask(1000, nums=2))
        ),
        {"NodeInsufficientDevice": 1},
    ),
    "init_containers_counted": (
        lambda r: place(r, [CardSpec("gpu", L4, 24576)], pod(ask(1000, cores=10), init_containers=(ask(30000),))),
        {"CardInsufficientMemory": 1},  # the init container asks more than the card has
    ),
    # A 4-card container on a 4-card node with one card full: the walk takes 3 and stops; v2.10.0 counts the 3
    # cards taken (device.go 871-874), v2.8.3 one device type.
    "partial_fit_counts_cards": (
        lambda r: place(r, FOUR, pod(ask(1000, nums=4)), use=[CardUse(10), CardUse(), CardUse(), CardUse()]),
        {"CardTimeSlicingExhausted": 1, "AllocatedCardsInsufficientRequest": 3},
    ),
    "device_cordon": (
        lambda r: place(r, [CardSpec("gpu", A100, 81920, cordoned=True)], pod(ask(1000))),
        {"CardCordoned": 1},
    ),
    # nvidia.com/nouse-gputype "A100," (a trailing comma): v2.8.3's empty entry excludes every card.
    "trimmed_selectors": (
        lambda r: place(r, SIZES, pod(ask(1000), nouse_types=("A100", ""))),
        [["l4"]],
    ),
    # gpumem-percentage 0: v2.10.0 takes it as unset, so the whole card; v2.8.3 books 0 MB, so a full card fits.
    "clamp_memory_percentage": (
        lambda r: place(r, [CardSpec("gpu", L4, 24576)], pod(ask(0, 0)), use=[CardUse(1, 24000, 10)]),
        {"CardInsufficientMemory": 1},
    ),
    "node_score_zero_totals": (
        lambda r: guarded(lambda: node_score(Node([CardSpec("z", "NVIDIA", 0, 0, 0)], rules=r))),
        0.0,
    ),
    "quota_zero_limit_blocks": (
        lambda r: place(r, [CardSpec("gpu", A100, 81920)], pod(ask(1000)), quotas={"ns": NamespaceQuota(memory_mb=0)}),
        {"ResourceQuotaNotFit": 1},
    ),
    "quota_at_admission": (
        lambda r: quota_refusal(pod(ask(4000)), QuotaInUse("ns", NamespaceQuota(8000), 6000, 0), r),
        QUOTA_DENIAL,
    ),
    # webhook.go `Handle`, what it refuses before the quota (hami/webhook.py `webhook_denial`).
    "memory_percentage_range_checked": (
        lambda r: webhook_denial(PodAdmission((("cuda", 101),), has_resource=True), r),
        (
            INVALID_GPUMEM_PERCENTAGE,
            denied(
                "invalid nvidia.com/gpumem-percentage value 101 in container cuda: must be an integer between 0 and 100"
            ),
        ),
    ),
    "privileged_refused": (
        lambda r: webhook_denial(PodAdmission(privileged="debug", has_resource=True), r),
        (PRIVILEGED_CONTAINER, denied("container debug is privileged")),
    ),
    # Both refuse a GPU pod with spec.nodeName; v2.8.3 finds no GPU resource in an init or privileged container
    # (v2.8.3 webhook.go `Handle` 70-87), and lets a pod naming hami-scheduler through untouched (63-68).
    "webhook_resource_in_every_container": (
        lambda r: webhook_denial(PodAdmission(has_resource=True, node_name="gpu-1"), r),
        (POD_HAS_NODE_ASSIGNED, denied("pod has node assigned")),
    ),
    "webhook_scheduler_names": (
        lambda r: webhook_denial(
            PodAdmission(has_resource=True, app_resource=True, node_name="gpu-1", scheduler_name="hami-scheduler"), r
        ),
        (POD_HAS_NODE_ASSIGNED, denied("pod has node assigned")),
    ),
    "gpumem_beyond_int32_dropped": (lambda r: gpumem_read(ask(2**31), r), False),  # 2147483648 MB: no request at all
}


def test_every_rule_difference_has_a_scenario() -> None:
    assert sorted(SCENARIOS) == sorted(f.name for f in fields(Rules) if f.name != "version")


@pytest.mark.parametrize("field", sorted(SCENARIOS))
def test_v2_10_0_gives_its_answer(field: str) -> None:
    scenario, want = SCENARIOS[field]
    assert scenario(V2_10_0) == want


@pytest.mark.parametrize("field", sorted(SCENARIOS))
def test_removing_the_difference_loses_v2_10_0_s_answer(field: str) -> None:
    """v2.10.0's rules with this one field set back to v2.8.3's value: the scenario's answer changes."""
    scenario, want = SCENARIOS[field]
    assert scenario(replace(V2_10_0, **{field: getattr(V2_8_3, field)})) != want


# --- the same input, two releases ----------------------------------------------------------------------------------


def test_spread_over_cards_of_two_sizes_takes_another_card() -> None:
    """An empty A100 and an empty L4 (gpulab's types), a 20000 MB pod, spread: v2.8.3 takes the A100 (the request
    weighs less on it), v2.10.0 the L4 (no request counts on an NVIDIA-... card; the tie keeps node order)."""
    p = pod(ask(20000, cores=30))
    assert place(V2_8_3, SIZES, p) == [["a100"]]
    assert place(V2_10_0, SIZES, p) == [["l4"]]


def test_binpack_packs_onto_the_busy_card_in_v2_10_0_only() -> None:
    """Binpack, an A100 with 5000 MB in use and an empty L4, a 20000 MB pod: v2.8.3's score with the request
    (20000 MB weighs 0.81 on the L4) packs onto the L4; v2.10.0 scores use alone and packs onto the busy A100."""
    p = pod(ask(20000, cores=10))
    use = [CardUse(1, 5000, 10), CardUse()]
    assert place(V2_8_3, SIZES, p, "binpack", use) == [["l4"]]
    assert place(V2_10_0, SIZES, p, "binpack", use) == [["a100"]]


def test_a_partial_fit_counts_one_device_type_or_the_cards_taken() -> None:
    p = pod(ask(1000, nums=4))
    use = [CardUse(10), CardUse(), CardUse(), CardUse()]
    assert place(V2_8_3, FOUR, p, use=use) == {"CardTimeSlicingExhausted": 1, "AllocatedCardsInsufficientRequest": 1}
    assert place(V2_10_0, FOUR, p, use=use) == {"CardTimeSlicingExhausted": 1, "AllocatedCardsInsufficientRequest": 3}


def test_an_init_container_too_big_for_every_card_refuses_the_pod_in_v2_10_0_only() -> None:
    p = pod(ask(1000, cores=10), init_containers=(ask(30000, cores=10, name="warmup"),))
    assert place(V2_8_3, [CardSpec("gpu", L4, 24576)], p) == [["gpu"]]
    assert place(V2_10_0, [CardSpec("gpu", L4, 24576)], p) == {"CardInsufficientMemory": 1}


def test_an_init_container_holds_its_peak_on_the_card() -> None:
    """v2.10.0: an init container of 8000 MB and an app container of 2000 MB on one card: the pod holds 8000 MB
    there (the larger), one slot; v2.8.3 holds what the app container asks."""
    p = pod(ask(2000, cores=10), init_containers=(ask(8000, cores=20),), namespace="ns")
    quotas = {"ns": NamespaceQuota(memory_mb=100000)}
    for rules, held, counted in (
        (V2_8_3, CardUse(1, 2000, 10), [2000, 10]),
        (V2_10_0, CardUse(1, 8000, 20), [8000, 20]),
    ):
        state = Cluster(["w"], [Node([CardSpec("gpu", A100, 81920)], quotas=quotas)], rules=rules)
        outcome = state.candidates(p, "spread", "binpack")
        state.commit(p, outcome.choices[0])
        assert state.nodes[0].use == [held]
        assert state.namespace_use["ns"] == counted


def test_mutex_refuses_a_card_in_use_in_v2_10_0_only() -> None:
    p = pod(ask(100, cores=10), gpu_policy="mutex")
    assert place(V2_8_3, BUSY[:1], p, use=BUSY_USE[:1]) == [["busy"]]
    assert place(V2_10_0, BUSY[:1], p, use=BUSY_USE[:1]) == {"ExclusiveDeviceAllocateConflict": 1}
    assert place(V2_10_0, BUSY, p, use=BUSY_USE) == [["idle"]]


def test_a_trailing_comma_in_nouse_gputype_excludes_every_card_in_v2_8_3_only() -> None:
    p = pod(ask(1000), nouse_types=("A100", ""))
    assert place(V2_8_3, SIZES, p) == {"CardTypeMismatch": 2}
    assert place(V2_10_0, SIZES, p) == [["l4"]]


def test_a_zero_quota_blocks_in_v2_10_0_and_means_no_limit_in_v2_8_3() -> None:
    quotas = {"ns": NamespaceQuota(memory_mb=0)}
    assert place(V2_8_3, [CardSpec("gpu", A100, 81920)], pod(ask(1000)), quotas=quotas) == [["gpu"]]
    assert place(V2_10_0, [CardSpec("gpu", A100, 81920)], pod(ask(1000)), quotas=quotas) == {"ResourceQuotaNotFit": 1}


def test_the_webhook_refuses_over_quota_at_create_in_v2_10_0_only() -> None:
    """4000 MB asked, 6000 of 8000 MB used: v2.10.0's webhook denies it; v2.8.3 creates it (and refuses it at
    scheduling, ResourceQuotaNotFit). A percentage counts 0 MB at the webhook, so a 50 % pod passes it."""
    in_use = QuotaInUse("ns", NamespaceQuota(8000), 6000, 0)
    assert quota_refusal(pod(ask(4000)), in_use, V2_8_3) is None
    assert quota_refusal(pod(ask(4000)), in_use, V2_10_0) == QUOTA_DENIAL
    assert quota_refusal(pod(ask(0, 50)), in_use, V2_10_0) is None
    assert quota_refusal(pod(ask(1000, nums=3)), in_use, V2_10_0) == QUOTA_DENIAL  # memory x cards


def test_rules_by_version() -> None:
    assert rules_for("v2.10.0") is V2_10_0 and rules_for("v2.8.3") is V2_8_3
    assert set(RULES) == {"v2.10.0", "v2.8.3"}
    with pytest.raises(ValueError, match=r"v2\.9\.0"):
        rules_for("v2.9.0")
