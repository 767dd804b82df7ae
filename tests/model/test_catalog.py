"""The HAMi register annotation and node capacity, byte for byte, for the reference tenants."""

from __future__ import annotations

import json

from lab_harness import lab_config

from model.catalog import GPU_CATALOG, gpu_capacity, register_annotation, totals
from model.config import parse_config

TENANT_A_ANNOTATION = (
    '[{"id":"GPU-MOCK-tenant-a-0","index":0,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA-A100-SXM4-80GB","numa":0,"mode":"hami-core","health":true}]'
)
TENANT_B_ANNOTATION = (
    '[{"id":"GPU-MOCK-tenant-b-0","index":0,"count":10,"devmem":24576,"devcore":100,'
    '"type":"NVIDIA-L4","numa":0,"mode":"hami-core","health":true},'
    '{"id":"GPU-MOCK-tenant-b-1","index":1,"count":10,"devmem":24576,"devcore":100,'
    '"type":"NVIDIA-L4","numa":0,"mode":"hami-core","health":true}]'
)


def reference_cards():
    lab = parse_config(lab_config())
    return {tenant.name: tenant.cards() for tenant in lab.tenants}


def test_tenant_a_annotation_byte_for_byte() -> None:
    assert register_annotation(reference_cards()["tenant-a"]) == TENANT_A_ANNOTATION


def test_tenant_b_annotation_byte_for_byte() -> None:
    assert register_annotation(reference_cards()["tenant-b"]) == TENANT_B_ANNOTATION


def test_capacity_is_the_sum_of_split_counts() -> None:
    cards = reference_cards()
    assert gpu_capacity(cards["tenant-a"]) == 10
    assert gpu_capacity(cards["tenant-b"]) == 20


def test_advertised_totals_match_the_reference_lab() -> None:
    cards = reference_cards()
    assert totals(cards["tenant-a"]) == {
        "nvidia.com/gpu": 10,
        "nvidia.com/gpumem": 81920,
        "nvidia.com/gpucores": 100,
        "nvidia.com/gpumem-percentage": 100,
    }
    assert totals(cards["tenant-b"])["nvidia.com/gpumem"] == 49152
    assert totals(cards["tenant-b"])["nvidia.com/gpucores"] == 200


def test_annotation_fields_follow_hamis_rules() -> None:
    """HAMi v2.8.3 (devices.go, score.go): numbers as numbers, health true, hami-core, unique ids, NVIDIA in type."""
    for cards in reference_cards().values():
        devices = json.loads(register_annotation(cards))
        assert len({d["id"] for d in devices}) == len(devices)
        for device in devices:
            assert device["health"] is True and device["mode"] == "hami-core"
            assert "nvidia" in device["type"].lower()
            for key in ("index", "count", "devmem", "devcore", "numa"):
                assert type(device[key]) is int
            assert device["count"] >= 1 and device["devcore"] == 100


def test_catalog_types_contain_nvidia() -> None:
    assert all("NVIDIA" in model.type for model in GPU_CATALOG.values())
