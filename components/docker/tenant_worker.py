"""TenantWorker: a kindest/node container joined to its tenant with kubeadm, with Calico (or the bridge plugin of
gpulab's kind node image), Ready.

The container gets the flags kind itself gives a node, defined once in model/node_container.py (each commented
there). It is not labelled as a kind node, so `kind delete cluster` never touches it; Pulumi owns it.
"""

from __future__ import annotations

import copy
import re
import sys
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.docker.image_cache import ImageCache
from components.docker.management_cluster import ManagementCluster
from components.docker.sources import manifest_file, sources
from components.docker.tenant_control_plane import TenantControlPlane
from components.shell import remote_script, script_command
from model.config import LabConfig, SshWorker, Tenant, secret
from model.node_container import (
    CNI_CONFLIST,
    CONTAINER_PREFLIGHT,
    NodeContainer,
    bridge_conflist,
    join_token_ttl_minutes,
)

JOIN_TIMEOUT = 300  # seconds per step of a worker's join (worker-join.sh and join-config.sh TIMEOUT)


def worker_node_name(tenant: Tenant) -> str:
    """The node name of a container worker (its hostname)."""
    return tenant.worker_node_names()[0]


def token_id_of(join_configuration: str) -> str:
    """The public half of the bootstrap token in a JoinConfiguration (`<id>.<secret>`)."""
    match = re.search(r"token:\s*\"?([a-z0-9]{6})\.[a-z0-9]{16}", join_configuration or "")
    return match.group(1) if match else ""


