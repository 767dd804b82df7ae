"""What HAMi v2.10.0's admission webhook refuses at create, and what it cannot read, as the engine predicts it from
manifests (placement/workloads.py `pod_admission`, placement/per_pod.py, the words in placement/wording.py); the
webhook's own rules on hand-made inputs are hami/tests/test_conformance_v2_10_0_webhook.py's.

Read at Project-HAMi/HAMi tag v2.10.0 (commit 4707fb02c91c): pkg/scheduler/webhook.go `Handle` 53-123 (init containers
first, 74-85; privileged 99-102, #2139; nodeName 104-112; the quota after them, 114-116), pkg/device/nvidia/device.go
`MutateAdmission` 347-387 (`validateMemoryPercentage` 389-396, #1997; `hasResource`: `mutateContainerResource`
398-415, `defaultExclusiveCoreIfNeeded` 417-450) and `GenerateResourceRequests` 531-543 (#2285). v2.8.3 judges none of
these but the node name (tests/placement/test_hami_v2_8_3_webhook.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from hami.cards import CardSpec
from hami.releases import V2_10_0
from hami.tests.test_conformance_v2_10_0 import DEVICE_TEST
from hami.webhook import denied, percentage_denial
from model.config import GpuQuota, PodLimits
from placement import per_pod
from placement.inventory import NamespaceUsage, TenantInventory
from placement.replay import Denied, Placed, replay
from placement.verdicts import RefusedByWebhook
from placement.wording import evaluate_tenant
from placement.workloads import container_request, pod_admission, read_workload

L4S = (CardSpec("GPU-L4-0", "NVIDIA-L4", 24576), CardSpec("GPU-L4-1", "NVIDIA-L4", 24576))


def inventory(version: str, **kw: Any) -> TenantInventory:
    return TenantInventory("t", L4S, PodLimits(), kw.pop("quota", None), ("ns",), hami_version=version, **kw)


def pod(*containers: dict, init: list[dict] | None = None, kind: str = "Pod", **spec: Any) -> Any:
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init is not None:
        body["initContainers"] = init
    if kind == "Pod":
        obj = {"metadata": {"name": "p", "namespace": "ns"}, "spec": body}
    else:
        obj = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"template": {"spec": body}}}
    workload = read_workload(kind, obj)
    assert workload is not None
    return workload


def ctr(name: str = "cuda", privileged: bool | None = None, **limits: Any) -> dict:
    container: dict[str, Any] = {
        "name": name,
        "resources": {"limits": {f"nvidia.com/{k.replace('_', '-')}": str(v) for k, v in limits.items()}},
    }
    if privileged is not None:
        container["securityContext"] = {"privileged": privileged}
    return container


def findings(version: str, *workloads: Any, **kw: Any) -> list[tuple[str, str]]:
    return [(f.reason, f.message) for f in evaluate_tenant(inventory(version, **kw), workloads)]


# --- device_test.go Test_MutateAdmission: does the webhook find a GPU resource (`hasResource`) ------------------

HAS_RESOURCE = [
    # (case, limits, requests, want)
    ("having ResourceName set to resource limits.", {"nvidia.com/gpu": "1"}, {}, True),
    (
        "don't having ResourceName, but having ResourceCores set to resource limits",
        {"nvidia.com/gpucores": "1"},
        {},
        True,
    ),
    ("don't having ResourceName, but having ResourceMem set to resource limits", {"nvidia.com/gpumem": "1"}, {}, True),
    (
        "don't having ResourceName, but having ResourceMemPercentage set to resource limits",
        {"nvidia.com/gpumem-percentage": "1"},
        {},
        True,
    ),
    ("don't having math resources.", {}, {}, False),
]
# TestMutateAdmissionDefaultsExclusiveCore's requests-only cases: the exclusive default finds a resource (wantCore),
# explicit cores in the requests leave none (the core limit is not added and nothing is in the limits).
EXCLUSIVE = [
    ("exclusive via percentage in requests only", {}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100}, True),
    ("explicit cores in requests remains unchanged", {}, {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 55}, False),
]


@pytest.mark.parametrize(
    "case, limits, requests, want",
    HAS_RESOURCE + EXCLUSIVE,
    ids=[f"{DEVICE_TEST}::Test_MutateAdmission::{v[0]}" for v in HAS_RESOURCE]
    + [f"{DEVICE_TEST}::TestMutateAdmissionDefaultsExclusiveCore::{v[0]}" for v in EXCLUSIVE],
)
def test_has_resource(case: str, limits: dict, requests: dict, want: bool) -> None:
    container = {"name": "test", "resources": {"limits": limits, "requests": requests}}
    container_request(container, "Pod/p")  # what read_workload reads first
    assert pod_admission({}, [], [container], "Pod/p").has_resource is want


# --- Test_MutateAdmission_MemoryPercentageValidation through the pack -------------------------------------------

PERCENTAGES = [(0, None), (100, None), (101, "InvalidGpumemPercentage"), (150, "InvalidGpumemPercentage")]


VALIDATION = f"{DEVICE_TEST}::Test_MutateAdmission_MemoryPercentageValidation"


@pytest.mark.parametrize("pct, want", PERCENTAGES, ids=[f"{VALIDATION}::{p}" for p, _ in PERCENTAGES])
def test_the_webhook_s_percentage_range(pct: int, want: str | None) -> None:
    workload = pod(ctr("test", gpu=1, gpumem_percentage=pct))
    refusals = per_pod.per_pod_refusals(inventory("v2.10.0"), workload.pods[0])
    assert [r.reason for r in refusals[:1] if isinstance(r, RefusedByWebhook)] == ([want] if want else [])
    assert not any(
        isinstance(r, RefusedByWebhook) for r in per_pod.per_pod_refusals(inventory("v2.8.3"), workload.pods[0])
    )


def test_a_percentage_above_100_is_refused_at_create_with_hami_s_words() -> None:
    """The finding is HAMi's refusal and only that: the scheduler's clamp (100 %, the whole L4) is never reached, and
    the pod is neither placed nor counted against the quota (which its 100 % would exceed)."""
    workload = pod(ctr(gpu=1, gpumem_percentage=150, gpucores=10))
    quota = GpuQuota(gpumem=1000)
    message = percentage_denial("cuda", 150)
    assert findings("v2.10.0", workload, quota=quota) == [
        ("InvalidGpumemPercentage", f"HAMi v2.10.0's admission webhook refuses the pod (each of a workload's pods) "
                                    f"when it is created: {message}")
    ]  # fmt: skip
    assert message == (
        'admission webhook "vgpu.hami.io" denied the request: invalid nvidia.com/gpumem-percentage value 150 in '
        "container cuda: must be an integer between 0 and 100"
    )
    assert [reason for reason, _ in findings("v2.8.3", workload)] == ["CardInsufficientMemory"]


def test_an_explicit_101_is_refused_though_it_is_hami_s_not_given() -> None:
    workload = pod(ctr(gpu=1, gpumem=1000, gpumem_percentage=101))
    assert [reason for reason, _ in findings("v2.10.0", workload)] == ["InvalidGpumemPercentage"]
    assert findings("v2.8.3", workload) == [], 'v2.8.3: 101 is "not given", 1000 MB placed'


def test_an_init_container_s_percentage_is_judged_first() -> None:
    workload = pod(ctr(gpu=1, gpumem_percentage=300), init=[ctr("warmup", gpu=1, gpumem_percentage=120)])
    assert findings("v2.10.0", workload) == [
        ("InvalidGpumemPercentage", "HAMi v2.10.0's admission webhook refuses the pod (each of a workload's pods) "
                                    f"when it is created: {percentage_denial('warmup', 120)}")
    ]  # fmt: skip


def test_a_privileged_container_in_a_gpu_pod_is_refused_at_create() -> None:
    sidecar = {"name": "debug", "securityContext": {"privileged": True}}
    for kind in ("Pod", "Deployment"):
        workload = pod(ctr(gpu=1, gpumem=1000), sidecar, kind=kind)
        assert findings("v2.10.0", workload) == [
            ("PrivilegedContainer", "HAMi v2.10.0's admission webhook refuses the pod (each of a workload's pods) "
                                    f"when it is created: {denied('container debug is privileged')}")
        ]  # fmt: skip
        assert findings("v2.8.3", workload) == []
    privileged_init = pod(ctr(gpu=1, gpumem=1000), init=[{"name": "setup", "securityContext": {"privileged": True}}])
    assert "container setup is privileged" in findings("v2.10.0", privileged_init)[0][1]
    assert findings("v2.10.0", pod(ctr(gpu=1, gpumem=1000, privileged=False))) == []


def test_a_gpu_pod_with_a_node_name_is_refused_at_create() -> None:
    """v2.8.3 refuses it too, in the same words (tests/placement/test_hami_v2_8_3_webhook.py)."""
    workload = pod(ctr(gpu=1, gpumem=1000), nodeName="tenant-b-worker")
    for version in ("v2.10.0", "v2.8.3"):
        assert findings(version, workload) == [
            ("PodHasNodeAssigned", f"HAMi {version}'s admission webhook refuses the pod (each of a workload's pods) "
                                   f"when it is created: {denied('pod has node assigned')}")
        ]  # fmt: skip


def test_a_bound_pod_read_back_from_the_api_server_is_not_taken_for_one_created_with_a_node_name() -> None:
    """Boundary: a Pod as the API server holds it after its binding (uid, spec.nodeName, status), as the stack
    policies get it from the engine (its outputs) on a second `make up`: HAMi's webhook admitted it before the
    scheduler bound it, so its nodeName is no refusal. Seen live: a second `make up` of a v2.10.0 process-mode stack
    was refused for the three bound trainer pods until this. A template's nodeName, a creator's, still is."""
    body = {"containers": [ctr(gpu=1, gpumem=1000)], "nodeName": "tenant-b-worker", "schedulerName": "hami-scheduler"}
    metadata = {"name": "trainer-1", "namespace": "ns", "uid": "7d2c0f9e-4b1a-4f7e-9a55-0c1d2e3f4a5b"}
    bound = read_workload("Pod", {"metadata": metadata, "spec": body, "status": {"phase": "Running"}})
    assert findings("v2.10.0", bound) == []
    created = read_workload("Pod", {"metadata": {"name": "trainer-1", "namespace": "ns"}, "spec": body})
    assert [reason for reason, _ in findings("v2.10.0", created)] == ["PodHasNodeAssigned"]
    template = pod(ctr(gpu=1, gpumem=1000), kind="Deployment", nodeName="tenant-b-worker")
    assert [reason for reason, _ in findings("v2.10.0", template)] == ["PodHasNodeAssigned"]


def test_the_webhook_answers_its_first_refusal_only() -> None:
    workload = pod(ctr(gpu=1, gpumem_percentage=150, privileged=True), nodeName="n")
    assert [reason for reason, _ in findings("v2.10.0", workload)] == ["InvalidGpumemPercentage"]
    workload = pod(ctr(gpu=1, gpumem=1000, privileged=True), nodeName="n")
    assert [reason for reason, _ in findings("v2.10.0", workload)] == ["PrivilegedContainer"]


def test_a_pod_the_webhook_refuses_never_reaches_its_quota_check() -> None:
    """20000 MB of a 30000 MB quota in use, a privileged 20000 MB pod: the webhook refuses it for the privileged
    container (Handle 99-102) before `fitResourceQuota` (114-116) could, so that is the one refusal; unprivileged,
    the quota refuses it. Neither is placed."""
    used = {"ns": NamespaceUsage(20000, 0, 1)}
    quota = GpuQuota(gpumem=30000)
    privileged = pod(ctr(gpu=1, gpumem=20000, privileged=True))
    assert [reason for reason, _ in findings("v2.10.0", privileged, quota=quota, namespace_usage=used)] == [
        "PrivilegedContainer"
    ]
    plain = pod(ctr(gpu=1, gpumem=20000))
    assert [reason for reason, _ in findings("v2.10.0", plain, quota=quota, namespace_usage=used)] == [
        "ExceedingResourceQuota"
    ]


# --- device_test.go TestGenerateResourceRequests: a gpumem beyond int32 is no request ---------------------------

BEYOND_INT32 = [
    ("byte-scale memory quantity that overflows int32 is rejected", "16Gi"),
    ("decimal-form memory request is rejected, not treated as zero", "16.0Gi"),
]


GENERATE = f"{DEVICE_TEST}::TestGenerateResourceRequests"


@pytest.mark.parametrize("case, gpumem", BEYOND_INT32, ids=[f"{GENERATE}::{v[0]}" for v in BEYOND_INT32])
def test_a_gpumem_hami_cannot_read_is_said_not_placed(case: str, gpumem: str) -> None:
    workload = pod(ctr(gpu=1, gpumem=gpumem))
    found = findings("v2.10.0", workload)
    assert found[0][0] == "GpumemNotReadByHami"
    assert "gpulab cannot predict it" in found[0][1] and "17179869184" in found[0][1]
    assert [reason for reason, _ in findings("v2.8.3", workload)][:1] == ["CardInsufficientMemory"]


def test_int32_is_the_boundary() -> None:
    def reasons(workload: Any) -> list[str]:
        return [r.reason for r in per_pod.per_pod_refusals(inventory("v2.10.0"), workload.pods[0])]

    assert reasons(pod(ctr(gpu=1, gpumem=2**31 - 1))) == ["CardInsufficientMemory"]
    init = pod(ctr(gpu=1, gpumem=1000), init=[ctr("warmup", gpu=1, gpumem=2**31)])
    assert reasons(init)[:1] == ["GpumemNotReadByHami"], "init containers are read as well (v2.10.0 Resourcereqs)"


def test_v2_10_0_rules_are_the_ones_judged() -> None:
    assert V2_10_0.memory_percentage_range_checked and V2_10_0.privileged_refused
    assert V2_10_0.webhook_resource_in_every_container and V2_10_0.webhook_scheduler_names is None


def test_make_check_s_run_creates_no_pod_the_webhook_refuses() -> None:
    """placement/replay.py: the refused pod is `Denied` with HAMi's message and holds no card; v2.8.3 places it."""
    workload = pod(ctr(gpu=1, gpumem=1000, privileged=True))
    (outcome,) = replay(inventory("v2.10.0"), [workload]).outcomes
    assert isinstance(outcome, Denied) and outcome.message == denied("container cuda is privileged")
    run = replay(inventory("v2.8.3"), [workload])
    assert isinstance(run.outcomes[0], Placed) and run.inventory.card_usage[-1].memory_mb == 1000
