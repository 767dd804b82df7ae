"""The in-tenant admission policy decides what the pack decides: its CEL, evaluated offline
(tests/cel_harness.py), against policies/per_pod.py on the shared fixtures and generated pods;
its objects against the Kubernetes v1.36 schema; one policy and binding per tenant in the program."""

from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest
import yaml
from cel_harness import run_policy
from hypothesis import given, settings
from hypothesis import strategies as st
from lab_harness import lab_config, run_program
from shared_data import ROOT

from components.config import parse_config
from components.gpu_admission import DENY_POLICY, WARN_POLICY, deny_validations, policy_objects
from policies import per_pod
from policies.inventory import from_tenant
from policies.workloads import POD_TEMPLATE_PATHS, WorkloadError, read_workload

LAB = parse_config(lab_config())
TENANTS = {tenant.name: tenant for tenant in LAB.tenants}
SCHEDULER = "SchedulerName"


def vap_reasons(policy: dict, obj: dict) -> set[str]:
    """Reason names of the validations `obj` fails (the message's prefix before ':')."""
    outcome = run_policy(policy, obj)
    assert not outcome.errors, outcome.errors
    return {message.split(":", 1)[0] if ":" in message.split(" ")[0] else SCHEDULER for message in outcome.failed}


def pack_reasons(tenant_name: str, obj: dict) -> set[str]:
    workload = read_workload(obj["kind"], obj)
    if workload is None or not workload.pods:
        return set()
    return {refusal.reason for refusal in per_pod.per_pod_refusals(from_tenant(TENANTS[tenant_name]), workload.pods[0])}


def policies(tenant_name: str) -> tuple[dict, dict]:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in policy_objects(TENANTS[tenant_name])}
    return (
        objects[("ValidatingAdmissionPolicy", DENY_POLICY)],
        objects[("ValidatingAdmissionPolicy", WARN_POLICY)],
    )


def as_admitted(obj: dict) -> dict:
    """A Pod as the API server's validating stage sees it after HAMi's webhook (schedulerName set)."""
    obj = copy.deepcopy(obj)
    if obj.get("kind") == "Pod":
        obj["spec"]["schedulerName"] = "hami-scheduler"
    return obj


def fixtures() -> list[dict]:
    found = []
    for path in sorted((ROOT / "tests" / "manifests").glob("*.yaml")):
        if path.name == "broken.yaml":  # invalid YAML on purpose (the checker's bad-input case)
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") in POD_TEMPLATE_PATHS:
                found.append(document)
    return found


FIXTURES = fixtures()


def test_there_are_fixtures() -> None:
    assert len(FIXTURES) >= 8
    assert {f["kind"] for f in FIXTURES} >= {"Pod", "Deployment", "StatefulSet", "Job", "CronJob"}


@pytest.mark.parametrize("tenant", sorted(TENANTS))
@pytest.mark.parametrize("obj", FIXTURES, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_policy_and_pack_agree_on_the_shared_fixtures(tenant: str, obj: dict) -> None:
    deny, _ = policies(tenant)
    admitted = as_admitted(obj)
    assert vap_reasons(deny, admitted) == pack_reasons(tenant, admitted)


def test_the_reference_refusals_at_admission() -> None:
    deny, _ = policies("tenant-a")

    def pod(limits: dict, **spec) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "gpu-workloads"},
            "spec": {
                "schedulerName": "hami-scheduler",
                "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
                **spec,
            },
        }

    assert vap_reasons(deny, pod({"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"})) == set()
    big = run_policy(deny, pod({"nvidia.com/gpumem": "90000", "nvidia.com/gpucores": "10"})).failed
    assert any(m.startswith("CardInsufficientMemory: a container asks 90000 MB per card") for m in big), big
    two = run_policy(deny, pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"})).failed
    assert "PodGpuLimitExceeded: each pod asks 2 GPUs in total; tenant tenant-a allows 1 GPUs per pod" in two
    unhandled = pod({"nvidia.com/gpumem": "1000"}, schedulerName="default-scheduler")
    assert vap_reasons(deny, unhandled) == {SCHEDULER}
    no_gpu = pod({"cpu": "1"}, schedulerName="default-scheduler")
    assert vap_reasons(deny, no_gpu) == set(), "pods without GPU requests are never touched (HAMi's own, too)"


def test_warnings_for_what_hami_accepts_but_changes() -> None:
    _, warn = policies("tenant-a")
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpucores": "120"}}}]},
    }
    assert [m.split(":")[0] for m in run_policy(warn, pod).failed] == ["CoresAbove100"]
    advice = {f.reason for f in per_pod.per_pod_advisories(read_workload("Pod", pod).pods[0])}
    assert advice == {"CoresAbove100"}


# Generated pods and workloads: every per-pod question, both sides.

QUANTITY_FORMS = st.sampled_from(["{}", "{}", "{}", "{}e0", "{}"])
CARD_TYPES = st.sampled_from(["A100", "L4", "H100", "nvidia", "l4,a100", "T4", ""])
UUIDS = st.sampled_from(["GPU-MOCK-tenant-a-0", "GPU-MOCK-tenant-b-1", "GPU-MOCK-tenant-b-0,GPU-X", "nope", ""])


