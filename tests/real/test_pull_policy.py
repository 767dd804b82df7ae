"""Kamaji's control-plane pods start from the images on the node (model/docker_lab/pull_policy.py), judged by the real
kube-apiserver v1.36.4.

Boundary: the API server's admission of a MutatingAdmissionPolicy and its binding, and its admission chain, which
compiles the policy's CEL against the Pod schema when it puts the policy to use (creating a policy with a mistyped
expression was accepted here: the type check is at use, and with failurePolicy Fail a policy that does not compile
refuses the pod), then mutates a Pod shaped as Kamaji 26.8.2-edge shapes a TenantControlPlane's
(internal/builders/controlplane/deployment.go: the pod template's labels, the four containers, PullAlways) in a
namespace shaped as gpulab's control-plane namespace, and leaves other pods alone. So a pod that comes back
mutated is what proves the expressions right.
Pods are created with --dry-run=server: the whole admission chain runs and the answer is the object as it would be
stored, and nothing is scheduled onto the session's nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from model.docker_lab.pull_policy import pull_policy_objects
from model.names import TENANT_LABEL, control_plane_namespace
from tests.acceptance.helpers import wait_until
from tests.real.cluster import POLL, Cluster

pytestmark = pytest.mark.real
TENANT = "pullcheck"
NAMESPACE = control_plane_namespace(TENANT)
ELSEWHERE = "pullcheck-elsewhere"  # a namespace of someone else's, with a pod of the same shape
WAIT = 90  # seconds for any one condition of the setup
VERSION = "v1.36.4"


def kamaji_pod(namespace: str, labels: dict[str, str] | None = None) -> dict:
    """A TCP's pod as Kamaji's Deployment makes it: the template's labels (templateLabels: the TCP's name, the
    component, hashes of its secrets), kube-apiserver, kube-controller-manager, kube-scheduler and
    konnectivity-server, every one asking to pull (the worst case: Kamaji sets Always on two), and an init
    container as a TCP's additionalInitContainers would add one."""
    images = {
        "kube-apiserver": f"registry.k8s.io/kube-apiserver:{VERSION}",
        "kube-controller-manager": f"registry.k8s.io/kube-controller-manager:{VERSION}",
        "kube-scheduler": f"registry.k8s.io/kube-scheduler:{VERSION}",
        "konnectivity-server": "registry.k8s.io/kas-network-proxy/proxy-server:v0.36.0",
    }
    if labels is None:
        labels = {
            "kamaji.clastix.io/name": TENANT,
            "kamaji.clastix.io/component": "deployment",
            "component.kamaji.clastix.io/ca": "0cc175b9c0f1b6a831c399e269772661",
            "component.kamaji.clastix.io/datastore": "default",
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"{TENANT}-", "namespace": namespace, "labels": labels},
        "spec": {
            "initContainers": [
                {"name": "chmod", "image": "docker.io/library/busybox:1.37.0", "imagePullPolicy": "Always"}
            ],
            "containers": [
                {"name": name, "image": image, "imagePullPolicy": "Always"} for name, image in images.items()
            ],
        },
    }


def admitted(cluster: Cluster, pod: dict) -> dict[str, str]:
    """Each container's imagePullPolicy in the Pod the API server would store."""
    result = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=pod)
    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)["spec"]
    return {c["name"]: c["imagePullPolicy"] for c in stored.get("initContainers", []) + stored["containers"]}


@pytest.fixture(scope="module")
def policy(cluster: Cluster) -> Iterator[tuple[dict, dict]]:
    """The policy and binding gpulab generates for a tenant's control-plane namespace, created, and in force."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {TENANT_LABEL: TENANT}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ELSEWHERE}},
    ]
    cluster.ok("create", "-f", "-", stdin=namespaces)
    objects = pull_policy_objects([NAMESPACE])
    created = cluster.kubectl("create", "-f", "-", stdin=list(objects))
    try:
        assert created.returncode == 0, f"the API server refused the policy: {created.stderr}"
        for each in (NAMESPACE, ELSEWHERE):
            wait_until(
                lambda each=each: cluster.get("serviceaccount", "-n", each, "default"),
                WAIT,
                f"service account {each}/default (every Pod create needs it)",
                interval=POLL,
            )
        # In force once the admission plugin's informers have the policy and its binding.
        wait_until(
            lambda: admitted(cluster, kamaji_pod(NAMESPACE))["kube-apiserver"] == "IfNotPresent",
            WAIT,
            f"the policy to set IfNotPresent on a Kamaji pod in {NAMESPACE}",
            interval=POLL,
        )
        yield objects
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "-f", "-", stdin=list(objects))
        cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "namespace", NAMESPACE, ELSEWHERE)


def test_every_container_of_a_kamaji_pod_in_a_control_plane_namespace_starts_from_the_node(
    cluster: Cluster, policy: tuple[dict, dict]
) -> None:
    assert admitted(cluster, kamaji_pod(NAMESPACE)) == {
        "chmod": "IfNotPresent",
        "kube-apiserver": "IfNotPresent",
        "kube-controller-manager": "IfNotPresent",
        "kube-scheduler": "IfNotPresent",
        "konnectivity-server": "IfNotPresent",
    }


def test_a_kamaji_pod_elsewhere_keeps_its_pull_policy(cluster: Cluster, policy: tuple[dict, dict]) -> None:
    """Only gpulab's control-plane namespaces: the same pod in another namespace is left as it was."""
    assert set(admitted(cluster, kamaji_pod(ELSEWHERE)).values()) == {"Always"}


@pytest.mark.parametrize(
    "labels",
    [
        {"app": "something-else"},
        {"kamaji.clastix.io/name": TENANT},  # not the deployment component
        {"kamaji.clastix.io/component": "deployment"},  # not a TCP's
    ],
    ids=["other-pod", "no-component", "no-tcp-name"],
)
def test_another_pod_in_a_control_plane_namespace_keeps_its_pull_policy(
    cluster: Cluster, policy: tuple[dict, dict], labels: dict[str, str]
) -> None:
    assert set(admitted(cluster, kamaji_pod(NAMESPACE, labels)).values()) == {"Always"}
