"""Real nodes for process mode: a tenant's workers as containers of gpulab's node image (`make node-image`) on the
lab's own `--internal` Docker network, each with a real kubelet joined by kubeadm to the tenant's control plane
of local processes (../docs/real-nodes.md).

The Docker engine is driven with its CLI (the Pulumi docker provider cannot be had here: tools/README.md), every
call bounded. A node container is made from the one definition of a node (model/node_container.py); it is joined
by the lab's own scripts, with join material made on this host from the tenant's admin kubeconfig, which never
goes into the node (scripts/join-config.sh, worker-join.sh, delete-token.sh: the Docker lab's join too).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.names import OWNER_LABEL
from model.node_container import (
    CNI_CONFLIST,
    CONTAINER_PREFLIGHT,
    NodeContainer,
    bridge_conflist,
    join_token_ttl_minutes,
    node_platform,
)
from process_lab.commands import ProcessLabError, run
from process_lab.control_plane import ControlPlane
from process_lab.joinable import join_kubeconfig
from process_lab.stack import TenantProcesses

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
JOIN_TIMEOUT = 300  # seconds per step of a join (as the Docker lab's JOIN_TIMEOUT)


def docker(*args: str, what: str, timeout: float = 60, stdin: str | None = None, check: bool = True):
    return run(["docker", *args], env=os.environ, what=what, timeout=timeout, stdin=stdin, check=check)


@dataclass(frozen=True)
class DockerNetwork:
    """The lab's Docker network: `--internal` (no route beyond the host: nothing leaves the machine), labelled
    with its owner. Its gateway is the host's address on it, where the tenants' API servers listen."""

    name: str
    owner: str

    def create(self) -> str:
        """Make the network (one left by an interrupted run of the same owner is taken as it is); its gateway."""
        found = self.gateway()
        if found is None:
            docker(
                "network", "create", "--internal", "--label", f"{OWNER_LABEL}={self.owner}", self.name,
                what=f"creating the lab network {self.name}",
            )  # fmt: skip
            found = self.gateway()
        if not found:
            raise ProcessLabError(f"the lab network {self.name} has no IPv4 gateway (docker network inspect)")
        return found

    def gateway(self) -> str | None:
        """The gateway address of the network, None when there is no such network; refuses one not ours."""
        answer = docker("network", "inspect", self.name, what=f"reading network {self.name}", check=False)
        if answer.returncode != 0:
            return None
        network = json.loads(answer.stdout)[0]
        owner = (network.get("Labels") or {}).get(OWNER_LABEL)
        if owner != self.owner:
            raise ProcessLabError(
                f"a Docker network named {self.name} exists and is not this lab's ({OWNER_LABEL}={owner}): "
                "remove it (docker network rm) or name another stack"
            )
        for config in (network.get("IPAM") or {}).get("Config") or []:
            if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", config.get("Gateway") or ""):
                return str(config["Gateway"])
        return ""

    def delete(self) -> None:
        """Remove the network, and first every node container of this lab still on it (one a failed or
        interrupted create left, which no state records); a container that is not the lab's stays, and so does
        the network then (docker names the active endpoint)."""
        if self.gateway() is None:
            return
        answer = docker("network", "inspect", "-f", "{{range .Containers}}{{.Name}} {{end}}", self.name, what=self.name)
        for name in answer.stdout.split():
            owner = container_owner(name) or ""
            if owner == self.owner or owner.startswith(f"{self.owner}/"):
                remove_node(name, owner)
        docker("network", "rm", self.name, what=f"removing the lab network {self.name}")


def container_owner(name: str) -> str | None:
    """The owner label of container `name`, "" for a container without one, None when there is none."""
    answer = docker("inspect", "--type", "container", name, what=f"reading container {name}", check=False)
    if answer.returncode != 0:
        return None
    return ((json.loads(answer.stdout)[0].get("Config") or {}).get("Labels") or {}).get(OWNER_LABEL, "")


def running(name: str) -> bool:
    answer = docker("inspect", "--type", "container", "-f", "{{.State.Running}}", name, what=name, check=False)
    return answer.returncode == 0 and answer.stdout.strip() == "true"


def remove_node(name: str, owner: str) -> None:
    """Remove a node container of this owner with its anonymous volume (/var); a container of that name that is
    someone else's is refused, not removed."""
    found = container_owner(name)
    if found is None:
        return
    if found != owner:
        raise ProcessLabError(f"a container named {name} exists and is not this lab's ({OWNER_LABEL}={found})")
    docker("rm", "--force", "--volumes", name, what=f"removing node container {name}", timeout=120)


