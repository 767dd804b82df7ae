"""A tenant's node container, as kind runs a node (kind `pkg/cluster/internal/providers/docker/provision.go`,
runArgsForNode and commonArgs), defined once: the Docker lab renders it for pulumi-docker
(components/docker/tenant_worker.py), process mode's node containers as `docker run` arguments (`run_args`).

It is not labelled as a kind node, so `kind delete cluster` never touches it; its owner (Pulumi, or the dynamic
resource that made it) removes it.
"""

from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass, field

from model.names import NODE_IMAGE_LABEL, TENANT_LABEL


def node_platform() -> str:
    """The platform of the host's node containers (kind publishes amd64 and arm64 node images)."""
    machine = platform.machine().lower()
    return "linux/arm64" if machine in ("aarch64", "arm64") else "linux/amd64"


@dataclass(frozen=True)
class NodeContainer:
    """What a node container is run with; each value is kind's for a node, with the reason beside it."""

    name: str  # also its hostname: kubeadm registers the node under the hostname
    tenant: str
    image_ref: str  # the pinned reference, recorded in a label (pulumi-docker is given the pulled image's id)
    network: str
    privileged: bool = True  # kubelet, containerd and kube-proxy manage cgroups, mounts and iptables
    security_opts: tuple[str, ...] = ("seccomp=unconfined", "apparmor=unconfined")  # as kind: no profile in the way
    tmpfs: tuple[str, ...] = ("/tmp", "/run")  # systemd expects tmpfs here; /tmp also keeps secrets off disk
    anonymous_volumes: tuple[str, ...] = ("/var",)  # containerd's overlayfs must not sit on the container's own
    read_only_mounts: tuple[str, ...] = ("/lib/modules",)  # the host's modules, for the kubelet and kube-proxy
    cgroupns: str = "private"  # kind's --cgroupns=private: the node sees its own cgroup root
    init: bool = False  # systemd is PID 1 (kind's --init=false)
    tty: bool = True  # kind's --tty: systemd logs to the console
    restart: str = "on-failure"
    max_retry_count: int = 1  # kind's --restart=on-failure:1
    labels: dict[str, str] = field(default_factory=dict)

    def all_labels(self) -> dict[str, str]:
        return {TENANT_LABEL: self.tenant, "gpulab.io/role": "worker", NODE_IMAGE_LABEL: self.image_ref, **self.labels}

    def run_args(self, image: str) -> list[str]:
        """`docker run` arguments (after `docker run`) that start this node from `image`, detached."""
        args = ["--detach", "--name", self.name, "--hostname", self.name, "--network", self.network]
        if self.privileged:
            args.append("--privileged")
        args += [arg for opt in self.security_opts for arg in ("--security-opt", opt)]
        args += [arg for path in self.tmpfs for arg in ("--tmpfs", path)]
        args += [arg for path in self.anonymous_volumes for arg in ("--volume", path)]
        args += [arg for path in self.read_only_mounts for arg in ("--volume", f"{path}:{path}:ro")]
        args += ["--cgroupns", self.cgroupns, f"--init={str(self.init).lower()}"]
        if self.tty:
            args.append("--tty")
        args += ["--restart", f"{self.restart}:{self.max_retry_count}"]
        args += [arg for key, value in sorted(self.all_labels().items()) for arg in ("--label", f"{key}={value}")]
        return [*args, image]


# kubeadm preflight checks a node container cannot pass: its kernel config is the host's (SystemVerification), swap
# is the host's (failSwapOn: false), and the image carries only what a node uses (FileExisting).
CONTAINER_PREFLIGHT = "SystemVerification,FileExisting,Swap"


def join_token_ttl_minutes(timeout: int) -> int:
    """How long a worker's bootstrap token lives. It is made on the Pulumi host before join-config.sh waits
    (up to TIMEOUT) for the tenant to accept it; the machine then waits for systemd (up to TIMEOUT) and joins,
    a call bounded at 2 x TIMEOUT + 60 s (worker-join.sh join_bound); 5 minutes more cover the steps between
    (Pulumi opening the SSH session, the quick checks). worker-join.sh refuses to start a join the token would
    not outlive, and delete-token.sh deletes it once the join is over."""
    return math.ceil((timeout + timeout + (2 * timeout + 60) + 300) / 60)


# Where a node keeps the bridge CNI configuration gpulab writes (gpulab's node images carry Debian's
# containernetworking-plugins; kindest/node does not carry the bridge plugin).
CNI_CONFLIST = "/etc/cni/net.d/10-gpulab-bridge.conflist"


def bridge_conflist(pod_cidr: str) -> str:
    """The CNI bridge plugin over the tenant's pod CIDR (Debian's containernetworking-plugins in the node image):
    one node per tenant, so no route between nodes is needed. Masquerade for pods reaching the host."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "gpulab-bridge",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )
