"""A real control plane for the real tier: `kwokctl create cluster --runtime binary` with the programs that
`make tools` builds (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), KWOK nodes in place
of kubelets, and the real kubectl as the client. Everything listens on 127.0.0.1 and lives in one folder.

kwokctl binds every component to 0.0.0.0 unless its configuration says otherwise (KwokctlConfiguration
`options.bindAddress`, default "0.0.0.0", kwok pkg/apis/config/v1alpha1/kwokctl_configuration_types.go), so
the cluster is created with a configuration file that says 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared_data import ROOT

from tests.acceptance.helpers import WaitTimeout, wait_until

PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kwokctl")
NOT_BUILT = "real programs not built: run `make tools`"
# kwokctl's flag for each control-plane program; a local path is linked into the cluster, never downloaded.
BINARY_FLAGS = {
    "etcd": "--etcd-binary",
    "kube-apiserver": "--kube-apiserver-binary",
    "kube-controller-manager": "--kube-controller-manager-binary",
    "kube-scheduler": "--kube-scheduler-binary",
    "kwok": "--kwok-controller-binary",
}
LOOPBACK_ONLY = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
"""
POLL = 0.5  # seconds between two looks at a condition
REQUEST_TIMEOUT = "20s"  # kubectl's bound on one HTTP request; every process is bounded by `timeout=` too


def bin_dir() -> Path:
    """Where the real programs are: GPULAB_BIN, else the checkout's ./bin (what `make tools` fills)."""
    return Path(os.environ.get("GPULAB_BIN") or ROOT / "bin").resolve()


def missing_programs(directory: Path) -> list[str]:
    return [name for name in PROGRAMS if not os.access(directory / name, os.X_OK)]


@dataclass
class Refusal:
    """A request the API server refused: the text kubectl printed, and the admission message in it, if any."""

    text: str

    @property
    def policy(self) -> str | None:
        """The ValidatingAdmissionPolicy that denied, from `ValidatingAdmissionPolicy 'NAME' with binding ...`."""
        marker = "ValidatingAdmissionPolicy '"
        return self.text.split(marker, 1)[1].split("'", 1)[0] if marker in self.text else None

    @property
    def message(self) -> str:
        """What the policy said (the first failing validation's message: only that one is shown)."""
        return self.text.split("denied request: ", 1)[-1].strip()


