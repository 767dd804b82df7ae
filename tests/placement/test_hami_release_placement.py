"""Every placement path judges a tenant with its own HAMi release (hami/releases.py): the per-pod rules
(placement/per_pod.py), the placement search (placement/search.py, init containers included under v2.10.0), the
order walk (placement/orders.py), `make check`'s run (placement/replay.py), the words (placement/wording.py), and the
webhook's quota at create (hami/webhook.py, v2.9.0 and later). Each case is asked of both releases.

Citations are to Project-HAMi/HAMi tag v2.10.0: devices.go `Resourcereqs` 639-692 and score.go
`allocateInitContainers` 226-254 (init containers placed), initContainer.go `CollapseInitContainerUsage` 36-113 (the
pod holds their peak), device.go `GenerateResourceRequests` 556-570 (0 % is not given), devices.go `CheckType`
719-738 (trimmed selectors), device.go `Fit` 767-771 (mutex), util/device_scoring_weights.go, webhook.go `Handle`
114-116 and `fitResourceQuota` 145-192.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hami.cards import NO_PERCENTAGE, CardSpec, CardUse, ContainerRequest, NamespaceQuota, PodRequest
from hami.cluster import Cluster
from hami.nodes import Node
from hami.reasons import EXCEEDING_RESOURCE_QUOTA, INVALID_DEVICE_SCORING_WEIGHTS, ZERO_MEMORY_PERCENTAGE
from hami.releases import V2_8_3, V2_10_0
from hami.webhook import QUOTA_DENIAL
from model.config import GpuQuota, PodLimits
from placement.inventory import TenantInventory
from placement.orders import cannot_strand, distinct_orders, find_stranding, order_verdict, simulate
from placement.per_pod import per_pod_refusals
from placement.replay import Denied, replay
from placement.search import Budget, Fit, _Searcher, first_fit, search_placement
from placement.wording import evaluate_tenant
from placement.workloads import read_workload

L4 = CardSpec("GPU-L4-0", "NVIDIA-L4", 24576)
L4S = (L4, CardSpec("GPU-L4-1", "NVIDIA-L4", 24576))
A100S = tuple(CardSpec(f"GPU-A100-{i}", "NVIDIA-A100-SXM4-80GB", 81920) for i in range(2))
VERSIONS = ("v2.8.3", "v2.10.0")


def inventory(version: str, cards: tuple[CardSpec, ...] = L4S, **kw: Any) -> TenantInventory:
    return TenantInventory("t", cards, PodLimits(), kw.pop("quota", None), kw.pop("namespaces", ()), **kw,
                           hami_version=version)  # fmt: skip


def gpu_pod(
    name: str,
    limits: dict[str, str],
    init: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    replicas: int = 1,
) -> Any:
    """A Deployment of `replicas` pods in namespace ns, one app container with `limits` (and an init container)."""
    spec: dict[str, Any] = {"containers": [{"name": "cuda", "resources": {"limits": limits}}]}
    if init is not None:
        spec["initContainers"] = [{"name": "warmup", "resources": {"limits": init}}]
    template = {"metadata": {"annotations": annotations or {}}, "spec": spec}
    obj = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": replicas, "template": template}}
    workload = read_workload("Deployment", obj)
    assert workload is not None
    return workload


def c(name: str, memory: int, cores: int = 0, nums: int = 1) -> ContainerRequest:
    return ContainerRequest(name, nums, memory, NO_PERCENTAGE, cores)


def reasons(version: str, *workloads: Any, **kw: Any) -> list[str]:
    return [f.reason for f in evaluate_tenant(inventory(version, **kw), workloads)]


# --- per pod -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "refused"), [("v2.8.3", True), ("v2.10.0", False)])
def test_gpu_init_containers_are_refused_only_where_the_release_ignores_them(version: str, refused: bool) -> None:
    workload = gpu_pod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, init={"nvidia.com/gpumem": "2000"})
    found = {r.reason for r in per_pod_refusals(inventory(version), workload.pods[0])}
    assert ("InitContainerGpuRequest" in found) is refused
    assert ("InitContainerGpuRequest" in reasons(version, workload)) is refused


@pytest.mark.parametrize(("version", "refused"), [("v2.8.3", False), ("v2.10.0", True)])
def test_type_selectors_are_read_as_the_release_reads_them(version: str, refused: bool) -> None:
    """`A100,`: v2.8.3 does not trim, and the empty entry matches every type; v2.10.0 skips it (CheckType)."""
    workload = gpu_pod("p", {"nvidia.com/gpu": "1"}, annotations={"nvidia.com/use-gputype": "A100,"})
    found = {r.reason for r in per_pod_refusals(inventory(version), workload.pods[0])}
    assert ("CardTypeMismatch" in found) is refused


# v2.8.3 keeps 150 % (more memory than any card); v2.10.0's webhook refuses a percentage above 100 before its
# scheduler's clamp could apply (pkg/device/nvidia/device.go MutateAdmission 349-351, validateMemoryPercentage
# 389-396), so both refuse it, each for its own reason.
@pytest.mark.parametrize(
    ("version", "reasons"), [("v2.8.3", ["CardInsufficientMemory"]), ("v2.10.0", ["InvalidGpumemPercentage"])]
)
def test_a_percentage_above_100_is_refused_by_either_release(version: str, reasons: list[str]) -> None:
    workload = gpu_pod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"})
    assert [r.reason for r in per_pod_refusals(inventory(version), workload.pods[0])] == reasons


@pytest.mark.parametrize(
    ("version", "said"),
    [("v2.8.3", "HAMi gives it 0 MB"), ("v2.10.0", "HAMi v2.10.0 reads 0% as not given and gives it all of each")],
)
def test_the_zero_memory_advice_says_what_the_release_does(version: str, said: str) -> None:
    workload = gpu_pod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0", "nvidia.com/gpucores": "5"})
    (advice,) = [f for f in evaluate_tenant(inventory(version), [workload]) if f.reason == ZERO_MEMORY_PERCENTAGE]
    assert said in advice.message
    assert advice.severity == "warning"


def test_scoring_weights_are_read_into_the_pod() -> None:
    weights = "hami.io/device-scoring-weights"
    good = gpu_pod("p", {"nvidia.com/gpu": "1"}, annotations={weights: "slot=1, core=0, memory=3"}).pods[0]
    assert (good.scoring_weights, good.scoring_weights_error) == ((1, 0, 3), None)
    bad = gpu_pod("p", {"nvidia.com/gpu": "1"}, annotations={weights: "slot=1"}).pods[0]
    assert bad.scoring_weights is None and "expected slot, core, and memory weights" in (
        bad.scoring_weights_error or ""
    )
    none = gpu_pod("p", {"nvidia.com/gpu": "1"}).pods[0]
    assert (none.scoring_weights, none.scoring_weights_error) == (None, None)


@pytest.mark.parametrize(("version", "refused"), [("v2.8.3", False), ("v2.10.0", True)])
def test_unreadable_scoring_weights_fail_the_pod_only_where_the_release_reads_them(version: str, refused: bool) -> None:
    """v2.10.0's calcScore returns the parse error (score.go `calcScoreWithOptions` 361-364): never scheduled."""
    workload = gpu_pod("p", {"nvidia.com/gpu": "1"}, annotations={"hami.io/device-scoring-weights": "slot=-1"})
    assert (INVALID_DEVICE_SCORING_WEIGHTS in reasons(version, workload)) is refused


