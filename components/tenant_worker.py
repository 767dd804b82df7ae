"""TenantWorker: a kindest/node container joined to its tenant with kubeadm, with Calico, Ready.

The container gets the flags kind itself gives a node (kind `pkg/cluster/internal/providers/docker/
provision.go`), each commented below. It is not labelled as a kind node, so `kind delete cluster`
never touches it; Pulumi owns it.
"""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.config import LabConfig, Tenant
from components.management_cluster import ManagementCluster
from components.shell import script_command
from components.tenant_control_plane import TENANT_LABEL, TenantControlPlane


def worker_node_name(tenant: Tenant) -> str:
    return f"{tenant.name}-worker"


NODE_IMAGE_LABEL = "gpulab.io/node-image"


def container_args(tenant: Tenant, image_id: pulumi.Input[str], image_ref: str, network: str) -> dict[str, Any]:
    """Arguments of the node container, as kind runs a node."""
    node_name = worker_node_name(tenant)
    return {
        "name": node_name,
        "hostname": node_name,  # kubeadm registers the node under the hostname
        # The pulled image's id: the provider reads a container's image back as an id, so a name
        # here would show a diff on every refresh. The pinned reference goes into a label instead.
        "image": image_id,
        "privileged": True,  # kubelet, containerd and kube-proxy manage cgroups, mounts and iptables
        "security_opts": ["seccomp=unconfined", "apparmor=unconfined"],  # as kind: no profile in the way
        "tmpfs": {"/tmp": "", "/run": ""},  # systemd expects tmpfs here; /tmp also keeps secrets off disk
        "volumes": [
            docker.ContainerVolumeArgs(container_path="/var"),  # anonymous volume: containerd's overlayfs
            docker.ContainerVolumeArgs(host_path="/lib/modules", container_path="/lib/modules", read_only=True),
        ],
        "cgroupns_mode": "private",  # kind's --cgroupns=private: the node sees its own cgroup root
        "init": False,  # systemd is PID 1 (kind's --init=false)
        "tty": True,  # kind's --tty: systemd logs to the console
        "restart": "on-failure",
        "max_retry_count": 1,  # kind's --restart=on-failure:1
        "networks_advanced": [docker.ContainerNetworksAdvancedArgs(name=network)],
        "labels": [
            docker.ContainerLabelArgs(label=TENANT_LABEL, value=tenant.name),
            docker.ContainerLabelArgs(label="gpulab.io/role", value="worker"),
            docker.ContainerLabelArgs(label=NODE_IMAGE_LABEL, value=image_ref),
        ],
        "must_run": True,
    }


def set_container_env(obj: dict, container: str, env: dict[str, str]) -> dict:
    """A copy of a workload object with `env` set on one container of its pod template."""
    updated = copy.deepcopy(obj)
    for item in updated.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        if item.get("name") != container:
            continue
        current = [entry for entry in item.get("env", []) if entry.get("name") not in env]
        item["env"] = current + [{"name": key, "value": value} for key, value in env.items()]
    return updated


def calico_pool_transform(pod_cidr: str):
    """Sets calico-node's CALICO_IPV4POOL_CIDR to the tenant's pod CIDR (the manifest leaves it unset)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if (
            args.type_ != "kubernetes:apps/v1:DaemonSet"
            or (args.props.get("metadata") or {}).get("name") != "calico-node"
        ):
            return None
        return pulumi.ResourceTransformResult(
            props=set_container_env(dict(args.props), "calico-node", {"CALICO_IPV4POOL_CIDR": pod_cidr}),
            opts=args.opts,
        )

    return transform


class TenantWorker(pulumi.ComponentResource):
    """One worker node for one tenant: container, host checks, kubeadm join, Calico, Ready."""

    node_name: str
    node_ip: pulumi.Output[str]
    container: docker.Container
    join: command.local.Command
    ready: command.local.Command

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        management: ManagementCluster,
        control_plane: TenantControlPlane,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:TenantWorker", name, None, opts)
        image_ref = lab.worker_image(tenant)
        assert image_ref is not None  # LabConfig rejects a tenant without one
        self.node_name = worker_node_name(tenant)

        # keep_locally: the management cluster may use the same image.
        image = docker.RemoteImage(
            f"{name}-image", name=image_ref, keep_locally=True, opts=pulumi.ResourceOptions(parent=self)
        )
        host_prerequisites = script_command(
            f"{name}-host-prerequisites",
            "host-prereqs.sh",
            environment={"IMAGE": image_ref, "TENANT": tenant.name},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[image]),
        )
        self.container = docker.Container(
            f"{name}-node",
            **container_args(tenant, image.image_id, image_ref, management.network_name),
            # On the network kind creates; a fixed container name means delete before replace.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[management.cluster, host_prerequisites],
                delete_before_replace=True,
            ),
        )
        self.node_ip = self.container.network_datas.apply(lambda datas: datas[0].ip_address if datas else "")

        # The container id in the environment makes a replaced container re-run the join.
        self.join = script_command(
            f"{name}-join",
            "worker-join.sh",
            stdin=control_plane.kubeconfig,
            environment={
                "CONTAINER": self.container.name,
                "CONTAINER_ID": self.container.id,
                "TENANT": tenant.name,
                "TIMEOUT": "300",
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane.api_ready]),
        )
        calico = k8s.yaml.v2.ConfigFile(
            f"{name}-calico",
            file=lab.versions.calico_manifest,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=control_plane.provider,
                depends_on=[self.join],
                transforms=[calico_pool_transform(tenant.pod_cidr)],
            ),
        )
        self.ready = script_command(
            f"{name}-ready",
            "wait-node-ready.sh",
            stdin=control_plane.kubeconfig,
            environment={"NODE_NAME": self.node_name, "TENANT": tenant.name, "TIMEOUT": "600"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[calico]),
        )
        self.register_outputs({"nodeName": self.node_name, "nodeIp": self.node_ip})
