"""The bind-time role against the real API server, and across its restart.

A kwokctl control plane of the real programs; pods bound as HAMi's /bind binds them (the node locked, the pod
annotated `hami.io/bind-phase=allocating`, then a Binding); process_lab.device_plugin's role watching through
the real kubectl. One pod is bound before the role starts (its list finishes it), one while it watches (its
watch does), and one after kube-apiserver was killed with KILL and started again on its data (the watch died
with it; the role lists and watches again). No hami-scheduler is needed: the pods name a scheduler that does
not run here, so that only the Binding binds them.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from process_lab.commands import zombie
from process_lab.control_plane import ControlPlane
from process_lab.device_plugin import BIND_PHASE, NODE_LOCK, BindTimeRole
from process_lab.gpu_nodes import KWOK_NODE_ANNOTATION
from tests.acceptance.helpers import wait_until

pytestmark = pytest.mark.real
NODE = "bind-time-gpu-0"
WAIT = 90  # seconds for any one condition; the role's own steps take milliseconds


@pytest.fixture(scope="module")
def control_plane(real_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane("gpulab-bind-time", real_bin, tmp_path_factory.mktemp("bind-time") / "kwok")
    plane.create()
    try:
        yield plane
    finally:
        plane.delete()


def bind(plane: ControlPlane, name: str, node_name: str = NODE) -> None:
    """What HAMi v2.8.3's Scheduler.Bind does: lock the node, annotate the pod, create the Binding."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if node_name == NODE:  # a node no kubelet and no KWOK runs: only the role acts on its pods
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(node))
    plane.kubectl("annotate", "node", node_name, "--overwrite", f"{NODE_LOCK}={stamp},default,{name}")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
    }
    plane.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    plane.kubectl("annotate", "pod", name, f"{BIND_PHASE}=allocating")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}}
    binding["target"] = {"kind": "Node", "name": node_name}
    path = f"/api/v1/namespaces/default/pods/{name}/binding"
    plane.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(binding))


def finished(plane: ControlPlane, role: BindTimeRole, name: str) -> None:
    wait_until(lambda: f"default/{name}" in role.finished, WAIT, f"{name} finished", interval=0.2)
    pod = plane.get("pod", name)
    assert pod["spec"]["nodeName"] == NODE
    assert pod["metadata"]["annotations"][BIND_PHASE] == "success"
    assert NODE_LOCK not in (plane.get("node", NODE)["metadata"].get("annotations") or {})


def test_pods_bound_before_during_and_after_an_api_server_restart_are_finished(control_plane: ControlPlane) -> None:
    bind(control_plane, "before")
    role = BindTimeRole(control_plane, watch_seconds=600)  # no watch ends on its own while this runs
    role.start()
    try:
        finished(control_plane, role, "before")  # from the list
        assert role.lists == 1
        bind(control_plane, "watched")
        finished(control_plane, role, "watched")  # from the watch: no list since
        assert role.lists == 1 and role.errors == []

        pid = int((control_plane.cluster_dir / "pids" / "kube-apiserver.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "kube-apiserver" in control_plane.start(timeout=WAIT)
        wait_until(lambda: role.lists >= 2, WAIT, "the role listing again after the restart", interval=0.2)
        bind(control_plane, "after-restart")
        finished(control_plane, role, "after-restart")
        assert role.errors, "the watch that died with the API server is not recorded"
    finally:
        role.stop()
    assert not role._thread.is_alive()
    assert sorted(role.finished) == ["default/after-restart", "default/before", "default/watched"]


def test_a_watch_the_api_server_ends_is_followed_by_a_fresh_one_without_an_error(control_plane: ControlPlane) -> None:
    """The API server ends each watch at its timeoutSeconds and kubectl then exits 0: a watch that ended as
    asked, not a failure."""
    role = BindTimeRole(control_plane, watch_seconds=1)
    role.start()
    try:
        wait_until(lambda: role.lists >= 3, WAIT, "three watches ended by the API server", interval=0.2)
        bind(control_plane, "between-watches")
        finished(control_plane, role, "between-watches")
    finally:
        role.stop()
    assert role.errors == []


def phase(plane: ControlPlane, name: str) -> str:
    return str(plane.get("pod", name).get("status", {}).get("phase"))


def test_kwok_runs_a_pod_hami_bound_only_once_the_role_released_its_nodes_lock(control_plane: ControlPlane) -> None:
    """Boundary: the real kwok-controller with the lab's flags (process_lab/control_plane.py KWOK_PATCHES). A
    kubelet starts a GPU pod only after its device plugin's Allocate, which releases HAMi's node lock: a pod
    running with the lock held makes the next GPU pod's bind fail (`has been locked within`)."""
    node = "bind-time-kwok-0"
    metadata = {"name": node, "annotations": {KWOK_NODE_ANNOTATION: "fake"}}
    fake = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(fake))

    def plain(name: str) -> None:  # a pod no device plugin takes part in, placed on the KWOK node directly
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}
        pod["spec"] = {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]}
        control_plane.kubectl("create", "-f", "-", stdin=json.dumps(pod))

    try:
        plain("plain-before")
        wait_until(lambda: phase(control_plane, "plain-before") == "Running", WAIT, "KWOK running a plain pod", 0.2)
        bind(control_plane, "held", node)  # locked and `allocating`, and no role runs yet
        plain("plain-after")
        wait_until(lambda: phase(control_plane, "plain-after") == "Running", WAIT, "KWOK running the next pod", 0.2)
        assert phase(control_plane, "held") == "Pending", "KWOK ran a pod its device plugin has not allocated"

        role = BindTimeRole(control_plane, watch_seconds=600)
        role.start()
        try:
            wait_until(lambda: phase(control_plane, "held") == "Running", WAIT, "KWOK running the finished pod", 0.05)
            # Running, and the lock is gone already: the role released it before it marked the pod.
            assert NODE_LOCK not in (control_plane.get("node", node)["metadata"].get("annotations") or {})
            assert control_plane.get("pod", "held")["metadata"]["annotations"][BIND_PHASE] == "success"
        finally:
            role.stop()
    finally:
        for name in ("plain-before", "plain-after", "held"):
            control_plane.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=false", check=False)
