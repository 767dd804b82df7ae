"""The pack on a DRA tenant (gpuSharing: dra, Pulumi.dra.yaml): a pod asking nvidia.com/* of it is refused, naming
the tenant's device class, since no node of a DRA tenant advertises those resources (make verify's TC-14 sees
that on the live lab); the HAMi tenant beside it is judged as before. Boundary: what CrossGuard hands the pack
(tests/support/policy_harness.py), the tenant's inventory ConfigMap as the program writes it."""

from __future__ import annotations

import json

from policy_harness import resource, run_stack_policy, stack_args
from shared_data import ROOT

from model.config import load_stack_file
from model.kube_objects.tenant_objects import inventory_document
from placement.findings import NOT_SHARED_BY_HAMI
from tests.components.test_process_mode import built_tools  # noqa: F401  (the fixture)

LAB = load_stack_file(ROOT / "Pulumi.dra.yaml")
HAMI, DRA = LAB.tenants
SHARE = {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}


def inventory(tenant) -> object:
    document = inventory_document(tenant, LAB, tenant.cards(), f"{tenant.name}-worker")
    labels = {"gpulab.io/tenant": tenant.name}
    metadata = {"name": "gpulab-gpu-inventory", "namespace": "kube-public", "labels": labels}
    props = {"metadata": metadata, "data": {"inventory.json": json.dumps(document)}}
    return resource("kubernetes:core/v1:ConfigMap", props, name=f"{tenant.name}-inventory")


def pod(name: str, tenant: str) -> object:
    props = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu-workloads", "labels": {"gpulab.io/tenant": tenant}},
        "spec": {"containers": [{"name": "cuda", "image": "busybox", "resources": {"limits": SHARE}}]},
    }
    return resource("kubernetes:core/v1:Pod", props, name=name)


def test_a_pod_asking_nvidia_resources_of_a_dra_tenant_is_refused_naming_its_class() -> None:
    assert json.loads(inventory(DRA).props["data"]["inventory.json"])["sharing"] == "dra"
    found = run_stack_policy("gpu-request-limits", stack_args([inventory(HAMI), inventory(DRA), pod("p", DRA.name)]))
    [(message, _)] = found
    assert NOT_SHARED_BY_HAMI in message and "gpulab-tenant-b-gpu" in message and "gpuSharing: dra" in message


def test_the_hami_tenant_beside_it_is_judged_as_before() -> None:
    assert "sharing" not in json.loads(inventory(HAMI).props["data"]["inventory.json"]), "HAMi documents unchanged"
    pods = [pod(f"t{i}", HAMI.name) for i in range(3)]
    assert run_stack_policy("gpu-request-limits", stack_args([inventory(HAMI), inventory(DRA), *pods])) == []


# --- the stack's declared claims, through the real analyzer protocol (the program under Pulumi mocks) -------------


def dra_program(workloads: list[dict]):
    from lab_harness import run_program

    from tests.components.test_dra_tenant import dra_config

    config = dra_config()
    config["tenants"][1]["workloads"] = workloads
    return run_program(config)


def test_make_plan_refuses_a_fourth_declared_claim_of_a_dra_tenant(built_tools) -> None:  # noqa: F811
    from policy_harness import analyze_stack, program_resources

    shares = [{"name": f"trainer-{i}", "gpumem": 20000, "gpucores": 30} for i in range(1, 5)]
    response = analyze_stack(program_resources(dra_program(shares)))
    messages = [d.message for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert len(messages) == 1, messages
    assert "Pod/gpu-workloads/trainer-4: cannot allocate all claims" in messages[0]
    assert "free beside the claims before it: GPU-MOCK-tenant-b-0: 21920 MB, 10 %" in messages[0]
    fits = analyze_stack(program_resources(dra_program(shares[:3])))
    assert [d for d in fits.diagnostics if d.policyName == "gpu-request-limits"] == []
