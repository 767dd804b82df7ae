"""Findings about the host: kernel settings, Docker itself, kind's clusters, and process mode's control planes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from diagnose.analyze import (
    BR_NETFILTER,
    FIX_BR_NETFILTER,
    FIX_BRIDGE_NF_SYSCTL,
    FIX_CONNTRACK,
    FIX_INOTIFY,
    Finding,
)
from diagnose.cluster_findings import process_logs
from process_lab.resume import stopped_control_planes

BRIDGE_NF = "net.bridge.bridge-nf-call-iptables"


def kernel_findings(docker_info: dict[str, Any] | None, sysctls: dict[str, int], cpus: int) -> list[Finding]:
    """Host kernel settings the node containers need (scripts/node-host-check.sh has the same limits):
    from `docker info` warnings, and from /proc/sys where the Docker host is this machine."""
    findings = []
    # Read from /proc/sys (this machine is the Docker host): 0 means the hooks are there and only switched off.
    bridge_fix = FIX_BRIDGE_NF_SYSCTL if sysctls.get(BRIDGE_NF) == 0 else FIX_BR_NETFILTER
    for warning in (docker_info or {}).get("Warnings") or []:
        if BR_NETFILTER.search(warning):
            findings.append(
                Finding(
                    "host",
                    "br_netfilter",
                    warning,
                    "",
                    bridge_fix,
                    "missing host kernel setting: br_netfilter",
                )
            )
    minimum = {
        "fs.inotify.max_user_instances": 512,
        "fs.inotify.max_user_watches": 524288,
        "net.netfilter.nf_conntrack_max": max(131072, 32768 * cpus),
    }
    for key, want in minimum.items():
        have = sysctls.get(key)
        if have is not None and have < want:
            fix = FIX_CONNTRACK if "conntrack" in key else FIX_INOTIFY
            name = "nf_conntrack_max" if "conntrack" in key else "inotify limits"
            findings.append(
                Finding(
                    "host",
                    key,
                    f"{have}, below the {want} node containers need",
                    "",
                    fix,
                    f"missing host kernel setting: {name}",
                )
            )
    return findings


def docker_findings(
    containers: list[dict], expected: list[str], network: str, network_found: bool | None
) -> list[Finding]:
    """gpulab's containers (kind node, workers) running, and its network present. `containers` are
    `docker ps -a --format '{{json .}}'` lines parsed."""
    findings = []
    by_name = {c.get("Names", ""): c for c in containers}
    for name in expected:
        container = by_name.get(name)
        if container is None:
            findings.append(
                Finding(
                    "docker",
                    f"container {name}",
                    "not found",
                    "",
                    "deleted outside Pulumi, or never created: `make down` then `make up`",
                )
            )
        elif container.get("State") != "running":
            findings.append(
                Finding(
                    "docker",
                    f"container {name}",
                    container.get("Status") or container.get("State") or "not running",
                    "",
                    f"`docker logs {name}` says why; `docker start {name}`, or `make down` then `make up`",
                )
            )
    if network_found is False:
        findings.append(Finding("docker", f"network {network}", "not found", "", "`make down` then `make up`"))
    return findings


def kind_findings(clusters: list[str] | None, name: str) -> list[Finding]:
    if clusters is None or name in clusters:
        return []
    return [
        Finding(
            "management",
            f"kind cluster {name}",
            "kind cluster gone",
            "`kind get clusters` does not list it",
            "it was deleted outside Pulumi: `make down` (it finishes without it) then `make up`",
            "kind cluster gone",
        )
    ]


def now_utc() -> datetime:
    return datetime.now(UTC)


def process_findings(stack_folder: Path, stack: str, bin_dir: Path) -> list[Finding]:
    """Process mode: a tenant whose control-plane programs are not all running (killed, crashed, the host
    rebooted), each named; its data is there, so `make up` starts them again on it (process_lab/resume.py)."""
    return [
        Finding(
            f"tenant {tenant}",
            "control plane",
            f"{', '.join(control_plane.stopped_components())} not running",
            "",
            f"`make up STACK={stack}` starts them again on the tenant's data; their logs are under "
            f"{process_logs(stack, tenant)}",
            "control-plane process gone",
        )
        for tenant, control_plane in stopped_control_planes(stack_folder, bin_dir)
    ]
