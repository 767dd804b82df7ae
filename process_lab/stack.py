"""Where a process-mode stack's programs come from and where each tenant's processes keep their state.

`ProcessStack` is the stack's part (the programs `make tools` built, or GPULAB_BIN; the state folder
.state/process/<stack>); `TenantProcesses` is one tenant's, the record every dynamic resource of process mode
(components/process/) keeps in its props, so that a later `pulumi destroy`, another process,
finds what to stop from the state alone. `ControlPlaneSettings` (with `JoinSettings` for real nodes) is what the
control plane's provider keeps beside it: HAMi's extender or not, and how nodes join.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from process_lab import hami_binary
from process_lab.control_plane import ControlPlane
from process_lab.preflight import ROOT, bin_dir, hami_missing, programs_missing


@dataclass(frozen=True)
class TenantProcesses:
    """One tenant's processes: its kwokctl cluster's name, the programs' folder and the tenant's own folder
    (state, logs, keys: removed by destroy)."""

    cluster: str
    bin_dir: Path
    folder: Path

    def props(self) -> dict[str, str]:
        return {"cluster": self.cluster, "bin_dir": str(self.bin_dir), "folder": str(self.folder)}

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> TenantProcesses:
        # An older control plane's state calls its cluster `name`.
        return cls(str(props.get("cluster") or props["name"]), Path(props["bin_dir"]), Path(props["folder"]))

    @property
    def control_plane(self) -> ControlPlane:
        return ControlPlane(self.cluster, self.bin_dir, self.folder / "kwok")


@dataclass(frozen=True)
class JoinSettings:
    """What real nodes need to join: the address the relay listens on (the lab network's gateway) and the
    cluster settings kubeadm's configuration carries."""

    bind_address: str
    kubernetes_version: str
    pod_cidr: str
    service_cidr: str


@dataclass(frozen=True)
class ControlPlaneSettings:
    processes: TenantProcesses
    hami: bool  # HAMi's extender in the tenant's kube-scheduler
    join: JoinSettings | None  # None: KWOK nodes, loopback only

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> ControlPlaneSettings:
        """A provider's props, as ControlPlaneProcesses writes them: `bind_address` and `join` only for real
        nodes, `without_hami` only without HAMi (an older state's inputs stay as they were)."""
        join = None
        if props.get("bind_address"):
            cluster = props["join"]
            join = JoinSettings(
                props["bind_address"], cluster["kubernetes_version"], cluster["pod_cidr"], cluster["service_cidr"]
            )
        return cls(TenantProcesses.from_props(props), not props.get("without_hami"), join)


@dataclass(frozen=True)
class ProcessStack:
    """A process-mode stack's programs and state folder."""

    bin_dir: Path
    folder: Path
    # HAMi's scheduler of each release the stack's tenants run (hamiVersion), None where there is none.
    hami_binaries: dict[str, Path | None]

    @classmethod
    def named(cls, stack: str, hami_versions: tuple[str, ...] = ()) -> ProcessStack:
        programs = bin_dir()
        binaries = {version: hami_binary.find(programs, version).path for version in hami_versions}
        return cls(programs, ROOT / ".state" / "process" / stack, binaries)

    def hami_binary(self, version: str) -> Path | None:
        return self.hami_binaries.get(version)

    def tenant(self, name: str) -> TenantProcesses:
        return TenantProcesses(f"gpulab-{name}", self.bin_dir, self.folder / name)

    def missing(self) -> list[str]:
        """The programs `make up` needs that are not there (process_lab.preflight)."""
        return programs_missing(self.bin_dir) + hami_missing(self.bin_dir, tuple(self.hami_binaries))
