"""The resources of process mode (`runtime: process`): local processes, created and deleted by the engine.

Each is a Pulumi dynamic resource whose provider runs process_lab's code (the same code `make test-real`
runs) in the engine's Python provider process. That process lives in a process group the engine kills
when it closes the provider (pulumi sdk/go/common/util/cmdutil: RegisterProcessGroup, KillChildren), so
every program meant to outlive `pulumi up` starts in a session of its own (process_lab.commands). Every
delete finds what to stop from the resource's own state: a later `pulumi destroy` is another process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from model.catalog import REGISTER_ANNOTATION
from model.kube_client import self_contained
from model.quantity import parse_quantity
from process_lab.commands import ProcessLabError, free_port, is_ours, start_detached, stop_all, stop_session
from process_lab.control_plane import ControlPlane
from process_lab.gpu_nodes import apply_nodes, write_inventory
from process_lab.hami_scheduler import HamiScheduler, HamiSettings, prepare, serve, wait_for_registered
from process_lab.joinable import join_kubeconfig, kubeadm_configuration, make_joinable, start_relay
from process_lab.stack import TenantProcesses


def _control_plane(props: dict[str, Any]) -> ControlPlane:
    return TenantProcesses.from_props(props).control_plane


def _observed(id_: str, props: dict[str, Any], running: bool) -> ReadResult:
    """What a refresh reads: the resource as it was, with `running` as found. The program always asks for
    running: True, so one found stopped (processes killed by hand, a reboot) differs and is replaced (deleted,
    which clears what is left, then made again) by `make up`; `make down` still deletes it, files included."""
    observed = {**props, "running": running}
    return ReadResult(id_=id_, outs=observed, inputs=observed)


def _api_ready(props: dict[str, Any]) -> bool:
    """Whether the tenant's API server answers /readyz now (false when its processes are gone: killed by hand,
    or a reboot)."""
    control_plane = _control_plane(props)
    if not control_plane.kubeconfig.exists():
        return False
    try:
        return control_plane.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
    except ProcessLabError:  # no answer within the bound
        return False


def _read_in_cluster(id_: str, props: dict[str, Any], *args: str) -> ReadResult:
    """A resource that is objects in the tenant's API server: found stopped only when that server answers and
    `kubectl ARGS` fails. With the server down its objects are still in etcd, and the control plane's own read
    decides what happens to them (started again on its data, or made anew, which makes these anew too):
    a refresh never drops nodes whose pods a user made because their API server was down at that moment."""
    if not _api_ready(props):
        return ReadResult(id_=id_, outs=props, inputs=props)
    try:
        found = _control_plane(props).kubectl(*args, check=False, timeout=10).returncode == 0
    except ProcessLabError:
        found = False
    return _observed(id_, props, found)


def _changed(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    # `control_plane` (which control plane a resource lives in) is newer than process mode's first states: a
    # state written before it lacks it, which is no change.
    return [key for key in keys if olds.get(key) != news.get(key) and not (key == "control_plane" and key not in olds)]


def _diff(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...], restart: bool) -> DiffResult:
    """A change of any of `keys` replaces the resource (processes are restarted, never patched in place), but a
    resource found stopped (`running`) and nothing else is brought back in place when `restart` says it can be
    (an update): what it holds is kept."""
    changed = _changed(olds, news, keys)
    if changed == ["running"] and restart:
        return DiffResult(changes=True, replaces=[], delete_before_replace=True)
    return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=True)


def make_folder(folder: Path, attempts: int = 20) -> None:
    """Make a tenant's folder (mode 0700) with its parents. A destroy of another tenant removes the stack's
    folder when it finds it empty (ControlPlaneProvider._clear), which may fall between `mkdir(parents=True)`
    making it and making ours inside it (FileNotFoundError, seen in 3 of 8 runs): make them again."""
    for attempt in range(attempts):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            break
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise
    os.chmod(folder, 0o700)


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
        return _diff(olds, news, self.KEYS, restart=_control_plane(olds).has_data())

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        running = not _control_plane(props).stopped_components() and _api_ready(props)
        relay = props.get("relay_pid")
        running = running and (not relay or is_ours(int(relay), f"{props['folder']}/relay"))
        return _observed(id_, props, running)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Start what stopped, on the same data, ports, certificates and kubeconfig: every object survives and
        every saved kubeconfig still works."""
        _control_plane(olds).start()
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
        self.instance = pulumi.Output.unsecret(self.kubeconfig.apply(_instance_of))


