"""The tenants' kube-proxy configuration (model/docker_lab/kube_proxy.py), judged by the real kube-proxy v1.36.4
(`make tools`) against a real kube-apiserver, run where a node container runs it: in a network namespace of its own,
where the kernel makes net.netfilter.nf_conntrack_max read-only (net/netfilter/nf_conntrack_standalone.c: 0444 outside
the host's namespace).

Boundary: kube-proxy's start (cmd/kube-proxy/app/server.go newProxyServer, server_linux.go platformSetup:
conntrack.SetSysctls writes nf_conntrack_max when it differs from max(min, maxPerCore x CPUs)) and its iptables
proxier. With the ConfigMap gpulab makes (config.conf and kubeconfig.conf where the DaemonSet mounts them, the
service account's token and CA where the pod gets them, the command of the DaemonSet) it must keep running and
write the Services' rules into the namespace; with kubeadm's conntrack defaults, everything else the same, it must
exit with the permission error, which proves the namespace holds the rule a node container has. gpulab's RBAC
objects are the only grant the token has: the API server's RBAC judges them too.

Needs root (unshare, mount, iptables); without it, or without unshare, nsenter or iptables-save, the module skips
with one line on a developer's machine and fails in CI.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from model.docker_lab.kube_proxy import (
    CONFIG_DIR,
    CONFIG_KEY,
    SERVICE_ACCOUNT_DIR,
    config_map_data,
    kube_proxy_objects,
)
from process_lab.commands import free_port
from process_lab.forward import pipe
from tests.acceptance.helpers import WaitTimeout, wait_until
from tests.real import cluster as kwok
from tests.real.cluster import POLL, Cluster
from tests.real.host import unavailable

pytestmark = pytest.mark.real
VERSION = "v1.36.4"
POD_CIDR = "10.244.0.0/16"
NODE = "kube-proxy-test-node"
NODE_IP = "192.0.2.10"  # TEST-NET-1: the Node's address, never reached
WAIT = 120  # seconds for kube-proxy to start and write its rules, or to give up
CONNTRACK_MAX = Path("/proc/sys/net/netfilter/nf_conntrack_max")
RUNNER = Path(__file__).with_name("netns_run.py")
CONNTRACK_ERROR = "could not set conntrack parameters from kube-proxy configuration"


@pytest.fixture(scope="module")
def machine() -> None:
    if os.geteuid() != 0:
        unavailable("kube-proxy runs in a network namespace of its own: needs root (unshare, mount, iptables)")
    missing = [name for name in ("unshare", "nsenter", "iptables-save", "ip") if shutil.which(name) is None]
    if missing:
        unavailable(f"{', '.join(missing)} not found: kube-proxy's namespace cannot be made or looked into")
    if not CONNTRACK_MAX.exists():
        unavailable("the nf_conntrack module is not loaded here (no /proc/sys/net/netfilter/nf_conntrack_max)")


@pytest.fixture(scope="module")
def proxy_cluster(machine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane of its own: this module adds a Node and kube-system objects the session's tests do not
    expect."""
    started = kwok.create(tmp_path_factory.mktemp("kube-proxy"))
    try:
        yield started
    finally:
        problems = kwok.delete(started)
        assert not problems, "\n".join(problems)


class HostRelay:
    """The API server's port, served on a unix socket from the host's network namespace."""

    def __init__(self, socket_path: Path, host: str, port: int) -> None:
        self.socket_path, self.host, self.port = socket_path, host, port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    def __enter__(self) -> HostRelay:
        self.thread.start()
        start = asyncio.start_unix_server(self._relay, str(self.socket_path))
        self.server = asyncio.run_coroutine_threadsafe(start, self.loop).result(30)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@dataclass
class Setup:
    cluster: Cluster
    token: str
    ca: bytes
    relay: Path  # the host relay's unix socket


