"""One GPU node's simulated cards in process mode: put on, found or not, taken off.

Process mode's GpuInventoryProvider (components/process/gpu_node.py) is a thin adaptor: its props become a
NodeInventory and one call here does the work. The cards are HAMi's register annotation and the node's capacity,
as the Docker lab's apply-gpu-inventory.sh and mock device plugin write them (process_lab.gpu_nodes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from model.catalog import REGISTER_ANNOTATION
from model.quantity import parse_quantity
from process_lab.commands import ProcessLabError
from process_lab.gpu_nodes import write_inventory
from process_lab.hami_plugin import UNIT as PLUGIN_UNIT
from process_lab.hami_scheduler import wait_for_registered
from process_lab.node_containers import running, unit_state
from process_lab.stack import TenantProcesses


@dataclass(frozen=True)
class NodeInventory:
    processes: TenantProcesses
    node: str
    register: str  # HAMi's register annotation
    capacity: dict[str, int]  # nvidia.com/gpu, gpumem, gpucores
    hami: bool  # HAMi takes the cards in (else kube-scheduler counts them as extended resources)
    kwok: bool  # a KWOK node; else a real node's container, whose kubelet keeps its own cpu, memory and pods

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> NodeInventory:
        """A provider's props, as GpuInventory writes them: `without_hami` only without HAMi, `worker` (the node
        container) only for a real node."""
        return cls(
            TenantProcesses.from_props(props),
            props["node"],
            props["register"],
            dict(props["capacity"]),
            not props.get("without_hami"),
            not props.get("worker"),
        )


def put_on(inventory: NodeInventory) -> None:
    """The cards on the node, then, with HAMi, the wait until HAMi has taken them in: on the node's add event or
    its 15 s registration tick (v2.8.3 pkg/scheduler/scheduler.go)."""
    processes = inventory.processes
    control_plane = processes.control_plane
    write_inventory(control_plane, inventory.node, inventory.register, inventory.capacity, inventory.kwok)
    if inventory.hami:
        wait_for_registered(processes.folder / "hami-scheduler.log", [inventory.node])


def carried(inventory: NodeInventory) -> bool | None:
    """Whether the node is there and carries the cards (annotation and capacity); None when its API server does
    not answer now (its objects are still in etcd: the control plane's own read decides). Only gpulab writes
    them, so a node that has them is as it was made."""
    control_plane = inventory.processes.control_plane
    if not control_plane.answers():
        return None
    try:
        answer = control_plane.kubectl("get", "node", inventory.node, "-o", "json", check=False, timeout=10)
    except ProcessLabError:
        return None
    node = json.loads(answer.stdout) if answer.returncode == 0 else {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    carries = (node.get("metadata") or {}).get("annotations", {}).get(REGISTER_ANNOTATION) == inventory.register
    return carries and all(same_quantity(capacity.get(key), value) for key, value in inventory.capacity.items())


def take_off(inventory: NodeInventory) -> None:
    """HAMi's register annotation off the node, where the API server still answers (an API server gone is fine:
    the node lives only in that control plane's etcd), and only while it is still the one this inventory wrote.

    A stack upgraded to HAMi's device plugin on a real node replaces this inventory with the plugin, created before
    this is deleted: the plugin has written the annotation by then (the same text, for v2.8.3's cards), and it
    writes it once per start only (tools/gpulab-hami-plugin register.go, as HAMi's plugin does), so the annotation
    of a node whose plugin runs is left alone; any other value is someone else's, and a JSON patch whose `test`
    operation holds this inventory's value removes it only if it is still that (compare and delete, one request)."""
    control_plane = inventory.processes.control_plane
    if not control_plane.kubeconfig.exists():
        return
    if not inventory.kwok and plugin_runs(inventory.node):
        return
    path = "/metadata/annotations/" + REGISTER_ANNOTATION.replace("~", "~0").replace("/", "~1")
    patch = [{"op": "test", "path": path, "value": inventory.register}, {"op": "remove", "path": path}]
    # A failed test is the API server's 422 (or 404 without the node): nothing of ours to remove, so not an error.
    control_plane.kubectl("patch", "node", inventory.node, "--type=json", "-p", json.dumps(patch), check=False,
                          timeout=20)  # fmt: skip


def plugin_runs(node: str) -> bool:
    """Whether the real node's container runs HAMi's device plugin now (process_lab/hami_plugin.py UNIT)."""
    if not running(node):
        return False
    return unit_state(node, PLUGIN_UNIT) == "active"


def same_quantity(found: str | None, expected: int | str) -> bool:
    """The API server writes a quantity in its canonical form (20000 comes back as "20k"): compare values."""
    try:
        return found is not None and parse_quantity(found) == parse_quantity(str(expected))
    except ValueError:
        return False
