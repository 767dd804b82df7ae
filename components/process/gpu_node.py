"""ProcessGpuNode: HAMi as a local process and a tenant's simulated cards on its nodes (process mode).

hami-scheduler (extender and webhook) on the ports the tenant's kube-scheduler was configured with, and per GPU node
the cards, each ready once HAMi has taken them in (HamiProvider below). Who plays HAMi's device plugin depends on
the nodes:
- KWOK nodes (no kubelet): the device plugin's bind-time role beside hami-scheduler, and the cards written as HAMi's
  register annotation and the node's capacity (GpuInventoryProvider below, as the Docker lab's mock device plugin
  advertises them);
- real nodes (workers: containers) of a HAMi tenant: gpulab-hami-plugin in each node container, registered with its
  kubelet (components/process/hami_plugin.py), and no bind-time role: the kubelet calls the plugin's Allocate;
- without HAMi (scheduling.scheduler: kube-scheduler), on either: the cards as the nodes' capacity only
  (GpuInventory).
It gives the tenant's objects what MockGpuNode gives them (components/parts.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.parts import gpu_node_prefixes
from components.process.control_plane import ControlPlaneProcesses, ProcessControlPlane
from components.process.dra import DraDevices
from components.process.hami_plugin import HamiPlugin
from components.process.kwok_workers import KwokWorkers
from components.process.lifecycle import (
    delete_in_cluster,
    observed,
    replace_or_restart,
)
from components.process.node_container_workers import NodeContainerWorkers
from model.catalog import Card, register_annotation, totals
from model.config import LabConfig, Tenant
from process_lab import hami_plugin, tenant_hami
from process_lab.hami_scheduler import HamiSettings
from process_lab.node_inventory import NodeInventory, carried, put_on, take_off
from process_lab.stack import ProcessStack, TenantProcesses
from process_lab.tenant_hami import RunningHami, TenantHami

# The Docker lab's simulated cards' type: the same concept (mock GPUs), so an existing stack's URNs stay.
TYPE = "gpulab:index:MockGpuNode"


class HamiProvider(ResourceProvider):
    """hami-scheduler (extender and webhook) and, unless `without_bind_time_role` (real nodes, whose device plugin
    plays it), the device plugin's bind-time part, as local processes, and HAMi's MutatingWebhookConfiguration by
    URL (process_lab.hami_scheduler).
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = (
        "cluster",
        "bin_dir",
        "folder",
        "control_plane",
        "hami_binary",
        "hami_port",
        "hami_metrics_port",
        "settings",
        "without_bind_time_role",  # absent (the role runs) in every state written before it and on KWOK nodes
        "running",
    )

    def create(self, props: dict[str, Any]) -> CreateResult:
        running = tenant_hami.start(TenantHami.from_props(props))
        return CreateResult(id_=f"{props['cluster']}/hami", outs={**props, **running.outputs(), "running": True})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # HAMi keeps nothing of its own (it reads nodes and pods from the API server): one found stopped is
        # started again in place, on the same ports.
        return replace_or_restart(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        role = not props.get("without_bind_time_role")
        return observed(id_, props, RunningHami.from_outputs(props).alive(Path(props["folder"]), role))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        tenant_hami.stop(Path(olds["folder"]), RunningHami.from_outputs(olds))  # the one of the pair still running
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        tenant_hami.stop(Path(props["folder"]), RunningHami.from_outputs(props))
        delete_in_cluster(props, "mutatingwebhookconfiguration", "hami-webhook")


class HamiProcesses(pulumi.dynamic.Resource):
    hami_pid: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: ControlPlaneProcesses,
        hami_binary: Path | None,
        settings: HamiSettings,
        opts: pulumi.ResourceOptions,
        bind_time_role: bool = True,
    ) -> None:
        """`bind_time_role`: false on real nodes, where gpulab-hami-plugin's Allocate marks the pod and releases
        the node's lock."""
        props = {
            **processes.props(),
            "control_plane": control_plane.instance,
            "hami_binary": str(hami_binary or ""),
            "hami_port": control_plane.hami_port,  # what the tenant's kube-scheduler was configured with
            "hami_metrics_port": control_plane.hami_metrics_port,
            "settings": settings.props(),
        }
        if not bind_time_role:  # only then: a KWOK stack's props stay as they were
            props["without_bind_time_role"] = True
        outs = {"hami_pid": None, "bind_time_pid": None}
        super().__init__(HamiProvider(), name, {**props, **outs, "running": True}, opts)