def _instance_of(kubeconfig: str | None) -> str:
    return hashlib.sha256((kubeconfig or "").encode()).hexdigest()[:16]


def _delete_in_cluster(props: dict[str, Any], *objects: str) -> None:
    """Delete objects in the tenant's API server where it still answers. Every object lives only in that
    control plane's etcd, which its own delete removes: an API server killed by hand or gone with a reboot
    (connection refused) must not stop `make down`."""
    control_plane = _control_plane(props)
    if control_plane.kubeconfig.exists():
        control_plane.kubectl("delete", "--ignore-not-found", *objects, check=False, timeout=20)


class KwokNodesProvider(ResourceProvider):
    """A tenant's worker nodes as KWOK nodes (kwok-controller manages every node: its heartbeats, its pods)."""

    KEYS = ("cluster", "bin_dir", "folder", "control_plane", "nodes", "running")

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._apply(props)
        return CreateResult(id_=f"{props['cluster']}/nodes", outs=props)

    @staticmethod
    def _apply(props: dict[str, Any]) -> None:
        """Nodes without cards (GpuInventory writes those): an update re-applies, and nodes there keep their pods."""
        control_plane = _control_plane(props)
        apply_nodes(control_plane, {name: [] for name in props["nodes"]})
        control_plane.kubectl("wait", "--for=condition=Ready", "--timeout=60s", *(f"node/{n}" for n in props["nodes"]))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A node deleted by hand is applied again in place: replacing would delete the others, and a deleted
        # node's pods go with it (the pod garbage collector removes pods bound to a node that is gone).
        return _diff(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return _read_in_cluster(id_, props, "get", "node", *props["nodes"])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._apply(news)
        return UpdateResult(outs={**news, "running": True})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        _delete_in_cluster(props, "node", *props["nodes"])


class KwokNodes(pulumi.dynamic.Resource):
    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: ControlPlaneProcesses,
        nodes: list[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {**processes.props(), "control_plane": control_plane.instance, "nodes": nodes, "running": True}
        super().__init__(KwokNodesProvider(), name, props, opts)


class HamiProvider(ResourceProvider):
    """hami-scheduler (extender and webhook) and the device plugin's bind-time part, as local processes, and
    HAMi's MutatingWebhookConfiguration by URL (process_lab.hami_scheduler)."""

    KEYS = (
        "cluster",
        "bin_dir",
        "folder",
        "control_plane",
        "hami_binary",
        "hami_port",
        "hami_metrics_port",
        "settings",
        "running",
    )

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['cluster']}/hami", outs=self._start(props))

    @staticmethod
    def _start(props: dict[str, Any]) -> dict[str, Any]:
        folder = Path(props["folder"])
        control_plane = _control_plane(props)
        hami = HamiScheduler(
            Path(props["hami_binary"]), folder, int(props["hami_port"]), int(props["hami_metrics_port"])
        )
        serve(hami, control_plane, HamiSettings.from_props(props["settings"]), folder / "tls")
        argv = [
            sys.executable,
            "-m",
            "process_lab.device_plugin",
            control_plane.name,
            props["bin_dir"],
            folder / "kwok",
        ]
        bind_time = start_detached(argv, env=os.environ, log=folder / "bind-time.log")
        return {**props, "hami_pid": hami.process.pid, "bind_time_pid": bind_time, "running": True}

    @staticmethod
    def _stop(props: dict[str, Any]) -> None:
        folder = props["folder"]
        for key in ("bind_time_pid", "hami_pid"):
            if props.get(key):
                stop_session(int(props[key]), folder)
        stop_all(f"{folder}/tls/", timeout=5)  # a HAMi an interrupted create started (its TLS files)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # HAMi keeps nothing of its own (it reads nodes and pods from the API server): one found stopped is
        # started again in place, on the same ports.
        return _diff(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        alive = all(
            props.get(key) and is_ours(int(props[key]), props["folder"]) for key in ("hami_pid", "bind_time_pid")
        )
        return _observed(id_, props, alive)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._stop(olds)  # the one of the pair still running, if any
        return UpdateResult(outs=self._start(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self._stop(props)
        _delete_in_cluster(props, "mutatingwebhookconfiguration", "hami-webhook")


class HamiProcesses(pulumi.dynamic.Resource):
    hami_pid: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: ControlPlaneProcesses,
        hami_binary: Path | None,
        settings: HamiSettings,
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            **processes.props(),
            "control_plane": control_plane.instance,
            "hami_binary": str(hami_binary or ""),
            "hami_port": control_plane.hami_port,  # what the tenant's kube-scheduler was configured with
            "hami_metrics_port": control_plane.hami_metrics_port,
            "settings": settings.props(),
        }
        outs = {"hami_pid": None, "bind_time_pid": None}
        super().__init__(HamiProvider(), name, {**props, **outs, "running": True}, opts)


class GpuInventoryProvider(ResourceProvider):
    """One GPU node's cards: HAMi's register annotation and the node's capacity (as the Docker lab's
    apply-gpu-inventory.sh and mock device plugin write them), then the wait until HAMi has taken them in."""

    KEYS = (
        *("cluster", "bin_dir", "folder", "control_plane", "node", "register", "capacity"),
        *("without_hami", "worker", "running"),
    )

    def create(self, props: dict[str, Any]) -> CreateResult:
        node = props["node"]
        kwok = not props.get("worker")  # a real node's container is recorded as its worker
        write_inventory(_control_plane(props), node, props["register"], props["capacity"], kwok)
        if not props.get("without_hami"):
            # HAMi takes a node in on its add event or its 15 s registration tick (v2.8.3 pkg/scheduler/scheduler.go).
            wait_for_registered(Path(props["folder"]) / "hami-scheduler.log", [node])
        return CreateResult(id_=f"{props['cluster']}/{node}/inventory", outs={**props, "running": True})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _diff(olds, news, self.KEYS, restart=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Found stopped when the node is gone or no longer carries the cards (annotation or capacity): the
        update writes them again. Only gpulab writes them, so a node that has them is as it was made."""
        if not _api_ready(props):
            return ReadResult(id_=id_, outs=props, inputs=props)
        try:
            answer = _control_plane(props).kubectl("get", "node", props["node"], "-o", "json", check=False, timeout=10)
        except ProcessLabError:
            return ReadResult(id_=id_, outs=props, inputs=props)
        node = json.loads(answer.stdout) if answer.returncode == 0 else {}
        capacity = (node.get("status") or {}).get("capacity") or {}
        carries = (node.get("metadata") or {}).get("annotations", {}).get(REGISTER_ANNOTATION) == props["register"]
        carries = carries and all(_same_quantity(capacity.get(key), value) for key, value in props["capacity"].items())
        return _observed(id_, props, carries)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        control_plane = _control_plane(props)
        if control_plane.kubeconfig.exists():  # as _delete_in_cluster: an API server gone is fine
            control_plane.kubectl("annotate", "node", props["node"], f"{REGISTER_ANNOTATION}-", check=False, timeout=20)


def _same_quantity(found: str | None, expected: int | str) -> bool:
    """The API server writes a quantity in its canonical form (20000 comes back as "20k"): compare values."""
    try:
        return found is not None and parse_quantity(found) == parse_quantity(str(expected))
    except ValueError:
        return False


class GpuInventory(pulumi.dynamic.Resource):
    def __init__(
        self,
        name: str,
        processes: TenantProcesses,
        control_plane: ControlPlaneProcesses,
        node: str,
        register: str,
        capacity: dict[str, int],
        hami: bool,
        worker: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            **processes.props(),
            "control_plane": control_plane.instance,
            "node": node,
            "register": register,
            "capacity": capacity,
            "running": True,
        }
        if not hami:  # only then, as ControlPlaneProcesses' without_hami
            props["without_hami"] = True
        if worker is not None:  # a real node's container: the cards are written again on a node made anew
            props["worker"] = worker
        super().__init__(GpuInventoryProvider(), name, props, opts)
