"""KwokWorkers: a tenant's nodes as KWOK nodes on its process control plane (process mode).

kwok-controller keeps each node Ready and runs the pods bound to it: no kubelet, no container, no CNI (there is
no pod network to make). It gives the GPU node what TenantWorker gives it (components/parts.py).
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.process.control_plane import ControlPlaneProcesses, ProcessControlPlane
from components.process.lifecycle import control_plane_of, delete_in_cluster, read_in_cluster, replace_or_restart
from model.config import Tenant
from process_lab.gpu_nodes import ready_nodes
from process_lab.stack import TenantProcesses

TYPE = "gpulab:index:TenantWorker"  # the Docker lab's workers' type: an existing stack's URNs stay


class KwokNodesProvider(ResourceProvider):
    """A tenant's worker nodes as KWOK nodes (kwok-controller manages every node: its heartbeats, its pods).
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = ("cluster", "bin_dir", "folder", "control_plane", "nodes", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        ready_nodes(control_plane_of(props), props["nodes"])
        return CreateResult(id_=f"{props['cluster']}/nodes", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A node deleted by hand is applied again in place: replacing would delete the others, and a deleted
        # node's pods go with it (the pod garbage collector removes pods bound to a node that is gone).
        return replace_or_restart(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return read_in_cluster(id_, props, "get", "node", *props["nodes"])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ready_nodes(control_plane_of(news), news["nodes"])
        return UpdateResult(outs={**news, "running": True})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        delete_in_cluster(props, "node", *props["nodes"])


class KwokNodes(pulumi.dynamic.Resource):
    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: ControlPlaneProcesses,
        nodes: list[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {**processes.props(), "control_plane": control_plane.instance, "nodes": nodes, "running": True}
        super().__init__(KwokNodesProvider(), name, props, opts)


class KwokWorkers(pulumi.ComponentResource):
    """A tenant's KWOK nodes, Ready."""

    node_names: list[str]
    node_name: str  # the node that carries the tenant's declared GPUs
    node_ip: pulumi.Output[str]
    ready: KwokNodes
    instance = None  # KWOK nodes are the control plane's objects: no container of their own to follow

    def __init__(
        self, name: str, tenant: Tenant, control_plane: ProcessControlPlane, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE, name, None, opts)
        self.node_names = tenant.worker_node_names()
        self.node_name = tenant.gpu_node_name()
        self.node_ip = pulumi.Output.from_input("127.0.0.1")
        self.ready = KwokNodes(
            f"{name}-kwok-nodes",
            control_plane.tenant_processes,
            control_plane.processes,
            self.node_names,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane.api_ready]),
        )
        self.register_outputs({"nodeNames": self.node_names, "nodeName": self.node_name, "nodeIp": self.node_ip})
