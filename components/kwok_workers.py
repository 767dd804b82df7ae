"""KwokWorkers: a tenant's nodes as KWOK nodes on its process control plane (process mode).

kwok-controller keeps each node Ready and runs the pods bound to it: no kubelet, no container, no CNI (there is
no pod network to make). It gives the GPU node what TenantWorker gives it (components/parts.py).
"""

from __future__ import annotations

import pulumi

from components.process_control_plane import ProcessControlPlane
from components.process_resources import KwokNodes
from model.config import Tenant

TYPE = "gpulab:index:TenantWorker"  # the Docker lab's workers' type: an existing stack's URNs stay


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
