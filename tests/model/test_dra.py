"""model/dra.py: one card means the same to DRA as to HAMi (the register annotation's devmem and devcore); the
real API server and kube-scheduler judge the objects in tests/real/test_dra_allocation.py."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from lab_harness import LAB_PROJECT

from model.catalog import expand_cards, register_annotation
from model.config import ConfigError, parse_config
from model.dra import CORES, DRIVER, MEMORY, claim_template, device_class, resource_slice
from model.kube_objects.tenant_objects import quota_hard
from model.kube_objects.workload_manifests import workload_claim_template, workload_manifest


def test_each_card_is_one_shared_device_with_the_memory_and_cores_hami_registers() -> None:
    cards = expand_cards("tenant-b", [("L4", 2)])
    registered = {device["id"]: device for device in json.loads(register_annotation(cards))}
    devices = resource_slice("tenant-b", "tenant-b-worker", cards)["spec"]["devices"]
    assert len(devices) == len(cards) == 2
    for device in devices:
        hami = registered[device["attributes"]["uuid"]["string"]]
        assert device["allowMultipleAllocations"] is True
        assert device["capacity"][MEMORY]["value"] == str(hami["devmem"]) == "24576"
        assert device["capacity"][CORES]["value"] == str(hami["devcore"]) == "100"
        assert device["attributes"]["type"]["string"] == hami["type"]


def test_a_tenants_class_selects_its_own_devices_of_gpulabs_driver_only() -> None:
    expression = device_class("tenant-a")["spec"]["selectors"][0]["cel"]["expression"]
    assert f"device.driver == '{DRIVER}'" in expression and "== 'tenant-a'" in expression


def test_a_claim_asks_what_a_pods_limits_ask_of_hami() -> None:
    template = claim_template("tenant-a", "trainer", "gpu-workloads", 20000, 30)
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["capacity"]["requests"] == {
        MEMORY: "20k",
        CORES: "30",
    }  # as the API server writes 20000 back
    assert request["exactly"]["deviceClassName"] == device_class("tenant-a")["metadata"]["name"]
    whole = claim_template("tenant-a", "whole", "gpu-workloads", None, None)
    assert "capacity" not in whole["spec"]["spec"]["devices"]["requests"][0]["exactly"], "the defaults: a whole card"


# --- gpuSharing: dra in a stack's config (model/config) -------------------------------------------------------

DRA_STACK = yaml.safe_load((LAB_PROJECT / "Pulumi.dra.yaml").read_text())["config"]


def dra_config(**tenant_b: object) -> dict:
    config = {key.split(":", 1)[1]: value for key, value in copy.deepcopy(DRA_STACK).items()}
    config["tenants"][1].update(tenant_b)
    return config


def refusal(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


def test_the_dra_stack_is_valid_and_only_tenant_b_shares_through_dra() -> None:
    lab = parse_config(dra_config())
    assert [(t.name, t.gpu_sharing) for t in lab.tenants] == [("tenant-a", "hami"), ("tenant-b", "dra")]
    assert [lab.runs_hami(t) for t in lab.tenants] == [True, False]
    without = dra_config()
    del without["tenants"][1]["gpuSharing"]
    assert parse_config(without).tenants[1].gpu_sharing == "hami", "a stack without the key behaves as before"


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [
        ({"quota": {"gpumem": 40960}}, "tenants[1].quota.gpumem = 40960", "only its devices per class"),
        ({"quota": {"gpucores": 150}}, "tenants[1].quota.gpucores = 150", "quota.gpus is what a DRA tenant can cap"),
        ({"splitCount": 4}, "tenants[1].splitCount = 4", "HAMi's slot limit"),
        ({"limits": {"gpus": 1}}, "tenants[1].limits = {'gpus': 1}", "pods' nvidia.com limits"),
        (
            {"workloads": [{"name": "half", "gpumemPercentage": 50}]},
            "tenants[1].workloads[0].gpumemPercentage = 50",
            "in MB: use gpumem",
        ),
        ({"gpuSharing": "mig"}, "tenants[1].gpuSharing = 'mig'", "must be one of: hami, dra"),
    ],
)
def test_hamis_own_keys_on_a_dra_tenant_are_refused_naming_key_value_and_fix(change: dict, key: str, says: str):
    message = refusal(dra_config(**change))
    assert f"gpulab:{key}" in message and says in message, message
    if change.get("gpuSharing") != "mig":
        assert "gpuSharing: hami" in message, message


def test_a_dra_tenant_in_the_docker_lab_is_refused_its_kubelets_have_no_plugin() -> None:
    config = dra_config()
    config.update({"runtime": "docker", "scheduling": {}, "management": {}})
    message = refusal(config)
    assert "gpulab:tenants[1].gpuSharing = 'dra'" in message and "the Docker lab's workers" in message, message
    assert "use runtime: process" in message and "gpuSharing: hami" in message, message


def test_a_dra_tenant_on_real_nodes_is_taken_its_node_runs_gpulabs_plugin() -> None:
    """Process mode's node containers run gpulab's DRA kubelet plugin (tools/gpulab-dra-plugin)."""
    config = yaml.safe_load((LAB_PROJECT / "Pulumi.nodes-dra.yaml").read_text())["config"]
    lab = parse_config({key.removeprefix("gpulab:"): value for key, value in config.items()})
    assert lab.real_nodes and [t.gpu_sharing for t in lab.tenants] == ["hami", "dra"]


def test_a_dra_tenants_quota_caps_the_devices_its_claims_ask() -> None:
    tenant = parse_config(dra_config()).tenants[1]
    assert quota_hard(tenant) == {"gpulab-tenant-b-gpu.deviceclass.resource.k8s.io/devices": "4"}
    assert quota_hard(parse_config(dra_config(quota=None)).tenants[1]) == {}


def test_a_dra_tenants_workload_is_a_pod_with_a_claim_from_its_own_template() -> None:
    two_cards = [{"model": "A100-80GB", "count": 2}]
    tenant = parse_config(dra_config(gpus=two_cards, workloads=[{"name": "pair", "gpus": 2, "gpumem": 1000}])).tenants[
        1
    ]
    [workload] = tenant.workloads
    template = workload_claim_template(tenant, workload)
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["count"], exactly["capacity"]["requests"]) == (2, {MEMORY: "1k"})
    assert template["metadata"]["namespace"] == "gpu-workloads"
    pod = workload_manifest(tenant, workload, "busybox")
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": template["metadata"]["name"]}]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    hami_tenant = parse_config(dra_config()).tenants[0]
    assert workload_claim_template(hami_tenant, hami_tenant.workloads[0]) is None


def test_every_quantity_is_written_as_the_api_server_writes_it_back() -> None:
    """pulumi-kubernetes compares a custom object's inputs with what the API server returned as text: "20000"
    against "20k" was a change on every `make up` (seen with the real engine on Pulumi.dra.yaml, 2026-12-04)."""
    from model.quantity import canonical_whole, parse_quantity

    cards = expand_cards("tenant-x", [("A100-80GB", 1), ("L4", 1)])
    texts = [
        text
        for device in resource_slice("tenant-x", "n", cards)["spec"]["devices"]
        for capacity in device["capacity"].values()
        for text in (capacity["value"], capacity["requestPolicy"]["default"])
    ]
    texts += claim_template("tenant-x", "t", "ns", 20000, 30)["spec"]["spec"]["devices"]["requests"][0]["exactly"][
        "capacity"
    ]["requests"].values()
    assert texts and all(text == canonical_whole(int(parse_quantity(text))) for text in texts), texts
