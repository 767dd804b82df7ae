"""Conformance with HAMi v2.10.0, continued (test_conformance_v2_10_0.py has the harness and the pattern): the vectors
of pkg/device/devices_test.go (CheckUUID, CheckType, with device_test.go's type checks),
pkg/device/initContainer_test.go (CollapseInitContainerUsage), pkg/device/quota_test.go (the quota manager) and
pkg/scheduler/webhook_test.go (the webhook's quota at create), Project-HAMi/HAMi tag v2.10.0, commit 4707fb02c91c;
each by file, test and case name.
"""

from __future__ import annotations

import pytest

from hami.cards import (
    NO_PERCENTAGE,
    CardSpec,
    ContainerRequest,
    NamespaceQuota,
    PodRequest,
    _type_ok,
    _uuid_ok,
)
from hami.cluster import QuotaInUse
from hami.nodes import ContainerFailure, Node, collapsed_use
from hami.tests.test_conformance_v2_10_0 import (
    DEVICE_TEST,
    DEVICES_TEST,
    INIT_TEST,
    QUOTA_TEST,
    WEBHOOK_TEST,
    R,
    req,
    selectors,
)
from hami.webhook import QUOTA_DENIAL, quota_refusal

# --- initContainer_test.go CollapseInitContainerUsage ---------------------------------------------------------

COLLAPSE = [
    # (test, init containers, containers [[(uuid, MB, cores)]], want {uuid: (slots, MB, cores)})
    ("NoInitContainers", 0, [[("gpu0", 100, 10)], [("gpu0", 200, 20)]], {"gpu0": (2, 300, 30)}),
    ("OnlyInitContainers", 2, [[("gpu0", 100, 10)], [("gpu0", 200, 30)]], {"gpu0": (1, 200, 30)}),
    ("MixedInitAndApp", 1, [[("gpu0", 500, 50)], [("gpu0", 100, 10)]], {"gpu0": (1, 500, 50)}),
    ("InitLargerThanApp", 1, [[("gpu0", 1000, 80)], [("gpu0", 200, 20)]], {"gpu0": (1, 1000, 80)}),
    (
        "AppLargerThanInit",
        1,
        [[("gpu0", 100, 10)], [("gpu0", 200, 20)], [("gpu0", 300, 30)]],
        {"gpu0": (2, 500, 50)},
    ),
    (
        "MultipleInitContainersPeak",
        3,
        [[("gpu0", 100, 10)], [("gpu0", 300, 30)], [("gpu0", 200, 20)], [("gpu0", 50, 5)]],
        {"gpu0": (1, 300, 30)},
    ),
    (
        "MultipleDevicesSameContainer",
        1,
        [[("gpu0", 200, 20), ("gpu1", 300, 30)], [("gpu0", 100, 10), ("gpu1", 150, 15)]],
        {"gpu0": (1, 200, 20), "gpu1": (1, 300, 30)},
    ),
    ("EmptyContainerDeviceList", 2, [[], [], [], []], {}),
    ("MultiAppSameGPUSlots", 0, [[("gpu0", 100, 10)]] * 3, {"gpu0": (3, 300, 30)}),
]


@pytest.mark.parametrize(
    "test, num_init, containers, want",
    COLLAPSE,
    ids=[f"{INIT_TEST}::TestCollapseInitContainerUsage_{v[0]}" for v in COLLAPSE],
)
def test_collapse_init_container_usage(test, num_init, containers, want) -> None:
    entries = [(i < num_init, uuid, mb, cores) for i, cards in enumerate(containers) for uuid, mb, cores in cards]
    assert collapsed_use(entries) == want


# --- devices_test.go TestCheckUUID, TestCheckType; device_test.go Test_checkType, TestCheckGPUtype_* -----------------

