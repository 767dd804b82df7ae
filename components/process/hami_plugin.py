"""HamiPlugin: gpulab's HAMi device plugin on one real GPU node of a HAMi tenant, in process mode with workers:
containers (process_lab/hami_plugin.py).

It is HAMi's device plugin there, as HAMi's NVIDIA plugin is on a node with GPUs: the node's kubelet registers its
three resources, it writes the node's `hami.io/node-nvidia-register`, and the kubelet calls its Allocate for every
GPU container HAMi binds to the node. It takes the place, on real nodes, of what KWOK nodes keep: GpuInventory
(the annotation and capacity written by hand) and the bind-time role beside hami-scheduler
(components/process/gpu_node.py).
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.process.lifecycle import observed, replace_or_restart
from model.catalog import Card
from process_lab import hami_plugin
from process_lab.hami_plugin import NodePlugin
from process_lab.stack import TenantProcesses


class HamiPluginProvider(ResourceProvider):
    """gpulab-hami-plugin on one real node, registered with its kubelet, its cards on the node, taken in by HAMi.
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = ("cluster", "bin_dir", "folder", "control_plane", "node", "cards", "hami_version", "worker", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        expires = hami_plugin.start(NodePlugin.from_props(props))
        outs = {**props, "token_expires": expires, "running": True}
        return CreateResult(id_=f"{props['cluster']}/{props['node']}/hami-plugin", outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A plugin found stopped (or its token near its end) is started again in place; a node made anew (`worker`)
        # gets it anew.
        return replace_or_restart(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        found = hami_plugin.serving(NodePlugin.from_props(props))
        read = ReadResult(id_=id_, outs=props, inputs=props) if found is None else observed(id_, props, found)
        # The token's end is an output only: as an input, every refresh would show it as a change of the program's.
        inputs = {key: value for key, value in (read.inputs or {}).items() if key != "token_expires"}
        return ReadResult(id_=read.id, outs=read.outs, inputs=inputs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        hami_plugin.stop(NodePlugin.from_props(props))


class HamiPlugin(pulumi.dynamic.Resource):
    token_expires: pulumi.Output[float]

    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: pulumi.Input[str],
        node: str,
        cards: list[Card],
        hami_version: str,
        worker: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            **processes.props(),
            "control_plane": control_plane,
            "node": node,
            "cards": [dict(card.__dict__) for card in cards],  # the plugin's cards file: model/catalog.py Card
            "hami_version": hami_version,  # the plugin behaves as HAMi's plugin of the tenant's release
            "worker": worker,  # the node's container: one made anew gets the plugin anew
            "token_expires": None,
            "running": True,
        }
        super().__init__(HamiPluginProvider(), name, props, opts)