class GpuInventoryProvider(ResourceProvider):
    """One GPU node's cards (process_lab/node_inventory.py), then the wait until HAMi has taken them in.
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = (
        *("cluster", "bin_dir", "folder", "control_plane", "node", "register", "capacity"),
        *("without_hami", "worker", "running"),
    )

    def create(self, props: dict[str, Any]) -> CreateResult:
        put_on(NodeInventory.from_props(props))
        return CreateResult(id_=f"{props['cluster']}/{props['node']}/inventory", outs={**props, "running": True})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return replace_or_restart(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Found stopped when the node is gone or no longer carries the cards: the update writes them again."""
        found = carried(NodeInventory.from_props(props))
        return ReadResult(id_=id_, outs=props, inputs=props) if found is None else observed(id_, props, found)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        take_off(NodeInventory.from_props(props))


class GpuInventory(pulumi.dynamic.Resource):
    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: ControlPlaneProcesses,
        node: str,
        register: str,
        capacity: dict[str, int],
        hami: bool,
        worker: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            **processes.props(),
            "control_plane": control_plane.instance,
            "node": node,
            "register": register,
            "capacity": capacity,
            "running": True,
        }
        if not hami:  # only then, as ControlPlaneProcesses' without_hami
            props["without_hami"] = True
        if worker is not None:  # a real node's container: the cards are written again on a node made anew
            props["worker"] = worker
        super().__init__(GpuInventoryProvider(), name, props, opts)


class ProcessGpuNode(pulumi.ComponentResource):
    """HAMi as local processes and each GPU node's simulated cards: written from config (KWOK nodes, or without
    HAMi), or registered by gpulab-hami-plugin (a HAMi tenant's real nodes)."""

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
        hami = lab.runs_hami(tenant)
        after: pulumi.Resource = workers.ready
        if tenant.gpu_sharing == "dra":  # the cards as DRA devices, no HAMi and no extended resources on the nodes
            real_nodes = None
            if isinstance(workers, NodeContainerWorkers):
                real_nodes = (processes, control_plane.processes.instance, workers.instance)
            devices = DraDevices(
                f"{name}-dra",
                tenant,
                control_plane.provider,
                workers.ready,
                pulumi.ResourceOptions(parent=self),
                real_nodes,
            )
            self.readies = devices.readies
            self.advertised = {}  # nothing as a node's extended resources: the slices say what each node has
            self.register_outputs({"cards": [card.__dict__ for card in self.cards], "advertised": self.advertised})
            return
        kubelets = isinstance(workers, NodeContainerWorkers)  # real nodes: a device plugin can run there
        if hami:
            self.hami = HamiProcesses(
                f"{name}-hami",
                processes,
                control_plane.processes,
                stack.hami_binary(tenant.hami_version),
                HamiSettings.of(lab, tenant),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[workers.ready]),
                bind_time_role=not kubelets,
            )
            after = self.hami
        if hami and kubelets:
            # HAMi's device plugin on each node, started once HAMi serves (it registers a node on its add or
            # update event): it alone writes the register annotation and, through the kubelet, the capacity.
            self.readies = [
                HamiPlugin(
                    f"{prefix}-hami-plugin",
                    processes,
                    control_plane.processes.instance,
                    node.name,
                    node.cards,
                    tenant.hami_version,
                    workers.instance,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[after]),
                )
                for prefix, node in gpu_node_prefixes(name, tenant)
            ]
            self.advertised = {}  # what the kubelets have from the plugins: no gpumem-percentage
            for _, node in gpu_node_prefixes(name, tenant):
                for resource, value in hami_plugin.advertised([card.__dict__ for card in node.cards]).items():
                    self.advertised[resource] = self.advertised.get(resource, 0) + value
            self.register_outputs({"cards": [card.__dict__ for card in self.cards], "advertised": self.advertised})
            return
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