CHECK_UUID = [
    ("don't set GPUUseUUID and GPUNoUseUUID annotation", {}, "abc", True),
    ("use set GPUUseUUID don't set GPUNoUseUUID annotation,device match", {"use-gpuuuid": "abc,123"}, "abc", True),
    (
        "use set GPUUseUUID don't set GPUNoUseUUID annotation,device don't match",
        {"use-gpuuuid": "abc,123"},
        "1abc",
        False,
    ),
    ("use don't set GPUUseUUID set GPUNoUseUUID annotation,device match", {"nouse-gpuuuid": "abc,123"}, "abc", False),
    (
        "use don't set GPUUseUUID set GPUNoUseUUID annotation,device  don't match",
        {"nouse-gpuuuid": "abc,123"},
        "1abc",
        True,
    ),
    (
        "both GPUUseUUID and GPUNoUseUUID set, device in use list but also in nouse list",
        {"use-gpuuuid": "abc,123", "nouse-gpuuuid": "abc"},
        "abc",
        False,
    ),
    (
        "both GPUUseUUID and GPUNoUseUUID set, device in use list and not in nouse list",
        {"use-gpuuuid": "abc,123", "nouse-gpuuuid": "456"},
        "abc",
        True,
    ),
    ("use list with spaces around uuids, device matches after trim", {"use-gpuuuid": " abc , 123 "}, "abc", True),
    ("empty GPUUseUUID annotation should not filter out any device", {"use-gpuuuid": ""}, "abc", True),
    ("whitespace-only GPUUseUUID annotation should not filter out any device", {"use-gpuuuid": "   "}, "abc", True),
    ("empty GPUNoUseUUID annotation should not exclude any device", {"nouse-gpuuuid": ""}, "abc", True),
]


@pytest.mark.parametrize(
    "case, annotations, card_id, want", CHECK_UUID, ids=[f"{DEVICES_TEST}::TestCheckUUID::{v[0]}" for v in CHECK_UUID]
)
def test_check_uuid(case, annotations, card_id, want) -> None:
    pod = PodRequest("p", "default", (), **selectors(annotations))
    assert _uuid_ok(CardSpec(card_id, "NVIDIA", 1), pod, R) is want


CHECK_TYPE = [
    # devices_test.go TestCheckType
    (DEVICES_TEST, "TestCheckType", "no annotation is no constraint", {}, "NVIDIA-A100", True),
    (DEVICES_TEST, "TestCheckType", "use list matches by substring", {"use-gputype": "A100,V100"}, "NVIDIA-A100", True),
    (DEVICES_TEST, "TestCheckType", "use list does not match", {"use-gputype": "V100"}, "NVIDIA-A100", False),
    (
        DEVICES_TEST,
        "TestCheckType",
        "nouse list matches excludes the device",
        {"nouse-gputype": "A100"},
        "NVIDIA-A100",
        False,
    ),
    (
        DEVICES_TEST,
        "TestCheckType",
        "nouse list does not match keeps the device",
        {"nouse-gputype": "V100"},
        "NVIDIA-A100",
        True,
    ),
    (DEVICES_TEST, "TestCheckType", "empty use value is no constraint", {"use-gputype": ""}, "NVIDIA-A100", True),
    (
        DEVICES_TEST,
        "TestCheckType",
        "whitespace-only nouse value excludes nothing",
        {"nouse-gputype": "   "},
        "NVIDIA-A100",
        True,
    ),
    (
        DEVICES_TEST,
        "TestCheckType",
        "use satisfied and nouse matches still excludes",
        {"use-gputype": "A100", "nouse-gputype": "A100"},
        "NVIDIA-A100",
        False,
    ),
    (
        DEVICES_TEST,
        "TestCheckType",
        "nouse with trailing comma only excludes named type",
        {"nouse-gputype": "V100,"},
        "NVIDIA-A100",
        True,
    ),
    (
        DEVICES_TEST,
        "TestCheckType",
        "nouse with leading comma only excludes named type",
        {"nouse-gputype": ",V100"},
        "NVIDIA-A100",
        True,
    ),
    (
        DEVICES_TEST,
        "TestCheckType",
        "use with trailing comma matches named type only",
        {"use-gputype": "V100,"},
        "NVIDIA-A100",
        False,
    ),
    # device_test.go Test_checkType
    (
        DEVICE_TEST,
        "Test_checkType",
        "use set GPUInUse don't set GPUNoUse annotation,device match",
        {"use-gputype": "A10"},
        "NVIDIA A100",
        True,
    ),
    (
        DEVICE_TEST,
        "Test_checkType",
        "use set GPUInUse set GPUNoUse annotation,device don't match",
        {"use-gputype": "A10", "nouse-gputype": "A100"},
        "NVIDIA A100",
        False,
    ),
    (
        DEVICE_TEST,
        "Test_checkType",
        "use set GPUInUse set GPUNoUse annotation,device match",
        {"use-gputype": "A10", "nouse-gputype": "A100"},
        "NVIDIA A10",
        True,
    ),
    # device_test.go TestCheckGPUtype_NoUse, _EmptyAnnotation, _InUseMismatch
    (DEVICE_TEST, "TestCheckGPUtype_NoUse", "A100 card", {"nouse-gputype": "A100"}, "NVIDIA-A100", False),
    (DEVICE_TEST, "TestCheckGPUtype_NoUse", "V100 card", {"nouse-gputype": "A100"}, "NVIDIA-V100", True),
    (DEVICE_TEST, "TestCheckGPUtype_EmptyAnnotation", "use empty", {"use-gputype": ""}, "NVIDIA-A100", True),
    (DEVICE_TEST, "TestCheckGPUtype_EmptyAnnotation", "use blank", {"use-gputype": "   "}, "NVIDIA-A100", True),
    (DEVICE_TEST, "TestCheckGPUtype_EmptyAnnotation", "nouse empty", {"nouse-gputype": ""}, "NVIDIA-A100", True),
    (DEVICE_TEST, "TestCheckGPUtype_EmptyAnnotation", "nouse blank", {"nouse-gputype": "   "}, "NVIDIA-A100", True),
    (
        DEVICE_TEST,
        "TestCheckGPUtype_InUseMismatch",
        "A100 asked, V100 card",
        {"use-gputype": "A100"},
        "NVIDIA-V100",
        False,
    ),
]


