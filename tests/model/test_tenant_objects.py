"""The inventory ConfigMap the program puts in a tenant (model/kube_objects/tenant_objects.py) carries the tenant's HAMi
release, and the policy pack reads it back (placement/inventory.py `from_inventory_document`): a lab-stack tenant is
judged with its own release's placement rules, not v2.8.3's."""

from __future__ import annotations

import json

import pytest
from lab_harness import lab_config

from hami.releases import RULES, rules_for
from model.config import parse_config
from model.kube_objects.tenant_objects import inventory_document, tenant_objects
from placement.inventory import from_inventory_document, from_stack_resources

LAB = parse_config(lab_config())


@pytest.mark.parametrize("version", sorted(RULES))
def test_the_inventory_document_round_trips_the_tenant_s_hami_version(version: str) -> None:
    tenant = LAB.tenants[0].model_copy(update={"hami_version": version})
    document = inventory_document(tenant, LAB, tenant.cards(), f"{tenant.name}-worker")
    assert document["hamiVersion"] == version
    inventory = from_inventory_document(json.loads(json.dumps(document)))
    assert inventory.hami_version == version
    assert inventory.cluster([]).rules is rules_for(version)


@pytest.mark.parametrize("version", sorted(RULES))
def test_the_inventory_configmap_the_pack_finds_names_the_release(version: str) -> None:
    """The ConfigMap as the program declares it, found among a stack's resources as the pack finds it."""
    tenant = LAB.tenants[0].model_copy(update={"hami_version": version})
    _, _, configmap = tenant_objects(tenant, LAB, tenant.cards(), f"{tenant.name}-worker")
    found = from_stack_resources([("kubernetes:core/v1:ConfigMap", configmap)])
    assert found[tenant.name].hami_version == version