def container_args(
    tenant: Tenant,
    image_id: pulumi.Input[str],
    image_ref: str,
    network: str,
    node_name: str | None = None,
    bridge_cni: bool = False,
) -> dict[str, Any]:
    """pulumi-docker's arguments of a node container (the tenant's first unless `node_name` is given): the one
    definition, model/node_container.py, rendered for the provider. With `bridge_cni` the container is made with
    the bridge plugin's configuration over the tenant's pod range in place (the provider uploads it before the
    container starts), as the process lab's real nodes get it."""
    node = NodeContainer(node_name or worker_node_name(tenant), tenant.name, image_ref, network)
    uploads = [docker.ContainerUploadArgs(file=CNI_CONFLIST, content=bridge_conflist(tenant.pod_cidr))]
    return {
        "name": node.name,
        "hostname": node.name,
        # The pulled image's id: the provider reads a container's image back as an id, so a name
        # here would show a diff on every refresh. The pinned reference goes into a label instead.
        "image": image_id,
        "privileged": node.privileged,
        "security_opts": list(node.security_opts),
        "tmpfs": dict.fromkeys(node.tmpfs, ""),
        "volumes": [
            *(docker.ContainerVolumeArgs(container_path=path) for path in node.anonymous_volumes),
            *(
                docker.ContainerVolumeArgs(host_path=path, container_path=path, read_only=True)
                for path in node.read_only_mounts
            ),
        ],
        "cgroupns_mode": node.cgroupns,
        "init": node.init,
        "tty": node.tty,
        "restart": node.restart,
        "max_retry_count": node.max_retry_count,
        "networks_advanced": [docker.ContainerNetworksAdvancedArgs(name=node.network)],
        "labels": [docker.ContainerLabelArgs(label=key, value=value) for key, value in node.all_labels().items()],
        "must_run": True,
        **({"uploads": uploads} if bridge_cni else {}),
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


def gone_with(owner: pulumi.Resource):
    """Every object of a manifest is deleted with `owner` (the tenant's control plane, whose datastore holds them)
    and never one by one: on a destroy, Calico's CRDs and calico-node went before calico-kube-controllers, whose pod
    then could not be torn down (no CNI to release its address) and stalled `make down` for 600 s (2026-12-08)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        return pulumi.ResourceTransformResult(
            props=args.props, opts=pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(deleted_with=owner))
        )

    return transform


class TenantWorker(pulumi.ComponentResource):
    """A tenant's worker nodes, joined and Ready, with Calico: one kindest/node container on the
    Docker host (workerMode container), or real machines over SSH (workerMode ssh)."""

    node_names: list[str]
    node_name: str  # the node that carries the tenant's declared GPUs
    node_ip: pulumi.Output[str]  # of that node
    container: docker.Container | None  # the first node container
    containers: list[docker.Container]
    joins: list[pulumi.Resource]
    ready: command.local.Command

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        management: ManagementCluster,
        control_plane: TenantControlPlane,
        images: ImageCache,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:TenantWorker", name, None, opts)
        self._name, self._tenant, self._control_plane = name, tenant, control_plane
        self.node_names = tenant.worker_node_names()
        self.node_name = tenant.gpu_node_name()
        self._bridge_cni = lab.pod_network == "bridge"
        self.container = None
        self.containers = []
        if tenant.worker_mode == "container":
            self.joins = self._container_nodes(lab, management, images)
        else:
            self.joins = [self._ssh_node(index, worker) for index, worker in enumerate(tenant.workers)]
            host = dict(zip(self.node_names, (w.host for w in tenant.workers), strict=True))[self.node_name]
            self.node_ip = pulumi.Output.from_input(host)

        # One CNI per tenant cluster, once every node has joined and kube-proxy is there (calico-node reaches the API
        # server through its Service): Calico, or the bridge plugin whose configuration each node container got when
        # it was made (container_args).
        network: list[pulumi.Resource] = [*self.joins, *control_plane.kube_proxy]
        if lab.pod_network == "calico":
            network = [
                k8s.yaml.v2.ConfigFile(
                    f"{name}-calico",
                    file=manifest_file(lab.versions.calico_manifest, sources(lab)),
                    opts=pulumi.ResourceOptions(
                        parent=self,
                        provider=control_plane.provider,
                        depends_on=[*self.joins, *control_plane.kube_proxy],
                        transforms=[
                            calico_pool_transform(tenant.pod_cidr),
                            gone_with(control_plane.tenant_control_plane),
                        ],
                    ),
                )
            ]
        self.ready = script_command(
            f"{name}-ready",
            "wait-node-ready.sh",
            stdin=control_plane.kubeconfig,
            environment={"NODE_NAMES": " ".join(self.node_names), "TENANT": tenant.name, "TIMEOUT": "600"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=network),
        )
        self.register_outputs({"nodeNames": self.node_names, "nodeName": self.node_name, "nodeIp": self.node_ip})

    def _container_nodes(
        self, lab: LabConfig, management: ManagementCluster, images: ImageCache
    ) -> list[pulumi.Resource]:
        """The tenant's kindest/node containers on the management cluster's Docker network, joined.
        One image pull and host check for all; per node its container, images and join. Each join works
        on its own container, so they run in parallel. One node keeps the resource names it always had
        (`<name>-node`, ...); with several, each name carries the node (`<name>-<node>-node`)."""
        name, tenant = self._name, self._tenant
        image_ref = lab.worker_image(tenant)
        assert image_ref is not None and management.cluster is not None  # LabConfig guarantees both
        # keep_locally: the management cluster may use the same image.
        image_name, loaded = images.node_image(image_ref)
        image = docker.RemoteImage(
            f"{name}-image",
            name=image_name,
            keep_locally=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=loaded),
        )
        host_prerequisites = script_command(
            f"{name}-host-prerequisites",
            "host-prereqs.sh",
            # image_name, as the image was pulled or loaded: a loaded image has no registry digest to be run by
            environment={"IMAGE": image_name, "TENANT": tenant.name},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[image]),
        )
        several = tenant.nodes is not None
        joins = []
        for node_name in self.node_names:
            prefix = f"{name}-{node_name}" if several else name
            joins.append(
                self._container_node(prefix, node_name, image, image_ref, host_prerequisites, management, images)
            )
        self.container = self.containers[0]
        gpu_container = self.containers[self.node_names.index(self.node_name)]
        self.node_ip = gpu_container.network_datas.apply(lambda datas: datas[0].ip_address if datas else "")
        return joins

    def _container_node(
        self,
        prefix: str,
        node_name: str,
        image: docker.RemoteImage,
        image_ref: str,
        host_prerequisites: pulumi.Resource,
        management: ManagementCluster,
        images: ImageCache,
    ) -> pulumi.Resource:
        """One kindest/node container, its images loaded, joined."""
        tenant, control_plane = self._tenant, self._control_plane
        assert management.network_name is not None and management.cluster is not None
        container = docker.Container(
            f"{prefix}-node",
            **container_args(tenant, image.image_id, image_ref, management.network_name, node_name, self._bridge_cni),
            # On the network kind creates; a fixed container name means delete before replace.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[management.cluster, host_prerequisites],
                delete_before_replace=True,
            ),
        )
        self.containers.append(container)
        # Every image the node will run (Calico, HAMi, konnectivity, workloads) is in its containerd before
        # the join starts its first pods: the node never pulls from a registry.
        loaded = images.load(
            f"{prefix}-images",
            tenant.name,
            node=container.name,
            node_id=container.id,
            parent=self,
            after=[container],
        )
        # As an SSH worker's: the node gets only a JoinConfiguration made here with the admin kubeconfig (which
        # stays on this host), and its token is deleted once the node has joined. The container id in both
        # environments makes a replaced container get fresh material (a new token) and re-run the join.
        material = script_command(
            f"{prefix}-join-config",
            "join-config.sh",
            stdin=control_plane.kubeconfig,
            environment={
                "NODE_NAME": node_name,
                "CONTAINER_ID": container.id,
                "TENANT": tenant.name,
                "IGNORE_PREFLIGHT": CONTAINER_PREFLIGHT,
                "TTL_MINUTES": str(join_token_ttl_minutes(JOIN_TIMEOUT)),
                "TIMEOUT": str(JOIN_TIMEOUT),
                "PYTHON": sys.executable,
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane.api_ready, loaded]),
        )
        join = script_command(
            f"{prefix}-join",
            "worker-join.sh",
            stdin=pulumi.Output.secret(material.stdout),  # the token: secret in the state and logs
            environment={
                "CONTAINER": container.name,
                "CONTAINER_ID": container.id,
                "TENANT": tenant.name,
                "TIMEOUT": str(JOIN_TIMEOUT),
                "JOIN_CONFIG_RESOURCE": f"{prefix}-join-config",
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane.api_ready, loaded, material]),
        )
        script_command(
            f"{prefix}-join-token-delete",
            "delete-token.sh",
            stdin=control_plane.kubeconfig,
            environment={"TOKEN_ID": material.stdout.apply(token_id_of), "TENANT": tenant.name},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[join]),
        )
        # On destroy only: the join's lock file on this host goes with the container.
        script_command(
            f"{prefix}-join-unlock",
            None,
            delete="worker-join-unlock.sh",
            environment={"CONTAINER": container.name},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[join]),
        )
        return join

    def _ssh_node(self, index: int, worker: SshWorker) -> pulumi.Resource:
        """A real machine: checked, joined over SSH, reset and removed from the tenant on destroy."""
        name, tenant, control_plane = self._name, self._tenant, self._control_plane
        node_name = self.node_names[index]
        connection = command.remote.ConnectionArgs(
            host=worker.host, user=worker.user, port=worker.port, private_key=secret(worker.private_key_secret)
        )
        sudo = worker.user != "root"
        # Named after the node, which carries the tenant: `<tenant>-worker-0-check` for a default-named worker
        # (it was `<tenant>-worker-<tenant>-worker-0-check`; the alias keeps such a stack's resources), and
        # `<tenant>-worker-<name>-check` for a named one, as always.
        prefix = node_name if node_name.startswith(f"{name}-") else f"{name}-{node_name}"

        def named(suffix: str, **options: Any) -> dict[str, Any]:
            former = [pulumi.Alias(name=f"{name}-{node_name}-{suffix}")] if prefix != f"{name}-{node_name}" else []
            return {
                "resource_name": f"{prefix}-{suffix}",
                "opts": pulumi.ResourceOptions(parent=self, aliases=former, **options),
            }

        check = command.remote.Command(
            **named("check"),
            connection=connection,
            create=remote_script(
                "ssh-node-check.sh", {"KUBERNETES_VERSION": tenant.kubernetes_version, "NODE": node_name}, sudo
            ),
            add_previous_output_in_env=False,
            logging=command.remote.Logging.STDERR,
        )
        # The machine gets only a JoinConfiguration, made here with the tenant's admin kubeconfig (which
        # stays on the Pulumi host); the token it carries is deleted once the machine has joined.
        material = script_command(
            **named("join-config", depends_on=[check, control_plane.api_ready]),
            create="join-config.sh",
            stdin=control_plane.kubeconfig,
            environment={
                "NODE_NAME": node_name,
                "TENANT": tenant.name,
                "IGNORE_PREFLIGHT": "Swap",
                "TTL_MINUTES": str(join_token_ttl_minutes(JOIN_TIMEOUT)),
                "TIMEOUT": str(JOIN_TIMEOUT),
                "PYTHON": sys.executable,
            },
        )
        join = command.remote.Command(
            **named("join", depends_on=[check, material], additional_secret_outputs=["stdout"]),
            connection=connection,
            create=remote_script(
                "worker-join.sh",
                {
                    "NODE_NAME": node_name,
                    "TENANT": tenant.name,
                    "TIMEOUT": str(JOIN_TIMEOUT),
                    "JOIN_CONFIG_RESOURCE": f"{prefix}-join-config",
                },
                sudo,
            ),
            delete=remote_script("ssh-node-reset.sh", {"NODE": node_name}, sudo),
            stdin=pulumi.Output.secret(material.stdout),  # the token: secret in the state and logs
            add_previous_output_in_env=False,
            logging=command.remote.Logging.STDERR,
        )
        script_command(
            **named("join-token-delete", depends_on=[join]),
            create="delete-token.sh",
            stdin=control_plane.kubeconfig,
            environment={"TOKEN_ID": material.stdout.apply(token_id_of), "TENANT": tenant.name},
        )
        # Destroy removes the Node object from the tenant before the machine resets (it depends on the join).
        return script_command(
            **named("leave", depends_on=[join]),
            create=None,
            delete="node-leave.sh",
            stdin=control_plane.kubeconfig,
            environment={"NODE_NAME": node_name, "TIMEOUT": "120"},
        )
