"""The Docker lab's management cluster on the programs the Go module proxy serves, live: kind v0.33.0 (make
lab-images) makes it with the lab's own scripts on an `--internal` network, from gpulab's kind node image, and MetalLB
v0.16.1 (its controller and speaker built from its module) gives a LoadBalancer Service an address of the pool the
lab computes, which a container on that network reaches. Nothing is pulled: every image is in the node or loaded by
the lab's loader, and a pull could not leave the network anyway.

The same node's kubelet then runs gpulab's HAMi device plugin from `make lab-images`' image, as the Docker lab's
`devicePlugin: gpulab` tenants run it (the DaemonSet, RBAC and cards of model/kube_objects/hami_device_plugin.py,
applied as they are built): the node's allocatable gets nvidia.com/gpu, gpumem, gpucores and gpumem-percentage from the
plugin, and its register annotation appears, as the lab's own wait (wait-gpu-node.sh) asks.

Boundaries: kind's CLI and its node contract (kind-create.sh, kind-kubeconfig.sh, kind-delete.sh as the Command
runs them: record on stdout, the record handed back to the delete); the real kube-apiserver, kubelet, containerd
and kube-proxy of the node; MetalLB's webhook and its L2 answers on a Docker bridge; `docker network inspect`'s
IPAM as the pool is computed from it (model/network.py). Everything made here is removed, and checked gone.
Without an engine or the images: one skip line, a failure in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from upstream_data import upstream_path

from components.docker.management_cluster import l2_advertisement_spec, metallb_pool_spec
from model.catalog import expand_cards, register_annotation, totals
from model.kube_objects.hami_device_plugin import NAME as PLUGIN_NAME
from model.kube_objects.hami_device_plugin import plugin_objects
from model.names import HAMI_NAMESPACE, METALLB_NAMESPACE, POOL_NAME
from model.network import metallb_range
from model.node_contract import gpulab_kind_node
from model.versions import HAMI_DEVICE_PLUGIN_IMAGE
from tests.acceptance.helpers import wait_until
from tests.real.cluster import bin_dir
from tests.real.host import docker, unavailable
from tools.build import required_version

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = required_version((ROOT / "tools" / "kubernetes" / "go.mod").read_text(), "k8s.io/kubernetes")
IMAGE = os.environ.get("GPULAB_KIND_NODE_IMAGE") or gpulab_kind_node(KUBERNETES).reference
METALLB_VERSION = required_version((ROOT / "tools" / "metallb" / "go.mod").read_text(), "go.universe.tf/metallb")
METALLB_IMAGES = [f"quay.io/metallb/{part}:{METALLB_VERSION}" for part in ("controller", "speaker")]
WAIT = 300  # seconds for any one condition: a cold node on a busy 2-core machine


@dataclass
class Management:
    name: str
    network: str
    record: str
    kubeconfig: Path
    env: dict[str, str]

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bin_dir() / "kubectl"), "--kubeconfig", str(self.kubeconfig), "--request-timeout=30s", *args],
            input=stdin, capture_output=True, text=True, timeout=120, check=check,
        )  # fmt: skip

    def apply(self, documents: list[dict]) -> None:
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(documents))


def script(
    name: str, env: dict[str, str], stdin: str | None = None, timeout: float = 1200
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / name)],
        input=stdin, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,  # python -m scripts.*
    )  # fmt: skip


@pytest.fixture(scope="module")
def management(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Management]:
    try:
        answers = docker("info", check=False).returncode == 0
    except FileNotFoundError:
        answers = False
    if not answers:
        unavailable("no Docker engine answers: `bash hack/docker-engine.sh start` gives one (as root)")
    for image in (IMAGE, *METALLB_IMAGES):
        if docker("image", "inspect", image, check=False).returncode != 0:
            unavailable(f"{image} is not in the engine: `make lab-images` builds it")
    if not (bin_dir() / "kind").exists():
        unavailable(f"no kind in {bin_dir()}: `make lab-images` builds it")
    suffix = uuid.uuid4().hex[:6]
    name = network = f"gpulab-ci-{suffix}"
    env = {
        **os.environ,
        "PATH": f"{bin_dir()}:{os.environ['PATH']}",
        "CLUSTER_NAME": name,
        "NODE_IMAGE": IMAGE,
        "NETWORK": network,
        "OWNER": f"gpulab.ci-{suffix}",
        "INTERNAL_NETWORK": "yes",
        "OUTPUT": "record",
    }
    created = script("kind-create.sh", env)
    try:
        assert created.returncode == 0, created.stderr[-3000:]
        record = created.stdout
        got = script("kind-kubeconfig.sh", {**env, "RECORD": record}, timeout=120)
        assert got.returncode == 0, got.stderr
        kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
        kubeconfig.write_text(got.stdout)
        kubeconfig.chmod(0o600)
        yield Management(name, network, record, kubeconfig, env)
    finally:
        deleted = script("kind-delete.sh", {**env, "PULUMI_COMMAND_STDOUT": created.stdout}, timeout=600)
        leftovers = [
            what
            for what, listing in (
                ("container", docker("ps", "-a", "--format", "{{.Names}}").stdout),
                ("network", docker("network", "ls", "--format", "{{.Name}}").stdout),
            )
            for line in listing.split()
            if line.startswith(name)
        ]
        assert deleted.returncode == 0 and not leftovers, (deleted.stderr, leftovers)


def test_kind_makes_the_cluster_on_an_internal_network_and_the_host_reaches_its_api(management: Management) -> None:
    record = dict(line.split("=", 1) for line in management.record.split())
    assert record["cluster"] == management.name and record["network"] == "created"
    assert docker("network", "inspect", "-f", "{{.Internal}}", management.network).stdout.strip() == "true"
    server = yaml.safe_load(management.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    node_address = docker(
        "inspect", "-f", f"{{{{(index .NetworkSettings.Networks \"{management.network}\").IPAddress}}}}",
        f"{management.name}-control-plane",
    ).stdout.strip()  # fmt: skip
    assert server == f"https://{node_address}:6443"
    node = json.loads(management.kubectl("get", "node", f"{management.name}-control-plane", "-o", "json").stdout)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == KUBERNETES
    assert node["metadata"]["labels"]["gpulab.io/owner"] == management.env["OWNER"]


def test_every_pod_of_kind_runs_from_the_images_the_node_carries(management: Management) -> None:
    """kubeadm's control plane, kube-proxy, CoreDNS, the CNI installer and the storage provisioner all run, and
    no image was pulled (a pull could not succeed on this network, so a pulled image would be an error)."""

    def all_running() -> list[str]:
        pods = json.loads(management.kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
        pending = [p["metadata"]["name"] for p in pods if p["status"].get("phase") != "Running"]
        return [] if pending or len(pods) < 8 else [p["metadata"]["name"] for p in pods]

    names = wait_until(all_running, WAIT, "every pod of the kind cluster to run", interval=3)
    for part in ("kube-apiserver", "etcd", "kube-proxy", "coredns", "gpulab-bridge-cni", "local-path-provisioner"):
        assert any(part in name for name in names), (part, names)
    events = management.kubectl("get", "events", "-A", "-o", "json").stdout
    assert "Pulling image" not in events


def test_metallb_gives_a_load_balancer_an_address_a_container_on_the_network_reaches(
    management: Management, tmp_path: Path
) -> None:
    node = f"{management.name}-control-plane"
    loaded = script(
        "load-images.sh",
        {**management.env, "NODE": node, "IMAGES": " ".join(METALLB_IMAGES), "PLATFORM": "linux/amd64"},
        timeout=600,
    )
    assert loaded.returncode == 0, loaded.stderr
    manifest = upstream_path(f"metallb/metallb-native-{METALLB_VERSION}.yaml")
    management.kubectl("apply", "-f", str(manifest))
    wait_until(
        lambda: management.kubectl(
            "-n", METALLB_NAMESPACE, "wait", "--for=condition=Available", "deployment/controller", "--timeout=5s",
            check=False,
        ).returncode == 0,
        WAIT, "MetalLB's controller (it serves the webhook) to be available", interval=3,
    )  # fmt: skip
    ipam = json.loads(docker("network", "inspect", management.network).stdout)[0]["IPAM"]["Config"]
    pool, subnet = metallb_range([{"subnet": e.get("Subnet"), "ip_range": e.get("IPRange")} for e in ipam], 8, {})
    resources = [
        {
            "apiVersion": "metallb.io/v1beta1",
            "kind": "IPAddressPool",
            "metadata": {"name": POOL_NAME, "namespace": METALLB_NAMESPACE},
            "spec": metallb_pool_spec([pool]),
        },
        {
            "apiVersion": "metallb.io/v1beta1",
            "kind": "L2Advertisement",
            "metadata": {"name": POOL_NAME, "namespace": METALLB_NAMESPACE},
            "spec": l2_advertisement_spec(),
        },
    ]
    # The lab's own wait, judged by MetalLB's real webhook: it serves a little after the Deployment is available.
    waited = script(
        "wait-metallb.sh",
        {**management.env, "PROBE_JSON": json.dumps(resources[0]), "TIMEOUT": str(WAIT)},
        stdin=management.kubeconfig.read_text(),
        timeout=WAIT + 60,
    )
    assert waited.returncode == 0, waited.stderr
    management.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(resources))
    # A later make up that changes the pool dry-runs a create of a pool that exists: admitted, not waited on.
    again = script(
        "wait-metallb.sh",
        {**management.env, "PROBE_JSON": json.dumps(resources[0]), "TIMEOUT": "60"},
        stdin=management.kubeconfig.read_text(),
        timeout=120,
    )
    assert again.returncode == 0 and "ready: MetalLB's webhook" in again.stderr, again.stderr
    busybox = gpulab_kind_node(KUBERNETES).workload_image
    management.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "hello", "namespace": "default", "labels": {"app": "hello"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": busybox,
                            "imagePullPolicy": "Never",
                            "command": [
                                "sh",
                                "-c",
                                "mkdir -p /www && echo gpulab-hello >/www/index.html && exec httpd -f -p 8080 -h /www",
                            ],
                        }
                    ]
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "hello", "namespace": "default"},
                "spec": {
                    "type": "LoadBalancer",
                    "selector": {"app": "hello"},
                    "ports": [{"port": 80, "targetPort": 8080}],
                },
            },
        ]
    )

    def address() -> str:
        service = json.loads(management.kubectl("get", "service", "hello", "-o", "json").stdout)
        return ((service["status"].get("loadBalancer") or {}).get("ingress") or [{}])[0].get("ip", "")

    ip = wait_until(address, WAIT, "MetalLB to give Service hello an address", interval=3)
    first, last = pool.split("-")
    assert tuple(map(int, first.split("."))) <= tuple(map(int, ip.split("."))) <= tuple(map(int, last.split(".")))
    wait_until(
        lambda: management.kubectl("wait", "--for=condition=Ready", "pod/hello", "--timeout=5s", check=False).returncode
        == 0,
        WAIT, "pod hello to be ready", interval=3,
    )  # fmt: skip
    probe = f"gpulab-ci-probe-{uuid.uuid4().hex[:6]}"

    def fetched() -> str:
        # busybox's nc, not its wget: the static wget of Debian's busybox crashes looking the address up.
        answer = docker(
            "run", "--rm", "--name", probe, "--network", management.network, "--entrypoint", "sh", busybox, "-c",
            f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 5 {ip} 80', check=False, timeout=60,
        )  # fmt: skip
        return answer.stdout.replace("\r", "").split("\n\n", 1)[-1].strip() if " 200 " in answer.stdout else ""

    assert wait_until(fetched, WAIT, f"a container on {management.network} to reach {ip}", interval=3) == "gpulab-hello"
    assert subnet  # the pool came from the network's own IPv4 subnet


@pytest.mark.parametrize("hami_version", ["v2.10.0", "v2.8.3"])
def test_gpulab_hami_plugin_as_a_daemon_set_registers_the_nodes_cards_with_its_kubelet(
    management: Management, hami_version: str
) -> None:
    """The plugin's objects as components/docker/hami_device_plugin.py creates them (imagePullPolicy Never: the image
    loaded by the lab's loader), on the kind node's real kubelet: the kubelet takes its four resources into the node's
    allocatable, and the plugin writes the register annotation of its HAMi release, which the lab's wait reads."""
    if docker("image", "inspect", HAMI_DEVICE_PLUGIN_IMAGE, check=False).returncode != 0:
        unavailable(f"{HAMI_DEVICE_PLUGIN_IMAGE} is not in the engine: `make lab-images` builds it")
    node = f"{management.name}-control-plane"
    loaded = script(
        "load-images.sh",
        {**management.env, "NODE": node, "IMAGES": HAMI_DEVICE_PLUGIN_IMAGE, "PLATFORM": "linux/amd64"},
        timeout=600,
    )
    assert loaded.returncode == 0, loaded.stderr
    # Two cards, as tenant-b's, under the node's own name (the DaemonSet's affinity and the cards file's key).
    cards = expand_cards("tenant-b", [("L4", 2)])
    objects = plugin_objects(HAMI_DEVICE_PLUGIN_IMAGE, hami_version, {node: cards}, pull_policy="Never")
    management.apply(objects)
    try:
        waited = script(
            "wait-gpu-node.sh",
            {
                **management.env,
                "NODE_NAME": node,
                "EXPECT_JSON": json.dumps(totals(cards)),
                "REGISTER_JSON": register_annotation(cards),
                "PLUGIN_SELECTOR": f"app.kubernetes.io/name={PLUGIN_NAME}",
                "WEBHOOK": "no",
                "HAMI_NAMESPACE": HAMI_NAMESPACE,
                "PYTHON": sys.executable,
                "TIMEOUT": str(WAIT),
            },
            stdin=management.kubeconfig.read_text(),
            timeout=WAIT + 60,
        )
        pods = management.kubectl("-n", HAMI_NAMESPACE, "get", "pods", "-l", f"app.kubernetes.io/name={PLUGIN_NAME}",
                                  "-o", "json", check=False).stdout  # fmt: skip
        assert waited.returncode == 0, (waited.stderr[-3000:], pods[-3000:])
        found = json.loads(management.kubectl("get", "node", node, "-o", "json").stdout)
        allocatable = found["status"]["allocatable"]
        assert {key: allocatable[key] for key in totals(cards)} == {
            "nvidia.com/gpu": "20",
            "nvidia.com/gpumem": "49152",
            "nvidia.com/gpucores": "200",
            "nvidia.com/gpumem-percentage": "200",
        }
        written = json.loads(found["metadata"]["annotations"]["hami.io/node-nvidia-register"])
        assert [card["id"] for card in written] == ["GPU-MOCK-tenant-b-0", "GPU-MOCK-tenant-b-1"]
        # Each release's own shape (tools/gpulab-hami-plugin hami.go): v2.8.3's devices carry a pair score.
        assert all(("devicepairscore" in card) == (hami_version == "v2.8.3") for card in written)
        [pod] = json.loads(pods)["items"]
        assert pod["spec"]["nodeName"] == node and pod["status"]["phase"] == "Running"
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        events = management.kubectl("get", "events", "-n", HAMI_NAMESPACE, "-o", "json").stdout
        assert "Pulling image" not in events
    finally:
        # Foreground: the plugin's pod is gone before the annotation it may still write is taken off.
        management.kubectl("delete", "-f", "-", "--cascade=foreground", "--wait=true", "--timeout=120s",
                           stdin=yaml.safe_dump_all(objects), check=False)  # fmt: skip
        management.kubectl("annotate", "node", node, "hami.io/node-nvidia-register-", check=False)
