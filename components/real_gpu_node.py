"""RealGpuNode: HAMi and a tenant's real NVIDIA GPUs (gpuMode real, on SSH workers).

HAMi's NVIDIA device plugin runs on nodes labelled `gpu: on`; the plugin advertises only the card
slots, memory and cores are HAMi's bookkeeping. The declared cards are checked against what the
plugin registers (check-real-gpus.sh, model/gpu_expectation.py) before the node counts as ready.

Until issue 23 MockGpuNode also handled real GPUs: the alias to that type keeps an existing stack's
`<tenant>-gpus` and its children (same names) from being replaced.
"""

from __future__ import annotations

import json
import sys

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.hami import gpu_node_ready, hami_release
from components.shell import script_command
from components.tenant_control_plane import TenantControlPlane
from components.tenant_worker import TenantWorker
from model.catalog import GPU_RESOURCE, Card, gpu_capacity, register_annotation, totals
from model.config import LabConfig, Tenant

FORMER_TYPE = "gpulab:index:MockGpuNode"  # the type real GPUs were declared under before issue 23


class RealGpuNode(pulumi.ComponentResource):
    """HAMi + the NVIDIA device plugin on each GPU node, the declared cards checked against the node's."""

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
        super().__init__(
            "gpulab:index:RealGpuNode",
            name,
            None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=FORMER_TYPE)])),
        )
        self.resource_name = name
        self.cards = tenant.cards()
        self.advertised = totals(self.cards)
        self.register_annotation = register_annotation(self.cards)
        after_worker = pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=[worker.ready])
        hami = hami_release(name, tenant, lab, control_plane, after_worker)
        gpu_nodes = tenant.gpu_nodes()
        self.readies = []
        for node in gpu_nodes:
            # One node keeps the resource names it always had; with several, each name carries the node.
            prefix = f"{name}-{node.name}" if len(gpu_nodes) > 1 else name
            label = k8s.core.v1.NodePatch(
                f"{prefix}-gpu-label",
                metadata={
                    "name": node.name,
                    "labels": {"gpu": "on"},
                    "annotations": {"pulumi.com/patchForce": "true"},
                },
                opts=pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=[hami]),
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
            self.readies.append(
                gpu_node_ready(
                    prefix,
                    node.name,
                    {GPU_RESOURCE: gpu_capacity(node.cards)},
                    control_plane,
                    pulumi.ResourceOptions(parent=self, depends_on=[expectation]),
                )
            )
        self.ready = self.readies[0]
        self.register_outputs({"cards": [card.__dict__ for card in self.cards], "advertised": self.advertised})
