"""The real tier's control plane: the process lab's (process_lab.control_plane: `kwokctl create cluster
--runtime binary` with the programs `make tools` builds, on 127.0.0.1), seen as the tests need it: kubectl
with objects as input and answers as data, readiness as conditions of the cluster, and a delete that says
what survived it. KWOK nodes stand in for kubelets; kubectl is the real one.
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

from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane, missing_programs
from tests.acceptance.helpers import WaitTimeout, wait_until

NOT_BUILT = "real programs not built: run `make tools`"
POLL = 0.5  # seconds between two looks at a condition
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")


def bin_dir() -> Path:
    """Where the real programs are: GPULAB_BIN, else the checkout's ./bin (what `make tools` fills)."""
    return Path(os.environ.get("GPULAB_BIN") or ROOT / "bin").resolve()


# Programs the tier runs beside a control plane's: kube-proxy and kubeadm, on the tenants' kube-proxy configuration
# (test_kube_proxy.py).
TIER_PROGRAMS = ("kube-proxy", "kubeadm")


def missing() -> list[str]:
    folder = bin_dir()
    return missing_programs(folder) + [name for name in TIER_PROGRAMS if not os.access(folder / name, os.X_OK)]


@dataclass
class Refusal:
    """A request the API server refused: the text kubectl printed, and the admission message in it."""

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
    plane: ControlPlane

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def env(self) -> dict[str, str]:
        return {**self.plane.env, "KUBECONFIG": str(self.plane.kubeconfig)}

    def kubectl(self, *args: str, stdin: Any = None, timeout: float = 30) -> subprocess.CompletedProcess:
        """The real kubectl (bounded: --request-timeout and a process deadline); `stdin` objects go as JSON."""
        if isinstance(stdin, list):
            stdin = {"apiVersion": "v1", "kind": "List", "items": stdin}
        text = None if stdin is None else json.dumps(stdin)
        return self.plane.kubectl(*args, stdin=text, check=False, timeout=timeout)

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
        for path in (self.plane.cluster_dir / "pids").glob("*.pid"):
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
            if str(self.plane.cluster_dir) in command:
                found[int(entry.name)] = command.strip()
        return found


def create(base: Path) -> Cluster:
    """A started cluster with a name unique to this run: `ControlPlane.create` returns once every component runs
    and the controller manager gave namespace `default` its service account, which every Pod create needs."""
    plane = ControlPlane(f"gpulab-real-{uuid.uuid4().hex[:8]}", bin_dir(), base / "kwok")
    try:
        plane.create(policy_status=True)  # the type checking of gpulab's policies is read here
    except ProcessLabError:
        plane.delete()  # whatever it started
        raise
    return Cluster(plane)


def delete(cluster: Cluster) -> list[str]:
    """Delete the cluster and return what survived it (empty: nothing). A survivor is killed, so a failed
    run leaves no process behind either, and named in the answer so the test fails."""
    recorded = cluster.pids()
    problems = []
    try:
        cluster.plane.delete()
    except ProcessLabError as error:
        problems.append(str(error))

    def survivors() -> dict[int, str]:
        alive = {pid: f"{name} (pid {pid})" for name, pid in recorded.items() if _alive(pid)}
        return {**alive, **cluster.processes()}

    try:
        wait_until(lambda: not survivors(), 30, f"the processes of {cluster.plane.name} to exit", interval=POLL)
    except WaitTimeout:
        left = survivors()
        problems.append(f"processes of {cluster.plane.name} outlived kwokctl delete: {sorted(left.values())}")
        _kill(left)
    return problems


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone: it only waits for its parent)."""
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
        descriptors: list[Path] = []
        with contextlib.suppress(OSError):  # the process is gone meanwhile
            descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        for fd in descriptors:
            with contextlib.suppress(OSError):  # closed meanwhile
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(_address(fields[1], family))
    return found


def _address(hex_address: str, family: int) -> str:
    """/proc/net/tcp's `0100007F:1F90` as `127.0.0.1:8080` (each 32-bit word of the address is little-endian)."""
    address, port = hex_address.split(":")
    raw = bytes.fromhex(address)
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if family == 4:
        return f"{ipaddress.IPv4Address(ordered)}:{int(port, 16)}"
    return f"[{ipaddress.IPv6Address(ordered)}]:{int(port, 16)}"