@pytest.mark.parametrize(
    "source, test, case, annotations, card_type, want", CHECK_TYPE, ids=[f"{v[0]}::{v[1]}::{v[2]}" for v in CHECK_TYPE]
)
def test_check_type(source, test, case, annotations, card_type, want) -> None:
    pod = PodRequest("p", "default", (), **selectors(annotations))
    assert _type_ok(CardSpec("gpu", card_type, 1), pod, R) is want


# --- quota_test.go TestFitQuota, TestFitQuotaExplicitZeroBlocks ---------------------------------------------------

QUOTA_MANAGER = [
    # (check, namespace, MB, cores, want); testns uses 1000 of 2000 MB and 200 of 400 cores
    ("Should fit", "testns", 500, 100, True),
    ("Should not fit memory", "testns", 1500, 100, False),
    ("Should not fit core", "testns", 500, 300, False),
    ("Should fit if namespace not present", "otherns", 1500, 100, True),
]


@pytest.mark.parametrize(
    "case, namespace, memreq, cores, want",
    QUOTA_MANAGER,
    ids=[f"{QUOTA_TEST}::TestFitQuota::{v[0]}" for v in QUOTA_MANAGER],
)
def test_quota_manager(case, namespace, memreq, cores, want) -> None:
    n = Node([], quotas={"testns": NamespaceQuota(2000, 400)}, namespace_use={"testns": (1000, 200)}, rules=R)
    room_mb, room_cores = n.quota_room(namespace)
    assert ((room_mb is None or memreq <= room_mb) and (room_cores is None or cores <= room_cores)) == want


def test_explicit_zero_quota_blocks() -> None:
    """quota_test.go TestFitQuotaExplicitZeroBlocks: limits.nvidia.com/gpumem "0" blocks a 500 MB request."""
    n = Node([CardSpec("gpu", "NVIDIA", 8192)], quotas={"team-zero": NamespaceQuota(memory_mb=0)}, rules=R)
    assert n.quota_room("team-zero") == (0, None)
    placed = n.place_hami(PodRequest("p", "team-zero", (req(1, 500, NO_PERCENTAGE, 0),)), "spread")
    assert isinstance(placed, ContainerFailure) and placed.reasons == {"ResourceQuotaNotFit": 1}


# --- webhook_test.go TestFitResourceQuota, TestFitResourceQuota_InitContainerPeakSequence -------------------------


