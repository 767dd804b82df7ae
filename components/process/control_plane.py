"""ProcessControlPlane: a tenant's control plane as local processes (process mode, `runtime: process`).

etcd, kube-apiserver, kube-controller-manager and kube-scheduler (with HAMi's extender) on 127.0.0.1, by
kwokctl's binary runtime (ControlPlaneProvider below runs them; docs/process-lab.md). It gives the next
parts what Kamaji's TenantControlPlane gives them (components/parts.py), and its own folder to the process
workers and GPU node of the same runtime.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.parts import tenant_provider
from components.process.lifecycle import (
    api_ready,
    control_plane_of,
    instance_of,
    make_folder,
    observed,
    replace_or_restart,
)
from model import pulumi_state
from model.config import Tenant
from model.kube_client import self_contained
from process_lab.commands import free_port, is_ours, stop_all
from process_lab.control_plane import ControlPlane, lost_data
from process_lab.hami_scheduler import prepare
from process_lab.joinable import join_kubeconfig, kubeadm_configuration, make_joinable, start_relay
from process_lab.stack import ProcessStack, TenantProcesses

# The type the Docker lab's control plane has: one concept, so an existing stack's URNs stay as they were.
TYPE = "gpulab:index:TenantControlPlane"


# The Kubernetes provider `make tools` builds (tools/programs.toml): the SDK (requirements.txt) asks for its own
# release, which the Go module proxy does not serve, and the engine warns of the mismatch at every start.
PROGRAMS = Path(__file__).resolve().parents[2] / "tools" / "programs.toml"


def built_provider_version(programs: Path = PROGRAMS) -> str:
    """The release of pulumi-resource-kubernetes that process mode runs, as Pulumi writes a version (4.25.0)."""
    with programs.open("rb") as handle:
        return tomllib.load(handle)["pulumi-kubernetes"]["release"].removeprefix("v")


def process_stack(stack: str, hami: bool = True) -> ProcessStack:
    """Where the stack's programs and state are, checked before the first process starts: every program is
    there (pulumi.RunError naming the fix if not). `make plan` starts nothing and sets GPULAB_PLAN: it says
    what is missing in a line of its own."""
    found = ProcessStack.named(stack)
    missing = [program for program in found.missing() if hami or program != "hami-scheduler"]
    if missing and not pulumi.runtime.is_dry_run() and not os.environ.get("GPULAB_PLAN"):
        raise pulumi.RunError(
            f"runtime: process needs {', '.join(missing)} in {found.bin_dir}: run `make tools` "
            "(hami-scheduler: the Go module proxy refuses HAMi, so build HAMi v2.8.3's cmd/scheduler and set "
            "GPULAB_HAMI_SCHEDULER to it; docs/process-lab.md)"
        )
    return found


class ControlPlaneProvider(ResourceProvider):
    """A tenant's control plane by kwokctl (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
    kwok-controller), with HAMi's extender in its kube-scheduler: HAMi's ports and TLS are chosen here,
    before the scheduler starts, and used by HamiProvider."""

    KEYS = ("cluster", "bin_dir", "folder", "bind_address", "join", "without_hami", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        processes = TenantProcesses.from_props(props)
        # What an interrupted `pulumi up` left: processes and files without a state record. Never the stack's
        # folder: another tenant's create may be making its own folder inside it right now.
        self._clear(props, parents=False)
        make_folder(processes.folder)
        config, hami_port, metrics_port = None, None, None
        if not props.get("without_hami"):
            config, hami_port, metrics_port = prepare(processes.folder)
        control_plane = processes.control_plane
        control_plane.create(config, bind_address=props.get("bind_address"))
        joined = _joinable(props, control_plane, free_port()) if props.get("bind_address") else {}
        # kwokctl's kubeconfig names its certificate files under .state; the output carries them (a user's copy
        # must work anywhere, and after `make down` removed the folder).
        kubeconfig = self_contained(control_plane.kubeconfig.read_text(), control_plane.kubeconfig.parent)
        server = next(line.split()[-1] for line in kubeconfig.splitlines() if line.strip().startswith("server:"))
        outs = {
            **props,
            "kubeconfig": kubeconfig,
            "endpoint": server,
            "hami_port": hami_port,
            "hami_metrics_port": metrics_port,
            **joined,
        }
        return CreateResult(id_=str(processes.folder), outs=outs)

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
        """Start what stopped, on the same data, ports, certificates and kubeconfig: every object survives and
        every saved kubeconfig still works."""
        control_plane_of(olds).start()
        kept = {key: olds.get(key) for key in ("kubeconfig", "endpoint", "hami_port", "hami_metrics_port")}
        if olds.get("join_endpoint"):  # the relay again, on the same address and port (the nodes know it)
            port = int(str(olds["join_endpoint"]).rsplit(":", 1)[1])
            stop_all(f"{olds['folder']}/relay", timeout=5)
            relay = start_relay(Path(olds["folder"]), olds["bind_address"], port, _loopback(olds["kubeconfig"]))
            kept |= {"join_endpoint": olds["join_endpoint"], "relay_pid": relay}
        return UpdateResult(outs={**news, **kept, "running": True})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self._clear(props)

    @staticmethod
    def _clear(props: dict[str, Any], parents: bool = True) -> None:
        """Stop the cluster (kwokctl), then every process still naming the tenant's folder (HAMi and the
        bind-time role too, when killed by hand or never recorded), then remove the folder: TLS keys,
        scheduler config, logs, kubeconfig. Nothing stays; a tenant already gone (reboot) is fine."""
        processes = TenantProcesses.from_props(props)
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


def _loopback(kubeconfig: str) -> str:
    """host:port of the API server a kwokctl kubeconfig names."""
    server = next(line.split()[-1] for line in kubeconfig.splitlines() if line.strip().startswith("server:"))
    return server.removeprefix("https://")


def _joinable(props: dict[str, Any], control_plane: ControlPlane, port: int) -> dict[str, Any]:
    """Real nodes reach the API server through a relay on the lab network's gateway; kubeadm's phases make the
    tenant joinable (process_lab.joinable). What the nodes' join needs: the relay's address."""
    folder, address = Path(props["folder"]), props["bind_address"]
    relay = start_relay(folder, address, port, _loopback(control_plane.kubeconfig.read_text()))
    endpoint = f"{address}:{port}"
    tenant = props["join"]
    configuration = kubeadm_configuration(
        endpoint, tenant["kubernetes_version"], tenant["pod_cidr"], tenant["service_cidr"]
    )
    make_joinable(control_plane, join_kubeconfig(control_plane, endpoint), configuration, folder)
    return {"join_endpoint": endpoint, "relay_pid": relay}


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
