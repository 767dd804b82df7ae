"""The bind-time role against the real API server, and across its restart (issue 41 item 2).

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


def bind(plane: ControlPlane, name: str) -> None:
    """What HAMi v2.8.3's Scheduler.Bind does: lock the node, annotate the pod, create the Binding."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(node))
    plane.kubectl("annotate", "node", NODE, "--overwrite", f"{NODE_LOCK}={stamp},default,{name}")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
    }
    plane.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    plane.kubectl("annotate", "pod", name, f"{BIND_PHASE}=allocating")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}}
    binding["target"] = {"kind": "Node", "name": NODE}
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
