"""make diagnose's verdict on DaemonSets with nothing to run, on what the real API server and DaemonSet controller say.

Boundary: kube-controller-manager's DaemonSet controller (which node a DaemonSet should run on: its nodeSelector,
the node's taints) and the API server's JSON of the result (a status with 0 desired omits the zero counts its type
marks omitempty). HAMi's NVIDIA plugin selects `gpu: "on"`, which no node of the Docker lab carries: 0 desired by
design, not "not ready". A DaemonSet whose nodeSelector matches a node and that still has 0 desired (here: a taint it
does not tolerate) is a real finding.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from diagnose.analyze import Cluster as Collected
from diagnose.cluster_findings import workload_findings
from process_lab.gpu_nodes import KWOK_NODE_ANNOTATION
from tests.acceptance.helpers import wait_until
from tests.real.cluster import POLL, Cluster

pytestmark = pytest.mark.real
NAMESPACE = "gpulab-daemonsets"
NODE = "ds-node"


def daemonset(name: str, node_selector: dict[str, str]) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": node_selector, "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }


# Labels of this module's own: the session's cluster has other nodes (the process lab's GPU node carries gpu=on).
GPU_LABEL = {"gpulab.io/daemonset-test-gpu": "on"}  # as HAMi's gpu=on: no node of the Docker lab has it
NODE_LABEL = {"gpulab.io/daemonset-test-os": "linux"}  # as kube-proxy's kubernetes.io/os=linux: the node has it


@pytest.fixture(scope="module")
def collected(cluster: Cluster) -> Iterator[Collected]:
    """A node as a worker registers (no gpu label) with a taint, and two DaemonSets: one selecting as HAMi's NVIDIA
    plugin does, one as kube-proxy does but without the taint's toleration. What diagnose collects: every node."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux", **NODE_LABEL},
        },
        "spec": {"taints": [{"key": "gpulab.io/test", "value": "daemonsets", "effect": "NoSchedule"}]},
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    sets = [daemonset("nvidia-like", GPU_LABEL), daemonset("proxy-like", NODE_LABEL)]
    cluster.ok("create", "-f", "-", stdin=[node, namespace, *sets])
    try:

        def observed() -> list[dict]:
            found = (cluster.get("daemonsets", "-n", NAMESPACE) or {}).get("items") or []
            done = [d for d in found if (d.get("status") or {}).get("observedGeneration")]
            return found if len(done) == len(sets) else []

        wait_until(observed, 60, "the DaemonSet controller to judge both DaemonSets", interval=POLL)
        yield Collected(
            "tenant-a",
            objects={
                "workloads": cluster.get("daemonsets", "-n", NAMESPACE)["items"],
                "nodes": cluster.get("nodes")["items"],
            },
        )
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cluster.kubectl("delete", "node", NODE, "--wait=false")


def test_the_api_server_omits_the_zero_counts_of_a_daemonset_with_nothing_to_run(collected: Collected) -> None:
    """The shape the unit tier's DaemonSets copy (tests/diagnose/test_diagnose.py)."""
    nvidia = next(d for d in collected.items("workloads") if d["metadata"]["name"] == "nvidia-like")
    status = nvidia["status"]
    assert status["desiredNumberScheduled"] == 0 and status["numberReady"] == 0
    assert "numberAvailable" not in status and "updatedNumberScheduled" not in status


def test_a_daemonset_no_node_is_selected_for_is_not_a_finding(collected: Collected) -> None:
    found = {f.component: f.reason for f in workload_findings(collected, {NAMESPACE}, [], set())}
    assert f"{NAMESPACE}/nvidia-like" not in found, found
    assert found[f"{NAMESPACE}/proxy-like"] == f"DaemonSet 0 pods scheduled, though its nodeSelector matches {NODE}"
