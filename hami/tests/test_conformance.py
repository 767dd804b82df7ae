"""Conformance with HAMi v2.8.3: its own unit-test vectors, run against gpulab's simulator.

Each vector is a fact taken from a HAMi test (Project-HAMi/HAMi tag v2.8.3; file and test name, then
the case name), written as data: cards with their current usage, the request, and what HAMi's test
expects. The harness and the tables are gpulab's; no HAMi code is used. Cases the model cannot
express are listed in NOT_MODELLED with the reason. The webhook's defaults, which gpulab applies while
reading a manifest (placement/workloads.py), are checked against HAMi's Test_MutateAdmission vectors in
tests/placement/test_hami_webhook_defaults.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hami.cards import NO_PERCENTAGE, CardSpec, CardUse, ContainerRequest, NamespaceQuota, PodRequest, _f32, card_score
from hami.nodes import ContainerFailure, Node, rank

DEVICE_TEST = "pkg/device/nvidia/device_test.go"
SCORE_TEST = "pkg/scheduler/score_test.go"
POLICY_TEST = "pkg/scheduler/policy/gpu_policy_test.go"
SCHEDULER_TEST = "pkg/scheduler/scheduler_test.go"
QUOTA_TEST = "pkg/device/quota_test.go"
CONFIG_TEST = "pkg/scheduler/config/config_test.go"


@dataclass(frozen=True)
class Dev:
    """HAMi's DeviceUsage: Count, Used, Totalmem, Usedmem, Totalcore, Usedcores, Health."""

    id: str
    totalmem: int
    count: int = 10
    used: int = 0
    usedmem: int = 0
    totalcore: int = 100
    usedcores: int = 0
    health: bool = True

    def spec(self) -> CardSpec:
        return CardSpec(self.id, "NVIDIA", self.totalmem, self.totalcore, self.count, self.health)

    def use(self) -> CardUse:
        return CardUse(self.used, self.usedmem, self.usedcores)


def req(nums: int, memreq: int = 0, pct: int = 0, cores: int = 0) -> ContainerRequest:
    """HAMi's ContainerDeviceRequest; Go's zero value for an unset MemPercentagereq is 0."""
    return ContainerRequest("c", nums, memreq, pct, cores)


def node(devs: list[Dev], quotas: dict | None = None, used: dict | None = None) -> Node:
    return Node([d.spec() for d in devs], [d.use() for d in devs], quotas, used)


def reasons(text: str) -> dict[str, int]:
    """GenReason's "1/2 CardInsufficientMemory, 1/2 ..." as {reason: count}."""
    if not text:
        return {}
    parsed = {}
    for part in text.split(", "):
        count, reason = part.split(" ", 1)
        parsed[reason] = int(count.split("/")[0])
    return parsed


# --- Fit: TestDevices_Fit ------------------------------------------------------------------------

E = 100  # the Fit test's Count

FIT = [
    # (case, devices, request, annotations, want_fit, want_ids, want_reason)
    ("fit success", [Dev("dev-0", 128, E), Dev("dev-1", 128, E)], req(1, 64, 0, 50), {}, True, ["dev-1"], ""),
    (
        "fit fail: memory not enough",
        [Dev("dev-0", 128, E)],
        req(1, 512, 0, 50),
        {},
        False,
        [],
        "1/1 CardInsufficientMemory",
    ),
    (
        "fit fail: core not enough",
        [Dev("dev-0", 1024, E, usedcores=100)],
        req(1, 512, 0, 50),
        {},
        False,
        [],
        "1/1 CardInsufficientCore",
    ),
    (
        "fit fail: user assign use uuid mismatch",
        [Dev("dev-1", 1280, E)],
        req(2, 512, 0, 50),
        {"use_uuids": ("dev-0",)},
        False,
        [],
        "1/1 CardUuidMismatch",
    ),
    (
        "fit fail: user assign no use uuid match",
        [Dev("dev-0", 1280, E)],
        req(2, 512, 0, 50),
        {"nouse_uuids": ("dev-0",)},
        False,
        [],
        "1/1 CardUuidMismatch",
    ),
    (
        "fit fail: card overused",
        [Dev("dev-0", 1280, E, used=100)],
        req(1, 512, 0, 50),
        {},
        False,
        [],
        "1/1 CardTimeSlicingExhausted",
    ),
    (
        "fit success: but core limit can't exceed 100",
        [Dev("dev-0", 1280, E)],
        req(1, 512, 0, 120),
        {},
        True,
        ["dev-0"],
        "",
    ),
    (
        "fit fail:  card exclusively",
        [Dev("dev-0", 1280, E, used=20)],
        req(1, 512, 0, 100),
        {},
        False,
        [],
        "1/1 ExclusiveDeviceAllocateConflict",
    ),
    (
        "fit fail:  CardComputeUnitsExhausted",
        [Dev("dev-0", 1280, E, used=20, usedcores=100)],
        req(1, 512, 0, 0),
        {},
        False,
        [],
        "1/1 CardComputeUnitsExhausted",
    ),
    (
        "fit fail:  AllocatedCardsInsufficientRequest",
        [Dev("dev-0", 1280, E, used=20, usedcores=10)],
        req(2, 512, 0, 20),
        {},
        False,
        [],
        "1/1 AllocatedCardsInsufficientRequest",
    ),
    (
        "fit success:  memory percentage",
        [Dev("dev-0", 1280, E, used=20, usedcores=10)],
        req(1, 0, 10, 20),
        {},
        True,
        ["dev-0"],
        "",
    ),
    (
        "fit fail:  CardNotHealth",
        [Dev("dev-0", 1280, E, used=20, usedcores=10, health=False)],
        req(1, 0, 10, 20),
        {},
        False,
        [],
        "1/1 CardNotHealth",
    ),
]


