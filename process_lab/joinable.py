"""Making a tenant's control plane of local processes joinable by real kubelets, as Kamaji makes a
TenantControlPlane joinable: kubeadm's own `init phase` commands run against the tenant (Kamaji runs the same
phases in its controllers: internal/resources/kubeadm_phases.go, upload-config and bootstrap-token), with a kubeconfig
whose server is the address the nodes reach (the relay of process_lab/forward.py on the lab network's gateway).

What the phases leave in the tenant (kubeadm v1.36.4 cmd/kubeadm/app/phases/uploadconfig and bootstraptoken):
the kubeadm-config and kubelet-config ConfigMaps
(the kubelet's configuration: cgroupfs as the node image's containerd, and cgroup v1 allowed), `cluster-info` in
kube-public (signed per token by the controller-manager's bootstrapsigner), and the RBAC for bootstrap tokens,
CSR approval and rotation. The token the bootstrap-token phase makes for itself is deleted at once: each join
brings its own, made on this host (scripts/join_config.py).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import yaml

from process_lab.commands import ProcessLabError, run, start_detached
from process_lab.control_plane import ControlPlane

ROOT = Path(__file__).resolve().parents[1]
PHASES = (
    ("upload-config", "kubeadm"),
    ("upload-config", "kubelet"),
    ("bootstrap-token",),
)


def join_kubeconfig(control_plane: ControlPlane, endpoint: str) -> str:
    """The admin kubeconfig, flattened (certificates inline, as scripts/join_config.py reads them), its server
    `https://<endpoint>`: what kubeadm's phases and the join material are made with. Secret: kept in memory."""
    flat = control_plane.kubectl("config", "view", "--raw", "--flatten", "--minify").stdout
    document = yaml.safe_load(flat)
    for cluster in document.get("clusters") or []:
        cluster["cluster"]["server"] = f"https://{endpoint}"
    return yaml.safe_dump(document)


def kubeadm_configuration(endpoint: str, kubernetes_version: str, pod_cidr: str, service_cidr: str) -> str:
    """A ClusterConfiguration naming the endpoint and the tenant's networks, and the KubeletConfiguration every
    joining kubelet downloads (kubelet-config): the node image's containerd runs runc with cgroupfs; this machine
    kind has cgroup v1, which kubelet v1.36 refuses unless failCgroupV1 is false; swap and the host's disk are
    the host's (kind's eviction thresholds, as the Docker lab's Kamaji patches)."""
    cluster = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "kubernetesVersion": kubernetes_version,
        "controlPlaneEndpoint": endpoint,
        "networking": {"podSubnet": pod_cidr, "serviceSubnet": service_cidr},
    }
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
    }
    return "---\n".join(json.dumps(document) + "\n" for document in (cluster, kubelet))


def make_joinable(control_plane: ControlPlane, kubeconfig: str, configuration: str, folder: Path) -> None:
    """Run kubeadm's phases against the tenant (kubeconfig and configuration in files only the owner reads, in
    the tenant's folder, removed afterwards), then delete the token the bootstrap-token phase made."""
    kubeadm = control_plane.bin_dir / "kubeadm"
    if not kubeadm.is_file():
        raise ProcessLabError(f"kubeadm is not in {control_plane.bin_dir}: run `make tools`")
    files = {"kubeconfig": folder / "kubeadm-admin.conf", "config": folder / "kubeadm.yaml"}
    try:
        for path, text in ((files["kubeconfig"], kubeconfig), (files["config"], configuration)):
            path.touch(mode=0o600)
            path.write_text(text)
        for phase in PHASES:
            argv = [kubeadm, "init", "phase", *phase, "--config", files["config"], "--kubeconfig", files["kubeconfig"]]
            run(argv, env=control_plane.env, what=f"kubeadm init phase {' '.join(phase)} on {control_plane.name}")
    finally:
        for path in files.values():
            path.unlink(missing_ok=True)
    delete_bootstrap_tokens(control_plane)


def delete_bootstrap_tokens(control_plane: ControlPlane) -> None:
    """Every bootstrap token in the tenant (none is wanted between joins: each join makes and deletes its own)."""
    listing = control_plane.get(
        "secrets", "-n", "kube-system", "--field-selector", "type=bootstrap.kubernetes.io/token"
    )
    names = [item["metadata"]["name"] for item in listing.get("items", [])]
    if names:
        control_plane.kubectl("delete", "secret", "-n", "kube-system", "--ignore-not-found", *names)


def start_relay(folder: Path, address: str, port: int, target: str) -> int:
    """process_lab.forward from `address`:`port` to the API server at `target` (host:port), in a session of its own
    (it outlives the Pulumi provider); its pid, once it listens."""
    host, target_port = target.rsplit(":", 1)
    argv = [sys.executable, "-m", "process_lab.forward", f"{folder}/relay", address, str(port), host, target_port]
    pid = start_detached(argv, env={**os.environ, "PYTHONPATH": str(ROOT)}, log=folder / "relay.log")
    deadline = time.monotonic() + 20
    while True:
        with socket.socket() as probe:
            probe.settimeout(1)
            if probe.connect_ex((address, port)) == 0:
                return pid
        if time.monotonic() > deadline:
            raise ProcessLabError(
                f"the API server relay did not listen on {address}:{port} within 20 s ({folder}/relay.log)"
            )
        time.sleep(0.1)
