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
from process_lab.hami_scheduler import wait_for_registered
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
    the node lives only in that control plane's etcd)."""
    control_plane = inventory.processes.control_plane
    if control_plane.kubeconfig.exists():
        control_plane.kubectl("annotate", "node", inventory.node, f"{REGISTER_ANNOTATION}-", check=False, timeout=20)


def same_quantity(found: str | None, expected: int | str) -> bool:
    """The API server writes a quantity in its canonical form (20000 comes back as "20k"): compare values."""
    try:
        return found is not None and parse_quantity(found) == parse_quantity(str(expected))
    except ValueError:
        return False