@pytest.mark.parametrize(
    "case, devs, ask, annotations, want_fit, want_ids, want_reason",
    FIT,
    ids=[f"{DEVICE_TEST}::TestDevices_Fit::{v[0]}" for v in FIT],
)
def test_fit(case, devs, ask, annotations, want_fit, want_ids, want_reason) -> None:
    n = node(devs)
    pod = PodRequest("p", "default", (ask,), **annotations)
    chosen, got_reasons, _ = n.walk(list(range(len(devs))), ask, pod)
    fit = len(chosen) == ask.nums
    assert fit == want_fit
    if want_fit:
        assert [devs[i].id for i in chosen] == want_ids
    assert got_reasons == reasons(want_reason)


# --- fitInDevices: Test_fitInDevices and Test_calcScore (single node) -----------------------------

T = Dev("test-1", 8192, count=4, used=1, usedmem=2048, totalcore=4, usedcores=1)
PLACE = [
    # (test, case, devices, containers, policy, want: per-container device ids, or a reason)
    (
        "Test_fitInDevices",
        "all device score for one node",
        [T, Dev("test-2", 8192, 4, 1, 2048, 4, 1)],
        [req(1, 1024, 100, 1)],
        "spread",
        [["test-2"]],
    ),
    (
        "Test_fitInDevices",
        "request devices nums cannot exceed the total number of devices on the node",
        [T],
        [req(2, 1024, 100, 1)],
        "spread",
        "NodeInsufficientDevice",
    ),
    (
        "Test_calcScore",
        "one node one device one pod one container use one device.",
        [Dev("uuid1", 8000)],
        [req(1, 1000, 0, 30)],
        "spread",
        [["uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node one device one pod one container use one device,but this device before having use.",
        [Dev("uuid1", 8000, used=5, usedmem=4000, usedcores=50)],
        [req(1, 1000, 0, 30)],
        "spread",
        [["uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node two device one pod one container use one device",
        [Dev("uuid1", 8000), Dev("uuid2", 8000)],
        [req(1, 1000, 0, 30)],
        "spread",
        [["uuid2"]],
    ),
    (
        "Test_calcScore",
        "one node two device one pod one container use one device,but having use 50%",
        [Dev("uuid1", 8000), Dev("uuid2", 8000, used=5, usedmem=4000, usedcores=50)],
        [req(1, 1000, 0, 30)],
        "spread",
        [["uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node two device one pod one container use two device",
        [Dev("uuid1", 8000), Dev("uuid2", 8000)],
        [req(2, 1000, 0, 30)],
        "spread",
        [["uuid2", "uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node two device one pod one container use two device,but this two device before having use.",
        [
            Dev("uuid1", 8000, used=5, usedmem=4000, usedcores=50),
            Dev("uuid2", 8000, used=5, usedmem=4000, usedcores=50),
        ],
        [req(2, 1000, 0, 30)],
        "spread",
        [["uuid2", "uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node one device one pod with three containers, middle container uses one device.",
        [Dev("uuid1", 8000)],
        [req(1, 1000, NO_PERCENTAGE, 30)],
        "spread",
        [["uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node two device one pod two containers use two device with spread,should not in same device.",
        [Dev("uuid1", 8000), Dev("uuid2", 8000)],
        [req(1, 8000, 0, 30), req(1, 1000, 0, 30)],
        "spread",
        [["uuid2"], ["uuid1"]],
    ),
    (
        "Test_calcScore",
        "one node one device one pod one container use one device and not enough resource,node should be failed.",
        [Dev("uuid1", 50)],
        [req(1, 1000, 0, 30)],
        "spread",
        "CardInsufficientMemory",
    ),
]


@pytest.mark.parametrize(
    "test, case, devs, containers, policy, want", PLACE, ids=[f"{SCORE_TEST}::{v[0]}::{v[1]}" for v in PLACE]
)
def test_place(test, case, devs, containers, policy, want) -> None:
    placed = node(devs).place_hami(PodRequest("p", "default", tuple(containers)), policy)
    if isinstance(want, str):
        assert isinstance(placed, ContainerFailure) and placed.reason == want
    else:
        assert not isinstance(placed, ContainerFailure), placed.explain()
        assert [[devs[i].id for i in cards] for cards in placed] == want


# --- ComputeScore and Less: TestComputeScore, TestDeviceUsageList_Less ----------------------------

S = Dev("test-device", 8192, count=10, used=2, usedmem=2048, totalcore=4, usedcores=1)
SCORE = [
    ("ContainerDeviceRequests has no data", [], 7),
    ("ContainerDeviceRequests has  data (1)", [req(1, 1024, 0, 1), req(2, 0, 50, 2)], 18.75),
    ("ContainerDeviceRequests has  data (2)", [req(1, 1024, 30, 1), req(2, 200, 101, 3)], 20.24414),
    ("ContainerDeviceRequests has  data (3)", [req(1, 1024, 30, 1), req(2, 200, 30, 3)], 20),
]


@pytest.mark.parametrize("case, requests, want", SCORE, ids=[f"{POLICY_TEST}::TestComputeScore::{v[0]}" for v in SCORE])
def test_compute_score(case, requests, want) -> None:
    # Go compares float32 values: the expected literal is rounded to float32 too.
    assert card_score(S.spec(), S.use(), requests) == _f32(want)


LESS = [("Binpack policy with same Numa", "binpack", [0, 1]), ("Spread policy with same Numa", "spread", [1, 0])]


@pytest.mark.parametrize(
    "case, policy, want", LESS, ids=[f"{POLICY_TEST}::TestDeviceUsageList_Less::{v[0]}" for v in LESS]
)
def test_sort_direction(case, policy, want) -> None:
    """Scores 10 and 20: binpack sorts ascending (Less(10, 20) is true), spread descending."""
    assert rank([0, 1], [10.0, 20.0], policy) == want


# --- Quota: Test_ResourceQuota, TestFitQuota (nvidia and device) ----------------------------------

QUOTA_DEVICES = [Dev("device1", 2000), Dev("device2", 8000), Dev("device3", 4000), Dev("device4", 6000)]
RESOURCE_QUOTA = [
    # (case, request as Filter sees it (no webhook), quota (MB, cores), want_fit)
    ("multi device Resourcequota pass", req(2, 2000, NO_PERCENTAGE, 100), (4000, 200), True),
    ("multi device Resourcequota deny", req(2, 3000, NO_PERCENTAGE, 60), (4000, 200), False),
    ("unspecified device Resourcequota pass", req(1, 0, 100, 0), (2000, 100), True),
    ("unspecified device Resourcequota deny", req(1, 0, 100, 0), (1500, 100), False),
]


@pytest.mark.parametrize(
    "case, ask, quota, want_fit",
    RESOURCE_QUOTA,
    ids=[f"{SCHEDULER_TEST}::Test_ResourceQuota::{v[0]}" for v in RESOURCE_QUOTA],
)
def test_resource_quota(case, ask, quota, want_fit) -> None:
    n = node(QUOTA_DEVICES, {"default": NamespaceQuota(*quota)})
    placed = n.place_hami(PodRequest("p", "default", (ask,)), "spread")
    assert (not isinstance(placed, ContainerFailure)) == want_fit


FIT_QUOTA = [
    # (case, MB on cards already chosen for this container, MB of the pod's earlier containers, memreq, want)
    ("no tmp and no allocated", 0, 0, 100, True),
    ("request exceed quota", 0, 0, 3000, False),
    ("tmpdev", 1024, 0, 100, True),
    ("tmpdev exceed quota", 1024, 0, 2000, False),
    ("allocated devs", 0, 1024, 100, True),
    ("allocated devs exceed quota", 0, 1024, 2000, False),
    ("exceed quota", 1024, 1024, 100, False),
    ("fit", 100, 100, 100, True),
]


@pytest.mark.parametrize(
    "case, tmp, allocated, memreq, want", FIT_QUOTA, ids=[f"{DEVICE_TEST}::TestFitQuota::{v[0]}" for v in FIT_QUOTA]
)
def test_fit_quota(case, tmp, allocated, memreq, want) -> None:
    """limits.nvidia.com/gpumem 2048 in `default`; the pod's earlier containers are already counted."""
    n = Node(
        [CardSpec("gpu", "NVIDIA", 10**6)],
        quotas={"default": NamespaceQuota(2048)},
        namespace_use={"default": (allocated, 0)},
    )
    room_mb, _ = n.quota_room("default", pending_mb=tmp)
    assert (memreq <= room_mb) == want


QUOTA_MANAGER = [
    ("Should fit", 500, 100, True),
    ("Should not fit memory", 1500, 100, False),
    ("Should not fit core", 500, 300, False),
    ("Should fit if namespace not present", 1500, 100, True),
]


@pytest.mark.parametrize(
    "case, memreq, cores, want", QUOTA_MANAGER, ids=[f"{QUOTA_TEST}::TestFitQuota::{v[0]}" for v in QUOTA_MANAGER]
)
def test_quota_manager(case, memreq, cores, want) -> None:
    """Used 1000 of 2000 MB and 200 of 400 cores in `testns`."""
    namespace = "otherns" if "not present" in case else "testns"
    n = Node(
        [CardSpec("gpu", "NVIDIA", 10**6)],
        quotas={"testns": NamespaceQuota(2000, 400)},
        namespace_use={"testns": (1000, 200)},
    )
    room_mb, room_cores = n.quota_room(namespace)
    fits = (room_mb is None or memreq <= room_mb) and (room_cores is None or cores <= room_cores)
    assert fits == want


def test_should_not_fit_core_across_cards_names_both_reasons() -> None:
    """TestFitQuota's "Should not fit core" state (200 of 400 cores used in testns) met by a container that
    asks 3 cards at 100 % each: Fit takes two (the quota is checked with the cards already taken,
    FitQuota's tmp), the third fails ResourceQuotaNotFit, and the partial fit adds
    AllocatedCardsInsufficientRequest. GenReason posts both; the quota must not disappear behind it."""
    cards = [CardSpec(f"gpu-{i}", "NVIDIA", 10**6) for i in range(3)]
    n = Node(cards, quotas={"testns": NamespaceQuota(2000, 400)}, namespace_use={"testns": (1000, 200)})
    placed = n.place_hami(PodRequest("p", "testns", (req(3, 100, NO_PERCENTAGE, 100),)), "spread")
    assert isinstance(placed, ContainerFailure)
    assert placed.reasons == {"ResourceQuotaNotFit": 1, "AllocatedCardsInsufficientRequest": 1}
    assert placed.reason == "ResourceQuotaNotFit, AllocatedCardsInsufficientRequest"


# --- What the model does not express ---------------------------------------------------------------

NOT_MODELLED = {
    f"{DEVICE_TEST}::TestDevices_Fit::fit fail: type mismatch": "request type other than NVIDIA (one vendor)",
    f"{SCORE_TEST}::Test_fitInDevices::device type the different from request type": "one vendor only",
    f"{SCORE_TEST}::Test_calcScore::two node *": "node policy across nodes: each tenant has one GPU node",
    f"{SCORE_TEST}::Test_calcScore::*kunlun*": "other vendors",
    f"{SCORE_TEST}::Test_calcScore::race condition test for failedNodes map with two nodes failing": "concurrency",
    f"{SCORE_TEST}::Test_calcScore::one node two device one pod two container use two device": (
        "containers without a device request interleaved with the score of the pod's previous state"
    ),
    f"{SCORE_TEST}::Test_fitInCertainDevice::*": "MIG and device-plugin-specific paths",
    f"{SCORE_TEST}::Test_Nvidia_GPU_Topology": "topology-aware policy (2.10)",
    f"{POLICY_TEST}::TestDeviceUsageList_Less::* different Numa *": "NUMA",
    f"{DEVICE_TEST}::TestDevices_AddResourceUsage::* mig *": "MIG",
    f"{QUOTA_TEST}::TestFitQuota::* with factor": "memoryFactor (gpulab keeps factor 1)",
    f"{QUOTA_TEST}::TestFitQuota::Should fit if device not present": "one vendor only",
    f"{DEVICE_TEST}::TestMutateAdmissionDefaultsExclusiveCore::memory name empty treated as exclusive": (
        "custom device config"
    ),
    f"{DEVICE_TEST}::TestMutateAdmissionDefaultsExclusiveCore::custom resource names": "custom resource names",
    f"{DEVICE_TEST}::Test_checkType, Test_checkUUID": "covered through TestDevices_Fit and gpulab's selector tests",
    "Go sort.Sort above 12 cards": "pdqsort is not stable: ties among >12 cards may be ordered otherwise",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
