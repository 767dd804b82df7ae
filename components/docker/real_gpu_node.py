"""RealGpuNode: HAMi and a tenant's real NVIDIA GPUs (gpuMode real, on SSH workers).

HAMi's NVIDIA device plugin runs on nodes labelled `gpu: on`; the plugin advertises only the card
slots, memory and cores are HAMi's bookkeeping. The declared cards are checked against what the
plugin registers (check-real-gpus.sh, model/gpu_expectation.py) before the node counts as ready.

MockGpuNode once handled real GPUs too: the alias to that type keeps an existing stack's
`<tenant>-gpus` and its children (same names) from being replaced.
"""

from __future__ import annotations

import json
import sys

import pulumi
import pulumi_kubernetes as k8s

from components.docker.hami_chart import HamiGpuNode, gpu_node_ready
from components.docker.tenant_control_plane import TenantControlPlane
from components.docker.tenant_worker import TenantWorker
from components.shell import script_command
from model.catalog import GPU_RESOURCE, gpu_capacity
from model.config import LabConfig, Tenant

FORMER_TYPE = "gpulab:index:MockGpuNode"  # the type real GPUs were declared under in older stacks


class RealGpuNode(HamiGpuNode):
    """HAMi + the NVIDIA device plugin on each GPU node, the declared cards checked against the node's."""

    former_type = FORMER_TYPE

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        former = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=FORMER_TYPE)])
        super().__init__(
            "gpulab:index:RealGpuNode",
            name,
            tenant,
            lab,
            control_plane,
            worker,
            pulumi.ResourceOptions.merge(opts, former),
        )
        for prefix, node in self._node_prefixes(tenant):
            label = k8s.core.v1.NodePatch(
                f"{prefix}-gpu-label",
                metadata={
                    "name": node.name,
                    "labels": {"gpu": "on"},
                    "annotations": {"pulumi.com/patchForce": "true"},
                },
                opts=pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=[self.hami]),
            )
            expectation = script_command(
                f"{prefix}-expectation",
                "check-real-gpus.sh",
                stdin=control_plane.kubeconfig,
                environment={
                    "NODE_NAME": node.name,
                    "EXPECT_CARDS": json.dumps([{"type": c.type, "memoryMb": c.memory_mb} for c in node.cards]),
                    "PYTHON": sys.executable,
                    "TIMEOUT": "600",
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[label]),
            )
            ready_opts = pulumi.ResourceOptions(parent=self, depends_on=[expectation])
            capacity = {GPU_RESOURCE: gpu_capacity(node.cards)}
            self.readies.append(gpu_node_ready(prefix, node.name, capacity, control_plane, ready_opts))
        self._finish()
