"""What HAMi v2.8.3's admission webhook refuses at create, as the engine predicts it from manifests
(placement/workloads.py `pod_admission`, placement/per_pod.py, placement/replay.py, the words in placement/wording.py);
the webhook's rule on hand-made inputs is hami/tests/test_conformance_webhook.py's.

Read at Project-HAMi/HAMi tag v2.8.3 (commit 8f039ad22bfc14970e2ea557f24c411c34203079), pkg/scheduler/webhook.go
`Handle` 52-105: a pod naming a scheduler other than default-scheduler passes untouched (63-68, hami-scheduler
included); the GPU resource is looked for in spec.containers, skipping a privileged one (70-87; pkg/device/nvidia/
device.go `MutateAdmission` 342-379, `mutateContainerResource` 381-398, `defaultExclusiveCoreIfNeeded` 400-433); a
pod where it is found and spec.nodeName is set is refused: "pod has node assigned" (89-98).
"""

from __future__ import annotations

from typing import Any

from hami.webhook import denied
from placement import per_pod
from placement.replay import Denied, Placed, replay
from placement.workloads import pod_admission, read_workload
from tests.placement.test_hami_v2_10_0_webhook import ctr, findings, inventory, pod

NODE = "tenant-b-worker"
REFUSED = (
    "PodHasNodeAssigned",
    "HAMi v2.8.3's admission webhook refuses the pod (each of a workload's pods) when it is created: "
    + denied("pod has node assigned"),
)


def reasons(workload: Any, version: str = "v2.8.3") -> list[str]:
    return [r.reason for r in per_pod.per_pod_refusals(inventory(version), workload.pods[0])]


def test_a_gpu_pod_with_a_node_name_is_refused_at_create() -> None:
    """webhook_test.go TestPodHasNodeName (95-170): a GPU limit and spec.nodeName, denied; TestHandle (36-93): no
    node name, allowed."""
    for kind in ("Pod", "Deployment"):
        assert findings("v2.8.3", pod(ctr(gpu=1, gpumem=1000), kind=kind, nodeName=NODE)) == [REFUSED]
        assert findings("v2.8.3", pod(ctr(gpu=1, gpumem=1000), kind=kind)) == []
    assert findings("v2.8.3", pod(ctr(gpu=1, gpumem=1000), nodeName=NODE, schedulerName="default-scheduler")) == [
        REFUSED
    ]
    assert findings("v2.8.3", pod({"name": "cpu"}, nodeName=NODE)) == [], "no GPU resource: no pod of the engine's"


def test_it_is_the_webhook_s_one_refusal_and_comes_first() -> None:
    """The mutating webhook answers before gpulab's validating policy: its refusal is named first (a 30000 MB pod on
    24576 MB cards is CardInsufficientMemory too, which kubectl would not show)."""
    workload = pod(ctr(gpu=1, gpumem=30000), nodeName=NODE)
    assert reasons(workload) == ["PodHasNodeAssigned", "CardInsufficientMemory"]
    assert findings("v2.8.3", workload)[0] == REFUSED


def test_a_pod_naming_hami_scheduler_passes_the_v2_8_3_webhook_untouched() -> None:
    """63-68: v2.8.3 lets a pod naming hami-scheduler (or any name but default-scheduler) through before reading it;
    v2.10.0 handles hami-scheduler (its 64-69) and refuses the node name."""
    workload = pod(ctr(gpu=1, gpumem=1000), nodeName=NODE, schedulerName="hami-scheduler")
    assert findings("v2.8.3", workload) == []
    assert reasons(workload, "v2.10.0") == ["PodHasNodeAssigned"]


def test_a_privileged_or_init_container_s_gpu_is_not_found_by_v2_8_3() -> None:
    """70-87: privileged app containers are skipped, init containers not walked: no `hasResource`, no refusal (the
    init container's GPU is gpulab's InitContainerGpuRequest). v2.10.0 finds both (its 74-98)."""
    privileged = pod(ctr(gpu=1, gpumem=1000, privileged=True), nodeName=NODE)
    assert findings("v2.8.3", privileged) == []
    assert reasons(privileged, "v2.10.0") == ["PrivilegedContainer"]
    init_only = pod({"name": "app"}, init=[ctr("warmup", gpu=1, gpumem=1000)], nodeName=NODE)
    assert reasons(init_only) == ["InitContainerGpuRequest"]
    assert reasons(init_only, "v2.10.0") == ["PodHasNodeAssigned"]
    beside = pod(ctr(gpu=1, gpumem=1000, privileged=True), ctr("other", gpucores=10), nodeName=NODE)
    assert findings("v2.8.3", beside) == [REFUSED], "an unprivileged GPU container beside it is found"
    unprivileged = pod(ctr(gpu=1, gpumem=1000, privileged=False), nodeName=NODE)
    assert findings("v2.8.3", unprivileged) == [REFUSED]


def test_pod_admission_reads_what_v2_8_3_reads() -> None:
    """`app_resource`: a GPU resource (device.go `mutateContainerResource`, `defaultExclusiveCoreIfNeeded`) in an app
    container that is not privileged; `has_resource` (v2.10.0's) in any container; `scheduler_name`: spec.schedulerName,
    "" when absent."""
    gpu = ctr("gpu", gpu=1)
    privileged = ctr("gpu", privileged=True, gpu=1)
    exclusive = {"name": "x", "resources": {"requests": {"nvidia.com/gpu": 1}}}  # no gpucores, no gpumem: exclusive
    cpu = {"name": "cpu", "resources": {"limits": {"cpu": "1"}}}
    for init, app, v2_8_3, v2_10_0 in (
        ([], [gpu], True, True),
        ([gpu], [cpu], False, True),
        ([], [privileged], False, True),
        ([], [privileged, exclusive], True, True),
        ([], [cpu], False, False),
    ):
        admission = pod_admission({}, init, app, "Pod/p")
        assert (admission.app_resource, admission.has_resource) == (v2_8_3, v2_10_0), (init, app)
    assert pod_admission({"schedulerName": "hami-scheduler"}, [], [gpu], "Pod/p").scheduler_name == "hami-scheduler"
    assert pod_admission({}, [], [gpu], "Pod/p").scheduler_name == ""


def test_a_bound_pod_read_back_from_the_api_server_is_not_refused() -> None:
    """As under v2.10.0 (test_hami_v2_10_0_webhook.py): the binding wrote its nodeName after admission."""
    body = {"containers": [ctr(gpu=1, gpumem=1000)], "nodeName": NODE}
    metadata = {"name": "trainer-1", "namespace": "ns", "uid": "7d2c0f9e-4b1a-4f7e-9a55-0c1d2e3f4a5b"}
    bound = read_workload("Pod", {"metadata": metadata, "spec": body})
    assert findings("v2.8.3", bound) == []


def test_make_check_s_run_creates_no_pod_the_webhook_refuses() -> None:
    """placement/replay.py: the refused pod is `Denied` with HAMi's message and holds no card."""
    (outcome,) = replay(inventory("v2.8.3"), [pod(ctr(gpu=1, gpumem=1000), nodeName=NODE)]).outcomes
    assert isinstance(outcome, Denied) and outcome.message == denied("pod has node assigned")
    named = pod(ctr(gpu=1, gpumem=1000), nodeName=NODE, schedulerName="hami-scheduler")
    assert isinstance(replay(inventory("v2.8.3"), [named]).outcomes[0], Placed)
