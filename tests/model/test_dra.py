"""model/dra.py: one card means the same to DRA as to HAMi (the register annotation's devmem and devcore); the
real API server and kube-scheduler judge the objects in tests/real/test_dra_allocation.py."""

from __future__ import annotations

import json

from model.catalog import expand_cards, register_annotation
from model.dra import CORES, DRIVER, MEMORY, claim_template, device_class, resource_slice


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
    assert request["exactly"]["capacity"]["requests"] == {MEMORY: "20000", CORES: "30"}
    assert request["exactly"]["deviceClassName"] == device_class("tenant-a")["metadata"]["name"]
    whole = claim_template("tenant-a", "whole", "gpu-workloads", None, None)
    assert "capacity" not in whole["spec"]["spec"]["devices"]["requests"][0]["exactly"], "the defaults: a whole card"
