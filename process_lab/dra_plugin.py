"""A DRA tenant's real node: gpulab's DRA kubelet plugin (tools/gpulab-dra-plugin, in the node image) started in
the node container with the node's devices (model/dra.py node_devices), and the wait until it has registered with
the kubelet and published the node's ResourceSlice.

The plugin runs as the node's systemd unit gpulab-dra-plugin.service (node-image/files), with the kubelet's own
credentials. Process mode's DraPluginProvider (components/process/dra.py) is a thin adaptor over this module.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from model import dra
from model.quantity import parse_quantity
from process_lab.commands import ProcessLabError
from process_lab.node_containers import node_exec, running, unit_report, unit_state
from process_lab.stack import TenantProcesses

DEVICES_FILE = "/etc/gpulab/dra/devices.json"  # the unit's ConditionPathExists and --devices
UNIT = "gpulab-dra-plugin.service"
PROGRAM = "/usr/bin/gpulab-dra-plugin"
START_TIMEOUT = 120  # seconds from the unit's start to the node's slice published


@dataclass(frozen=True)
class NodePlugin:
    """One real node's plugin: the tenant's processes (its API server), the node (its container's name) and
    the devices it publishes."""

    processes: TenantProcesses
    node: str
    devices: dict[str, Any]

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> NodePlugin:
        return cls(TenantProcesses.from_props(props), props["node"], dict(props["devices"]))

    @property
    def selector(self) -> str:
        return f"spec.nodeName={self.node},spec.driver={dra.DRIVER}"


Devices = list[tuple[str, int, int]]  # (name, memory MB, cores %) of each device, sorted by name


def _devices(devices: list[dict[str, Any]]) -> Devices:
    """Each device's name and capacities, read as values ("81920" and "80k" alike)."""
    found = []
    for device in devices:
        capacity = device.get("capacity") or {}
        memory = parse_quantity(str((capacity.get(dra.MEMORY) or {}).get("value", "0")))
        cores = parse_quantity(str((capacity.get(dra.CORES) or {}).get("value", "0")))
        found.append((str(device.get("name")), int(memory), int(cores)))
    return sorted(found)


def published(plugin: NodePlugin) -> Devices | None:
    """The devices of the node's slices of gpulab's driver, as the API server has them; None when it does not
    answer now."""
    control_plane = plugin.processes.control_plane
    try:
        answer = control_plane.kubectl(
            "get", "resourceslices", "--field-selector", plugin.selector, "-o", "json", check=False, timeout=10
        )
    except ProcessLabError:
        return None
    if answer.returncode != 0:
        return None
    items = json.loads(answer.stdout).get("items") or []
    return _devices([device for item in items for device in (item.get("spec") or {}).get("devices") or []])


def _wanted(plugin: NodePlugin) -> Devices:
    return _devices(plugin.devices["devices"])


def _delete_slices(plugin: NodePlugin) -> None:
    """The node's slices of gpulab's driver deleted where the API server answers: a slice a former plugin left (the
    kubelet deletes it only 30 s after the driver is gone) must not pass for the new one's."""
    control_plane = plugin.processes.control_plane
    if control_plane.kubeconfig.exists():
        selected = ("--field-selector", plugin.selector, "--ignore-not-found")
        control_plane.kubectl("delete", "resourceslices", *selected, check=False, timeout=20)


def start(plugin: NodePlugin, timeout: float = START_TIMEOUT, interval: float = 1.0) -> None:
    """The devices file written, the unit (re)started, then the wait until the node's slice holds every device."""
    node = plugin.node
    if not running(node):
        raise ProcessLabError(f"the node container {node} is not running (docker ps -a): `make up` makes it again")
    if node_exec(node, "test", "-x", PROGRAM, what=f"looking for {PROGRAM} in {node}", check=False).returncode != 0:
        raise ProcessLabError(
            f"{node}'s image has no {PROGRAM}, which a gpuSharing: dra tenant's real node runs: `make tools` builds "
            "it and `make node-image` puts it in the node image; then `make up` again"
        )
    text = json.dumps(plugin.devices, indent=2, sort_keys=True)
    node_exec(node, "sh", "-c", f"mkdir -p {DEVICES_FILE.rsplit('/', 1)[0]} && cat > {DEVICES_FILE}", stdin=text,
          what=f"writing {node}'s DRA devices")  # fmt: skip
    node_exec(node, "systemctl", "stop", UNIT, what=f"stopping {UNIT} on {node}", check=False)
    _delete_slices(plugin)
    # Enabled, so that a node container started again runs it at boot (the kubelet deletes the slices it starts with).
    node_exec(node, "systemctl", "enable", "--now", UNIT, what=f"starting {UNIT} on {node}")
    deadline = time.monotonic() + timeout
    wanted = _wanted(plugin)
    while (found := published(plugin)) != wanted:
        if time.monotonic() >= deadline:
            said = ", ".join(f"{name} ({memory} MB, {cores} %)" for name, memory, cores in wanted)
            seen = ", ".join(name for name, _, _ in found or []) or "none"
            raise ProcessLabError(
                f"{node}: the node's ResourceSlice of {dra.DRIVER} did not hold {said} within {timeout:.0f} s "
                f"(found: {seen}). {unit_report(node, UNIT)}"
            )
        time.sleep(interval)


def serving(plugin: NodePlugin) -> bool | None:
    """Whether the plugin runs on its node and the node's slice holds its devices (names and capacities); None when
    the tenant's API server does not answer now (a refresh then keeps the resource as it was)."""
    if not running(plugin.node):
        return False
    if unit_state(plugin.node, UNIT) != "active":
        return False
    found = published(plugin)
    return None if found is None else found == _wanted(plugin)


def stop(plugin: NodePlugin) -> None:
    """The unit stopped and disabled and its devices file gone (where the node container still runs), then the
    node's slices deleted where the API server answers: the kubelet would remove them only after its grace period."""
    if running(plugin.node):
        node_exec(
            plugin.node, "systemctl", "disable", "--now", UNIT, what=f"stopping {UNIT} on {plugin.node}", check=False
        )
        node_exec(plugin.node, "rm", "-f", DEVICES_FILE, what=f"removing {plugin.node}'s DRA devices", check=False)
    _delete_slices(plugin)
