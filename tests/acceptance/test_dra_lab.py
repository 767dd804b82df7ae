"""TC-14..18: a tenant that shares its cards through DRA (gpuSharing: dra), checked against the live lab (`make
verify`): its cards are devices of gpulab's driver in ResourceSlices only it sees, its declared workloads' claims
share one card, and its own kube-scheduler refuses a claim that no longer fits. The seed's case, the
Kubernetes-native way (model/dra.py); the HAMi tenants' cases are test_lab.py's. On real nodes (TC-17) the real
kubelet has gpulab's DRA kubelet plugin prepare each claim before its pod runs, and unprepare it once the pod is
gone (tools/gpulab-dra-plugin). TC-18: `make check --live` judges a claim after the claims allocated now.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from kubernetes import client

from model import dra
from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_RESOURCE
from model.names import TENANT_LABEL
from model.quantity import parse_quantity
from tests.acceptance.helpers import claim_pod, disposable_namespace, tenants_sharing, wait_until
from tests.acceptance.test_real_nodes import on_node

GROUP, VERSION = "resource.k8s.io", "v1"
SHARE = {"memory": 20000, "cores": 30}


def dra_tenants(lab) -> list:
    return tenants_sharing(lab, "dra")


def objects(api_client, plural: str, namespace: str | None = None) -> list[dict]:
    custom = client.CustomObjectsApi(api_client)
    if namespace is None:
        return custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"]
    return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]


def unschedulable(api: client.CoreV1Api, namespace: str, name: str) -> str | None:
    pod = api.read_namespaced_pod(name, namespace)
    assert pod.status.phase == "Pending", f"{name} is {pod.status.phase}; it should not fit"
    for condition in pod.status.conditions or []:
        # The allocator's verdict only: a pod whose claim the claim controller has not made yet is Unschedulable
        # for that a moment too (kube-scheduler v1.36.4 dynamicresources.go PreFilter), then judged again.
        if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
            return condition.message if "cannot allocate all claims" in (condition.message or "") else None
    return None


def test_tc14_the_cards_are_devices_only_their_tenant_sees(lab) -> None:
    for tenant in dra_tenants(lab):
        api_client = lab.tenants[tenant.name]
        slices = {s["spec"]["nodeName"]: s for s in objects(api_client, "resourceslices")}
        for gpu_node in tenant.gpu_nodes():
            found = slices[gpu_node.name]
            assert found["spec"]["driver"] == dra.DRIVER
            devices = found["spec"]["devices"]
            assert [d["attributes"]["uuid"]["string"] for d in devices] == [card.id for card in gpu_node.cards]
            for device, card in zip(devices, gpu_node.cards, strict=True):
                assert device["allowMultipleAllocations"] is True
                # Read as the API server writes them (80000 would arrive as "80k").
                assert parse_quantity(device["capacity"][dra.MEMORY]["value"]) == card.memory_mb
                assert parse_quantity(device["capacity"][dra.CORES]["value"]) == card.cores
            node = client.CoreV1Api(api_client).read_node(gpu_node.name)
            advertised = {
                key: value
                for key, value in (node.status.allocatable or {}).items()
                if key in (GPU_RESOURCE, GPUMEM_RESOURCE, GPUCORES_RESOURCE) and parse_quantity(value) != 0
            }  # a KWOK node made before its cards were known lists them at 0
            assert not advertised, f"{gpu_node.name} advertises {advertised}: a DRA tenant's cards are slices only"
        classes = {c["metadata"]["name"] for c in objects(api_client, "deviceclasses")}
        assert dra.device_class_name(tenant.name) in classes
        for other in lab.config.tenants:
            if other.name != tenant.name:
                theirs = objects(lab.tenants[other.name], "resourceslices")
                mine = [s for s in theirs if (s["metadata"].get("labels") or {}).get(TENANT_LABEL) == tenant.name]
                assert not mine, f"{other.name} sees {tenant.name}'s slices"


def allocated_shares(lab, tenant) -> list[dict]:
    """The allocation results of the tenant's declared 20000 MB / 30 % workloads' claims, once their pods run."""
    shares = [w for w in tenant.workloads if (w.gpumem, w.gpucores) == (SHARE["memory"], SHARE["cores"])]
    if len(shares) < 3:
        pytest.fail(f"{tenant.name} must declare three 20000 MB / 30 % workloads (as Pulumi.dra.yaml does)")
    api = client.CoreV1Api(lab.tenants[tenant.name])
    for workload in shares:
        namespace = tenant.workload_namespace(workload)
        wait_until(
            lambda w=workload, n=namespace: api.read_namespaced_pod(w.name, n).status.phase == "Running",
            120,
            f"{tenant.name}'s {workload.name} to be Running",
        )
    return [
        result
        for namespace in {tenant.workload_namespace(w) for w in shares}
        for claim in objects(lab.tenants[tenant.name], "resourceclaims", namespace)
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    ]


def test_tc15_the_declared_claims_share_one_card(lab) -> None:
    for tenant in dra_tenants(lab):
        results = allocated_shares(lab, tenant)
        assert len(results) == 3, results
        assert len({(r["pool"], r["device"]) for r in results}) == 1, f"the claims are not on one card: {results}"
        for result in results:
            consumed = result["consumedCapacity"]
            assert (consumed[dra.MEMORY], consumed[dra.CORES]) == ("20k", "30"), consumed  # as the API server writes


def test_tc16_a_fourth_claim_and_a_90000_mb_claim_are_refused_by_the_allocator(lab) -> None:
    for tenant in dra_tenants(lab):
        assert len(allocated_shares(lab, tenant)) == 3, "the three declared claims hold 90 % of the card's cores"
        api_client = lab.tenants[tenant.name]
        api = client.CoreV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        image = lab.config.versions.workload_image
        with disposable_namespace(api) as namespace:
            for name, memory, cores in (("tc16-cores", 20000, 30), ("tc16-memory", 90000, 10)):
                template = dra.claim_template(tenant.name, name, namespace, memory, cores)
                custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", template)
                api.create_namespaced_pod(namespace, claim_pod(name, image, name))
            for name in ("tc16-cores", "tc16-memory"):
                message = wait_until(
                    lambda n=name, a=api, ns=namespace: unschedulable(a, ns, n),
                    120,
                    f"kube-scheduler to find no card for {name}",
                )
                assert "cannot allocate all claims" in message, message


def prepared_share(node: str, claim_uid: str) -> dict[str, str] | None:
    """What gpulab's plugin prepared on `node` for the claim: its CDI spec's environment (the file is named by the
    claim's UID: tools/gpulab-dra-plugin/driver.go), None when there is no such file."""
    path = f"/var/run/cdi/{dra.DRIVER}-gpu_{claim_uid}.json"
    text = on_node(node, "sh", "-c", f"cat {path} 2>/dev/null || true")  # one read: the file may go meanwhile
    if not text:
        return None
    spec = json.loads(text)
    [device] = spec["devices"]
    return dict(line.split("=", 1) for line in device["containerEdits"]["env"])


def test_tc17_on_a_real_node_gpulabs_plugin_prepares_each_claim_and_unprepares_it(lab) -> None:
    lab.needs_real_nodes("the kubelet preparing claims through gpulab's DRA kubelet plugin")
    for tenant in dra_tenants(lab):
        allocated_shares(lab, tenant)  # the declared pods Running: the kubelet had their claims prepared
        node = tenant.gpu_node_name()
        namespaces = {tenant.workload_namespace(w) for w in tenant.workloads}
        claims = [c for ns in namespaces for c in objects(lab.tenants[tenant.name], "resourceclaims", ns)]
        assert len(claims) >= 3, claims
        for claim in claims:
            share = prepared_share(node, claim["metadata"]["uid"])
            assert share is not None, f"no CDI spec of {claim['metadata']['name']} on {node}"
            assert (share["GPULAB_GPU_MEMORY_MB"], share["GPULAB_GPU_CORES"]) == ("20000", "30"), share
        # A claim of a pod that goes is unprepared: its CDI spec leaves the node.
        api_client = lab.tenants[tenant.name]
        api = client.CoreV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        with disposable_namespace(api) as namespace:
            template = dra.claim_template(tenant.name, "tc17", namespace, 1000, 5)  # fits beside the three
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", template)
            api.create_namespaced_pod(namespace, claim_pod("tc17", lab.config.versions.workload_image, "tc17"))
            wait_until(
                lambda a=api, ns=namespace: a.read_namespaced_pod("tc17", ns).status.phase == "Running",
                120,
                f"pod {namespace}/tc17 to be Running on {node}",
            )
            [claim] = objects(api_client, "resourceclaims", namespace)
            uid = claim["metadata"]["uid"]
            share = prepared_share(node, uid)
            assert share is not None and (share["GPULAB_GPU_MEMORY_MB"], share["GPULAB_GPU_CORES"]) == ("1000", "5")
            api.delete_namespaced_pod("tc17", namespace, grace_period_seconds=0)
            wait_until(lambda n=node, u=uid: prepared_share(n, u) is None, 120, f"{node} to unprepare tc17's claim")


def test_tc18_make_check_live_judges_a_claim_after_what_is_allocated_now(lab, capsys) -> None:
    """`python -m policies check --live` on a DRA tenant: the claims the tenant's API server holds allocated now (the
    declared three, as kube-scheduler recorded their consumed capacity), then the manifest's: a fourth share is
    refused with what the card has free now."""
    from model.stack import stack_name
    from policies.checker import main

    for tenant in dra_tenants(lab):
        assert len(allocated_shares(lab, tenant)) == 3
        namespace = tenant.workload_namespace(tenant.workloads[0])
        template = dra.claim_template(tenant.name, "tc18-gpu", namespace, SHARE["memory"], SHARE["cores"])
        pod = claim_pod("tc18", lab.config.versions.workload_image, "tc18-gpu")
        pod["metadata"]["namespace"] = namespace
        with tempfile.TemporaryDirectory(prefix="gpulab-tc18-") as scratch:
            manifest = Path(scratch) / "tc18.json"
            manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [template, pod]}))
            code = main(["--tenant", tenant.name, "--stack", stack_name(), "--live", str(manifest)])
        out = capsys.readouterr().out
        assert code == 1, out
        assert "60000 of 81920 MB, 90 of 100% cores in use (3 claims)" in out, out
        assert "cannot allocate all claims" in out and "21920 MB, 10 %" in out, out
