"""What gpulab uses of a node container: one contract, kept by both node images.

A tenant worker in a container is one of two images: kindest/node at its pinned digest (the Docker lab, where a
registry can be reached) or gpulab's own node image (`make node-image`, node-image/build.sh: Debian packages and
the kubelet of `make tools`, for machines without a registry). gpulab's scripts must work on either, so this is
what they use of a node, each item with the script that uses it:

- systemd is PID 1 and `systemctl is-system-running` says running or degraded once the node has booted
  (scripts/worker-join.sh node_booted; kind waits the same way);
- containerd answers on its socket, in the `k8s.io` namespace of the CRI, and imports `docker save` archives
  (scripts/load-images.sh: `ctr --namespace=k8s.io version`, `images ls`, `images import --digests -`);
- the programs the scripts run in a node are on PATH (worker-join.sh: kubeadm, systemctl and the shell tools of
  its `sh -c` snippets; load-images.sh: ctr; node-host-check.sh, run in the node image: bash, modprobe, nproc);
- kubelet.service is enabled, with kubeadm's drop-in: `kubeadm join` writes the bootstrap kubeconfig,
  /var/lib/kubelet/config.yaml and kubeadm-flags.env and restarts the unit; worker-join.sh reads
  /etc/kubernetes/kubelet.conf (its KUBELET_CONF) to tell a joined node;
- the CNI folders exist (/opt/cni/bin for plugins, /etc/cni/net.d for configurations): Calico installs into
  them, and the bridge fallback of the process lab's nodes writes its conflist there.

What differs between the images, and what a lab must match (a kubelet's cgroupDriver must be containerd's), is
in each image's facts (NodeImage). tests/model/test_node_contract.py holds kindest/node to the contract from kind's
own image definition (offline: it cannot be pulled here) and gpulab's image from its files;
tests/real/test_node_image.py holds the built gpulab image to it by running it.
Plain data: no import of anything but the standard library and model.versions.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.versions import Versions

PID1 = "systemd"
BOOTED_STATES = ("running", "degraded")
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
CTR_NAMESPACE = "k8s.io"
# On PATH in the node: what gpulab's scripts run there (see the module's docstring for which script).
PROGRAMS = (
    "kubeadm",
    "kubelet",
    "ctr",
    "systemctl",
    "sh",
    "bash",
    "cat",
    "rm",
    "test",
    "kill",
    "grep",
    "tr",
    "sleep",
    "modprobe",
    "nproc",
    "wc",
)
KUBELET_UNIT = "kubelet.service"
KUBEADM_DROPIN = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
# What kubeadm's drop-in must give the kubelet: kubeadm join writes these files and relies on the flags.
KUBEADM_DROPIN_FLAGS = (
    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
    "--kubeconfig=/etc/kubernetes/kubelet.conf",
    "--config=/var/lib/kubelet/config.yaml",
)
KUBEADM_DROPIN_ENVIRONMENT = ("-/var/lib/kubelet/kubeadm-flags.env",)
KUBEADM_DROPIN_VARIABLES = ("$KUBELET_KUBEADM_ARGS", "$KUBELET_EXTRA_ARGS")
CNI_BIN_DIR = "/opt/cni/bin"
CNI_CONF_DIR = "/etc/cni/net.d"
# The CNI plugins both images carry (kind builds these four, minus ptp which gpulab does not use).
CNI_PLUGINS = ("host-local", "loopback", "portmap")


@dataclass(frozen=True)
class NodeImage:
    """One node image's facts beyond the contract: what a lab must match, and where it comes from."""

    name: str
    reference: str  # the image a worker container runs (a repository:tag, with its digest where pinned)
    kubelet_path: str  # the kubelet unit's ExecStart program
    cgroup_driver: str  # containerd's runc cgroup driver: the kubelet's cgroupDriver must be the same
    sandbox_image: str  # containerd's sandbox_image: in the node before any pod starts
    extra_cni_plugins: tuple[str, ...]  # in /opt/cni/bin besides CNI_PLUGINS
    workload_image: str  # a busybox in the node's containerd, or "" when the lab loads its own
    source: str  # where these facts are read from


def kindest_node(versions: Versions | None = None) -> NodeImage:
    """kindest/node at the digest gpulab pins (model/versions.py), from kind's image definition: kind v0.33.0 is
    the pinned release; its tag is not in the stored kind snapshot, whose newest commit, fed268827 of main
    (2026-08-21, version 0.33.0-alpha), has the same images/base as tag v0.32.0 apart from the base image
    and containerd versions in its Dockerfile."""
    versions = versions or Versions()
    return NodeImage(
        name="kindest/node",
        reference=versions.worker_node_images["v1.36.4"],
        kubelet_path="/usr/bin/kubelet",  # pkg/build/nodeimage/buildcontext.go: binaries into /usr/bin
        cgroup_driver="systemd",  # images/base/files/etc/containerd/config.toml: SystemdCgroup = true
        sandbox_image="registry.k8s.io/pause:3.10",  # the same file's sandbox_image, kept by buildcontext.go
        extra_cni_plugins=("ptp",),  # images/base/Dockerfile: host-local, loopback, ptp, portmap
        workload_image="",
        source="kubernetes-sigs/kind images/base (Dockerfile, files/) and pkg/build/nodeimage at fed268827",
    )


def gpulab_node(kubernetes_version: str = "v1.36.4") -> NodeImage:
    """gpulab's node image, as node-image/build.sh builds it from node-image/."""
    return NodeImage(
        name="gpulab/node",
        reference=f"gpulab/node:{kubernetes_version}",
        kubelet_path="/usr/bin/kubelet",
        cgroup_driver="cgroupfs",  # node-image/files/etc/containerd/config.toml: SystemdCgroup = false
        sandbox_image="registry.k8s.io/pause:3.10.2",  # kubeadm v1.36's PauseVersion, built from build/pause
        extra_cni_plugins=("bridge",),  # Debian's containernetworking-plugins: the process lab's fallback CNI
        workload_image="localhost/gpulab/busybox:1.35.0",  # Debian's busybox-static 1:1.35.0-4
        source="node-image/ and node-image/build.sh",
    )


def gpulab_kind_node(kubernetes_version: str = "v1.36.4") -> NodeImage:
    """gpulab's kind node image, as node-image/lab-images.sh builds it from node-image/ and node-image/kind/."""
    return NodeImage(
        name="gpulab/kind-node",
        reference=f"gpulab/kind-node:{kubernetes_version}",
        kubelet_path="/usr/bin/kubelet",
        cgroup_driver="systemd",  # node-image/kind/files/etc/containerd/config.toml: SystemdCgroup = true, as kind
        sandbox_image="registry.k8s.io/pause:3.10.2",  # kubeadm v1.36's PauseVersion, built from build/pause
        extra_cni_plugins=("bridge",),  # Debian's containernetworking-plugins: the lab's bridge CNI
        workload_image="localhost/gpulab/busybox:1.35.0",  # Debian's busybox-static 1:1.35.0-4
        source="node-image/, node-image/kind/ and node-image/lab-images.sh",
    )
