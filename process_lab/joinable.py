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

from process_lab.commands import ProcessLabError, free_port, run, start_detached
from process_lab.control_plane import ControlPlane
from process_lab.stack import JoinSettings

ROOT = Path(__file__).resolve().parents[1]
PHASES = (
    ("upload-config", "kubeadm"),
    ("upload-config", "kubelet"),
    ("bootstrap-token",),
)


def open_to_nodes(control_plane: ControlPlane, kubeconfig: str, join: JoinSettings, folder: Path) -> tuple[str, int]:
    """The relay from the lab network's gateway to the API server the admin `kubeconfig` (self-contained) names,
    then kubeadm's phases against the tenant through it: the endpoint nodes join (address:port) and the relay's
    pid."""
    port = free_port()
    relay = start_relay(folder, join.bind_address, port, server_of(kubeconfig).removeprefix("https://"))
    endpoint = f"{join.bind_address}:{port}"
    configuration = kubeadm_configuration(endpoint, join.kubernetes_version, join.pod_cidr, join.service_cidr)
    make_joinable(control_plane, join_kubeconfig(kubeconfig, endpoint), configuration, folder)
    return endpoint, relay


def join_kubeconfig(kubeconfig: str, endpoint: str) -> str:
    """A self-contained admin kubeconfig (certificates inline, as scripts/join_config.py reads them) with its
    server `https://<endpoint>`: what kubeadm's phases and the join material are made with. Secret: kept in
    memory."""
    document = yaml.safe_load(kubeconfig)
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
    the tenant's folder, removed afterwards), then delete the token the bootstrap-token phase made: none is
    wanted between joins, each join makes and deletes its own."""
    kubeadm = control_plane.bin_dir / "kubeadm"
    if not kubeadm.is_file():
        raise ProcessLabError(f"kubeadm is not in {control_plane.bin_dir}: run `make tools`")
    files = {"kubeconfig": folder / "kubeadm-admin.conf", "config": folder / "kubeadm.yaml"}
    options = ["--config", files["config"], "--kubeconfig", files["kubeconfig"]]
    steps = [
        ([kubeadm, "init", "phase", *phase, *options], f"kubeadm init phase {' '.join(phase)}") for phase in PHASES
    ]
    tokens = ["delete", "secrets", "-n", "kube-system", "--field-selector", "type=bootstrap.kubernetes.io/token"]
    steps.append(([*control_plane.kubectl_argv(30), *tokens], "deleting the bootstrap tokens"))
    try:
        for path, text in ((files["kubeconfig"], kubeconfig), (files["config"], configuration)):
            path.touch(mode=0o600)
            path.write_text(text)
        for argv, what in steps:
            run(argv, env=control_plane.env, what=f"{what} on {control_plane.name}", timeout=60)
    finally:
        for path in files.values():
            path.unlink(missing_ok=True)


def server_of(kubeconfig: str) -> str:
    """The API server's URL a kubeconfig of one cluster names (`server:`)."""
    return next(line.split()[-1] for line in kubeconfig.splitlines() if line.strip().startswith("server:"))


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
