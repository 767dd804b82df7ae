"""A DRA tenant beside a HAMi tenant in process mode (Pulumi.dra.yaml), under Pulumi mocks: what the program hands
the Kubernetes provider and its own dynamic providers for each. Boundary: the Pulumi engine's registrations, as
`pulumi up --stack dra` makes them (the real engine ran the stack: `make up`/`make verify STACK=dra`, docs/dra.md);
the objects' fields are k8s.io/api v0.36.4's (tests/real/test_dra_allocation.py lets the real API server and
kube-scheduler judge them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lab_harness import LAB_PROJECT, run_program, stack_keys

from model import dra
from model.config import parse_config
from tests.components.test_process_mode import DYNAMIC, built_tools  # noqa: F401  (the fixture)


def dra_config() -> dict:
    return stack_keys(LAB_PROJECT / "Pulumi.dra.yaml")


@pytest.fixture
def program(built_tools: Path):  # noqa: F811
    return run_program(dra_config())


def of_tenant(program, tenant: str) -> list:
    return [r for r in program.registrations.values() if r.name.startswith(f"{tenant}-")]


def test_the_dra_tenant_gets_a_device_class_and_a_slice_and_no_hami(program) -> None:
    types_b = {r.type for r in of_tenant(program, "tenant-b")}
    assert "kubernetes:resource.k8s.io/v1:DeviceClass" in types_b
    assert "kubernetes:resource.k8s.io/v1:ResourceSlice" in types_b
    assert "gpulab:index:GpuAdmissionPolicy" not in types_b
    names_b = {r.name for r in of_tenant(program, "tenant-b") if r.type == DYNAMIC}
    assert not [n for n in names_b if n.endswith(("-hami", "-inventory"))], names_b
    # The HAMi tenant is as in Pulumi.sim.yaml: HAMi, its inventory and its admission policy.
    names_a = {r.name for r in of_tenant(program, "tenant-a") if r.type == DYNAMIC}
    assert any(n.endswith("-hami") for n in names_a) and any(n.endswith("-inventory") for n in names_a), names_a
    assert "gpulab:index:GpuAdmissionPolicy" in {r.type for r in of_tenant(program, "tenant-a")}


def test_the_slice_and_class_are_the_catalogs_cards_created_after_the_nodes(program) -> None:
    [slice_] = [r for r in of_tenant(program, "tenant-b") if r.type.endswith(":ResourceSlice")]
    [device_class] = [r for r in of_tenant(program, "tenant-b") if r.type.endswith(":DeviceClass")]
    expected = dra.resource_slice("tenant-b", "tenant-b-worker", tenant_b().cards())
    assert slice_.inputs["spec"] == expected["spec"]
    assert device_class.inputs["spec"] == dra.device_class("tenant-b")["spec"]
    nodes = next(r for r in of_tenant(program, "tenant-b") if r.type == DYNAMIC and r.name.endswith("-nodes"))
    assert program.depends_on(slice_, nodes) and program.depends_on(device_class, nodes)


def tenant_b():
    return next(t for t in parse_config(dra_config()).tenants if t.name == "tenant-b")


def test_the_dra_tenants_workloads_claim_their_share_and_its_quota_counts_devices(program) -> None:
    templates = {r.name: r for r in of_tenant(program, "tenant-b") if r.type.endswith(":ResourceClaimTemplate")}
    pods = {r.name: r for r in of_tenant(program, "tenant-b") if r.type == "kubernetes:core/v1:Pod"}
    assert len(templates) == len(pods) == 3
    for name, pod in pods.items():
        template = templates[f"{name}-claim"]
        exactly = template.inputs["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        assert exactly["deviceClassName"] == dra.device_class_name("tenant-b")
        assert exactly["capacity"]["requests"] == {dra.MEMORY: "20k", dra.CORES: "30"}
        spec = pod.inputs["spec"]
        assert spec["resourceClaims"] == [
            {"name": "gpu", "resourceClaimTemplateName": template.inputs["metadata"]["name"]}
        ]
        assert spec["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}  # no nvidia.com limits
        assert spec["schedulerName"] == "default-scheduler"
        assert program.depends_on(pod, template)
        # Its claims cannot change in place: asked otherwise, the pod is made anew, the old one gone first.
        assert (pod.replace_on_changes, pod.delete_before_replace) == (["spec"], True)
    [quota] = [r for r in of_tenant(program, "tenant-b") if r.type == "kubernetes:core/v1:ResourceQuota"]
    assert quota.inputs["spec"]["hard"] == {dra.devices_quota_key("tenant-b"): "4"}


def test_a_workload_that_asks_otherwise_names_a_new_template() -> None:
    """A ResourceClaimTemplate's spec is immutable (kubernetes v1.36.4 ValidateResourceClaimTemplateUpdate): the
    template's name carries what it asks, so a change is a new template, and the pod naming it is replaced."""
    from model.kube_objects.workload_manifests import claim_template_name

    [first, *_] = tenant_b().workloads
    same = claim_template_name(first)
    assert claim_template_name(first.model_copy(update={"gpumem": 10000})) != same
    assert claim_template_name(first.model_copy(update={"gpucores": 20})) != same
    assert claim_template_name(first.model_copy()) == same