@dataclass
class Cluster:
    name: str
    bin: Path
    workdir: Path  # KWOK_WORKDIR: kwokctl keeps every cluster file, log and pid here, nothing in ~/.kwok

    @property
    def directory(self) -> Path:
        return self.workdir / "clusters" / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig.yaml"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",  # kwokctl and tests run this kubectl
            "KWOK_WORKDIR": str(self.workdir),
            "KUBECONFIG": str(self.kubeconfig),
        }

    def kwokctl(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        # --kubeconfig: kwokctl adds a context to it (default ~/.kube/config); keep that file in the workdir.
        command = [str(self.bin / "kwokctl"), "--name", self.name, *args, "--kubeconfig", str(self.workdir / "kube")]
        return subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=timeout, check=False)

    def kubectl(self, *args: str, stdin: Any = None, timeout: float = 40) -> subprocess.CompletedProcess:
        """The real kubectl against this cluster; `stdin` (an object or a list of them) goes as JSON."""
        if isinstance(stdin, list):
            stdin = {"apiVersion": "v1", "kind": "List", "items": stdin}
        return subprocess.run(
            [str(self.bin / "kubectl"), f"--request-timeout={REQUEST_TIMEOUT}", *args],
            input=None if stdin is None else json.dumps(stdin),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, stdin: Any = None) -> str:
        """kubectl that must succeed; its standard output."""
        result = self.kubectl(*args, stdin=stdin)
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}"
        return result.stdout

    def get(self, *args: str) -> dict | None:
        """`kubectl get ... -o json`, None when absent."""
        result = self.kubectl("get", *args, "-o", "json")
        if result.returncode != 0:
            assert "NotFound" in result.stderr, result.stderr
            return None
        return json.loads(result.stdout)

    def pids(self) -> dict[str, int]:
        """The cluster's processes as kwokctl recorded them (pids/<component>.pid)."""
        found = {}
        for path in (self.directory / "pids").glob("*.pid"):
            text = path.read_text().strip()
            if text.isdigit():
                found[path.stem] = int(text)
        return found

    def processes(self) -> dict[int, str]:
        """Every process whose command line names this cluster's folder (its programs are linked there)."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # gone meanwhile, or not ours to read
                continue
            if str(self.directory) in command:
                found[int(entry.name)] = command.strip()
        return found


def create(base: Path, bin: Path) -> Cluster:
    """A started cluster (not yet known ready: see wait_ready); its name is unique to this run."""
    cluster = Cluster(name=f"gpulab-real-{uuid.uuid4().hex[:8]}", bin=bin, workdir=base / "kwok")
    cluster.workdir.mkdir(parents=True)
    config = cluster.workdir / "loopback.yaml"
    config.write_text(LOOPBACK_ONLY)
    binaries = [arg for program, flag in BINARY_FLAGS.items() for arg in (flag, str(bin / program))]
    result = cluster.kwokctl("-c", str(config), "create", "cluster", "--runtime", "binary", *binaries, timeout=120)
    assert result.returncode == 0, f"kwokctl create cluster failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return cluster


def wait_ready(cluster: Cluster, timeout: float = 90) -> None:
    """The API server answers /readyz, and the controller manager and scheduler run (each holds its leader
    lease, and the service account controller gave `default` its account, which every Pod create needs)."""

    def ready() -> bool:
        return cluster.kubectl("get", "--raw", "/readyz", timeout=25).stdout.strip() == "ok"

    wait_until(ready, timeout, f"kube-apiserver of {cluster.name} to answer /readyz with ok", interval=POLL)
    for lease in ("kube-controller-manager", "kube-scheduler"):
        holder = lambda lease=lease: cluster.get("lease", "-n", "kube-system", lease)  # noqa: E731
        wait_until(holder, timeout, f"the {lease} leader lease in kube-system", interval=POLL)
    account = lambda: cluster.get("serviceaccount", "default")  # noqa: E731
    wait_until(account, timeout, "service account default/default", interval=POLL)


def delete(cluster: Cluster, timeout: float = 60) -> list[str]:
    """Delete the cluster and return what survived it (empty: nothing). A survivor is killed, so a failed
    run leaves no process behind either, and named in the answer so the test fails."""
    recorded = cluster.pids()
    result = cluster.kwokctl("delete", "cluster", timeout=timeout)
    problems = [] if result.returncode == 0 else [f"kwokctl delete cluster failed: {result.stderr[-2000:]}"]

    def survivors() -> dict[int, str]:
        alive = {pid: f"{name} (pid {pid})" for name, pid in recorded.items() if _alive(pid)}
        return {**alive, **cluster.processes()}

    try:
        wait_until(lambda: not survivors(), 30, f"the processes of cluster {cluster.name} to exit", interval=POLL)
    except WaitTimeout:
        left = survivors()
        problems.append(f"processes of cluster {cluster.name} outlived kwokctl delete: {sorted(left.values())}")
        _kill(left)
    return problems


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone: it is only waiting for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, signal.SIGKILL)


def listening(pids: Iterable[int]) -> set[str]:
    """The local addresses (ip:port) on which these processes listen for TCP, from /proc/net/tcp{,6}."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    found = set()
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(_address(fields[1], family))
    return found


def _address(hex_address: str, family: int) -> str:
    """/proc/net/tcp's `0100007F:1F90` as `127.0.0.1:8080` (the address is in host byte order, little-endian)."""
    address, port = hex_address.split(":")
    raw = bytes.fromhex(address)
    # Each 32-bit word is little-endian.
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.IPv4Address(ordered) if family == 4 else ipaddress.IPv6Address(ordered)
    return f"{ip}:{int(port, 16)}" if family == 4 else f"[{ip}]:{int(port, 16)}"
