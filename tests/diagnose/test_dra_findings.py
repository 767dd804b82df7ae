"""`make diagnose` on a DRA tenant (gpuSharing: dra, Pulumi.dra.yaml): its GPU nodes' ResourceSlices are what it
checks, not HAMi's register annotation, the nodes' extended resources or gpulab's admission policies (a DRA tenant
has none). Boundary: `kubectl get resourceslices -o json` as the API server answers it (the slice gpulab applies,
with the fields the server adds), and a tenant API that refuses the query (its items are then empty)."""

from __future__ import annotations

from datetime import UTC, datetime

from shared_data import ROOT

from diagnose import cluster_findings
from diagnose.analyze import Cluster
from diagnose.collect import tenant_expectations
from model import dra
from model.config import load_stack_file

LAB = load_stack_file(ROOT / "Pulumi.dra.yaml")
TENANT = next(t for t in LAB.tenants if t.gpu_sharing == "dra")


def served_slice(node: str) -> dict:
    cards = next(n.cards for n in TENANT.gpu_nodes() if n.name == node)
    applied = dra.resource_slice(TENANT.name, node, cards)
    applied["metadata"] |= {"uid": "0b1c", "resourceVersion": "812", "creationTimestamp": "2026-12-04T18:40:02Z"}
    return applied


def findings(slices: list[dict]) -> list:
    node = TENANT.gpu_node_name()
    objects = {
        "nodes": [{"metadata": {"name": node}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}],
        "pods": [],
        "events": [],
        "workloads": [],
        "webhooks": [],
        "endpointslices": [],
        "admission": [],
        "quotas": [],
        "resourceslices": slices,
    }
    return cluster_findings.tenant_findings(
        Cluster(TENANT.name, objects=objects),
        **tenant_expectations(LAB, TENANT.name),
        now=datetime(2026, 12, 4, 18, 45, tzinfo=UTC),
        lock_timeout_seconds=2,
    )


def test_a_dra_tenant_with_its_slices_is_ready_without_hamis_annotation_capacity_or_policies() -> None:
    assert findings([served_slice(TENANT.gpu_node_name())]) == []


def test_a_missing_slice_is_named_with_its_node_and_the_fix() -> None:
    other_driver = served_slice(TENANT.gpu_node_name())
    other_driver["spec"]["driver"] = "gpu.nvidia.com"
    for slices in ([], [other_driver]):
        [found] = findings(slices)
        assert found.component == f"node {TENANT.gpu_node_name()}"
        assert found.reason == f"no ResourceSlice of {dra.DRIVER}"
        assert "make up" in found.fix