def start_node(node: NodeContainer, image: str, owner: str, pod_cidr: str) -> str:
    """Run the node container (one an interrupted run left is removed first) with its CNI configuration; its id."""
    remove_node(node.name, owner)
    labelled = NodeContainer(**{**node.__dict__, "labels": {**node.labels, OWNER_LABEL: owner}})
    started = docker("run", *labelled.run_args(image), what=f"starting node container {node.name}", timeout=120)
    try:
        docker(
            "exec", "-i", node.name, "sh", "-c", f"cat > {CNI_CONFLIST}",
            what=f"writing the CNI configuration of {node.name}", stdin=bridge_conflist(pod_cidr),
        )  # fmt: skip
    except ProcessLabError:
        remove_node(node.name, owner)  # a create that fails leaves nothing: no state records the container
        raise
    return started.stdout.strip()


def booted(node: str) -> bool:
    """systemd has finished booting the node (its image import included: gpulab-images.service)."""
    state = docker("exec", node, "systemctl", "is-system-running", what=f"asking {node}'s systemd", check=False)
    return state.stdout.strip() in {"running", "degraded"}


def load_images(node: str, images: list[str], timeout: float = 120, interval: float = 0.5) -> None:
    """Every image the node runs in its containerd before the join, by the lab's own loader (scripts/load-images.sh:
    an image the node holds is kept, one it lacks is loaded from this host's engine, one neither has is an error
    naming it), once systemd has booted the node, so the images its boot imports are there to be found."""
    deadline = time.monotonic() + timeout
    while not booted(node):
        if time.monotonic() >= deadline:
            raise ProcessLabError(f"{node} did not finish booting within {timeout:.0f}s (systemctl is-system-running)")
        time.sleep(interval)
    env = {**os.environ, "NODE": node, "IMAGES": " ".join(images), "PLATFORM": node_platform(), "TIMEOUT": "120"}
    run(["bash", str(SCRIPTS / "load-images.sh")], env=env, what=f"loading {node}'s images", timeout=timeout + 900)


def _script(control_plane: ControlPlane, name: str, env: dict[str, str], stdin: str, what: str, timeout: float) -> str:
    """One of the lab's scripts, with the programs of `make tools` first on PATH (kubectl), secrets on stdin."""
    env = {**control_plane.env, **env}
    return run(["bash", str(SCRIPTS / name)], env=env, what=what, timeout=timeout, stdin=stdin).stdout


def join(control_plane: ControlPlane, node: str, tenant: str, endpoint: str) -> None:
    """kubeadm join of the node container to the API server at `endpoint` (the relay on the lab network), with a
    JoinConfiguration made here from the admin kubeconfig (which stays on this host); the bootstrap token is
    deleted once the join is over, failed or not."""
    admin = join_kubeconfig(control_plane.admin_kubeconfig(), endpoint)
    material = _script(
        control_plane,
        "join-config.sh",
        {
            "NODE_NAME": node,
            "TENANT": tenant,
            "IGNORE_PREFLIGHT": CONTAINER_PREFLIGHT,
            "TTL_MINUTES": str(join_token_ttl_minutes(JOIN_TIMEOUT)),
            "TIMEOUT": str(JOIN_TIMEOUT),
            "PYTHON": sys.executable,
        },
        admin,
        f"making join material for {node}",
        JOIN_TIMEOUT + 90,
    )
    token = re.search(r"token:\s*\"?([a-z0-9]{6})\.", material)
    try:
        env = {"CONTAINER": node, "TENANT": tenant, "TIMEOUT": str(JOIN_TIMEOUT)}
        _script(control_plane, "worker-join.sh", env, material, f"joining {node} to {tenant}", 4 * JOIN_TIMEOUT + 120)
    finally:
        if token:
            env = {"TOKEN_ID": token.group(1), "TENANT": tenant}
            _script(control_plane, "delete-token.sh", env, admin, f"deleting the join token of {node}", 120)


