"""Conformance with HAMi v2.10.0: its own unit-test vectors, run against gpulab's engine with v2.10.0's rules.

Each vector is a fact taken from a HAMi test (Project-HAMi/HAMi tag v2.10.0, commit 4707fb02c91c; file and test
name, then the case name), written as data: cards with their current usage, the request, and what HAMi's test
expects. The harness and the tables are gpulab's; no HAMi code is used. Cases the engine cannot express are in
NOT_MODELLED with the reason, and are not run. Here: the harness and the vectors of pkg/device/nvidia/device_test.go
(Fit, cordon, mutex, topology, the per-card quota); the card-policy and scoring-weights vectors are in
test_conformance_v2_10_0_policy.py; the selector, init-container, quota-manager and webhook vectors in
test_conformance_v2_10_0_devices.py; the node and Filter vectors in test_node_conformance_v2_10_0.py; v2.8.3's are in
test_conformance.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hami.cards import (
    CardSpec,
    CardUse,
    ContainerRequest,
    NamespaceQuota,
    PodRequest,
    cordoned_ids,
)
from hami.nodes import ContainerFailure, Node, collapsed_use
from hami.releases import V2_10_0

R = V2_10_0
DEVICE_TEST = "pkg/device/nvidia/device_test.go"
DEVICES_TEST = "pkg/device/devices_test.go"
INIT_TEST = "pkg/device/initContainer_test.go"
POLICY_TEST = "pkg/scheduler/policy/gpu_policy_test.go"
QUOTA_TEST = "pkg/device/quota_test.go"
WEBHOOK_TEST = "pkg/scheduler/webhook_test.go"
WEIGHTS_TEST = "pkg/util/device_scoring_weights_test.go"


@dataclass(frozen=True)
class Dev:
    """HAMi's DeviceUsage: Count, Used, Totalmem, Usedmem, Totalcore, Usedcores, Health, Numa, Type."""

    id: str
    totalmem: int
    count: int = 10
    used: int = 0
    usedmem: int = 0
    totalcore: int = 100
    usedcores: int = 0
    health: bool = True
    numa: int = 0
    type: str = "NVIDIA"

    def spec(self, cordoned: frozenset[str] = frozenset()) -> CardSpec:
        return CardSpec(
            self.id, self.type, self.totalmem, self.totalcore, self.count, self.health, self.numa, self.id in cordoned
        )

    def use(self) -> CardUse:
        return CardUse(self.used, self.usedmem, self.usedcores)


def req(nums: int, memreq: int = 0, pct: int = 0, cores: int = 0, device_type: str = "NVIDIA") -> ContainerRequest:
    """HAMi's ContainerDeviceRequest; Go's zero value for an unset MemPercentagereq is 0."""
    return ContainerRequest("c", nums, memreq, pct, cores, device_type)


def node(devs: list[Dev], quotas: dict | None = None, used: dict | None = None, cordon: str | None = None) -> Node:
    cordoned = cordoned_ids(cordon)
    return Node([d.spec(cordoned) for d in devs], [d.use() for d in devs], quotas, used, rules=R)


def reasons(text: str) -> dict[str, int]:
    """GenReason's "1/2 CardInsufficientMemory, 1/2 ..." as {reason: count}."""
    if not text:
        return {}
    parsed = {}
    for part in text.split(", "):
        count, reason = part.split(" ", 1)
        parsed[reason] = int(count.split("/")[0])
    return parsed


def selectors(annotations: dict[str, str]) -> dict:
    """Pod annotations as placement/workloads.py reads them: split on ',', not trimmed."""
    keys = {
        "use-gputype": "use_types",
        "nouse-gputype": "nouse_types",
        "use-gpuuuid": "use_uuids",
        "nouse-gpuuuid": "nouse_uuids",
    }
    return {keys[k]: tuple(v.split(",")) for k, v in annotations.items() if k in keys} | (
        {"gpu_policy": annotations["gpu-scheduler-policy"]} if "gpu-scheduler-policy" in annotations else {}
    )


def fit(devs: list[Dev], ask: ContainerRequest, annotations: dict | None = None, cordon: str | None = None):
    """device.go `Fit` on `devs` in the order given: (cards taken, reason counts)."""
    n = node(devs, cordon=cordon)
    pod = PodRequest("p", "default", (ask,), **selectors(annotations or {}))
    chosen, got, _ = n.walk(list(range(len(devs))), ask, pod, policy=pod.gpu_policy or "spread")
    return [devs[i].id for i in chosen], got