@st.composite
def container(draw, name: str) -> dict:
    resources = {}
    for key, values in (
        ("nvidia.com/gpu", st.integers(0, 3)),
        ("nvidia.com/gpumem", st.sampled_from([0, 1000, 20000, 24576, 30000, 81920, 90000])),
        ("nvidia.com/gpumem-percentage", st.sampled_from([0, 10, 50, 100, 150])),
        ("nvidia.com/gpucores", st.sampled_from([0, 10, 30, 100, 120])),
    ):
        if draw(st.booleans()):
            resources[key] = draw(QUANTITY_FORMS).format(draw(values))
    where = draw(st.sampled_from(["limits", "limits", "both"]))
    spec: dict = {"name": name, "image": "x"}
    if resources:
        spec["resources"] = {"limits": resources} if where == "limits" else {"limits": resources, "requests": resources}
    return spec


@st.composite
def workloads(draw) -> dict:
    annotations = {}
    for key, values in (
        ("nvidia.com/use-gputype", CARD_TYPES),
        ("nvidia.com/nouse-gputype", CARD_TYPES),
        ("nvidia.com/use-gpuuuid", UUIDS),
        ("nvidia.com/nouse-gpuuuid", UUIDS),
    ):
        if draw(st.integers(0, 3)) == 0:
            annotations[key] = draw(values)
    pod_spec = {"containers": [draw(container(f"c{i}")) for i in range(draw(st.integers(1, 3)))]}
    if draw(st.integers(0, 4)) == 0:
        pod_spec["initContainers"] = [draw(container("init"))]
    kind = draw(st.sampled_from(["Pod", "Pod", "Deployment", "Job", "CronJob", "StatefulSet"]))
    template = {"metadata": {"annotations": annotations}, "spec": pod_spec}
    if kind == "Pod":
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "g", **template["metadata"]},
            "spec": {**pod_spec, "schedulerName": "hami-scheduler"},
        }
    if kind == "CronJob":
        return {
            "kind": kind,
            "metadata": {"name": "g"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}},
        }
    return {"kind": kind, "metadata": {"name": "g"}, "spec": {"template": template}}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(workloads(), st.sampled_from(sorted(TENANTS)))
def test_policy_and_pack_agree_on_generated_workloads(obj: dict, tenant: str) -> None:
    try:
        expected = pack_reasons(tenant, obj)
    except WorkloadError:  # not an object the API server would accept; nothing to compare
        return
    deny, _ = policies(tenant)
    assert vap_reasons(deny, obj) == expected, json.dumps(obj)


def test_the_agreement_check_has_teeth(monkeypatch) -> None:
    """Changing either side's rule alone is caught on the fixtures."""
    tenant = "tenant-b"
    deny, _ = policies(tenant)
    weakened = copy.deepcopy(deny)
    weakened["spec"]["validations"] = [
        v for v in deny["spec"]["validations"] if "NodeInsufficientDevice" not in v.get("message", "")
    ]
    two_l4 = next(f for f in FIXTURES if f["metadata"]["name"] == "three-cards")
    assert vap_reasons(weakened, as_admitted(two_l4)) != pack_reasons(tenant, as_admitted(two_l4))

    original = per_pod.per_pod_refusals
    monkeypatch.setattr(
        per_pod,
        "per_pod_refusals",
        lambda inventory, pod: [r for r in original(inventory, pod) if r.reason != "NodeInsufficientDevice"],
    )
    assert vap_reasons(deny, as_admitted(two_l4)) != pack_reasons(tenant, as_admitted(two_l4))


@pytest.mark.parametrize("tenant", sorted(TENANTS))
def test_objects_validate_against_the_kubernetes_1_36_schema(tenant: str) -> None:
    for obj in policy_objects(TENANTS[tenant]):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)


def test_one_policy_and_binding_per_tenant_generated_from_config() -> None:
    program = run_program(lab_config())
    policies_ = program.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    bindings = program.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    assert sorted(p.name for p in policies_) == sorted(
        f"{t}-admission-{name}" for t in TENANTS for name in (DENY_POLICY, WARN_POLICY)
    )
    assert len(bindings) == len(policies_)
    for resource in [*policies_, *bindings]:
        tenant = resource.name.split("-admission-")[0]
        assert program.provider_of(resource).name == f"{tenant}-provider", "in the tenant's own API server"

    changed = copy.deepcopy(lab_config())
    changed["tenants"][0]["limits"]["gpumem"] = 40000
    before = json.dumps(deny_validations(TENANTS["tenant-a"]))
    after = json.dumps(deny_validations(parse_config(changed).tenants[0]))
    assert "<= 81920" in before and "<= 40000" in after and before != after


def test_the_labs_own_workloads_pass_their_tenants_admission_policy() -> None:
    """gpulab's configured workloads (and HAMi's pods, which ask no GPU) must never be refused by the
    policy gpulab installs: `pulumi up` would fail on the user's first run."""
    from components.workload_manifests import workload_manifest

    for lab in (LAB, parse_config(copy.deepcopy(lab_config()))):
        for tenant in lab.tenants:
            deny, warn = policies(tenant.name)
            for workload in tenant.workloads:
                manifest = as_admitted(workload_manifest(tenant, workload, lab.versions.workload_image))
                assert run_policy(deny, manifest).failed == [], (tenant.name, workload.name)
                assert run_policy(warn, manifest).failed == [], (tenant.name, workload.name)


def test_the_reference_stack_workloads_pass() -> None:
    """The same for Pulumi.dev.yaml as shipped."""
    from components.config import load_stack_file
    from components.workload_manifests import workload_manifest

    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    for tenant in lab.tenants:
        deny = next(
            o
            for o in policy_objects(tenant)
            if o["metadata"]["name"] == DENY_POLICY and "validations" in o.get("spec", {})
        )
        for workload in tenant.workloads:
            manifest = as_admitted(workload_manifest(tenant, workload, lab.versions.workload_image))
            assert run_policy(deny, manifest).failed == [], (tenant.name, workload.name)
