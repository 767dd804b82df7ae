"""ProcessControlPlane: a tenant's control plane as local processes (process mode, `runtime: process`).

etcd, kube-apiserver, kube-controller-manager and kube-scheduler (with HAMi's extender) on 127.0.0.1, by
kwokctl's binary runtime (ControlPlaneProvider below runs them; docs/process-lab.md). It gives the next
parts what Kamaji's TenantControlPlane gives them (components/parts.py), and its own folder to the process
workers and GPU node of the same runtime.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from boundary import pulumi_state
from components.parts import tenant_provider
from components.process.lifecycle import api_ready, control_plane_of, instance_of, observed, replace_or_restart
from model.config import Tenant
from process_lab.commands import is_ours
from process_lab.control_plane import lost_data
from process_lab.stack import ProcessStack, TenantProcesses
from process_lab.tenant_control_plane import (
    ControlPlaneSettings,
    RunningControlPlane,
    bring_up,
    start_again,
    tear_down,
)

# The type the Docker lab's control plane has: one concept, so an existing stack's URNs stay as they were.
TYPE = "gpulab:index:TenantControlPlane"


# The Kubernetes provider `make tools` builds (tools/programs.toml): the SDK (requirements.txt) asks for its own
# release, which the Go module proxy does not serve, and the engine warns of the mismatch at every start.
PROGRAMS = Path(__file__).resolve().parents[2] / "tools" / "programs.toml"


def built_provider_version(programs: Path = PROGRAMS) -> str:
    """The release of pulumi-resource-kubernetes that process mode runs, as Pulumi writes a version (4.25.0)."""
    with programs.open("rb") as handle:
        return tomllib.load(handle)["pulumi-kubernetes"]["release"].removeprefix("v")


def process_stack(stack: str, hami_versions: tuple[str, ...] = ()) -> ProcessStack:
    """Where the stack's programs and state are, checked before the first process starts: every program is
    there (pulumi.RunError naming the fix if not). `make plan` starts nothing and sets GPULAB_PLAN: it says
    what is missing in a line of its own."""
    found = ProcessStack.named(stack, hami_versions)
    missing = found.missing()
    if missing and not pulumi.runtime.is_dry_run() and not os.environ.get("GPULAB_PLAN"):
        raise pulumi.RunError(
            f"runtime: process needs {', '.join(missing)} in {found.bin_dir}: run `make tools` "
            "(hami-scheduler: the Go module proxy refuses HAMi, so build the tenants' HAMi release's cmd/scheduler "
            "from its tag and set GPULAB_HAMI_SCHEDULER_<RELEASE>, e.g. GPULAB_HAMI_SCHEDULER_V2_10_0, to it; "
            "docs/process-lab.md)"
        )
    return found


class ControlPlaneProvider(ResourceProvider):
    """A tenant's control plane by kwokctl (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
    kwok-controller), with HAMi's extender in its kube-scheduler; the order of its bring-up is
    process_lab/tenant_control_plane.py's.
    Its module path and name are part of every state holding one (process_lab/state_upgrade.py says why)."""

    KEYS = ("cluster", "bin_dir", "folder", "bind_address", "join", "without_hami", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        settings = ControlPlaneSettings.from_props(props)
        running = bring_up(settings)
        return CreateResult(id_=str(settings.processes.folder), outs={**props, **running.outputs()})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Found stopped with its data there (a process killed, a reboot): started again on that data. Only a
        # control plane whose data is gone is made anew (the program says so: process_lab.lost).
        olds = {**olds, "cluster": TenantProcesses.from_props(olds).cluster}  # `name` in older states: the same
        return replace_or_restart(olds, news, self.KEYS, restart=control_plane_of(olds).has_data())

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        running = not control_plane_of(props).stopped_components() and api_ready(props)
        relay = props.get("relay_pid")
        running = running and (not relay or is_ours(int(relay), f"{props['folder']}/relay"))
        return observed(id_, props, running)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        running = start_again(ControlPlaneSettings.from_props(olds), RunningControlPlane.from_outputs(olds))
        return UpdateResult(outs={**news, **running.outputs(), "running": True})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        tear_down(TenantProcesses.from_props(props))


class ControlPlaneProcesses(pulumi.dynamic.Resource):
    """A tenant's control plane as local processes (ControlPlaneProvider)."""

    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    hami_port: pulumi.Output[int]
    hami_metrics_port: pulumi.Output[int]
    folder: pulumi.Output[str]
    instance: pulumi.Output[str]
    join_endpoint: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        bind_address: pulumi.Input[str] | None,
        hami: bool,
        opts: pulumi.ResourceOptions,
        join: dict[str, str] | None = None,
    ) -> None:
        props: dict[str, Any] = {**processes.props(), "running": True}
        # Set only when they differ from a loopback control plane with HAMi's extender: such a state's inputs stay
        # as they were.
        if bind_address is not None:
            props["bind_address"] = bind_address
            props["join"] = join
        if not hami:
            props["without_hami"] = True
        outs = dict.fromkeys(("kubeconfig", "endpoint", "hami_port", "hami_metrics_port"))
        if bind_address is not None:
            outs |= dict.fromkeys(("join_endpoint", "relay_pid"))
        secret = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
        super().__init__(ControlPlaneProvider(), name, {**props, **outs}, pulumi.ResourceOptions.merge(opts, secret))
        # Which control plane this is: the same while it is started again on its data, another once it is made
        # anew (new certificates), which replaces every resource that lives in it. Not secret: a digest.
        self.instance = pulumi.Output.unsecret(self.kubeconfig.apply(instance_of))


class ProcessControlPlane(pulumi.ComponentResource):
    """A tenant's control plane as local processes, with its admin kubeconfig (secret) and a provider on it."""

    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    provider: k8s.Provider
    api_ready: pulumi.Resource
    processes: ControlPlaneProcesses
    tenant_processes: TenantProcesses  # the tenant's folder and programs, for the parts of this runtime

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        stack: ProcessStack,
        bind_address: pulumi.Input[str] | None = None,
        hami: bool = True,
        after: list[pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TYPE, name, None, opts)
        self.tenant_processes = stack.tenant(tenant.name)
        # A stopped control plane is started again on its data; one whose data is gone is made anew: say so.
        recorded = pulumi_state.recorded(pulumi.get_project(), pulumi.get_stack(), f"::{name}-processes")
        lost = lost_data(tenant.name, self.tenant_processes.control_plane, bool(recorded))
        if lost:
            pulumi.log.warn(lost, resource=self)
        # Real nodes reach the API server on the lab network's gateway (bind_address); KWOK nodes need loopback only.
        self.processes = ControlPlaneProcesses(
            f"{name}-processes",
            self.tenant_processes,
            bind_address,
            hami,
            opts=pulumi.ResourceOptions(parent=self, depends_on=after or []),
            join={
                "kubernetes_version": tenant.kubernetes_version,
                "pod_cidr": tenant.pod_cidr,
                "service_cidr": tenant.service_cidr,
            },
        )
        self.api_ready = self.processes  # kwokctl --wait: the API answers once it is created
        self.kubeconfig = pulumi.Output.secret(self.processes.kubeconfig)
        self.endpoint = self.processes.endpoint.apply(lambda url: url.removeprefix("https://"))
        self.provider = tenant_provider(name, self, self.kubeconfig, self.api_ready, built_provider_version())
        self.register_outputs({"kubeconfig": self.kubeconfig, "endpoint": self.endpoint})
