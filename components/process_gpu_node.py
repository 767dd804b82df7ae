"""ProcessGpuNode: HAMi as a local process and a tenant's simulated cards on its KWOK nodes (process mode).

hami-scheduler (extender and webhook) on the ports the tenant's kube-scheduler was configured with, the device
plugin's bind-time role beside it, and per GPU node the cards as HAMi's register annotation and the node's
capacity (as the Docker lab's mock device plugin advertises them), each ready once HAMi has taken them in
(components/process_resources.py). It gives the tenant's objects what MockGpuNode gives them
(components/parts.py).
"""

from __future__ import annotations

import pulumi

from components.kwok_workers import KwokWorkers
from components.node_container_workers import NodeContainerWorkers
from components.parts import gpu_node_prefixes
from components.process_control_plane import ProcessControlPlane
from components.process_resources import GpuInventory, HamiProcesses
from model.catalog import Card, register_annotation, totals
from model.config import LabConfig, Tenant
from process_lab.hami_scheduler import HamiSettings
from process_lab.stack import ProcessStack

# The Docker lab's simulated cards' type: the same concept (mock GPUs), so an existing stack's URNs stay.
TYPE = "gpulab:index:MockGpuNode"


class ProcessGpuNode(pulumi.ComponentResource):
    """HAMi as local processes and each GPU node's simulated cards, written from config."""

    resource_name: str
    former_type: str | None = None
    cards: list[Card]
    advertised: dict[str, int]
    hami: HamiProcesses | None = None
    readies: list[pulumi.Resource]

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        stack: ProcessStack,
        control_plane: ProcessControlPlane,
        workers: KwokWorkers | NodeContainerWorkers,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TYPE, name, None, opts)
        self.resource_name = name
        self.cards = tenant.cards()
        self.advertised = totals(self.cards)
        processes = control_plane.tenant_processes
        hami = lab.scheduling.hami
        after: pulumi.Resource = workers.ready
        if hami:
            self.hami = HamiProcesses(
                f"{name}-hami",
                processes,
                control_plane.processes,
                stack.hami_binary,
                HamiSettings.of(lab, tenant),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[workers.ready]),
            )
            after = self.hami
        # Without HAMi (scheduling.scheduler: kube-scheduler) the cards are the node's extended resources only.
        self.readies = [
            GpuInventory(
                f"{prefix}-inventory",
                processes,
                control_plane.processes,
                node.name,
                register_annotation(node.cards),
                totals(node.cards),
                hami,
                workers.instance,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[after]),
            )
            for prefix, node in gpu_node_prefixes(name, tenant)
        ]
        self.register_outputs({"cards": [card.__dict__ for card in self.cards], "advertised": self.advertised})
