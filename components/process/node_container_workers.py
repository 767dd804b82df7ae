"""NodeContainerWorkers: a tenant's worker as a real node in process mode (`workers: containers`).

A container of gpulab's node image (`make node-image`) on the lab's `--internal` network, with the flags kind
gives a node (model/node_container.py), a bridge CNI over the tenant's pod CIDR, and a real kubelet joined by
kubeadm to the tenant's control plane of local processes with join material made on this host
(process_lab/node_containers.py). It gives the GPU node what TenantWorker and KwokWorkers give it
(components/parts.py). The network is LabNetwork's, one per stack.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.process.control_plane import ProcessControlPlane
from components.process.lifecycle import observed, replace_or_restart
from model.config import Tenant
from process_lab import node_containers
from process_lab.node_containers import JoiningNode

TYPE = "gpulab:index:TenantWorker"  # one concept whatever runs it


class LabNetworkProvider(ResourceProvider):
    """The lab's --internal Docker network of node containers.
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = ("name", "owner", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        gateway = node_containers.DockerNetwork(props["name"], props["owner"]).create()
        return CreateResult(id_=props["name"], outs={**props, "gateway": gateway, "running": True})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A network removed by hand is made again; its gateway may differ, which replaces what binds to it.
        return replace_or_restart(olds, news, self.KEYS, restart=False)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        found = node_containers.DockerNetwork(props["name"], props["owner"]).gateway()
        return observed(id_, props, found is not None and found == props.get("gateway"))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        node_containers.DockerNetwork(props["name"], props["owner"]).delete()


class LabNetwork(pulumi.dynamic.Resource):
    """The lab's `--internal` Docker network; `gateway` is the host's address on it."""

    gateway: pulumi.Output[str]

    def __init__(self, name: str, network: str, owner: str, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {"name": network, "owner": owner, "gateway": None, "running": True}
        super().__init__(LabNetworkProvider(), name, props, opts)


class NodeContainerProvider(ResourceProvider):
    """One node container, joined and Ready; deleted: its Node object left, the container and its /var gone.
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = (
        "cluster",
        "bin_dir",
        "folder",
        "control_plane",
        "tenant",
        "node",
        "image",
        "network",
        "pod_cidr",
        "endpoint",
    )

    def create(self, props: dict[str, Any]) -> CreateResult:
        container_id = node_containers.bring_up(JoiningNode.from_props(props))
        return CreateResult(id_=props["node"], outs={**props, "container_id": container_id, "running": True})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A node container removed or stopped by hand is made again and joined afresh (its kubelet's identity
        # lives in the container's own files).
        return replace_or_restart(olds, news, (*self.KEYS, "running"), restart=False)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return observed(id_, props, node_containers.running(props["node"]))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        node_containers.tear_down(JoiningNode.from_props(props))


class NodeContainerResource(pulumi.dynamic.Resource):
    container_id: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(NodeContainerProvider(), name, {**props, "container_id": None, "running": True}, opts)


class NodeContainerWorkers(pulumi.ComponentResource):
    """A tenant's node container, joined to its process control plane, Ready."""

    node_names: list[str]
    node_name: str
    node_ip: pulumi.Output[str]
    ready: NodeContainerResource
    instance: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        image: str,
        images: list[str],
        network: LabNetwork,
        network_name: str,
        control_plane: ProcessControlPlane,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TYPE, name, None, opts)
        self.node_names = tenant.worker_node_names()
        self.node_name = tenant.gpu_node_name()
        props = {
            **control_plane.tenant_processes.props(),
            "control_plane": control_plane.processes.instance,
            "tenant": tenant.name,
            "node": self.node_name,
            "image": image,
            "network": network_name,
            "pod_cidr": tenant.pod_cidr,
            "endpoint": control_plane.processes.join_endpoint,  # the relay on the lab network's gateway
            "images": images,  # not compared (KEYS): checked on every node made, a change makes no node anew
        }
        self.ready = NodeContainerResource(
            f"{name}-node",
            props,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane.api_ready, network]),
        )
        self.node_ip = pulumi.Output.from_input("")  # the container's address on the lab network: not needed yet
        # Which container the node is: a node made again (removed by hand) registers afresh, without its cards.
        self.instance = self.ready.container_id
        self.register_outputs({"nodeNames": self.node_names, "nodeName": self.node_name})
