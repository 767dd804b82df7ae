"""gpulab's node image (`make node-image`), run on the real engine and held to the node contract.

Boundary: the built image as Docker runs a kind node (kind's flags: privileged, seccomp unconfined, tmpfs /tmp and
/run, an anonymous /var, /lib/modules read-only, a private cgroup namespace), on an `--internal` network of its own:
systemd boots as PID 1, containerd answers, every item of model/node_contract.py is there, and containerd runs a
nested container, through the runc wrapper where the machine's bounding set lacks CAP_SYS_RESOURCE. The same
contract is held for kindest/node offline (tests/model/test_node_contract.py). Every container and network made here is
removed. Without an engine or the image: one skip line here, a failure in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from model import node_contract as contract
from tests.acceptance.helpers import wait_until
from tests.real.host import docker, unavailable
from tools.build import required_version

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]
BOOT_WAIT = 120  # seconds for systemd to finish booting the node
KIND_FLAGS = (
    "--privileged",
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "apparmor=unconfined",
    "--cgroupns",
    "private",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    "/run",
    "-v",
    "/var",
    "-v",
    "/lib/modules:/lib/modules:ro",
)
WRAPPER = "/usr/local/sbin/gpulab-runc"
SYS_RESOURCE_BIT = 1 << 24


def pinned_kubernetes() -> str:
    return required_version((ROOT / "tools" / "kubernetes" / "go.mod").read_text(), "k8s.io/kubernetes")


NODE = contract.gpulab_node(pinned_kubernetes())
IMAGE = os.environ.get("GPULAB_NODE_IMAGE") or NODE.reference


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    try:
        answers = docker("info", check=False).returncode == 0
    except FileNotFoundError:
        answers = False
    if not answers:
        unavailable("no Docker engine answers: `bash hack/docker-engine.sh start` gives one (as root)")
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        unavailable(f"{IMAGE} is not in the engine: `make node-image` builds it")
    suffix = uuid.uuid4().hex[:8]
    network, name = f"gpulab-test-{suffix}", f"gpulab-node-test-{suffix}"
    docker("network", "create", "--internal", network)
    try:
        docker("run", "-d", "--name", name, "--hostname", name, *KIND_FLAGS, "--network", network, IMAGE)

        def booted() -> str:
            state = docker("exec", name, "systemctl", "is-system-running", check=False).stdout.strip()
            return state if state in contract.BOOTED_STATES else ""

        wait_until(booted, BOOT_WAIT, f"systemd in {name} to be {' or '.join(contract.BOOTED_STATES)}", interval=1)
        yield name
    finally:
        docker("rm", "-f", "-v", name, check=False)
        docker("network", "rm", network, check=False)
        assert name not in docker("ps", "-a", "--format", "{{.Names}}").stdout
        assert network not in docker("network", "ls", "--format", "{{.Name}}").stdout


def on_node(name: str, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return docker("exec", name, *command, check=check)


def test_systemd_is_pid_1_and_nothing_failed(node: str) -> None:
    assert on_node(node, "cat", "/proc/1/comm").stdout.strip() == contract.PID1
    failed = on_node(node, "systemctl", "list-units", "--failed", "--plain", "--no-legend").stdout
    assert failed.strip() == "", failed


def test_containerd_answers_on_its_socket(node: str) -> None:
    on_node(node, "test", "-S", contract.CONTAINERD_SOCKET)
    version = on_node(
        node, "ctr", "--address", contract.CONTAINERD_SOCKET, f"--namespace={contract.CTR_NAMESPACE}", "version"
    )
    assert "Server:" in version.stdout


def test_the_programs_gpulab_runs_in_a_node_are_on_its_path(node: str) -> None:
    script = "".join(f'command -v {program} >/dev/null || echo "{program}"; ' for program in contract.PROGRAMS)
    missing = on_node(node, "sh", "-c", script).stdout.split()
    assert missing == []
    assert on_node(node, "kubeadm", "version", "-o", "short").stdout.strip() == pinned_kubernetes()
    assert on_node(node, "kubelet", "--version").stdout.strip() == f"Kubernetes {pinned_kubernetes()}"


def test_the_kubelet_unit_is_enabled_with_kubeadms_dropin(node: str) -> None:
    assert on_node(node, "systemctl", "is-enabled", contract.KUBELET_UNIT).stdout.strip() == "enabled"
    shown = on_node(node, "systemctl", "show", "-p", "DropInPaths", "-p", "ExecStart", contract.KUBELET_UNIT).stdout
    assert contract.KUBEADM_DROPIN in shown
    assert f"path={NODE.kubelet_path}" in shown
    dropin = on_node(node, "cat", contract.KUBEADM_DROPIN).stdout
    for text in (
        *contract.KUBEADM_DROPIN_FLAGS,
        *contract.KUBEADM_DROPIN_ENVIRONMENT,
        *contract.KUBEADM_DROPIN_VARIABLES,
    ):
        assert text in dropin


def test_the_cni_folders_hold_the_plugins(node: str) -> None:
    on_node(node, "test", "-d", contract.CNI_CONF_DIR)
    for plugin in (*contract.CNI_PLUGINS, *NODE.extra_cni_plugins):
        on_node(node, "test", "-x", f"{contract.CNI_BIN_DIR}/{plugin}")


def test_containerd_holds_its_sandbox_image_and_the_workload_image(node: str) -> None:
    images = on_node(node, "ctr", f"--namespace={contract.CTR_NAMESPACE}", "images", "ls", "-q").stdout.split()
    assert NODE.sandbox_image in images and NODE.workload_image in images
    config = on_node(node, "containerd", "config", "dump").stdout
    assert f'sandbox_image = "{NODE.sandbox_image}"' in config
    assert f'BinaryName = "{WRAPPER}"' in config
    assert f"SystemdCgroup = {'true' if NODE.cgroup_driver == 'systemd' else 'false'}" in config


def test_containerd_runs_a_nested_container(node: str) -> None:
    ctr = ("ctr", f"--namespace={contract.CTR_NAMESPACE}", "run", "--rm")
    ran = on_node(node, *ctr, NODE.workload_image, "nested-1", "sh", "-c", "echo ran")
    assert ran.stdout.strip() == "ran"


def test_the_runc_wrapper_runs_what_a_kubelet_asks_for(node: str) -> None:
    """A spec as the CRI makes a pod sandbox's: CAP_SYS_RESOURCE in its capabilities and an oomScoreAdj below the
    node's (-998 for a sandbox; -1000 here). Where the bounding set lacks the capability, runc alone fails on it
    and the wrapper runs it; where it holds it, the wrapper is a passthrough and both run."""
    bounding = on_node(node, "sed", "-n", "s/^CapBnd:[[:space:]]*//p", "/proc/self/status").stdout.strip()
    lacks = not int(bounding, 16) & SYS_RESOURCE_BIT
    rootfs, mounted = "/var/tmp/gpulab-test-rootfs", "/var/tmp/gpulab-test-spec.json"
    images = ("ctr", f"--namespace={contract.CTR_NAMESPACE}", "images")
    on_node(node, "mkdir", "-p", rootfs)
    on_node(node, *images, "mount", NODE.workload_image, rootfs)
    try:
        spec = json.loads(on_node(node, "ctr", "oci", "spec").stdout)
        spec["root"] = {"path": rootfs, "readonly": True}
        spec["process"]["args"] = ["/bin/sh", "-c", "cat /proc/self/oom_score_adj"]
        spec["process"]["oomScoreAdj"] = -1000
        for name, held in spec["process"]["capabilities"].items():
            spec["process"]["capabilities"][name] = [*held, "CAP_SYS_RESOURCE"]
        subprocess.run(
            ["docker", "exec", "-i", node, "sh", "-c", f"cat >{mounted}"],
            input=json.dumps(spec),
            text=True,
            check=True,
            timeout=30,
        )
        run = ("ctr", f"--namespace={contract.CTR_NAMESPACE}", "run", "--rm", "--config", mounted)
        wrapped = on_node(node, *run, "--runc-binary", WRAPPER, "nested-2", check=False)
        assert wrapped.returncode == 0, wrapped.stderr
        adjusted = int(wrapped.stdout.strip())
        plain = on_node(node, *run, "--runc-binary", "/usr/sbin/runc", "nested-3", check=False)
        if lacks:
            assert adjusted > -1000  # raised to the wrapper's own value
            assert plain.returncode != 0, "runc alone ran a spec this machine's bounding set cannot give"
        else:
            assert adjusted == -1000 and plain.returncode == 0, plain.stderr
    finally:
        on_node(node, *images, "unmount", rootfs, check=False)
