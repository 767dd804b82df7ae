"""TC-11: a tenant with several GPU nodes, live (`make verify`, when the stack has such a tenant).

- under binpack (the pod's `hami.io/node-scheduler-policy`), two small pods land on one node;
- under spread, on two nodes (when the two least used nodes start equally used, as in a fresh lab;
  otherwise on the node HAMi's score picks, which the model predicts from the live usage);
- a pod that no single node can hold (one exclusive card per container, one container more than the
  largest node has cards) passes admission and stays Pending with HAMi's CardInsufficientCore.
"""

from __future__ import annotations

import copy

import pytest
from kubernetes import client

from model.config import Tenant
from tests.acceptance.helpers import disposable_namespace, gpu_pod, hami_reasons, pod_events, wait_until

NODE_POLICY_ANNOTATION = "hami.io/node-scheduler-policy"
SMALL = {"gpumem": 1000, "gpucores": 5}


def multi_node_tenant(lab) -> Tenant:
    for tenant in lab.config.tenants:
        if len(tenant.gpu_nodes()) > 1 and tenant.gpu_sharing == "hami":
            return tenant
    pytest.skip("TC-11 needs a HAMi tenant with several GPU nodes (tenants[].nodes); this stack has none")


def with_node_policy(pod: dict, policy: str) -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"].setdefault("annotations", {})[NODE_POLICY_ANNOTATION] = policy
    return pod


def unplaceable_pod(tenant: Tenant, image: str) -> dict:
    """One container per card of the largest node, plus one, each asking a whole card's cores: every
    node runs out of cards for it (CardInsufficientCore), while each container alone fits any card."""
    most = max(len(node.cards) for node in tenant.gpu_nodes())
    pod = gpu_pod("tc11-nowhere", image, gpumem=1000, gpucores=100)
    template = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [{**copy.deepcopy(template), "name": f"gpu-{i}"} for i in range(most + 1)]
    return pod


def node_of(api: client.CoreV1Api, namespace: str, name: str, timeout: float = 120) -> str:
    def running():
        pod = api.read_namespaced_pod(name, namespace)
        return pod.spec.node_name if pod.status.phase == "Running" else None

    return wait_until(running, timeout, f"pod {namespace}/{name} to be Running")


def gpu_node_scores(lab, tenant: Tenant) -> dict[str, float]:
    """HAMi's node score of each GPU node now, from HAMi's allocations on the tenant's pods."""
    from hami.cluster import node_score
    from placement.inventory import from_tenant
    from placement.live import current_usage, fetch_pod_list

    inventory = current_usage(from_tenant(tenant), fetch_pod_list(lab.kubeconfigs[tenant.name]))
    cluster = inventory.cluster([])
    return {name: node_score(node) for name, node in zip(cluster.names, cluster.nodes, strict=True)}


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_tc11_node_policy_decides_where_two_small_pods_go(lab, policy: str) -> None:
    tenant = multi_node_tenant(lab)
    image = lab.config.versions.workload_image
    api = client.CoreV1Api(lab.tenants[tenant.name])
    before = gpu_node_scores(lab, tenant)
    with disposable_namespace(api) as namespace:
        api.create_namespaced_pod(namespace, with_node_policy(gpu_pod("tc11-1", image, **SMALL), policy))
        first = node_of(api, namespace, "tc11-1")
        api.create_namespaced_pod(namespace, with_node_policy(gpu_pod("tc11-2", image, **SMALL), policy))
        second = node_of(api, namespace, "tc11-2")
    assert first in before and second in before, f"{first}, {second} are not {tenant.name}'s GPU nodes"
    if policy == "binpack":
        assert first == second, f"binpack put the two small pods on {first} and {second}"
        return
    lowest = sorted(before.values())[:2]
    if lowest[0] == lowest[1]:
        assert first != second, f"spread put both small pods on {first} (scores before: {before})"
    else:
        assert first == min(before, key=before.get), f"spread chose {first}, not the least used (scores {before})"


def test_tc11_a_pod_no_single_node_holds_is_refused_by_hami(lab) -> None:
    tenant = multi_node_tenant(lab)
    api = client.CoreV1Api(lab.tenants[tenant.name])
    with disposable_namespace(api) as namespace:
        api.create_namespaced_pod(namespace, unplaceable_pod(tenant, lab.config.versions.workload_image))

        def refused():
            pod = api.read_namespaced_pod("tc11-nowhere", namespace)
            assert pod.status.phase == "Pending", f"tc11-nowhere is {pod.status.phase}; no node can hold it"
            return "CardInsufficientCore" in hami_reasons(pod_events(api, namespace, "tc11-nowhere"))

        wait_until(refused, 120, "HAMi's FilteringFailed event with CardInsufficientCore for tc11-nowhere")