@pytest.mark.parametrize(("version", "card"), [("v2.8.3", "GPU-A100-0"), ("v2.10.0", "GPU-A100-1")])
def test_scoring_weights_decide_the_card_where_the_release_reads_them(version: str, card: str) -> None:
    """Two A100s, the first with 30 % cores in use, the second with 40000 MB: spread takes the card that scores
    lower. With equal weights that is the first (its memory weighs more); weighting cores alone (slot=0, core=1,
    memory=0) makes it the second, under v2.10.0 (gpu_policy.go `ComputeScore` 220); v2.8.3 ignores the annotation."""
    used = (CardUse(1, 0, 30), CardUse(1, 40000, 0))
    weighted = gpu_pod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "10"},
                       annotations={"hami.io/device-scoring-weights": "slot=0,core=1,memory=0"}).pods[0]  # fmt: skip
    plain = PodRequest("Pod/ns/q", "ns", weighted.containers)
    cluster = TenantInventory("t", A100S, PodLimits(), None, (), card_usage=used, hami_version=version).cluster([])
    picks = [cluster.card_ids(cluster.candidates(p, "spread", "binpack").choices[0]) for p in (plain, weighted)]
    assert picks == [[["GPU-A100-0"]], [[card]]]


# --- the order walk ----------------------------------------------------------------------------------------------


def test_mutex_pods_are_left_to_the_simulation_under_v2_10_0() -> None:
    """Three small pods on two A100s: no order strands one under v2.8.3 (cannot_strand proves it); under v2.10.0 the
    mutex policy takes idle cards only, so the third is stranded in every order."""
    pods = [PodRequest(f"Pod/ns/p{i}", "ns", (c("c", 1000, 10),), gpu_policy="mutex") for i in range(3)]
    old, new = (inventory(v, A100S).cluster(pods) for v in VERSIONS)
    assert cannot_strand(old, pods)
    assert not cannot_strand(new, pods)
    stranded = find_stranding(new, pods, "spread", "binpack").stranding
    assert stranded is not None and "ExclusiveDeviceAllocateConflict" in stranded.failure.reason


