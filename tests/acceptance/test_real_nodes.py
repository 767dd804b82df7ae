"""TC-12, TC-13: what a real kubelet does to the lab (`make verify` on a stack with workers: containers).

Boundary: the real kubelet v1.36.4 in a container of gpulab's node image, under systemd (its unit restarts it),
rewriting its node's status and deleting its node's ResourceSlices when it starts. The GPU inventory gpulab
patched onto the node (or, for a DRA tenant, the slice gpulab's DRA kubelet plugin publishes) must survive the
kubelet's own restart and its death; and no node of the lab may ever pull an image (its network is --internal).
"""

from __future__ import annotations

import subprocess
from datetime import datetime

import pytest
from kubernetes import client

from model import dra
from model.catalog import totals
from model.quantity import parse_quantity
from tests.acceptance.helpers import (
    IDLE_COMMAND,
    SUITE_LABEL,
    disposable_namespace,
    image_pull_problem,
    pod_events,
    wait_until,
)


def on_node(container: str, *command: str) -> str:
    """A command in a node container (named as its node: model/node_container.py), bounded."""
    done = subprocess.run(
        ["docker", "exec", container, *command], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"docker exec {container} {' '.join(command)}: {done.stderr.strip()[:300]}"
    return done.stdout.strip()


def kubelet_pid(container: str) -> str:
    return on_node(container, "systemctl", "show", "--property", "MainPID", "--value", "kubelet")


def ready_heartbeat(node: client.V1Node) -> tuple[str, datetime | None]:
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    return ready.status, ready.last_heartbeat_time


def gpu_allocatable(node: client.V1Node) -> dict[str, int]:
    items = node.status.allocatable.items()
    return {key: int(parse_quantity(value)) for key, value in items if key.startswith("nvidia.com/")}


def kubelet_comes_back(api: client.CoreV1Api, name: str, how: str) -> client.V1Node:
    """`how` done to the kubelet of node container `name`; the node once systemd runs a new kubelet and that
    kubelet has posted a Ready status. A kubelet posts its node's whole status when it starts (kubelet v1.36
    pkg/kubelet/kubelet_node_status.go), so what is read then has been through the post that would drop it."""
    pid = kubelet_pid(name)
    _, heartbeat = ready_heartbeat(api.read_node(name))
    since = int(on_node(name, "date", "+%s"))
    if how == "systemctl restart":
        on_node(name, "systemctl", "restart", "kubelet")
    else:
        on_node(name, "kill", "-KILL", pid)

    def posted_again() -> client.V1Node | None:
        if kubelet_pid(name) in {"0", pid}:
            return None
        node = api.read_node(name)
        status, posted = ready_heartbeat(node)
        fresh = posted is not None and posted != heartbeat and posted.timestamp() >= since
        return node if status == "True" and fresh else None

    return wait_until(posted_again, 120, f"a new kubelet on {name} to post a Ready status after `{how}`")


@pytest.mark.parametrize("how", ["systemctl restart", "kill -KILL"])
def test_tc12_the_gpu_inventory_outlives_a_kubelet_restart_and_a_killed_kubelet(lab, how: str) -> None:
    lab.needs_real_nodes("a real kubelet restarted on its node")
    for tenant in lab.config.tenants:
        name = tenant.gpu_node_name()
        api = client.CoreV1Api(lab.tenants[tenant.name])
        if tenant.gpu_sharing == "dra":
            # A kubelet that starts deletes its node's slices of every driver (kubernetes v1.36.4
            # pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, wipeResourceSlices, in the background): gpulab's
            # plugin, registered with the new kubelet, publishes them again, as a new slice.
            declared_devices = sorted(dra.device_name(card) for card in tenant.gpu_nodes()[0].cards)
            before, devices = published_slice(lab.tenants[tenant.name], name)
            assert devices == declared_devices, f"{name} before the {how}"
            kubelet_comes_back(api, name, how)

            def republished(t=tenant, n=name, b=before, d=declared_devices) -> bool:
                uid, devices = published_slice(lab.tenants[t.name], n)
                return uid is not None and uid != b and devices == d

            wait_until(republished, 180, f"a new ResourceSlice of {name} with its devices after the kubelet's `{how}`")
            continue
        declared = totals(tenant.gpu_nodes()[0].cards)
        assert gpu_allocatable(api.read_node(name)) == declared, f"{name} before the {how}"
        node = kubelet_comes_back(api, name, how)
        if lab.config.runs_hami(tenant):
            # HAMi's device plugin (gpulab-hami-plugin) registers the cards with the kubelet: a kubelet that starts
            # reports them at 0 until the plugin has registered with it again (it watches the kubelet's socket).
            def registered(a=api, n=name, d=declared) -> bool:
                return gpu_allocatable(a.read_node(n)) == d

            wait_until(registered, 180, f"{name}'s GPUs registered again by its device plugin after the `{how}`")
            continue
        assert gpu_allocatable(node) == declared, f"{name} after the kubelet's `{how}`"


def published_slice(api_client: client.ApiClient, node: str) -> tuple[str | None, list[str]]:
    """The uid of the node's ResourceSlice of gpulab's driver (None when there is none) and its device names."""
    selector = f"spec.nodeName={node},spec.driver={dra.DRIVER}"
    found = client.CustomObjectsApi(api_client).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=selector
    )["items"]
    uid = found[0]["metadata"]["uid"] if len(found) == 1 else None
    return uid, sorted(device["name"] for item in found for device in item["spec"].get("devices") or [])


