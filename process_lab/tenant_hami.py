"""HAMi for one tenant of process mode, in the order it starts and stops: HAMi's webhook and hami-scheduler
(extender and webhook) on the ports the tenant's kube-scheduler was configured with (process_lab/hami_scheduler.py
`prepare`), then the device plugin's bind-time role (process_lab/device_plugin.py), each in a session of its own:
both outlive the Pulumi provider that starts them. On real nodes (workers: containers) the bind-time role is left
out (`bind_time_role` false): each node's kubelet calls gpulab-hami-plugin's Allocate, which marks the pod and
releases the node's lock as HAMi's device plugin does (process_lab/hami_plugin.py).

Process mode's HamiProvider (components/process/gpu_node.py) is a thin adaptor: its props become a TenantHami, one
call here does the work, and a RunningHami becomes its outputs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from process_lab.commands import is_ours, start_detached, stop_all, stop_session
from process_lab.hami_scheduler import HamiScheduler, HamiSettings, serve
from process_lab.stack import TenantProcesses


@dataclass(frozen=True)
class TenantHami:
    """What a tenant's HAMi is started with: the tenant's processes, HAMi's program, the ports its kube-scheduler
    was configured with, the settings from the stack's config, and whether the bind-time role runs beside it
    (KWOK nodes: no kubelet, so no device plugin, plays its part)."""

    processes: TenantProcesses
    binary: Path
    port: int
    metrics_port: int
    settings: HamiSettings
    bind_time_role: bool = True

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> TenantHami:
        """`without_bind_time_role` only where a device plugin plays that part (real nodes): a state written
        before the key, and every KWOK stack, run the role as before."""
        return cls(
            TenantProcesses.from_props(props),
            Path(props["hami_binary"]),
            int(props["hami_port"]),
            int(props["hami_metrics_port"]),
            HamiSettings.from_props(props["settings"]),
            bind_time_role=not props.get("without_bind_time_role"),
        )


@dataclass(frozen=True)
class RunningHami:
    """The sessions a started HAMi left running: hami-scheduler's and the bind-time role's (None where it does not
    run)."""

    hami_pid: int | None
    bind_time_pid: int | None

    def outputs(self) -> dict[str, Any]:
        return {"hami_pid": self.hami_pid, "bind_time_pid": self.bind_time_pid}

    @classmethod
    def from_outputs(cls, outs: dict[str, Any]) -> RunningHami:
        return cls(outs.get("hami_pid"), outs.get("bind_time_pid"))

    def alive(self, folder: Path, bind_time_role: bool = True) -> bool:
        """Every session it runs (the bind-time role's only with `bind_time_role`) still runs programs of this
        tenant (a pid reused since is not ours)."""
        pids = (self.hami_pid, self.bind_time_pid) if bind_time_role else (self.hami_pid,)
        return all(pid and is_ours(int(pid), str(folder)) for pid in pids)


def start(hami: TenantHami) -> RunningHami:
    folder = hami.processes.folder
    control_plane = hami.processes.control_plane
    scheduler = HamiScheduler(hami.binary, folder, hami.port, hami.metrics_port)
    serve(scheduler, control_plane, hami.settings, folder / "tls")
    assert scheduler.process is not None  # serve started it
    if not hami.bind_time_role:
        return RunningHami(scheduler.process.pid, None)
    role = [
        sys.executable,
        "-m",
        "process_lab.device_plugin",
        control_plane.name,
        hami.processes.bin_dir,
        folder / "kwok",
    ]
    bind_time = start_detached(role, env=os.environ, log=folder / "bind-time.log")
    return RunningHami(scheduler.process.pid, bind_time)


def stop(folder: Path, running: RunningHami) -> None:
    """Both sessions, then any HAMi an interrupted start left (it names its TLS files)."""
    for pid in (running.bind_time_pid, running.hami_pid):
        if pid:
            stop_session(int(pid), str(folder))
    stop_all(f"{folder}/tls/", timeout=5)