# --- device_test.go TestDevices_Fit --------------------------------------------------------------------------

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
        "fit fail: type mismatch",
        [Dev("dev-0", 128, E)],
        req(1, 512, 0, 50, device_type="OtherType"),
        {},
        False,
        [],
        "1/1 CardTypeMismatch",
    ),
    (
        "fit fail: user assign use uuid mismatch",
        [Dev("dev-1", 1280, E)],
        req(2, 512, 0, 50),
        {"use-gpuuuid": "dev-0"},
        False,
        [],
        "1/1 CardUuidMismatch",
    ),
    (
        "fit fail: user assign no use uuid match",
        [Dev("dev-0", 1280, E)],
        req(2, 512, 0, 50),
        {"nouse-gpuuuid": "dev-0"},
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
        "fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards",
        [Dev("dev-0", 1280, E), Dev("dev-1", 1280, E)],
        req(3, 512, 0, 20),
        {},
        False,
        [],
        "2/2 AllocatedCardsInsufficientRequest",
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
    chosen, got = fit(devs, ask, annotations)
    assert (len(chosen) == ask.nums) == want_fit
    if want_fit:
        assert chosen == want_ids
    assert got == reasons(want_reason)


# --- device_test.go TestFit_DeviceCordon, TestFit_MutexPolicy, TestFit_Topology*, zero percentage -------------------

CORDON_DEVS = [Dev("dev-0", 128, 100), Dev("dev-1", 128, 100)]
CORDON = [
    # (subtest, cordon annotation, devices, want ids (None: the test asserts only that it fits), want reason)
    ("cordoned device is skipped, healthy sibling still fits", "dev-1, ", CORDON_DEVS, ["dev-0"], ""),
    ("all devices cordoned fails with CardCordoned reason", "dev-0,dev-1", CORDON_DEVS, [], "2/2 CardCordoned"),
    (
        "running pods on a cordoned device are unaffected",
        "dev-1",
        [Dev("dev-0", 128, 100), Dev("dev-1", 128, 100, used=1, usedcores=50, usedmem=64)],
        ["dev-0"],
        "",
    ),
    (
        "no annotation or no node info means nothing cordoned: node present, annotation absent",
        None,
        CORDON_DEVS,
        None,
        "",
    ),
    ("no annotation or no node info means nothing cordoned: NodeInfo.Node is nil", None, CORDON_DEVS, None, ""),
]


@pytest.mark.parametrize(
    "case, cordon, devs, want_ids, want_reason",
    CORDON,
    ids=[f"{DEVICE_TEST}::TestFit_DeviceCordon::{v[0]}" for v in CORDON],
)
def test_device_cordon(case, cordon, devs, want_ids, want_reason) -> None:
    n = node(devs, cordon=cordon)
    ask = req(1, 64, 0, 50)
    chosen, got, _ = n.walk([0, 1], ask, PodRequest("p", "default", (ask,)))
    if want_ids is None:
        assert len(chosen) == 1
    else:
        assert [devs[i].id for i in chosen] == want_ids
    assert got == reasons(want_reason)
    assert [u.slots for u in n.use] == [d.used for d in devs]  # the cordon leaves running pods' use alone


MUTEX_DEVS = [Dev("used", 8192, used=1), Dev("idle", 8192)]
MUTEX = [
    ("mutex skips the used device and allocates only the idle one", req(1, 100, 0, 10), True, ["idle"]),
    ("mutex cannot satisfy 2 cards when only one device is idle", req(2, 100, 0, 10), False, None),
]


@pytest.mark.parametrize(
    "case, ask, want_fit, want_ids", MUTEX, ids=[f"{DEVICE_TEST}::TestFit_MutexPolicy::{v[0]}" for v in MUTEX]
)
def test_mutex_policy(case, ask, want_fit, want_ids) -> None:
    chosen, _ = fit(MUTEX_DEVS, ask, {"gpu-scheduler-policy": "mutex"})
    assert (len(chosen) == ask.nums) == want_fit
    if want_ids is not None:
        assert chosen == want_ids


TOPOLOGY = [
    # Both tests give every pair of cards the same score (none, or all 0), which is what the engine assumes
    # (gpulab's nodes carry no hami.io/node-nvidia-score): the walk's first cards.
    ("TestFit_TopologyExactMatch", [Dev("dev-0", 8192), Dev("dev-1", 8192)]),
    ("TestFit_TopologyBestCombinationZeroScores", [Dev("dev-0", 8192), Dev("dev-1", 8192), Dev("dev-2", 8192)]),
]


@pytest.mark.parametrize("test, devs", TOPOLOGY, ids=[f"{DEVICE_TEST}::{v[0]}" for v in TOPOLOGY])
def test_topology_without_pair_scores(test, devs) -> None:
    chosen, _ = fit(devs, req(2, 100, 0, 10), {"gpu-scheduler-policy": "topology-aware"})
    assert len(chosen) == 2


def test_zero_memory_percentage_is_accounted_as_whole_card() -> None:
    """device_test.go TestZeroMemoryPercentageIsAccountedAsWholeCard: gpu 1 with gpumem-percentage 0, as
    placement/workloads.py reads it (memreq 0, percentage 0, cores 0: no exclusive default, the percentage is
    not 100); v2.10.0 treats 0 as unset, so the whole card."""
    ask = ContainerRequest("test", 1, 0, 0, 0)
    pod = PodRequest("p", "zero-percentage-ns", (ask,))
    empty = node([Dev("dev-0", 11264)])
    assert empty.place_hami(pod, "spread") == [[0]]
    assert empty.use[0].memory_mb == 11264  # must book the whole card, not 0
    almost_full = node([Dev("dev-0", 11264, usedmem=11260)]).place_hami(pod, "spread")
    assert isinstance(almost_full, ContainerFailure) and "CardInsufficientMemory" in almost_full.reasons


# --- device_test.go TestFitQuota (nvidia fitQuota over CollapseInitContainerUsage) ---------------------------------

FIT_QUOTA = [
    # (case, init containers, allocated containers [[(uuid, MB)]], tmpDevs [(uuid, MB)], devUUID, memreq, want)
    ("no tmp and no allocated", 0, [], [], "gpu-0", 100, True),
    ("request exceed quota", 0, [], [], "gpu-0", 3000, False),
    ("tmpdev", 0, [], [("gpu-1", 1024)], "gpu-0", 100, True),
    ("tmpdev exceed quota", 0, [], [("gpu-1", 1024)], "gpu-0", 2000, False),
    ("allocated devs", 0, [[("gpu-0", 1024)]], [], "gpu-1", 100, True),
    ("allocated devs exceed quota", 0, [[("gpu-0", 1024)]], [], "gpu-1", 2000, False),
    ("exceed quota", 0, [[("gpu-0", 1024)]], [("gpu-1", 1024)], "gpu-1", 100, False),
    ("fit", 0, [[("gpu-0", 100)]], [("gpu-1", 100)], "gpu-1", 100, True),
    ("fitting second init container maxes against first", 2, [[("gpu-0", 1500)]], [], "gpu-0", 1500, True),
    (
        "sequential init containers counted as peak not sum",
        2,
        [[("gpu-0", 1024)], [("gpu-0", 1024)]],
        [],
        "gpu-0",
        500,
        True,
    ),
    ("collapsed init peak still enforces quota", 1, [[("gpu-0", 2100)]], [], "gpu-1", 100, False),
]


@pytest.mark.parametrize(
    "case, num_init, allocated, tmp, dev, memreq, want",
    FIT_QUOTA,
    ids=[f"{DEVICE_TEST}::TestFitQuota::{v[0]}" for v in FIT_QUOTA],
)
def test_fit_quota(case, num_init, allocated, tmp, dev, memreq, want) -> None:
    """limits.nvidia.com/gpumem 2048 in `default`, nothing used yet. The allocated containers come first (their
    position decides init or app), the container being fitted (its cards so far, and `dev`) last."""
    entries = [(i < num_init, uuid, mb, 0) for i, cards in enumerate(allocated) for uuid, mb in cards]
    current = len(allocated) < num_init
    entries += [(current, uuid, mb, 0) for uuid, mb in [*tmp, (dev, memreq)]]
    total = sum(held[1] for held in collapsed_use(entries).values())
    room_mb, _ = Node([], quotas={"default": NamespaceQuota(2048)}, rules=R).quota_room("default")
    assert (total <= room_mb) == want


# --- What the engine does not express ---------------------------------------------------------------------------

NOT_MODELLED = {
    f"{DEVICE_TEST}::TestFit_NumaSwitching": "nvidia.com/numa-bind (NumaNotFit, NUMA runs in Fit): gpulab reads no "
    "numa-bind annotation and writes numa 0 for every card",
    f"{DEVICE_TEST}::TestFit_TopologyWorstSingleCard": "pair scores (hami.io/node-nvidia-score): gpulab writes none",
    f"{DEVICE_TEST}::TestFit_TopologyBestCombination": "pair scores (hami.io/node-nvidia-score): gpulab writes none",
    f"{DEVICE_TEST}::TestFit_TopologyNegativeScores (SingleGPU, MultiGPU)": "pair scores: gpulab writes none",
    f"{DEVICE_TEST}::TestFit_MigPercentageRequestRejectsUndersizedTemplate": "MIG",
    f"{DEVICE_TEST}::TestCheckType_AllocateMode": "nvidia.com/vgpu-mode: gpulab's cards are all hami-core and it reads "
    "no vgpu-mode annotation",
    f"{DEVICE_TEST}::TestGenerateResourceRequests (int32 overflow, decimal memory)": "a request HAMi rejects becomes "
    "no request, which the engine does not place: it says so (GpumemNotReadByHami, hami/cards.py `gpumem_read`; the "
    "vectors in tests/placement/test_hami_v2_10_0_webhook.py; the percentage cases in "
    "tests/placement/test_hami_release_rules.py)",
    f"{DEVICE_TEST}::TestCheckHealth, TestLockNode, TestNodeDeleted_*, Test_GetNodeDevices*": "registration, health "
    "and node lock: not placement",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
