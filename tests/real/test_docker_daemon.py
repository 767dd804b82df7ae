"""The Docker engine hack/docker-engine.sh gives a machine, judged by the real engine.

`.ci/run` starts it before `make test-real` (Debian's docker.io where no engine answers) and stops it after.
Boundary: dockerd, containerd and runc as they run here: a privileged container (what a node container is)
runs, with the runtime wrapper where the machine's capability bounding set lacks CAP_SYS_RESOURCE; a
container on an `--internal` network (what the lab's own network is in CI) has no route off its network.
A developer's machine without an engine skips this module with one line; CI fails.
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests.real.host import docker

pytestmark = pytest.mark.real
IMAGE = "gpulab-probe:busybox"  # hack/docker-engine.sh imports it from Debian's static busybox


@pytest.fixture(scope="module", autouse=True)
def engine() -> None:
    try:
        answers = docker("info", check=False).returncode == 0
    except FileNotFoundError:
        answers = False
    if not answers:
        message = "no Docker engine answers: `bash hack/docker-engine.sh start` gives one (as root)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.skip(f"{IMAGE} is not here: the engine was not started by hack/docker-engine.sh")


def test_a_privileged_container_runs_as_a_node_container_must() -> None:
    result = docker("run", "--rm", "--privileged", "--network", "none", IMAGE, "sh", "-c", "echo ran", check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ran", result.stderr


def test_an_internal_network_drops_whatever_leaves_it() -> None:
    """Docker 20.10 gives a container on an `--internal` network a default route all the same (seen: `default via
    172.18.0.1`); what keeps it in is the engine's filter rules, which drop every packet into or out of the
    network's bridge from or to another subnet (the rules `docker network create --internal` made here, iptables -S).
    Nothing is sent to find out: no address off this machine is ever a target."""
    network = f"gpulab-test-{uuid.uuid4().hex[:8]}"
    docker("network", "create", "--internal", network)
    try:
        found = docker("network", "inspect", "-f", "{{.Id}} {{.Internal}} {{(index .IPAM.Config 0).Subnet}}", network)
        network_id, internal, subnet = found.stdout.split()
        assert internal == "true"
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, timeout=30, check=True).stdout
        bridge = f"br-{network_id[:12]}"
        assert f"! -s {subnet} -o {bridge} -j DROP" in rules, rules
        assert f"! -d {subnet} -i {bridge} -j DROP" in rules, rules
        ran = docker("run", "--rm", "--network", network, IMAGE, "sh", "-c", "echo ran")
        assert ran.stdout.strip() == "ran"
    finally:
        docker("network", "rm", network)
    assert network not in docker("network", "ls", "--format", "{{.Name}}").stdout
