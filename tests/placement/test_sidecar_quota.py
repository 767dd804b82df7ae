"""A native sidecar (an init container with restartPolicy: Always, Kubernetes KEP-753) is counted two ways, and gpulab
keeps both: the API server's ResourceQuota counts it beside the app containers (requests.nvidia.com/gpu:
placement/workloads.py `pod_gpus`, for `gpu_count_quota`, `make check`'s replay and the live usage), HAMi v2.10.0 as
one more init container (its quota, hami/webhook.py `quota_request`; its per-card hold; gpulab's per-pod limits,
tests/model/test_admission_policy_init_containers.py), since it reads no restartPolicy.

Kubernetes: staging/src/k8s.io/component-helpers/resource/helpers.go `aggregateContainerResourcesByFn` and
`isRestartableInitContainer` (read at kubernetes/kubernetes 0085214e, not a tag; the formula is KEP-753's "Resources
calculation for scheduling and pod admission"), which pkg/quota/v1/evaluator/core/pods.go `PodUsageFunc` calls through
`PodRequests` and `podComputeUsageHelper` turns into requests.<extended resource>. HAMi: tag v2.10.0,
pkg/scheduler/webhook.go `fitResourceQuota` 167-177 (every init container at its largest; no restartPolicy read
anywhere under pkg/).
"""

from __future__ import annotations

from typing import Any

import pytest

from hami.webhook import quota_request
from model.config import GpuQuota, PodLimits
from placement.inventory import TenantInventory
from placement.per_pod import gpu_count_quota
from placement.replay import replay
from placement.wording import evaluate_tenant
from placement.workloads import pod_gpus, read_workload
from tests.placement.test_hami_release_placement import A100S


@pytest.mark.parametrize(
    ("app", "init", "gpus"),
    [
        ([1], [], 1),
        ([1], [(2, False), (1, False)], 2),  # init containers one after the other: the largest
        ([1], [(1, True)], 2),  # a sidecar runs beside the app container
        ([1], [(1, True), (1, True)], 3),
        ([0], [(1, True), (2, False)], 3),  # an init container after a sidecar runs beside it
        ([0], [(2, False), (1, True)], 2),  # one before it does not
        ([2], [(1, False), (1, True)], 3),
    ],
)
def test_the_api_server_counts_a_sidecar_beside_what_starts_after_it(
    app: list[int], init: list[tuple[int, bool]], gpus: int
) -> None:
    """helpers.go: InitContainerUse(i) = sum(restartable init containers before i) + init container i; a
    restartable one adds to the app containers' sum; the pod asks the larger."""
    assert pod_gpus(app, init) == gpus


def pod(name: str, init: list[dict[str, Any]], app_gpus: int = 1) -> Any:
    """A Pod in namespace ns: one app container of `app_gpus` cards x 2000 MB, and the init containers `init`."""
    app = {"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": str(app_gpus), "nvidia.com/gpumem": "2000"}}}
    obj = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"initContainers": init, "containers": [app]}}
    workload = read_workload("Pod", obj)
    assert workload is not None
    return workload


def init(name: str, gpus: int, gpumem: int = 2000, restart: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "resources": {"limits": {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": str(gpumem)}},
    }
    if restart is not None:
        container["restartPolicy"] = restart
    return container


def test_only_restart_policy_always_makes_a_sidecar() -> None:
    """`isRestartableInitContainer`: restartPolicy Always. Read per GPU init container, in order; none: ()."""
    cpu_only = {"name": "cpu-only", "restartPolicy": "Always"}
    (sidecar,) = pod("s", [init("a", 1), cpu_only, init("b", 1, restart="Always")]).pods
    assert [c.name for c in sidecar.init_containers] == ["a", "b"] and sidecar.init_sidecars == (False, True)
    (plain,) = pod("p", [init("a", 1), init("b", 1, restart="Never")]).pods
    assert plain.init_sidecars == ()


def v2_10_0(gpus: int) -> TenantInventory:
    """Two A100s, the namespace's requests.nvidia.com/gpu capped at `gpus`."""
    return TenantInventory("t", A100S, PodLimits(), GpuQuota(gpus=gpus), ("ns",), hami_version="v2.10.0")


def test_the_gpu_count_quota_counts_a_sidecar_beside_the_app_containers() -> None:
    """One card of quota: a one-card init container before a one-card app container fits (1), the same as a sidecar
    does not (2): the API server refuses it at create, ExceededQuota."""
    plain = pod("plain", [init("warmup", 1)])
    sidecar = pod("sidecar", [init("proxy", 1, restart="Always")])
    assert gpu_count_quota(v2_10_0(1), plain.pods) == []
    (over,) = gpu_count_quota(v2_10_0(1), sidecar.pods)
    assert (over.asks, over.limit, over.used) == (2, 1, 0)
    assert [f.reason for f in evaluate_tenant(v2_10_0(1), [sidecar])] == ["ExceededQuota"]
    assert [f.reason for f in evaluate_tenant(v2_10_0(2), [sidecar])] == []


def test_make_check_s_run_counts_a_sidecar_against_the_gpu_quota() -> None:
    """placement/replay.py: what the pods leave counted against requests.nvidia.com/gpu."""
    run = replay(v2_10_0(4), [pod("plain", [init("warmup", 1)]), pod("sidecar", [init("proxy", 1, restart="Always")])])
    assert run.inventory.namespace_usage["ns"].gpus == 1 + 2


def test_hami_s_own_quota_counts_a_sidecar_as_an_init_container() -> None:
    """webhook.go `fitResourceQuota` 167-179: max(app containers' sum, largest init container), restartPolicy unread;
    a sidecar of 8000 MB beside a 2000 MB app container is 8000 MB to HAMi (10000 MB to the API server's own
    count, were it to count HAMi's keys)."""
    (sidecar,) = pod("sidecar", [init("proxy", 1, gpumem=8000, restart="Always")]).pods
    assert quota_request(sidecar) == (8000, 0)
