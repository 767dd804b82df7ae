"""TC-19: gpulab's HAMi device plugin against a real kubelet, with HAMi's scheduler's part played by this test.

Boundary: the real kubelet v1.36.4 of gpulab's node image, its device manager (registration over the device plugin
socket, ListAndWatch into the node's allocatable, Allocate at a pod's admission, the answer's environment handed to
containerd), and the tenant's real API server. What HAMi's scheduler would write before the kubelet sees the pod
(the node lock `hami.io/mutex.lock`, the pod's `hami.io/vgpu-node`, `vgpu-devices-to-allocate`, `bind-phase:
allocating`, `bind-time`: HAMi pkg/scheduler/scheduler.go Bind, pkg/util/nodelock/nodelock.go, at v2.8.3 and v2.10.0)
is written here, as HAMi's own plugin tests write it, because the module proxy refuses HAMi and CI has none. The
plugin must then do what HAMi's NVIDIA plugin does: the environment HAMi-core reads in the container, the pod's
bind-phase `success`, the node's lock released. The same plugin under a real HAMi is judged by `make verify` on
Pulumi.nodes.yaml (TC-01..TC-12); this case runs wherever a lab has a real node that runs no device plugin of
gpulab's: a DRA tenant's node (Pulumi.nodes-without-hami.yaml's tenant-c, which CI runs).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from datetime import UTC, datetime

import pytest
from kubernetes import client

from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_RESOURCE, REGISTER_ANNOTATION
from model.hami_releases import RELEASES
from model.quantity import parse_quantity
from model.stack import stack_name
from process_lab import hami_plugin
from process_lab.hami_plugin import NodePlugin
from process_lab.stack import ProcessStack
from tests.acceptance.helpers import IDLE_COMMAND, disposable_namespace, pod_events, tenants_sharing, wait_until

LOCK = "hami.io/mutex.lock"
SHARE = {"memory": 20000, "cores": 30}
POD = "tc19"


def plugin_free_node(lab):
    """(tenant, its GPU node) for a real node that runs no device plugin of gpulab's: a DRA tenant's."""
    lab.needs_real_nodes("gpulab's HAMi device plugin and the real kubelet")
    for tenant in tenants_sharing(lab, "dra"):
        return tenant, tenant.gpu_nodes()[0]
    pytest.skip("needs a real node without gpulab's HAMi plugin: a DRA tenant's (Pulumi.nodes-without-hami.yaml)")


def container_env(node: str, namespace: str, pod: str) -> dict[str, str]:
    """The environment the kubelet handed containerd for the pod's container (its OCI spec), read on the node."""
    listed = subprocess.run(["docker", "exec", node, "ctr", "-n", "k8s.io", "containers", "ls", "-q"],
                            capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    for container_id in listed.stdout.split():
        shown = subprocess.run(["docker", "exec", node, "ctr", "-n", "k8s.io", "containers", "info", container_id],
                               capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        if shown.returncode != 0:  # gone between the list and the read
            continue
        info = json.loads(shown.stdout)
        labels = info.get("Labels") or {}
        if (labels.get("io.kubernetes.pod.namespace"), labels.get("io.kubernetes.pod.name")) != (namespace, pod):
            continue
        if labels.get("io.kubernetes.container.name") != "gpu":
            continue
        env = ((info.get("Spec") or {}).get("process") or {}).get("env") or []
        return dict(line.split("=", 1) for line in env)
    return {}


def running(api, namespace: str) -> bool:
    """Whether the pod runs; a pod the kubelet refused (Failed: UnexpectedAdmissionError when Allocate or the
    device manager said no) fails the test at once with the kubelet's words and the pod's events."""
    pod = api.read_namespaced_pod(POD, namespace)
    if pod.status.phase == "Failed":
        events = pod_events(api, namespace, POD)
        raise AssertionError(f"the kubelet refused {namespace}/{POD}: {pod.status.reason}: {pod.status.message}; "
                             f"events: {events}")  # fmt: skip
    return pod.status.phase == "Running"


def bound_pod(node: str, namespace: str, card: str, image: str) -> dict:
    """The pod as HAMi's scheduler leaves it after Bind: its cards chosen, `allocating`, bound to the node."""
    devices = f"{card},NVIDIA,{SHARE['memory']},{SHARE['cores']}:;"
    now = int(time.time())
    annotations = {
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-time": str(now),
        "hami.io/vgpu-devices-to-allocate": devices,
        "hami.io/vgpu-devices-allocated": devices,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": str(now),
    }
    limits = {GPU_RESOURCE: "1", GPUMEM_RESOURCE: str(SHARE["memory"]), GPUCORES_RESOURCE: str(SHARE["cores"])}
    container = {"name": "gpu", "image": image, "command": IDLE_COMMAND, "resources": {"limits": limits}}
    spec = {"nodeName": node, "containers": [container], "terminationGracePeriodSeconds": 0}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "annotations": annotations}, "spec": spec}


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_tc19_the_hami_plugin_registers_with_a_real_kubelet_and_allocates_as_hamis_does(lab, version: str) -> None:
    tenant, gpu_node = plugin_free_node(lab)
    node, card = gpu_node.name, gpu_node.cards[0]
    processes = ProcessStack.named(stack_name()).tenant(tenant.name)
    plugin = NodePlugin(processes, node, [dataclasses.asdict(c) for c in gpu_node.cards], version)
    api = client.CoreV1Api(lab.tenants[tenant.name])
    try:
        # Registration: the kubelet lists the plugin's resources in the node's allocatable, and the plugin writes
        # the register annotation HAMi reads (start_on_node waits for both, and says what it found if not).
        hami_plugin.start_on_node(plugin)
        allocatable = api.read_node(node).status.allocatable
        registered = {key: int(parse_quantity(allocatable[key])) for key in plugin.wanted()}
        assert registered == plugin.wanted(), registered
        # HAMi v2.10.0's health check (pkg/device/devices.go CheckHealth) reads allocatable nvidia.com/gpu > 0.
        assert registered[GPU_RESOURCE] == card.split_count * len(gpu_node.cards)
        annotation = api.read_node(node).metadata.annotations[REGISTER_ANNOTATION]
        assert [d["id"] for d in json.loads(annotation)] == [c.id for c in gpu_node.cards], annotation

        with disposable_namespace(api) as namespace:
            lock = f"{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')},{namespace},{POD}"
            api.patch_node(node, {"metadata": {"annotations": {LOCK: lock}}})
            api.create_namespaced_pod(
                namespace, bound_pod(node, namespace, card.id, lab.config.versions.workload_image)
            )
            wait_until(
                lambda: running(api, namespace),
                120,
                f"pod {namespace}/{POD} to be admitted by {node}'s kubelet (the plugin's Allocate) and Running",
            )
            env = container_env(node, namespace, POD)
            wanted = {
                "NVIDIA_VISIBLE_DEVICES": card.id,
                "CUDA_DEVICE_MEMORY_LIMIT_0": f"{SHARE['memory']}m",
                "CUDA_DEVICE_SM_LIMIT": str(SHARE["cores"]),
                "LIBCUDA_LOG_LEVEL": "1",
            }
            assert {key: env.get(key) for key in wanted} == wanted, env
            cache = env.get("CUDA_DEVICE_MEMORY_SHARED_CACHE", "")
            assert cache.startswith("/usr/local/vgpu/") and cache.endswith(".cache"), env
            annotations = api.read_namespaced_pod(POD, namespace).metadata.annotations
            assert annotations["hami.io/bind-phase"] == "success", annotations
            assert card.id not in annotations["hami.io/vgpu-devices-to-allocate"], annotations
            assert annotations["hami.io/vgpu-devices-allocated"].startswith(card.id), annotations
            assert LOCK not in (api.read_node(node).metadata.annotations or {}), "the plugin kept HAMi's node lock"
    finally:
        hami_plugin.stop(plugin)
        api.patch_node(node, {"metadata": {"annotations": {LOCK: None}}})
    assert REGISTER_ANNOTATION not in (api.read_node(node).metadata.annotations or {})
