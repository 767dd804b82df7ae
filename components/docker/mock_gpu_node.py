"""MockGpuNode: HAMi and simulated GPUs in a tenant (gpuMode mock, the default).

HAMi's scheduler places pods by `nvidia.com/gpumem` / `nvidia.com/gpucores` on cards it reads from
the node's `hami.io/node-nvidia-register` annotation; the mock device plugin advertises those same
cards to the kubelet. Every choice below follows HAMi v2.8.3 and mock-device-plugin 1.0.1 (hami_chart.py
names the upstream files).
Real GPUs are RealGpuNode's (real_gpu_node.py), process mode's ProcessGpuNode's (process_gpu_node.py);
the tenant's namespaces, quotas and inventory ConfigMap are TenantNamespaces' (tenant_namespaces.py).
"""

from __future__ import annotations

import pulumi

from components.docker.hami_chart import HAMI_NAMESPACE, HamiGpuNode, gpu_node_ready
from components.docker.tenant_control_plane import TenantControlPlane
from components.docker.tenant_worker import TenantWorker
from components.shell import script_command
from model.catalog import gpu_capacity, register_annotation, totals
from model.config import LabConfig, Tenant


class MockGpuNode(HamiGpuNode):
    """HAMi + the mock device plugin + each GPU node's simulated cards, written from config."""

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:MockGpuNode", name, tenant, lab, control_plane, worker, opts)
        previous: pulumi.Resource = self.hami
        for prefix, node in self._node_prefixes(tenant):
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
            ready_opts = pulumi.ResourceOptions(parent=self, depends_on=[previous])
            self.readies.append(gpu_node_ready(prefix, node.name, totals(node.cards), control_plane, ready_opts))
        self._finish()