def wait_ready(control_plane: ControlPlane, node: str, timeout: int = 300) -> None:
    control_plane.kubectl(
        "wait", "--for=condition=Ready", f"--timeout={timeout}s", f"node/{node}", timeout=timeout + 30
    )


def leave(control_plane: ControlPlane, node: str) -> None:
    """Remove the Node object from its tenant where the tenant still answers (scripts/node-leave.sh)."""
    if control_plane.kubeconfig.exists():
        run(
            ["bash", str(SCRIPTS / "node-leave.sh")],
            env={**control_plane.env, "NODE_NAME": node, "TIMEOUT": "60"},
            what=f"removing node {node} from its tenant",
            timeout=90,
            stdin=control_plane.kubeconfig.read_text(),
            check=False,
        )


@dataclass(frozen=True)
class JoiningNode:
    """One real node of a tenant: its container, the tenant's processes (whose folder owns the container), its
    pod CIDR, the endpoint it joins (the relay on the lab network's gateway) and the images loaded into it."""

    processes: TenantProcesses
    container: NodeContainer
    pod_cidr: str
    endpoint: str
    images: tuple[str, ...]

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> JoiningNode:
        container = NodeContainer(props["node"], props["tenant"], props["image"], props["network"])
        images = tuple(props.get("images") or ())
        return cls(TenantProcesses.from_props(props), container, props["pod_cidr"], props["endpoint"], images)


def bring_up(node: JoiningNode) -> str:
    """The container started, its images loaded, joined by kubeadm and Ready; its id. A failed bring-up leaves
    nothing: no state records the container, so no delete would find it."""
    owner = str(node.processes.folder)
    name = node.container.name
    container_id = start_node(node.container, node.container.image_ref, owner, node.pod_cidr)
    control_plane = node.processes.control_plane
    try:
        load_images(name, list(node.images))
        join(control_plane, name, node.container.tenant, node.endpoint)
        wait_ready(control_plane, name)
    except Exception:
        tear_down(node)
        raise
    return container_id


def tear_down(node: JoiningNode) -> None:
    """The Node object gone from its tenant (where it answers), then the container with its /var."""
    leave(node.processes.control_plane, node.container.name)
    remove_node(node.container.name, str(node.processes.folder))


# --- a systemd unit of a node container (gpulab's device plugins run as units of the node image) ------------------


def node_exec(node: str, *argv: str, what: str, stdin: str | None = None, check: bool = True, timeout: float = 30):
    """A command in the node container, its stdin given (never its argv) where it carries a secret."""
    return docker("exec", "-i", node, *argv, what=what, stdin=stdin, check=check, timeout=timeout)


def unit_state(node: str, unit: str) -> str:
    """`systemctl is-active` of the unit on the node ("active", "failed", ...; "" when the node does not answer)."""
    return node_exec(node, "systemctl", "is-active", unit, what=f"asking {node}'s systemd", check=False).stdout.strip()


def unit_report(node: str, unit: str) -> str:
    """The unit's state and its last lines, for an error a user can act on."""
    journal = node_exec(
        node, "journalctl", "-u", unit, "-n", "8", "--no-pager", "-o", "cat", what=f"{node}'s journal", check=False
    ).stdout.strip()
    return f"{unit} is {unit_state(node, unit) or 'unknown'}; its last lines:\n{journal or '(none)'}"