def webhook_pod(containers, init=()) -> PodRequest:
    """Containers as (gpus, gpumem) as the tests write them (no gpucores; fitResourceQuota is called directly, so no
    exclusive-core default)."""
    return PodRequest(
        "Pod/default/test-pod",
        "default",
        tuple(ContainerRequest("c", n, mb, NO_PERCENTAGE, 0) for n, mb in containers),
        init_containers=tuple(ContainerRequest("i", n, mb, NO_PERCENTAGE, 0) for n, mb in init),
    )


WEBHOOK = [
    # (case, pod); default uses 1000 of 2000 MB and 200 of 400 cores
    ("quota passed", webhook_pod([(1, 100)]), True),
    ("quota exceeded", webhook_pod([(1, 1024)]), False),
    ("request multiple gpus", webhook_pod([(2, 1024)]), False),
    ("request multiple gpus within quota", webhook_pod([(2, 400)]), True),
    (
        "InitContainers run sequentially: max init fits quota, but simple sum would exceed",
        webhook_pod([(1, 500)], init=[(1, 800), (1, 800)]),
        True,
    ),
    ("InitContainer request exceeds quota directly", webhook_pod([(1, 100)], init=[(1, 1500)]), False),
]


@pytest.mark.parametrize(
    "case, pod, want_fit", WEBHOOK, ids=[f"{WEBHOOK_TEST}::TestFitResourceQuota::{v[0]}" for v in WEBHOOK]
)
def test_webhook_quota(case, pod, want_fit) -> None:
    in_use = QuotaInUse("default", NamespaceQuota(2000, 400), 1000, 200)
    assert (quota_refusal(pod, in_use, R) is None) is want_fit


def test_webhook_quota_init_container_peak_sequence() -> None:
    """webhook_test.go TestFitResourceQuota_InitContainerPeakSequence: 30000 MB limit (cores: no limit)."""
    pod = webhook_pod([(1, 10000)], init=[(1, 20000)])
    quota = NamespaceQuota(memory_mb=30000)
    assert quota_refusal(pod, QuotaInUse("default", quota, 0, 0), R) is None  # step 1: peak 20000 <= 30000
    assert quota_refusal(pod, QuotaInUse("default", quota, 20000, 0), R) == QUOTA_DENIAL  # step 2: pod1 counted
    assert quota_refusal(pod, QuotaInUse("default", quota, 10000, 0), R) is None  # step 3: pod1's init done


# --- What the engine does not express ---------------------------------------------------------------------------

NOT_MODELLED = {
    f"{INIT_TEST}::TestCollapseInitContainerUsage_NilInput": "nil pod: no Go nil here",
    f"{INIT_TEST}::TestCollapseInitContainerUsage_MultipleDeviceTypes": "other vendors (kunlun)",
    f"{INIT_TEST}::TestAppContainersOnlyDeviceUsage_*": "the shrink to app containers once the init containers have "
    "finished (scheduler.go onUpdatePod): the engine keeps the peak a pod holds while they run",
    f"{QUOTA_TEST}::TestFitQuota::* with factor": "memoryFactor (gpulab keeps factor 1)",
    f"{QUOTA_TEST}::TestFitQuota::Should fit if device not present": "one vendor only",
    f"{WEBHOOK_TEST}::TestFitResourceQuota::request ascend": "other vendors",
    f"{WEBHOOK_TEST}::TestFitResourceQuotaNonNvidia": "other vendors (cambricon, hygon)",
    f"{WEBHOOK_TEST}::TestFitResourceQuotaCountsEveryDevice": "cambricon; the NVIDIA case is 'request multiple gpus'",
    f"{WEBHOOK_TEST}::TestFitResourceQuotaAscendMemoryFactor": "other vendors, memoryFactor",
    f"{WEBHOOK_TEST}::TestHandle, TestPodHasNodeName, TestPodHasDifferentScheduler, TestNonGPUPodAllowedAdmission, "
    "TestEmptyContainersDenied, TestSchedulerNameEmptyNoOverwrite": "admission outside the quota: run (or listed as "
    "not modelled) in test_conformance_v2_10_0_webhook.py",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
