"""DraDevices: a DRA tenant's simulated cards as devices of gpulab's driver (model/dra.py), in process mode.

The tenant's DeviceClass, and per GPU node its cards as the node's ResourceSlice:
- on KWOK nodes, created through the tenant's provider once the nodes exist. No program plays the driver there:
  nothing prepares a claim (there is no kubelet), and the tenant's own kube-scheduler allocates claims from the
  slices alone (tests/real/test_dra_allocation.py);
- on real nodes (workers: containers), published by gpulab's DRA kubelet plugin, which the node's kubelet then asks
  to prepare each claim of a pod bound there (process_lab/dra_plugin.py, DraPluginProvider below).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.process.lifecycle import observed, replace_or_restart
from model import dra
from model.config import Tenant
from process_lab import dra_plugin
from process_lab.dra_plugin import NodePlugin
from process_lab.stack import TenantProcesses


def _object(name: str, manifest: dict, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    # CustomResource carries any apiVersion/kind through the provider's dynamic client (resource.k8s.io/v1 is
    # built in, not a CRD, which it handles the same way).
    body = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind", "metadata")}
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        opts=opts,
        **body,
    )


class DraPluginProvider(ResourceProvider):
    """gpulab's DRA kubelet plugin on one real node, serving and its slice published (process_lab/dra_plugin.py).
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = ("cluster", "bin_dir", "folder", "control_plane", "node", "devices", "worker", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        dra_plugin.start(NodePlugin.from_props(props))
        return CreateResult(id_=f"{props['cluster']}/{props['node']}/dra-plugin", outs={**props, "running": True})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A plugin found stopped is started again in place; a node made anew (`worker`) gets it anew.
        return replace_or_restart(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        found = dra_plugin.serving(NodePlugin.from_props(props))
        return ReadResult(id_=id_, outs=props, inputs=props) if found is None else observed(id_, props, found)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        dra_plugin.stop(NodePlugin.from_props(props))


class DraPlugin(pulumi.dynamic.Resource):
    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: pulumi.Input[str],
        node: str,
        devices: dict,
        worker: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            **processes.props(),
            "control_plane": control_plane,
            "node": node,
            "devices": devices,
            "worker": worker,  # the node's container: one made anew gets the plugin anew
            "running": True,
        }
        super().__init__(DraPluginProvider(), name, props, opts)


class DraDevices(pulumi.ComponentResource):
    """The tenant's DeviceClass and its GPU nodes' ResourceSlices (or, on real nodes, the plugins that publish
    them)."""

    readies: list[pulumi.Resource]

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        provider: k8s.Provider,
        after: pulumi.Resource,
        opts: pulumi.ResourceOptions,
        real_nodes: tuple[TenantProcesses, pulumi.Input[str], pulumi.Input[str]] | None = None,
    ) -> None:
        """`real_nodes`: the tenant's processes, its control plane's instance and its node container's, when its
        workers are real nodes."""
        super().__init__("gpulab:index:DraDevices", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[after])
        device_class = _object(f"{name}-class", dra.device_class(tenant.name), child)
        self.readies = [device_class]
        for node in tenant.gpu_nodes():
            if real_nodes is None:
                manifest = dra.resource_slice(tenant.name, node.name, node.cards)
                self.readies.append(_object(f"{name}-{node.name}", manifest, child))
                continue
            processes, control_plane, worker = real_nodes
            devices = dra.node_devices(tenant.name, node.name, node.cards)
            opts = pulumi.ResourceOptions(parent=self, depends_on=[after])
            self.readies.append(
                DraPlugin(f"{name}-{node.name}-plugin", processes, control_plane, node.name, devices, worker, opts)
            )
        self.register_outputs({"driver": dra.DRIVER, "device_class": dra.device_class_name(tenant.name)})