def test_zero_percent_is_judged_as_the_release_reads_it() -> None:
    """Two pods asking 0 % memory on one L4: 0 MB each under v2.8.3; the whole card each under v2.10.0."""
    pods = [PodRequest(f"Pod/ns/p{i}", "ns", (ContainerRequest("c", 1, 0, 0, 10),)) for i in range(2)]
    old, new = (inventory(v, (L4,)).cluster(pods) for v in VERSIONS)
    assert cannot_strand(old, pods)
    assert not cannot_strand(new, pods)
    assert simulate(new, pods, "spread", "binpack") is not None


def test_pods_differing_in_init_containers_are_different_pods_under_v2_10_0() -> None:
    base = PodRequest("Pod/ns/a", "ns", (c("c", 1000),))
    other = PodRequest("Pod/ns/b", "ns", (c("c", 1000),), init_containers=(c("i", 2000),))
    assert distinct_orders([base, other], V2_8_3) == 1
    assert distinct_orders([base, other], V2_10_0) == 2


def test_the_order_verdict_counts_init_containers_under_v2_10_0() -> None:
    """Two pods of 10000 MB on one L4, the first with a 20000 MB init container: it holds 20000 MB while placed under
    v2.10.0 (CollapseInitContainerUsage), so whichever comes second is refused; v2.8.3 never sees the init container."""
    pods = [PodRequest("Pod/ns/a", "ns", (c("c", 10000),), init_containers=(c("i", 20000),))]
    pods.append(PodRequest("Pod/ns/b", "ns", (c("c", 10000),)))
    for version, strands in (("v2.8.3", False), ("v2.10.0", True)):
        cluster = inventory(version, (L4,)).cluster(pods)
        assert (find_stranding(cluster, pods, "spread", "binpack").stranding is not None) is strands
        assert (order_verdict(cluster, pods, "spread", "binpack", placement_exists=False) is not None) is strands


one_card_pod = st.builds(
    lambda i, memory, percentage, cores, mutex: PodRequest(
        f"Pod/ns/p{i}",
        "ns",
        (ContainerRequest("c", 1, memory, percentage if memory == 0 else NO_PERCENTAGE, cores),),
        gpu_policy="mutex" if mutex else None,
    ),
    st.integers(0, 10_000),
    st.sampled_from([0, 500, 1000, 2000]),
    st.sampled_from([0, 25, 50, 100, 150]),
    st.sampled_from([0, 10, 50, 100, 120]),
    st.booleans(),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.sampled_from([1000, 2000, 4000]), st.integers(1, 3)), min_size=1, max_size=3),
    st.lists(one_card_pod, min_size=1, max_size=4),
)
def test_cannot_strand_never_contradicts_the_simulation_under_v2_10_0(
    sizes: list[tuple[int, int]], pods: list[PodRequest]
) -> None:
    """tests/placement/test_gpu_fit.py's property, with v2.10.0's rules: 0 % and 150 % read as the whole card, and
    the mutex policy from a pod's annotation."""
    cards = [CardSpec(f"GPU-{i}", "NVIDIA-L4", memory, 100, split) for i, (memory, split) in enumerate(sizes)]
    cluster = Cluster(["n"], [Node(cards)], rules=V2_10_0)
    if cannot_strand(cluster, pods):
        for policy in ("spread", "binpack"):
            for order in itertools.permutations(pods):
                assert simulate(cluster, order, policy, "binpack") is None


# --- the search --------------------------------------------------------------------------------------------------

# One L4 of two holds 5000 MB already. Pod a has a 20000 MB init container and a 10000 MB app container (0 % cores,
# so it is searched first); pod b asks `b` MB. Under v2.10.0 a's init container only fits the empty card, and a then
# holds 20000 MB there; first fit puts a's app container on the other card, so b (19000 MB) fits only when the
# search puts both of a's containers on the same card. 19600 MB fits nowhere then; v2.8.3 never sees the init.
BUSY = (CardUse(1, 5000, 0), CardUse())


def two_pods(b: int) -> list[PodRequest]:
    a = PodRequest("Pod/ns/a", "ns", (c("app", 10000),), init_containers=(c("init", 20000),))
    return [a, PodRequest("Pod/ns/b", "ns", (c("app", b, 10),))]


