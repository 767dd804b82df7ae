"""The real kube-scheduler v1.36.4 as the DRA allocator of gpulab's simulated cards (model/dra.py): the seed's case
asked the Kubernetes-native way. Boundary: the API server's validation of resource.k8s.io/v1 DeviceClass,
ResourceSlice and ResourceClaimTemplate objects, kube-controller-manager's resourceclaim controller making each
pod's claim from its template, and kube-scheduler's DRA plugin allocating consumable capacity on a shared device
(DRAConsumableCapacity, beta and on by default in v1.36) on a KWOK node."""

from __future__ import annotations

import json

import pytest

from model.catalog import expand_cards
from model.dra import DRIVER, claim_template, device_class, resource_slice
from tests.acceptance.helpers import wait_until
from tests.real.cluster import POLL

TENANT = "tenant-dra"
NODE = "dra-a100"
NAMESPACE = "gpulab-dra"
WAIT = 90


def pod(name: str, template: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "work", "image": "fake", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


@pytest.fixture(scope="module")
def a100(cluster):
    """One KWOK node whose one A100 80 GB is a DRA device of gpulab's driver; removed afterwards."""
    [card] = expand_cards(TENANT, [("A100-80GB", 1)])
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    objects = [node, namespace, device_class(TENANT), resource_slice(TENANT, NODE, [card])]
    cluster.ok("apply", "--server-side", "--field-manager=gpulab", "-f", "-", stdin=objects)
    yield card
    cluster.ok("delete", "namespace", NAMESPACE, "--wait=false")
    cluster.ok("delete", "resourceslice", f"{NODE}-{DRIVER}", "--wait=false")
    cluster.ok("delete", "deviceclass", device_class(TENANT)["metadata"]["name"], "--wait=false")
    cluster.ok("delete", "node", NODE, "--wait=false")


def submit(cluster, name: str, memory_mb: int, cores: int) -> None:
    template = claim_template(TENANT, name, NAMESPACE, memory_mb, cores)
    cluster.ok("apply", "--server-side", "--field-manager=gpulab", "-f", "-", stdin=[template, pod(name, name)])


def scheduled(cluster, name: str) -> str | None:
    found = cluster.get("pod", "-n", NAMESPACE, name)
    return (found or {}).get("spec", {}).get("nodeName")


def unschedulable(cluster, name: str) -> str | None:
    """The scheduler's message when it has found no node for the pod."""
    found = cluster.get("pod", "-n", NAMESPACE, name) or {}
    for condition in found.get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return condition.get("message", "")
    return None


def test_three_claims_share_the_card_a_fourth_is_refused_for_cores_and_90000_mb_for_memory(cluster, a100) -> None:
    for index in (1, 2, 3):
        submit(cluster, f"trainer-{index}", 20000, 30)
    for index in (1, 2, 3):
        node = wait_until(lambda i=index: scheduled(cluster, f"trainer-{i}"), WAIT, f"trainer-{index} scheduled", POLL)
        assert node == NODE
    claims = json.loads(cluster.ok("get", "resourceclaims", "-n", NAMESPACE, "-o", "json"))["items"]
    results = [result for claim in claims for result in claim["status"]["allocation"]["devices"]["results"]]
    assert {(r["driver"], r["pool"], r["device"]) for r in results} == {(DRIVER, NODE, "gpu-0")}, "one card, shared"
    consumed = sorted(json.dumps(r["consumedCapacity"], sort_keys=True) for r in results)
    assert consumed == [json.dumps({"cores": "30", "memory": "20k"}, sort_keys=True)] * 3, consumed

    submit(cluster, "trainer-4", 20000, 30)  # 90 % of the cores are taken: 30 more do not fit
    message = wait_until(lambda: unschedulable(cluster, "trainer-4"), WAIT, "trainer-4 unschedulable", POLL)
    assert "cannot allocate all claims" in message, message
    submit(cluster, "too-big", 90000, 10)  # more memory than the card has
    message = wait_until(lambda: unschedulable(cluster, "too-big"), WAIT, "too-big unschedulable", POLL)
    assert "cannot allocate all claims" in message, message
    assert scheduled(cluster, "trainer-4") is None and scheduled(cluster, "too-big") is None
