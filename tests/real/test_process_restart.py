"""A user's objects survive every process of a process-mode tenant dying, and no process dies of a starved API server.

`make up STACK=sim` refreshes first: each resource's provider reads what it finds, then diffs the program's
inputs against that and creates, updates, replaces or keeps. Here the same providers (components/
process/) go through the same steps against the real programs: kwokctl's process management (pid
files, `kwokctl start cluster`), etcd's data on disk, the API server, kwok-controller; the processes die by
kill -9, as a crash or the OOM killer ends them, and all at once, as a reboot does (their folders kept). Where a
hami-scheduler binary exists, HAMi dies too. Before this issue each of these ended in a fresh etcd: the
ConfigMap and the Pod made with kubectl below were gone and `make up` said only "replaced".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.process.control_plane import ControlPlaneProvider
from components.process.gpu_node import GpuInventoryProvider, HamiProvider
from components.process.kwok_workers import KwokNodesProvider
from components.process.lifecycle import instance_of
from process_lab import node_inventory
from process_lab.commands import zombie
from process_lab.control_plane import COMPONENTS, ControlPlane, lost_data
from process_lab.hami_scheduler import find_hami_scheduler
from process_lab.resume import stopped_control_planes
from process_lab.stack import TenantProcesses
from tests.acceptance.helpers import wait_until

pytestmark = pytest.mark.real
CLUSTER = "gpulab-restart"
NODE = "restart-gpu-0"
REGISTER = '[{"id":"GPU-MOCK-restart-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100","health":true}]'
CAPACITY = {"nvidia.com/gpu": 10, "nvidia.com/gpumem": 81920, "nvidia.com/gpucores": 100}
# component-base's leader-election defaults for both programs (k8s.io/component-base config/v1alpha1 defaults.go:
# leaseDuration 15 s, renewDeadline 10 s): a stop of the API server longer than both loses any lease.
LEASE_FAULT = 15 + 10


def settle(provider, id_: str, state: dict[str, Any], inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What `pulumi up --refresh` does with one resource after its read: diff the program's inputs against the
    state, then keep, update or replace (delete first, as these providers ask)."""
    diff = provider.diff(id_, state, inputs)
    if diff.replaces:
        provider.delete(id_, state)
        return "replaced", provider.create(inputs).outs
    if diff.changes:
        return "updated", provider.update(id_, state, inputs).outs
    return "kept", state


class Tenant:
    """One tenant's resources as the program declares them, and their state as the engine keeps it."""

    def __init__(self, bin_dir: Path, folder: Path, hami: Path | None) -> None:
        record = TenantProcesses(CLUSTER, bin_dir, folder)  # what the program gives every resource
        self.control_plane_inputs = {**record.props(), "running": True}
        outs = ControlPlaneProvider().create(dict(self.control_plane_inputs)).outs
        self.resources: dict[str, list] = {"control_plane": [ControlPlaneProvider(), folder, outs, None]}
        self.control_plane = ControlPlane(CLUSTER, bin_dir, folder / "kwok")
        base: dict[str, Any] = record.props()
        base["control_plane"] = instance_of(outs["kubeconfig"])
        dependents = {"nodes": (KwokNodesProvider(), {**base, "nodes": [NODE]})}
        if hami is not None:
            settings = {"node_scheduler_policy": "binpack", "gpu_scheduler_policy": "spread"}
            settings |= {"node_lock_timeout": "2s", "split_count": 10}
            hami_inputs = {**base, "hami_binary": str(hami), "hami_port": outs["hami_port"]}
            hami_inputs |= {"hami_metrics_port": outs["hami_metrics_port"], "settings": settings}
            dependents["hami"] = (HamiProvider(), {**hami_inputs, "hami_pid": None, "bind_time_pid": None})
        dependents["inventory"] = (GpuInventoryProvider(), {**base, "node": NODE, "register": REGISTER})
        dependents["inventory"][1]["capacity"] = CAPACITY
        with pytest.MonkeyPatch.context() as patch:
            if hami is None:  # nothing takes the node's cards in: the inventory is written, not awaited
                patch.setattr(node_inventory, "wait_for_registered", lambda *_args, **_kwargs: None)
            for key, (provider, inputs) in dependents.items():
                inputs["running"] = True
                result = provider.create(dict(inputs))
                self.resources[key] = [provider, result.id, result.outs, inputs]
        self.resources["control_plane"][3] = self.control_plane_inputs

    def refresh_and_up(self) -> dict[str, str]:
        """Every read first (a refresh), then each resource in dependency order; what happened to each."""
        read = {
            key: provider.read(str(id_), dict(state)).outs for key, (provider, id_, state, _) in self.resources.items()
        }
        happened = {}
        for key, entry in self.resources.items():
            provider, id_, _, inputs = entry
            happened[key], entry[2] = settle(provider, str(id_), read[key], dict(inputs))
        return happened

    def kubectl(self, *args: str, stdin: str | None = None):
        return self.control_plane.kubectl(*args, stdin=stdin)

    def pids(self) -> dict[str, int]:
        pids = {name: int((self.control_plane.cluster_dir / "pids" / f"{name}.pid").read_text()) for name in COMPONENTS}
        state = self.resources.get("hami", [None, None, {}])[2]
        pids |= {key: int(state[key]) for key in ("hami_pid", "bind_time_pid") if state.get(key)}
        return pids

    def delete(self) -> None:
        for provider, id_, state, _ in reversed(list(self.resources.values())):
            provider.delete(str(id_), state)