@pytest.mark.parametrize(
    ("b", "version", "first_fits", "answer"),
    [
        (19000, "v2.8.3", True, Fit.FITS),
        (19000, "v2.10.0", False, Fit.FITS),
        (19600, "v2.8.3", True, Fit.FITS),
        (19600, "v2.10.0", False, Fit.NO_PLACEMENT),
    ],
)
def test_the_search_places_init_containers_as_the_release_does(
    b: int, version: str, first_fits: bool, answer: Fit
) -> None:
    pods = two_pods(b)
    cluster = TenantInventory("t", L4S, PodLimits(), None, (), card_usage=BUSY, hami_version=version).cluster(pods)
    assert first_fit(cluster.copy(), pods) is first_fits
    found = search_placement(cluster, pods)
    assert found.answer is answer
    if answer is Fit.FITS and version == "v2.10.0":
        assert found.cluster is not None and found.cluster.uses() == (((2, 24000, 10), (1, 20000, 0)),)


def test_an_init_container_larger_than_every_card_is_refused_with_hami_s_reason_under_v2_10_0() -> None:
    workload = gpu_pod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, init={"nvidia.com/gpumem": "30000"})
    assert reasons("v2.8.3", workload) == ["InitContainerGpuRequest"]
    (finding,) = evaluate_tenant(inventory("v2.10.0"), [workload])
    assert finding.reason == "CardInsufficientMemory" and "init container warmup asks 30000 MB" in finding.message


def small_cluster(sizes: list[tuple[int, int]], used: list[int]) -> Cluster:
    cards = [CardSpec(f"GPU-{i}", "NVIDIA-L4", memory, 100, split) for i, (memory, split) in enumerate(sizes)]
    use = [CardUse(1 if mb else 0, mb, 0) for mb in used[: len(cards)]]
    use += [CardUse() for _ in range(len(cards) - len(use))]
    quotas = {"ns": NamespaceQuota(6000, None)}
    return Cluster(["n"], [Node(cards, use, quotas)], rules=V2_10_0)


request_strategy = st.builds(
    lambda memory, cores, nums: c("c", memory, cores, nums),
    st.sampled_from([250, 500, 1000, 1500, 2000, 3000]),
    st.sampled_from([0, 10, 50, 100]),
    st.integers(1, 2),
)
pod_strategy = st.builds(
    lambda i, app, init: PodRequest(f"Pod/ns/p{i}", "ns", tuple(app), init_containers=tuple(init)),
    st.integers(0, 10_000),
    st.lists(request_strategy, min_size=1, max_size=2),
    st.lists(request_strategy, min_size=0, max_size=2),
)
cards_strategy = st.lists(
    st.tuples(st.sampled_from([1000, 2000, 4000]), st.integers(1, 3)), min_size=1, max_size=3
)  # fmt: skip


@settings(max_examples=200, deadline=None, derandomize=True)
@given(cards_strategy, st.lists(st.sampled_from([0, 500]), max_size=3), st.lists(pod_strategy, min_size=1, max_size=3))
def test_the_search_with_init_containers_is_never_stricter_than_hami_and_leaves_what_it_did_not_keep(
    sizes: list[tuple[int, int]], used: list[int], pods: list[PodRequest]
) -> None:
    """Under v2.10.0: where first fit or HAMi's own walk (any order, either card policy) places every pod, the
    exhaustive search (without its first-fit shortcut) finds a placement; the placement it keeps respects every
    card and the quota; and when it keeps none, the cluster is as it was."""
    cluster = small_cluster(sizes, used)
    trial = cluster.copy()
    answer = _Searcher(trial, pods, Budget()).run()
    assert answer is not Fit.UNDECIDED, "small cases never exhaust the budget"
    placed_by_hami = first_fit(cluster.copy(), pods) or any(
        simulate(cluster, order, policy, "binpack") is None
        for policy in ("spread", "binpack")
        for order in itertools.permutations(pods)
    )
    if placed_by_hami:
        assert answer is Fit.FITS
    if answer is Fit.FITS:
        (node,) = trial.nodes
        for card, use in zip(node.cards, node.use, strict=True):
            assert use.memory_mb <= card.memory_mb and use.cores <= card.cores and use.slots <= card.split_count
        assert node.namespace_use.get("ns", [0, 0])[0] <= 6000
    else:
        assert trial.uses() == cluster.uses() and trial.quota_state() == cluster.quota_state()


# --- HAMi's webhook on the namespace quota ----------------------------------------------------------------------