@pytest.fixture(scope="module")
def setup(proxy_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """gpulab's kube-proxy objects in the API server (the DaemonSet judged by it, not run: no kubelet here), the
    Node kube-proxy runs for, the token of kube-proxy's service account, and the relay to the API server."""
    cluster = proxy_cluster
    objects = kube_proxy_objects(VERSION, config_map_data("127.0.0.1:1", POD_CIDR, in_container=True))
    daemon_set = [o for o in objects if o["kind"] == "DaemonSet"]
    cluster.ok("create", "-f", "-", stdin=[o for o in objects if o["kind"] != "DaemonSet"])
    cluster.ok("create", "--dry-run=server", "-f", "-", stdin=daemon_set)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {"kubernetes.io/os": "linux"}}}
    cluster.ok("create", "-f", "-", stdin=node)
    status = {"status": {"addresses": [{"type": "InternalIP", "address": NODE_IP}]}}
    cluster.ok("patch", "node", NODE, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    token = cluster.ok("create", "token", "-n", "kube-system", "kube-proxy", "--duration=1h").strip()
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    [entry] = config["clusters"]
    server = urlparse(entry["cluster"]["server"])
    if "certificate-authority-data" in entry["cluster"]:
        ca = base64.b64decode(entry["cluster"]["certificate-authority-data"])
    else:
        ca = Path(entry["cluster"]["certificate-authority"]).read_bytes()
    socket_path = tmp_path_factory.mktemp("relay") / "api.sock"
    assert server.hostname and server.port
    with HostRelay(socket_path, server.hostname, server.port):
        yield Setup(cluster, token, ca, socket_path)


@dataclass
class Run:
    process: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def rules(self) -> str:
        """iptables-save of kube-proxy's namespace (the runner's: kube-proxy is its child)."""
        found = subprocess.run(
            ["nsenter", f"--net=/proc/{self.process.pid}/ns/net", "iptables-save"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return found.stdout


@contextlib.contextmanager
def kube_proxy(setup: Setup, config: dict, folder: Path) -> Iterator[Run]:
    """The DaemonSet's container, run in a network and mount namespace of its own on `config` (the ConfigMap's
    config.conf, parsed) and the ConfigMap's kubeconfig.conf, the pod's token and CA where the pod has them."""
    port = free_port()
    data = config_map_data(f"127.0.0.1:{port}", POD_CIDR, in_container=True)
    data[CONFIG_KEY] = yaml.safe_dump(config, sort_keys=False)
    files = folder / "files"
    for key, text in data.items():
        place(files, f"{CONFIG_DIR}/{key}", text.encode())
    place(files, f"{SERVICE_ACCOUNT_DIR}/token", setup.token.encode())
    place(files, f"{SERVICE_ACCOUNT_DIR}/ca.crt", setup.ca)
    [daemon_set] = [o for o in kube_proxy_objects(VERSION, data) if o["kind"] == "DaemonSet"]
    [container] = daemon_set["spec"]["template"]["spec"]["containers"]
    command = [arg.replace("$(NODE_NAME)", NODE) for arg in container["command"]]
    assert command[0] == "/usr/local/bin/kube-proxy"
    command[0] = str(kwok.bin_dir() / "kube-proxy")
    argv = ["unshare", "--net", "--mount", "--propagation", "private", sys.executable, str(RUNNER)]
    argv += ["--files", str(files), "--socket", str(setup.relay), "--port", str(port), "--", *command]
    log = folder / "kube-proxy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    run = Run(process, log)
    try:
        yield run
    finally:
        end_group(process)


def end_group(process: subprocess.Popen) -> None:
    """TERM to the runner's process group (the runner and kube-proxy), KILL to what is left after 30 s; returns
    once none of the group runs. The runner may end first: kube-proxy is waited for by its group, not its parent."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(30)
    try:
        wait_until(lambda: not group_members(process.pid), 30, "kube-proxy's process group to end", interval=POLL)
    except WaitTimeout:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        wait_until(lambda: not group_members(process.pid), 30, "kube-proxy's process group to die", interval=POLL)


def group_members(group: int) -> list[int]:
    """The live processes of a process group (field 5 of /proc/PID/stat; a zombie counts as gone)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


def place(files: Path, path: str, content: bytes) -> None:
    target = files / path.lstrip("/").replace("var/run/", "run/", 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)


def gpulab_config() -> dict:
    return yaml.safe_load(config_map_data("127.0.0.1:1", POD_CIDR, in_container=True)[CONFIG_KEY])


def test_gpulabs_configuration_keeps_kube_proxy_running_and_syncing(setup: Setup, tmp_path: Path) -> None:
    host_value = CONNTRACK_MAX.read_text().strip()
    with kube_proxy(setup, gpulab_config(), tmp_path) as run:

        def synced() -> bool:
            assert run.alive(), f"kube-proxy exited ({run.process.returncode}):\n{run.text()[-3000:]}"
            rules = run.rules()
            return "-A KUBE-SERVICES" in rules and "default/kubernetes:https" in rules

        wait_until(synced, WAIT, "kube-proxy to write the kubernetes Service's rules into its namespace", interval=1)
        assert run.alive(), run.text()[-3000:]
        assert CONNTRACK_ERROR not in run.text()
    assert CONNTRACK_MAX.read_text().strip() == host_value


def test_kubeadms_conntrack_defaults_make_kube_proxy_exit(setup: Setup, tmp_path: Path) -> None:
    """The same, with kube-proxy's (and kubeadm's) conntrack defaults, what Kamaji's addon runs: it must write
    nf_conntrack_max, and cannot."""
    host_value = int(CONNTRACK_MAX.read_text())
    cpus = os.cpu_count() or 1
    wanted = {max(131072, 32768 * n) for n in range(1, cpus + 1)}  # what kube-proxy computes from its CPU count
    if host_value in wanted:
        pytest.skip(f"nf_conntrack_max is {host_value} here, which kube-proxy may find right and not write")
    config = gpulab_config()
    del config["conntrack"]
    with kube_proxy(setup, config, tmp_path) as run:
        try:
            wait_until(lambda: not run.alive(), WAIT, "kube-proxy to exit on kubeadm's conntrack defaults", interval=1)
        except WaitTimeout:
            pytest.fail(f"kube-proxy kept running on kubeadm's conntrack defaults:\n{run.text()[-3000:]}")
        text = run.text()
        assert run.process.returncode != 0
        assert CONNTRACK_ERROR in text and "nf_conntrack_max: permission denied" in text, text[-3000:]


def test_the_namespace_is_gone_with_kube_proxy(setup: Setup, tmp_path: Path) -> None:
    """Nothing is left behind: the runner and kube-proxy end together, and with them their namespace."""
    own = os.readlink("/proc/self/ns/net")
    with kube_proxy(setup, gpulab_config(), tmp_path) as run:

        def namespace() -> str | None:
            found = _net_namespace(Path(f"/proc/{run.process.pid}"))
            return found if found not in (None, own) else None

        made = wait_until(namespace, WAIT, "kube-proxy's network namespace", interval=POLL)
    left = [pid.name for pid in Path("/proc").iterdir() if pid.name.isdigit() and _net_namespace(pid) == made]
    assert not left, f"processes left in kube-proxy's network namespace {made}: {left}"


def _net_namespace(pid: Path) -> str | None:
    try:
        return os.readlink(pid / "ns" / "net")
    except OSError:
        return None


@pytest.mark.parametrize("extra", [None, {"bogusField": 1}], ids=["gpulab", "unknown-field"])
def test_kubeadm_reads_the_configuration_a_joining_node_reads(tmp_path: Path, extra: dict | None) -> None:
    """`kubeadm join` reads the kube-proxy ConfigMap with its component-config decoder (cmd/kubeadm/app/cmd/join.go
    fetchInitConfiguration, componentconfigs/configset.go fromConfigMap: strict), and fails the join on what it
    cannot decode; `kubeadm config validate` decodes the same documents the same way. An unknown field shows the
    decoder is strict."""
    config = gpulab_config()
    if extra:
        config["conntrack"].update(extra)
    cluster = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "kubernetesVersion": VERSION,
        "networking": {"podSubnet": POD_CIDR},
    }
    path = tmp_path / "kubeadm.yaml"
    path.write_text(yaml.safe_dump_all([cluster, config], sort_keys=False))
    result = subprocess.run(
        [str(kwok.bin_dir() / "kubeadm"), "config", "validate", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if extra:
        assert result.returncode != 0 and 'unknown field "conntrack.bogusField"' in result.stderr, result.stderr
    else:
        assert result.returncode == 0, result.stderr