def kill_hard(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not zombie(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert zombie(pid), f"pid {pid} still runs after KILL"


@pytest.fixture(scope="module")
def tenant(real_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    made = Tenant(real_bin, tmp_path_factory.mktemp("restart") / "tenant", find_hami_scheduler(real_bin))
    made.kubectl("create", "configmap", "made-by-a-user", "--from-literal=keep=me")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "users-pod", "namespace": "default"},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]},
    }
    made.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    try:
        yield made
    finally:
        made.delete()


def users_objects_survive(tenant: Tenant) -> None:
    data = json.loads(tenant.kubectl("get", "configmap", "made-by-a-user", "-o", "json").stdout)["data"]
    assert data == {"keep": "me"}
    pod = json.loads(tenant.kubectl("get", "pod", "users-pod", "-o", "json").stdout)
    assert pod["spec"]["nodeName"] == NODE
    node = json.loads(tenant.kubectl("get", "node", NODE, "-o", "json").stdout)
    assert node["metadata"]["annotations"]["hami.io/node-nvidia-register"] == REGISTER


HAMI = ("hami_pid", "bind_time_pid")


@pytest.mark.parametrize(
    "victims",
    [*[(name,) for name in COMPONENTS], HAMI, (*COMPONENTS, *HAMI)],
    ids=[*COMPONENTS, "hami", "all-as-after-a-reboot"],
)
def test_a_users_objects_survive_kill_9_and_make_up(tenant: Tenant, victims: tuple[str, ...]) -> None:
    pids = tenant.pids()
    if set(victims) == set(HAMI) and "hami_pid" not in pids:
        pytest.skip("no hami-scheduler binary (GPULAB_HAMI_SCHEDULER): HAMi's death is not tried")
    kubeconfig = tenant.control_plane.kubeconfig.read_text()
    for victim in victims:
        if victim in pids:
            kill_hard(pids[victim])
    happened = tenant.refresh_and_up()
    killed_control_plane = bool(set(victims) & set(COMPONENTS))
    assert happened["control_plane"] == ("updated" if killed_control_plane else "kept"), happened
    assert happened["nodes"] == "kept" and happened["inventory"] == "kept", happened
    if "hami" in happened:
        assert happened["hami"] == ("updated" if set(victims) & set(HAMI) else "kept"), happened
    assert not tenant.control_plane.stopped_components()
    assert tenant.control_plane.kubeconfig.read_text() == kubeconfig, "a saved kubeconfig stops working"
    users_objects_survive(tenant)
    assert tenant.refresh_and_up() == dict.fromkeys(happened, "kept"), "a second make up changes nothing"