def pulled_messages(core: client.CoreV1Api, node: str, image: str) -> list[str]:
    """A pod of `image` on `node`, with Kubernetes' default pull policy for a tagged image (IfNotPresent), Running;
    what its kubelet's `Pulled` events said. A pull problem is named at once."""
    with disposable_namespace(core, "gpulab-acceptance-tc13") as namespace:
        container = {"name": "idle", "image": image, "imagePullPolicy": "IfNotPresent", "command": IDLE_COMMAND}
        spec = {"terminationGracePeriodSeconds": 1, "nodeName": node, "containers": [container]}
        core.create_namespaced_pod(
            namespace, {"metadata": {"name": "tc13", "labels": {SUITE_LABEL: "true"}}, "spec": spec}
        )

        def running() -> client.V1Pod | None:
            found = core.read_namespaced_pod("tc13", namespace)
            problem = image_pull_problem(found)
            assert problem is None, problem
            return found if found.status.phase == "Running" else None

        wait_until(running, 120, f"pod {namespace}/tc13 on {node} to be Running")
        return wait_until(
            lambda: [message for reason, message in pod_events(core, namespace, "tc13") if reason == "Pulled"],
            60,
            f"the kubelet's Pulled event for {namespace}/tc13",
        )


def test_tc13_no_node_of_the_lab_pulled_an_image(lab) -> None:
    """Every image a node runs was in its containerd before it was needed. Per tenant, a pod of the lab's workload
    image runs and its kubelet says the image was already present; and no event of the lab shows a pull
    (`Pulling`, a failed pull) or a pod refused for an image it would have had to pull (ErrImageNeverPull). The pod
    is the test's own: the lab's events expire after an hour (kube-apiserver --event-ttl), and tenant-b's node runs
    no pod of the lab's."""
    lab.needs_real_nodes("a real kubelet's image events")
    for tenant in lab.config.tenants:
        core = client.CoreV1Api(lab.tenants[tenant.name])
        said = pulled_messages(core, tenant.gpu_node_name(), lab.config.versions.workload_image)
        assert all("already present" in message for message in said), f"tenant {tenant.name}'s kubelet: {said}"
        events = core.list_event_for_all_namespaces().items
        pulls = [
            f"{e.involved_object.namespace}/{e.involved_object.name}: {e.reason}: {e.message}"
            for e in events
            if e.reason in {"Pulling", "ErrImageNeverPull"} or (e.reason == "Failed" and "pull" in (e.message or ""))
        ]
        assert not pulls, f"lab error: tenant {tenant.name}'s node asked for images it should hold: {pulls}"
