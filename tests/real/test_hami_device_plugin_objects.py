"""The Docker lab's gpulab-hami-plugin objects (devicePlugin: gpulab; model/kube_objects/hami_device_plugin.py) before
the real API server: it admits them as gpulab builds them, and its RBAC authorizer gives the plugin's ServiceAccount
exactly the calls of the plugin's code (tools/gpulab-hami-plugin kube.go and register.go) and nothing more.

Boundary: kube-apiserver v1.36.4's validation (server-side dry run: nothing of it is kept) and its RBAC authorizer
(`kubectl auth can-i --as` the ServiceAccount). A real kubelet running it: tests/real/test_kind_management.py.
"""

from __future__ import annotations

import json

import pytest

from model.catalog import expand_cards
from model.kube_objects.hami_device_plugin import NAME, NAMESPACE, RULES, plugin_objects, rbac_objects
from model.versions import HAMI_DEVICE_PLUGIN_IMAGE

pytestmark = pytest.mark.real
SUBJECT = f"system:serviceaccount:{NAMESPACE}:{NAME}"
# No node of the shared control plane has these names: the DaemonSet is only judged, never run here.
NODES = {"gpulab-plugin-probe-1": expand_cards("probe", [("L4", 2)]), "gpulab-plugin-probe-2": []}


def can(cluster, verb: str, resource: str, namespace: str | None = None) -> bool:
    where = ("--namespace", namespace) if namespace else ("--all-namespaces",)
    answer = cluster.kubectl("auth", "can-i", verb, resource, "--as", SUBJECT, *where)
    assert answer.stdout.strip() in ("yes", "no"), answer.stderr
    return answer.stdout.strip() == "yes"


def test_the_api_server_admits_the_objects_as_gpulab_builds_them(cluster) -> None:
    for version in ("v2.10.0", "v2.8.3"):
        objects = plugin_objects(HAMI_DEVICE_PLUGIN_IMAGE, version, NODES, pull_policy="Never")
        answer = cluster.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=objects)
        assert answer.returncode == 0, answer.stderr
        kinds = [item["kind"] for item in json.loads(answer.stdout)["items"]]
        assert kinds == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"]


def test_the_plugins_service_account_may_make_exactly_its_calls(cluster) -> None:
    objects = rbac_objects()
    cluster.ok("apply", "--server-side", "--field-manager=gpulab", "-f", "-", stdin=objects)
    try:
        granted = {(verb, resource) for rule in RULES for resource in rule["resources"] for verb in rule["verbs"]}
        assert granted == {("get", "pods"), ("list", "pods"), ("patch", "pods"), ("get", "nodes"), ("patch", "nodes")}
        for verb, resource in sorted(granted):
            assert can(cluster, verb, resource), (verb, resource)
            assert can(cluster, verb, resource, "gpu-workloads"), (verb, resource)  # a ClusterRole: every namespace
        for verb, resource in [
            ("watch", "pods"),
            ("update", "pods"),
            ("delete", "pods"),
            ("create", "pods"),
            ("list", "nodes"),
            ("update", "nodes"),
            ("get", "secrets"),
            ("get", "configmaps"),
        ]:
            assert not can(cluster, verb, resource), (verb, resource)
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "-f", "-", stdin=objects)