def test_a_starved_api_server_stops_no_control_plane_process(tenant: Tenant) -> None:
    """Boundary: client-go's leader election in the real kube-controller-manager and kube-scheduler v1.36.4: a
    leader that cannot renew its lease within the renew deadline (10 s) exits. The API server stopped (SIGSTOP, as
    a host starved of CPU leaves it) for longer than that, then continued: with one instance each and no leader
    election, every process still runs and the tenant reconciles (its controllers make a ReplicaSet's pods)."""
    before = tenant.pids()
    apiserver = before["kube-apiserver"]
    os.kill(apiserver, signal.SIGSTOP)
    try:
        # The fault lasts past the deadlines a leader would miss; no state of the stopped API server to poll.
        time.sleep(LEASE_FAULT)
    finally:
        os.kill(apiserver, signal.SIGCONT)
    tenant.control_plane.wait_ready(120)
    gone = [name for name, pid in before.items() if zombie(pid) or not Path(f"/proc/{pid}").exists()]
    assert not gone, f"exited while the API server was stopped: {gone}"
    assert tenant.control_plane.stopped_components() == []
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "after-the-stop", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "after-the-stop"}},
            "template": {
                "metadata": {"labels": {"app": "after-the-stop"}},
                "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    tenant.kubectl("apply", "-f", "-", stdin=json.dumps(deployment))
    wait_until(
        lambda: tenant.kubectl("get", "pods", "-l", "app=after-the-stop", "-o", "name").stdout.strip(),
        120, "kube-controller-manager to make the Deployment's pod after the stop",
    )  # fmt: skip
    tenant.kubectl("delete", "deployment", "after-the-stop", "--wait=false")


def test_a_foreground_delete_held_by_a_killed_controller_manager_ends_once_make_down_starts_it(
    tenant: Tenant,
) -> None:
    """Boundary: the real API server keeps an object deleted in the foreground, with its `foregroundDeletion`
    finalizer, until kube-controller-manager's garbage collector removes it; with that process killed, nothing
    does (seen: `make down` held over 35 minutes by a ValidatingAdmissionPolicyBinding). What `make down` runs
    first (process_lab/resume.py) starts it again, and the delete ends."""
    kill_hard(tenant.pids()["kube-controller-manager"])
    tenant.kubectl("create", "configmap", "held-by-the-finalizer", "--from-literal=a=b")
    tenant.kubectl("delete", "configmap", "held-by-the-finalizer", "--cascade=foreground", "--wait=false")
    held = json.loads(tenant.kubectl("get", "configmap", "held-by-the-finalizer", "-o", "json").stdout)
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"] and held["metadata"].get("deletionTimestamp")
    stack_folder = tenant.control_plane.workdir.parent.parent
    [(_, stopped)] = stopped_control_planes(stack_folder, tenant.control_plane.bin_dir)
    assert stopped.start() == ["kube-controller-manager"]
    wait_until(
        lambda: "NotFound" in tenant.control_plane.kubectl(
            "get", "configmap", "held-by-the-finalizer", check=False
        ).stderr,
        120, "the garbage collector to finish the foreground deletion",
    )  # fmt: skip


def test_only_a_control_plane_whose_data_is_gone_is_made_anew_and_says_so(real_bin: Path, tmp_path: Path) -> None:
    inputs = {"name": "gpulab-lost", "bin_dir": str(real_bin), "folder": str(tmp_path / "lost"), "running": True}
    provider = ControlPlaneProvider()
    state = provider.create(dict(inputs)).outs
    control_plane = ControlPlane("gpulab-lost", real_bin, tmp_path / "lost" / "kwok")
    try:
        control_plane.kubectl("create", "configmap", "made-by-a-user")
        assert lost_data("tenant-x", control_plane, recorded=True) is None
        for name in COMPONENTS:
            kill_hard(int((control_plane.cluster_dir / "pids" / f"{name}.pid").read_text()))
        for path in sorted(control_plane.data_dir.rglob("*"), reverse=True):  # etcd's files, deleted by hand
            path.unlink() if path.is_file() else path.rmdir()
        message = lost_data("tenant-x", control_plane, recorded=True)
        assert message is not None and "\n" not in message
        assert message.startswith("tenant tenant-x: its control plane's data is gone") and "is lost" in message
        happened, state = settle(provider, str(tmp_path / "lost"), provider.read("id", dict(state)).outs, inputs)
        assert happened == "replaced"
        assert control_plane.kubectl("get", "configmap", "made-by-a-user", check=False).returncode != 0
    finally:
        provider.delete("id", state)


def test_make_up_starts_a_stopped_control_plane_before_the_engine_looks(tenant: Tenant) -> None:
    """make up runs process_lab.resume before `pulumi up`: the engine configures a tenant's Kubernetes provider
    before any read, and pulumi-kubernetes fails every object of a cluster that did not answer then (seen: 5
    errored, `configured Kubernetes cluster is unreachable`). After it, the refresh finds the control plane
    running."""
    from process_lab.resume import stopped_control_planes

    for name in COMPONENTS:
        kill_hard(tenant.pids()[name])
    stack_folder = tenant.control_plane.workdir.parent.parent
    found = stopped_control_planes(stack_folder, tenant.control_plane.bin_dir)
    assert [(name, plane.name) for name, plane in found] == [("tenant", CLUSTER)]
    assert found[0][1].start() == list(COMPONENTS)
    assert stopped_control_planes(stack_folder, tenant.control_plane.bin_dir) == []
    assert tenant.refresh_and_up()["control_plane"] == "kept"
    users_objects_survive(tenant)


def test_the_kubeconfig_output_works_from_another_folder_without_the_certificate_files(
    tenant: Tenant, tmp_path: Path
) -> None:
    """The control plane's kubeconfig output (tenant_<name>_kubeconfig) as a user saves it, in a folder of their
    own: the real kubectl reaches the API server with it, from there, naming no file of the lab's folder (kwokctl's
    own kubeconfig names its certificate files)."""
    saved = tmp_path / "elsewhere" / "tenant.kubeconfig"
    saved.parent.mkdir()
    saved.write_text(tenant.resources["control_plane"][2]["kubeconfig"])
    assert str(tenant.control_plane.workdir) not in saved.read_text()
    document = yaml.safe_load(saved.read_text())
    named = [entry["cluster"] for entry in document["clusters"]] + [entry["user"] for entry in document["users"]]
    assert not [
        key for entry in named for key in ("certificate-authority", "client-certificate", "client-key") if key in entry
    ]
    result = subprocess.run(
        [str(tenant.control_plane.bin_dir / "kubectl"), f"--kubeconfig={saved.name}", "get", "--raw", "/readyz"],
        cwd=saved.parent,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout.strip()) == (0, "ok"), result.stderr


def test_a_deleted_inventory_removes_only_the_register_annotation_it_wrote(tenant: Tenant) -> None:
    """Boundary: the real API server's JSON patch, whose `test` operation fails the whole patch (422) when the value
    differs. An upgrade to HAMi's device plugin creates the plugin before it deletes the inventory; the plugin has
    written the annotation by then and writes it once per start, so the inventory's delete must leave any value it
    did not write, and remove its own."""
    _, _, state, _ = tenant.resources["inventory"]
    inventory = node_inventory.NodeInventory.from_props(state)

    def annotation() -> str | None:
        node = json.loads(tenant.kubectl("get", "node", NODE, "-o", "json").stdout)
        return node["metadata"].get("annotations", {}).get("hami.io/node-nvidia-register")

    others = REGISTER.replace('"health":true', '"health":true,"mode":"hami-core"')  # as a plugin would write it
    try:
        tenant.kubectl("annotate", "node", NODE, "--overwrite", f"hami.io/node-nvidia-register={others}")
        node_inventory.take_off(inventory)
        assert annotation() == others, "the inventory's delete removed an annotation it did not write"
        tenant.kubectl("annotate", "node", NODE, "--overwrite", f"hami.io/node-nvidia-register={REGISTER}")
        node_inventory.take_off(inventory)
        assert annotation() is None, "the inventory's delete left the annotation it wrote"
        node_inventory.take_off(inventory)  # nothing left to remove: the failed test is not an error
    finally:  # the fixture's node as the other tests find it
        tenant.kubectl("annotate", "node", NODE, "--overwrite", f"hami.io/node-nvidia-register={REGISTER}")
