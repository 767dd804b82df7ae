"""The node container's one definition (model/node_container.py) and its two renderings: pulumi-docker's
arguments (the Docker lab) and `docker run`'s (process mode's node containers). Both must say the same, flag for
flag, as kind runs a node (kind pkg/cluster/internal/providers/docker/provision.go)."""

from __future__ import annotations

from lab_harness import lab_config

from components.docker.tenant_worker import container_args
from model.config import parse_config
from model.names import NODE_IMAGE_LABEL, TENANT_LABEL
from model.node_container import NodeContainer


def pairs(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


def test_docker_run_arguments_are_kinds_node_flags() -> None:
    node = NodeContainer("tenant-a-worker", "tenant-a", "gpulab/node:abc", "gpulab-nodes")
    args = node.run_args("sha256:1234")
    assert args[-1] == "sha256:1234" and "--detach" in args and "--privileged" in args
    assert pairs(args, "--name") == pairs(args, "--hostname") == ["tenant-a-worker"]
    assert pairs(args, "--network") == ["gpulab-nodes"]
    assert pairs(args, "--security-opt") == ["seccomp=unconfined", "apparmor=unconfined"]
    assert pairs(args, "--tmpfs") == ["/tmp", "/run"]
    assert pairs(args, "--volume") == ["/var", "/lib/modules:/lib/modules:ro"]
    assert pairs(args, "--cgroupns") == ["private"] and "--init=false" in args and "--tty" in args
    assert pairs(args, "--restart") == ["on-failure:1"]
    labels = pairs(args, "--label")
    assert f"{TENANT_LABEL}=tenant-a" in labels and "gpulab.io/role=worker" in labels
    assert f"{NODE_IMAGE_LABEL}=gpulab/node:abc" in labels


def test_pulumi_docker_and_docker_run_render_the_same_node() -> None:
    """Every value of the definition reaches both renderings: a flag added to one only fails here."""
    tenant = parse_config(lab_config()).tenants[0]
    rendered = container_args(tenant, "sha256:1234", "kindest/node:v1.36.4", "kind")
    node = NodeContainer(rendered["name"], tenant.name, "kindest/node:v1.36.4", "kind")
    args = node.run_args("sha256:1234")
    assert rendered["privileged"] == ("--privileged" in args)
    assert rendered["security_opts"] == pairs(args, "--security-opt")
    assert list(rendered["tmpfs"]) == pairs(args, "--tmpfs")
    volumes = [f"{v.host_path}:{v.container_path}:ro" if v.host_path else v.container_path for v in rendered["volumes"]]
    assert volumes == pairs(args, "--volume")
    assert [rendered["cgroupns_mode"]] == pairs(args, "--cgroupns")
    assert f"--init={str(rendered['init']).lower()}" in args and rendered["tty"] == ("--tty" in args)
    assert [f"{rendered['restart']}:{rendered['max_retry_count']}"] == pairs(args, "--restart")
    assert sorted(f"{label.label}={label.value}" for label in rendered["labels"]) == sorted(pairs(args, "--label"))
    assert [n.name for n in rendered["networks_advanced"]] == pairs(args, "--network")
