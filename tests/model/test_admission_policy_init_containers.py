"""Under HAMi v2.10.0 an init container is fitted on a node as an app container is, so the per-pod rules on one
container's card count (NodeInsufficientDevice) and memory (CardInsufficientMemory) ask of the init containers too,
in the pack (placement/per_pod.py `per_pod_refusals`) and the admission policy (model/kube_objects/admission_policy.py
`deny_validations`) alike, with the same first reason; v2.8.3 refuses a GPU init container (InitContainerGpuRequest).
A native sidecar (an init container with restartPolicy: Always, Kubernetes KEP-753) is to v2.10.0 one more init
container: fitted alone before the app containers and counted in the init containers' peak, not beside the app
containers as Kubernetes runs it. Issue 64.

Read at Project-HAMi/HAMi tag v2.10.0 (commit 4707fb02c91c):
- pkg/device/devices.go `Resourcereqs` 639-692: one request per container, init containers first;
- pkg/scheduler/score.go `scoreNode` 309-318: `numInitContainers := len(task.Spec.InitContainers)`, every init
  container; `allocateInitContainers` 226-254 fits each on its own copy of the node (`fitInDevices` 81-137: the card
  count 98-103, NodeInsufficientDevice, then pkg/device/nvidia/device.go `Fit`, CardInsufficientMemory 789-790), a
  refusal failing the node (241-244); `allocateAppContainers` 256-286 the app containers after;
- nothing under pkg/ or cmd/ reads a container's RestartPolicy (`git grep RestartPolicy v2.10.0 -- pkg cmd`: no line);
  the tag's docs/develop/sidecarsContainer-design.md 5-11 says so ("There is no `RestartPolicy` check anywhere, so a
  sidecar gets run-to-completion semantics"), pkg/device/initContainer.go 64-65 leaves sidecars to PR #2584, and the
  quota count, webhook.go `fitResourceQuota` 167-177, takes every init container at its largest.
"""

from __future__ import annotations

import copy

import pytest
from cel_harness import admitted, run_policy

from hami.releases import V2_10_0
from placement import per_pod
from placement.inventory import from_tenant
from placement.verdicts import CardTooSmall, TooManyCards
from placement.workloads import read_workload
from tests.model.test_admission_policy_releases import both, deployment, gpu_container, judged, policy, with_inits

SIDECAR = {"restartPolicy": "Always"}


def init_pod(app: dict, init: dict, sidecar: bool) -> dict:
    """A Pod of one app container and one init container (a native sidecar when `sidecar`)."""
    return with_inits([app], [{**init, **SIDECAR} if sidecar else init])


def first_refusal(tenant, obj: dict):
    workload = read_workload(obj["kind"], obj)
    assert workload is not None
    return per_pod.per_pod_refusals(from_tenant(tenant), workload.pods[0])[0]


@pytest.mark.parametrize("sidecar", [False, True], ids=["init", "sidecar"])
def test_v2_10_0_refuses_an_init_container_asking_more_cards_than_the_node_has(sidecar: bool) -> None:
    """Three cards on tenant-b's two-L4 node: HAMi v2.10.0 fails the node for the init container (score.go
    `allocateInitContainers` 240-244, `fitInDevices` 98-103), before any app container; a sidecar alike. The per-pod
    `gpus` limit is raised to 3, so the card count is the one rule asked."""
    old, new = both(gpus=3)
    pod = init_pod(gpu_container("app", 1, 1000), gpu_container("load", 3, 1000), sidecar)
    for obj in (pod, deployment(pod)):
        assert judged(new, obj) == ["NodeInsufficientDevice"]
        assert judged(old, obj) == ["InitContainerGpuRequest"], "v2.8.3 places no init container"
    assert run_policy(policy(new), admitted(pod)).shown == (
        "NodeInsufficientDevice: a container asks for more cards than tenant tenant-b's node has (2)"
    )
    assert first_refusal(new, pod) == TooManyCards("load", 3, 2, init=True)


@pytest.mark.parametrize("sidecar", [False, True], ids=["init", "sidecar"])
def test_v2_10_0_refuses_an_init_container_asking_more_memory_than_the_largest_card(sidecar: bool) -> None:
    """90000 MB on tenant-a's 80 GB A100 (device.go `Fit` 789-790 for the init container); the message names the
    largest ask of any container, the init container's here. The per-pod `gpumem` limit is raised past it, so the
    memory is the one rule asked."""
    old, new = both("tenant-a", gpumem=100000)
    pod = init_pod(gpu_container("app", 1, 1000), gpu_container("load", 1, 90000), sidecar)
    for obj in (pod, deployment(pod)):
        assert judged(new, obj) == ["CardInsufficientMemory"]
        assert judged(old, obj) == ["InitContainerGpuRequest"]
    assert run_policy(policy(new), admitted(deployment(pod))).shown == (
        "CardInsufficientMemory: a container asks 90000 MB per card; the largest card of tenant tenant-a has 81920 MB"
    )
    refusal = first_refusal(new, pod)
    assert isinstance(refusal, CardTooSmall) and (refusal.container, refusal.asks_mb, refusal.init) == (
        "load",
        90000,
        True,
    )


def test_v2_10_0_judges_init_and_app_containers_together_first_reason_first() -> None:
    """An init container over the card count and an app container over the memory: both refused, the card count
    shown first (the question order of fitInDevices, then Fit), as the pack names it."""
    _, new = both("tenant-b", gpus=3)
    pod = with_inits([gpu_container("app", 1, 30000)], [gpu_container("load", 3, 1000)])
    assert judged(new, pod) == ["NodeInsufficientDevice", "CardInsufficientMemory"]
    fits = with_inits([gpu_container("app", 2, 24576)], [gpu_container("load", 2, 24576)])
    assert judged(new, fits) == [], "two whole L4s, for each in turn"


def test_a_native_sidecar_is_one_more_init_container_to_v2_10_0_s_per_pod_limits() -> None:
    """HAMi v2.10.0 counts a pod as the larger of its app containers' sum and its largest init container
    (webhook.go `fitResourceQuota` 167-180, initContainer.go `CollapseInitContainerUsage` 36-113), a sidecar among
    the init containers: one card for a one-card sidecar beside a one-card app container, under a limit of one card,
    where Kubernetes, which runs them together, would count two. The same container as an app container is over."""
    old, new = both("tenant-a")  # limits: 1 GPU, 81920 MB, 100 % cores per pod
    sidecar = init_pod(gpu_container("app", 1, 1000, 10), gpu_container("proxy", 1, 1000, 10), sidecar=True)
    for obj in (sidecar, deployment(sidecar)):
        assert judged(new, obj) == []
        assert judged(old, obj) == ["InitContainerGpuRequest"]
    workload = read_workload("Pod", sidecar)
    assert workload is not None
    (pod,) = workload.pods
    assert pod.init_sidecars == (True,), "read, for the API server's quota (tests/placement/test_sidecar_quota.py)"
    assert per_pod.pod_asks(pod, 81920, V2_10_0) == {"gpus": 1, "gpumem": 1000, "gpucores": 10}
    together = copy.deepcopy(sidecar)
    together["spec"]["containers"].append(together["spec"].pop("initContainers")[0])
    del together["spec"]["containers"][-1]["restartPolicy"]
    assert judged(new, together) == ["PodGpuLimitExceeded"]
