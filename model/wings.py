"""The lab's wings: each way gpulab can run a lab, with what it is like, one frozen row per wing.

A stack picks its wing with `gpulab:runtime` (`docker`, the default, or `process`): the key keeps the name users
write, but the code says "wing", never "runtime", which is already Pulumi's (`runtime: python`), kwokctl's
(`--runtime binary`) and the container runtime's. Each wing builds its tenants from its own folder,
`components/<wing>/lab.py`, which `components/wings.py` registers; the row here answers what the tools ask of a
lab without building it (preview, diagnose, the source cache), so none of them asks which wing it is. Adding a
wing is its folder, one line of that registry and one row here (tests/components/test_third_wing.py shows it).

Plain Python and the standard library only: the policy pack's venv and the tools import it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wing:
    """What a wing's lab is like, each trait one question the tools ask of it."""

    name: str  # the value of `gpulab:runtime` that picks it
    # Kamaji's management cluster holds the tenants' control planes (or a cluster of the user's does).
    management_cluster: bool
    # With `management.mode: kind`, that cluster is kind's, on kind's Docker network (MetalLB's pool comes from it).
    kind_management: bool
    # The lab's nodes are containers of the Docker host: diagnose asks docker and kind, and reads the host's kernel.
    docker_host: bool
    # Charts, images, CLIs and plugins come from outside (model/docker_lab/sources.py, `make cache`, `make up`'s
    # downloads).
    downloads: bool
    # It runs the programs `make tools` built under ./bin (process_lab/preflight.py), which preview lists if missing.
    programs_from_bin: bool
    # Each tenant's control plane is local processes on 127.0.0.1, with their logs under .state/process/<stack>.
    local_processes: bool
    # Each tenant's system parts run as workloads in its cluster, which diagnose expects there: Kamaji's kube-proxy,
    # CoreDNS and konnectivity, the CNI's, HAMi's scheduler and its device plugin (which puts the cards on the node).
    system_workloads: bool


WINGS: dict[str, Wing] = {
    # kind's management cluster with Kamaji; per tenant kindest/node containers (or SSH machines) and HAMi's chart.
    "docker": Wing(
        "docker",
        management_cluster=True,
        kind_management=True,
        docker_host=True,
        downloads=True,
        programs_from_bin=False,
        local_processes=False,
        system_workloads=True,
    ),
    # Per tenant kwokctl's control plane, KWOK nodes (or node containers) and hami-scheduler, as local processes.
    "process": Wing(
        "process",
        management_cluster=False,
        kind_management=False,
        docker_host=False,
        downloads=False,
        programs_from_bin=True,
        local_processes=True,
        system_workloads=False,
    ),
}
DEFAULT_WING = "docker"  # a stack that sets no `gpulab:runtime`
