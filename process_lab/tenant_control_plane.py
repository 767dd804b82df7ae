"""A tenant's control plane of local processes, in the order it is brought up, started again and torn down.

Process mode's ControlPlaneProvider (components/process/control_plane.py) is a thin adaptor: its props become a
ControlPlaneSettings (process_lab/stack.py), one call here does the work, and a RunningControlPlane becomes its
outputs. The order: what an interrupted `pulumi up` left is cleared, the tenant's folder made, HAMi's TLS and
ports chosen before the scheduler starts (process_lab/tenant_hami.py uses them), kwokctl creates the cluster,
then, for real nodes, the relay on the lab network's gateway and kubeadm's phases (process_lab.joinable).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from process_lab.commands import stop_all
from process_lab.hami_scheduler import prepare
from process_lab.joinable import open_to_nodes, server_of, start_relay
from process_lab.stack import ControlPlaneSettings, TenantProcesses


@dataclass(frozen=True)
class RunningControlPlane:
    """What a brought-up control plane gives the rest: its kubeconfig (self-contained: a user's copy works
    anywhere, and after `make down` removed the folder), its API server's URL, HAMi's ports, and for real nodes
    the relay's address and process."""

    kubeconfig: str
    endpoint: str
    hami_port: int | None
    hami_metrics_port: int | None
    join_endpoint: str | None = None
    relay_pid: int | None = None

    def outputs(self) -> dict[str, Any]:
        outs: dict[str, Any] = {
            "kubeconfig": self.kubeconfig,
            "endpoint": self.endpoint,
            "hami_port": self.hami_port,
            "hami_metrics_port": self.hami_metrics_port,
        }
        if self.join_endpoint is not None:
            outs |= {"join_endpoint": self.join_endpoint, "relay_pid": self.relay_pid}
        return outs

    @classmethod
    def from_outputs(cls, outs: dict[str, Any]) -> RunningControlPlane:
        return cls(
            outs["kubeconfig"],
            outs["endpoint"],
            outs.get("hami_port"),
            outs.get("hami_metrics_port"),
            outs.get("join_endpoint"),
            outs.get("relay_pid"),
        )


def bring_up(settings: ControlPlaneSettings) -> RunningControlPlane:
    processes = settings.processes
    # What an interrupted `pulumi up` left: processes and files without a state record. Never the stack's
    # folder: another tenant's bring-up may be making its own folder inside it right now.
    tear_down(processes, parents=False)
    make_folder(processes.folder)
    config, hami_port, metrics_port = prepare(processes.folder) if settings.hami else (None, None, None)
    control_plane = processes.control_plane
    control_plane.create(config, bind_address=settings.join.bind_address if settings.join else None)
    kubeconfig = control_plane.admin_kubeconfig()
    running = RunningControlPlane(kubeconfig, server_of(kubeconfig), hami_port, metrics_port)
    if settings.join is None:
        return running
    endpoint, relay = open_to_nodes(control_plane, kubeconfig, settings.join, processes.folder)
    return replace(running, join_endpoint=endpoint, relay_pid=relay)


def start_again(settings: ControlPlaneSettings, running: RunningControlPlane) -> RunningControlPlane:
    """Start what stopped, on the same data, ports, certificates and kubeconfig: every object survives and every
    saved kubeconfig still works. The relay again on the same address and port: the nodes know it."""
    settings.processes.control_plane.start()
    if settings.join is None or running.join_endpoint is None:
        return running
    port = int(running.join_endpoint.rsplit(":", 1)[1])
    stop_all(f"{settings.processes.folder}/relay", timeout=5)
    target = running.endpoint.removeprefix("https://")
    relay = start_relay(settings.processes.folder, settings.join.bind_address, port, target)
    return replace(running, relay_pid=relay)


def tear_down(processes: TenantProcesses, parents: bool = True) -> None:
    """Stop the cluster (kwokctl), then every process still naming the tenant's folder (HAMi and the bind-time
    role too, when killed by hand or never recorded), then remove the folder: TLS keys, scheduler config, logs,
    kubeconfig. Nothing stays; a tenant already gone (reboot) is fine."""
    folder = processes.folder
    if folder.exists():
        processes.control_plane.delete()
    stop_all(f"{folder}/")  # the slash: tenant-a's sweep must not match tenant-ab's paths
    shutil.rmtree(folder, ignore_errors=True)
    if not parents:
        return
    for parent in (folder.parent, folder.parent.parent):  # .state/process/<stack>, .state/process
        with contextlib.suppress(OSError):
            parent.rmdir()  # only when empty: another tenant or stack may still run (make_folder retries)


def make_folder(folder: Path, attempts: int = 20) -> None:
    """Make a tenant's folder (mode 0700) with its parents. Another tenant's tear_down removes the stack's folder
    when it finds it empty, which may fall between `mkdir(parents=True)` making it and making ours inside it
    (FileNotFoundError, seen in 3 of 8 runs): make them again."""
    for attempt in range(attempts):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            break
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise
    os.chmod(folder, 0o700)
