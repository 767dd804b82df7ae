"""MockGpuNode: HAMi and simulated GPUs in a tenant (gpuMode mock, the default).

HAMi's scheduler places pods by `nvidia.com/gpumem` / `nvidia.com/gpucores` on cards it reads from
the node's `hami.io/node-nvidia-register` annotation; the mock device plugin advertises those same
cards to the kubelet. Every choice below is from ../shared/notes/hami.md (sections in comments).
Real GPUs are RealGpuNode's (real_gpu_node.py); the tenant's namespaces, quotas and inventory
ConfigMap are TenantNamespaces' (tenant_namespaces.py).
"""

from __future__ import annotations

import pulumi
import pulumi_command as command

from components.hami import HAMI_NAMESPACE, gpu_node_ready, hami_release
from components.shell import script_command
from components.tenant_control_plane import TenantControlPlane
from components.tenant_worker import TenantWorker
from model.catalog import Card, gpu_capacity, register_annotation, totals
from model.config import LabConfig, Tenant


class MockGpuNode(pulumi.ComponentResource):
    """HAMi + the mock device plugin + each GPU node's simulated cards, written from config."""

    resource_name: str  # its children's names start with it
    cards: list[Card]
    advertised: dict[str, int]
    register_annotation: str
    ready: command.local.Command  # the first GPU node's readiness
    readies: list[command.local.Command]  # every GPU node's

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:MockGpuNode", name, None, opts)
        self.resource_name = name
        self.cards = tenant.cards()
        self.advertised = totals(self.cards)
        self.register_annotation = register_annotation(self.cards)
        after_worker = pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=[worker.ready])
        hami = hami_release(name, tenant, lab, control_plane, after_worker)
        gpu_nodes = tenant.gpu_nodes()
        self.readies = []
        previous: pulumi.Resource = hami
        for node in gpu_nodes:
            # One node keeps the resource names it always had; with several, each name carries the node.
            prefix = f"{name}-{node.name}" if len(gpu_nodes) > 1 else name
            # The register annotation and capacity written from config. One inventory write at a time:
            # a changed inventory restarts hami-scheduler, and two restarts at once would race
            # (apply-gpu-inventory.sh).
            previous = script_command(
                f"{prefix}-inventory",
                "apply-gpu-inventory.sh",
                stdin=control_plane.kubeconfig,
                environment={
                    "NODE_NAME": node.name,
                    "REGISTER_JSON": register_annotation(node.cards),
                    "GPU_CAPACITY": str(gpu_capacity(node.cards)),
                    "HAMI_NAMESPACE": HAMI_NAMESPACE,
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[previous]),
            )
            self.readies.append(
                gpu_node_ready(
                    prefix,
                    node.name,
                    totals(node.cards),
                    control_plane,
                    pulumi.ResourceOptions(parent=self, depends_on=[previous]),
                )
            )
        self.ready = self.readies[0]
        self.register_outputs({"cards": [card.__dict__ for card in self.cards], "advertised": self.advertised})