QUOTA = {"quota": GpuQuota(gpumem=40960, gpucores=150), "namespaces": ("ns",)}
WHOLE = {"nvidia.com/gpu": "1"}  # the whole card: gpucores 100 (the webhook's default), gpumem-percentage 100
BIG = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "50000", "nvidia.com/gpucores": "10"}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_pod_over_its_quota_alone_is_refused_at_create_under_v2_10_0(version: str) -> None:
    """50000 MB asked on a 40960 MB quota (an A100 holds it): v2.8.3's scheduler refuses it on every card
    (ResourceQuotaNotFit); v2.10.0's webhook refuses it when it is created, with its own message."""
    (finding,) = evaluate_tenant(inventory(version, A100S, **QUOTA), [gpu_pod("big", BIG)])
    if version == "v2.8.3":
        assert finding.reason == "ResourceQuotaNotFit" and QUOTA_DENIAL not in finding.message
    else:
        assert finding.reason == EXCEEDING_RESOURCE_QUOTA
        assert QUOTA_DENIAL in finding.message and "when it is created" in finding.message
        assert "limits.nvidia.com/gpumem=40960 (0 MB in use)" in finding.message
        assert "the webhook counts 50000 MB, 10% cores" in finding.message


@pytest.mark.parametrize("version", VERSIONS)
def test_pods_over_their_quota_together_are_refused_at_create_under_v2_10_0(version: str) -> None:
    """Two whole L4s on a 150 % cores quota: the second is over it. v2.8.3: ResourceQuotaNotFit at scheduling;
    v2.10.0: its webhook refuses the second pod once the first is placed (100 + 100 > 150)."""
    (finding,) = evaluate_tenant(inventory(version, **QUOTA), [gpu_pod("whole", WHOLE, replicas=2)])
    assert finding.workload == "Deployment/ns/whole#2"
    if version == "v2.8.3":
        assert finding.reason == "ResourceQuotaNotFit" and QUOTA_DENIAL not in finding.message
    else:
        assert finding.reason == EXCEEDING_RESOURCE_QUOTA and finding.card is None
        assert f"HAMi v2.10.0's admission webhook refuses it: {QUOTA_DENIAL}" in finding.message
        assert "the webhook counts 0 MB, 100% cores for the pod" in finding.message
        assert "created before they are placed, HAMi's scheduler refuses it (ResourceQuotaNotFit)" in finding.message


@pytest.mark.parametrize("version", VERSIONS)
def test_a_percentage_passes_the_webhook_and_meets_the_quota_at_scheduling(version: str) -> None:
    """The webhook counts a gpumem-percentage as 0 MB (it reads Memreq): three 60 % pods with 10 % cores pass it, and
    the third meets the 40960 MB quota at scheduling in both releases."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "60", "nvidia.com/gpucores": "10"}
    (finding,) = evaluate_tenant(inventory(version, **QUOTA), [gpu_pod("infer", limits, replicas=3)])
    assert finding.reason == "ResourceQuotaNotFit" and QUOTA_DENIAL not in finding.message


@pytest.mark.parametrize("version", VERSIONS)
def test_make_check_s_run_leaves_a_pod_the_webhook_refuses_out(version: str) -> None:
    """`make check` creates each pod once the ones before it are placed: under v2.10.0 the second whole card is
    refused at create (it never exists, so it counts against no quota); under v2.8.3 it stays Pending."""
    run = replay(inventory(version, **QUOTA), [gpu_pod("whole", WHOLE, replicas=2)])
    first, second = run.outcomes
    assert not isinstance(first, Denied)
    if version == "v2.8.3":
        assert not isinstance(second, Denied) and second.reason == "ResourceQuotaNotFit"  # type: ignore[union-attr]
        assert run.inventory.namespace_usage["ns"].gpus == 2
    else:
        assert isinstance(second, Denied) and second.message == QUOTA_DENIAL
        assert run.inventory.namespace_usage["ns"].gpus == 1
    assert run.inventory.namespace_usage["ns"].cores == 100


def test_a_pod_the_webhook_refuses_is_not_counted_by_the_gpu_quota() -> None:
    """The webhook (a mutating one) answers before the API server's ResourceQuota admission: a pod it refuses never
    counts against requests.nvidia.com/gpu."""
    quota = {"quota": GpuQuota(gpumem=40960, gpus=1), "namespaces": ("ns",)}
    small = gpu_pod("small", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1"})
    assert reasons("v2.10.0", gpu_pod("big", BIG), small, cards=A100S, **quota) == [EXCEEDING_RESOURCE_QUOTA]
    assert "ExceededQuota" in reasons("v2.8.3", gpu_pod("big", BIG), small, cards=A100S, **quota)
