"""The whole pack over what the program registers under mocks: the closest thing to
`pulumi preview --policy-pack policies` without the CLI (no provider normalisation, same inputs)."""

from __future__ import annotations

import copy

import pytest
from lab_harness import LabMocks, lab_config, reference_program, run_program, shared_program
from policy_harness import analyze_first_preview, analyze_stack, program_resources
from pulumi.output import Unknown

from preview import pack


def run_pack(config: dict) -> dict[str, list[str]]:
    """Every policy of the pack over the program's resources: policy name -> violation messages."""
    return pack.run_pack(run_program(config))


# The fourth 30 % pod of the reference stack: refused for cores (three tests judge one program of it).
TRAINER_4 = {"name": "trainer-4", "gpumem": 20000, "gpucores": 30}


def with_tenant_a_workload(workload: dict) -> dict:
    config = copy.deepcopy(lab_config())
    config["tenants"][0]["workloads"].append(workload)
    return config


def test_reference_stack_passes_every_policy() -> None:
    violations = pack.run_pack(reference_program())
    assert set(violations) == {
        "gpu-request-inputs",
        "gpu-request-limits",
        "gpu-placement-order",
        "mock-gpu-node-not-labelled-gpu-on",
        "worker-version-matches-control-plane",
        "tenant-version-supported-by-kamaji",
        "metallb-pool-ipv4",
    }
    assert all(messages == [] for messages in violations.values()), violations


def test_fourth_30_percent_pod_is_refused_for_cores() -> None:
    violations = pack.run_pack(shared_program(with_tenant_a_workload(TRAINER_4)))
    messages = violations["gpu-request-limits"]
    assert len(messages) == 1, messages
    assert "tenant tenant-a" in messages[0] and "Pod/gpu-workloads/trainer-4" in messages[0]
    assert "CardInsufficientCore" in messages[0] and "GPU-MOCK-tenant-a-0" in messages[0]
    assert "asks 30% cores, 10% free" in messages[0]


def test_90000_mb_pod_is_refused_for_memory() -> None:
    violations = run_pack(with_tenant_a_workload({"name": "huge", "gpumem": 90000, "gpucores": 10}))
    messages = violations["gpu-request-limits"]
    assert any(
        "CardInsufficientMemory" in m and "asks 90000 MB per card; the largest card has 81920 MB" in m for m in messages
    ), messages


def test_90000_mb_pod_is_refused_on_tenant_b_cards_too() -> None:
    config = copy.deepcopy(lab_config())
    config["tenants"][1]["workloads"] = [{"name": "huge", "gpumem": 90000, "gpucores": 10}]
    config["tenants"][1].pop("quota")  # with its gpumem quota, HAMi would say ResourceQuotaNotFit first
    messages = run_pack(config)["gpu-request-limits"]
    assert any(
        "tenant tenant-b" in m
        and "CardInsufficientMemory" in m
        and "GPU-MOCK-tenant-b-0" in m
        and "GPU-MOCK-tenant-b-1" in m
        for m in messages
    ), messages


def test_limits_come_from_the_stack_config_not_a_copy() -> None:
    """Tightening the tenant's per-pod limit in config is enough for the pack to refuse the same pods."""
    config = copy.deepcopy(lab_config())
    config["tenants"][0]["limits"]["gpumem"] = 10000
    messages = run_pack(config)["gpu-request-limits"]
    assert len([m for m in messages if "PodGpuLimitExceeded" in m]) == 3


def test_real_analyzer_reports_a_mandatory_violation() -> None:
    program = shared_program(with_tenant_a_workload(TRAINER_4))
    response = analyze_stack(program_resources(program))
    diagnostics = [d for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert len(diagnostics) == 1
    assert "CardInsufficientCore" in diagnostics[0].message
    assert diagnostics[0].enforcementLevel == 1  # MANDATORY in the analyzer protocol: fails preview and up


def test_a_first_preview_refuses_the_fourth_pod_although_the_engine_hands_no_outputs() -> None:
    """Boundary: the engine at a first preview (tests/real/test_engine_policies.py runs the real one): Analyze
    gets inputs, AnalyzeStack gets `{}` behind the tenant providers, in no fixed order. The pack judges the
    analysed inputs; without gpu-request-inputs this stack passed the real engine's preview."""
    program = run_program(with_tenant_a_workload(TRAINER_4), preview=True, mocks=LabMocks(first_preview=True))
    quota = next(r for r in program_resources(program) if r.resource_type == "kubernetes:core/v1:ResourceQuota")
    assert isinstance(quota.props["metadata"]["namespace"], Unknown), "its Namespace has no outputs at a first preview"
    analyzed, response = analyze_first_preview(program_resources(program))
    assert not [d for r in analyzed for d in r.diagnostics], "no resource policy refuses this stack"
    diagnostics = [d for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert len(diagnostics) == 1 and "CardInsufficientCore" in diagnostics[0].message
    assert "Pod/gpu-workloads/trainer-4 on" in diagnostics[0].message  # by URN, as make plan blames it


def test_without_gpu_request_inputs_a_first_preview_refuses_what_it_cannot_read() -> None:
    """Disabled (or dropped from the pack), the recorder leaves the stack policies only the engine's `{}`:
    each GPU workload is then reported as not checked, never passed silently."""
    from policies.rules import ALL_POLICIES

    program = shared_program(lab_config())
    policies = [policy for policy in ALL_POLICIES if policy.name != "gpu-request-inputs"]
    _, response = analyze_first_preview(program_resources(program), policies=policies)
    messages = [d.message for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert all("gpu-request-inputs" in m and "GpuWorkloadNotChecked" in m for m in messages)
    # Every workload in a tenant, the tenants' kube-proxy DaemonSets too: unread, none can be said to ask no GPU.
    named = sorted(m.split("GpuWorkloadNotChecked: ", 1)[1].split(":", 1)[0] for m in messages)
    assert named == [
        "DaemonSet tenant-a-kube-proxy-daemonset",
        "DaemonSet tenant-b-kube-proxy-daemonset",
        *(f"Pod tenant-a-workloads-trainer-{i}" for i in (1, 2, 3)),
    ]


def test_make_plan_hands_the_stack_policies_what_a_first_preview_does() -> None:
    """The double in preview/pack.py: `{}` for what goes through a provider configured from another resource
    of the run (every tenant's and the management cluster's), the inputs elsewhere."""
    resources = {r.urn: r for r in pack.program_resources(reference_program(), outputs=True)}
    behind_providers = [r for r in resources.values() if r.provider is not None]
    assert {r.resource_type for r in behind_providers} >= {"kubernetes:core/v1:Pod", "kubernetes:core/v1:ConfigMap"}
    assert all(r.props == {} for r in behind_providers)
    containers = [r for r in resources.values() if r.resource_type == "docker:index/container:Container"]
    assert containers and all(r.props for r in containers)  # the default Docker provider is configured


def test_real_analyzer_passes_the_reference_stack() -> None:
    response = analyze_stack(program_resources(reference_program()))
    assert list(response.diagnostics) == []


def test_policy_config_reaches_the_rules_through_the_analyzer() -> None:
    program = reference_program()
    config = {"gpu-request-limits": {"tenants": {"tenant-a": {"cards": [{"model": "T4", "count": 1}]}}}}
    response = analyze_stack(program_resources(program), config)
    messages = [d.message for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert messages and all("tenant tenant-a" in m for m in messages)
    assert any("CardInsufficientMemory" in m and "NVIDIA-Tesla-T4" in m for m in messages)


def test_gpu_rules_still_run_when_other_values_are_unknown_in_preview() -> None:
    """On a first preview the MetalLB pool and kubeconfigs are unknown; the GPU rules must not trip on them."""
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown sentinel
    program = shared_program(with_tenant_a_workload(TRAINER_4))
    resources = program_resources(program)
    for resource in resources:
        if resource.resource_type == "kubernetes:metallb.io/v1beta1:IPAddressPool":
            resource.props["spec"]["addresses"] = [unknown]
        if resource.resource_type == "command:local:Command" and "stdin" in resource.props:
            resource.props["stdin"] = unknown
    response = analyze_stack(resources)
    by_policy = {d.policyName: d.message for d in response.diagnostics}
    assert "CardInsufficientCore" in by_policy["gpu-request-limits"]
    assert not any("can't run policy" in message for message in by_policy.values()), by_policy


@pytest.mark.integration
def test_pack_imports_only_what_its_own_requirements_install() -> None:
    """policies/venv has pulumi-policy, pydantic and PyYAML only: the pack and the checker must not
    pull in the Kubernetes, Docker or Command SDKs that the program uses."""
    import subprocess
    import sys

    from shared_data import ROOT

    probe = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'pulumi_kubernetes', 'pulumi_docker', 'pulumi_command', 'kubernetes'}:\n"
        "            raise ImportError(name + ' is not in policies/requirements.txt')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import policies.rules, policies.checker\n"
        "print(len(policies.rules.ALL_POLICIES))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "7"
    requirements = (ROOT / "policies" / "requirements.txt").read_text()
    for package in ("pulumi-policy", "pydantic", "PyYAML"):
        assert package in requirements


def _tenant_a_pod_sent_as(resources, name: str, label: str):
    """A copy of tenant-a's trainer-3 pod (same provider: tenant-a's API), renamed and relabelled."""
    from pulumi_policy import PolicyResource

    original = next(
        r
        for r in resources
        if r.resource_type == "kubernetes:core/v1:Pod" and r.props["metadata"]["name"] == "trainer-3"
    )
    props = copy.deepcopy(original.props)
    props["metadata"]["name"] = name
    props["metadata"]["labels"] = {**props["metadata"].get("labels", {}), "gpulab.io/tenant": label}
    return PolicyResource(
        original.resource_type,
        props,
        original.urn.replace("trainer-3", name),
        name,
        original.opts,
        original.provider,
        original.parent,
        original.dependencies,
        original.property_dependencies,
    )


def test_a_label_cannot_move_a_workload_out_of_its_tenant() -> None:
    """A fourth 30 % pod sent to tenant-a's API but labelled tenant-b used to be judged against
    tenant-b's cards and pass; the provider decides, and the mismatched label is itself a violation."""
    resources = program_resources(reference_program())
    resources.append(_tenant_a_pod_sent_as(resources, "trainer-4", "tenant-b"))
    response = analyze_stack(resources)
    messages = [d.message for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert any("tenant tenant-a" in m and "trainer-4" in m and "CardInsufficientCore" in m for m in messages), messages
    assert any("TenantLabelMismatch" in m and "gpulab.io/tenant=tenant-b" in m for m in messages), messages
    assert all(d.enforcementLevel == 1 for d in response.diagnostics if d.policyName == "gpu-request-limits")


def test_a_mismatched_label_alone_is_a_violation() -> None:
    resources = program_resources(reference_program())
    resources.append(_tenant_a_pod_sent_as(resources, "small", "tenant-b"))
    small = resources[-1]
    container = small.props["spec"]["containers"][0]
    container["resources"]["limits"] = {"nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "5"}
    response = analyze_stack(resources)
    messages = [d.message for d in response.diagnostics if d.policyName == "gpu-request-limits"]
    assert len(messages) == 1 and "TenantLabelMismatch" in messages[0], messages
    assert "deployed through tenant-a-provider" in messages[0]


def test_gpu_only_pod_is_not_refused_where_a_smaller_card_fits_the_quota() -> None:
    """A false refusal once made: `nvidia.com/gpu: 1` is 100 % of each card HAMi tries, and the quota is
    checked per card, so with an A100 and an L4 and a 30000 MB quota HAMi places it on the L4."""
    config = copy.deepcopy(lab_config())
    config["tenants"][1]["gpus"] = [{"model": "A100-80GB", "count": 1}, {"model": "L4", "count": 1}]
    config["tenants"][1]["quota"] = {"gpumem": 30000, "gpucores": 150, "gpus": 8}
    config["tenants"][1]["limits"] = {"gpus": 1}
    config["tenants"][1]["workloads"] = [{"name": "whole", "gpus": 1}]
    assert run_pack(config)["gpu-request-limits"] == []
    config["tenants"][1]["quota"]["gpumem"] = 20000  # smaller than either card: now HAMi refuses it
    messages = run_pack(config)["gpu-request-limits"]
    assert any("ResourceQuotaNotFit" in m for m in messages), messages


# --- The engine's encoding: every number a double -------------------------------

WEB = {"name": "web", "kind": "Deployment", "replicas": 2, "gpumem": 1000, "gpucores": 10}


def gpu_diagnostics(response) -> list[str]:
    """The GPU policies' violations (the analyzer puts the policy's description on a first line)."""
    return [
        d.message.split("\n", 1)[-1]
        for d in response.diagnostics
        if d.policyName in ("gpu-request-limits", "gpu-placement-order")
    ]


def test_a_declared_deployment_passes_as_the_engine_sends_it() -> None:
    """The stack's own Deployment arrives with `replicas: 2.0`; it fits tenant-b and must pass."""
    config = copy.deepcopy(lab_config())
    config["tenants"][1]["workloads"] = [WEB]
    program = run_program(config)
    resources = program_resources(program)
    deployment = next(r for r in resources if r.resource_type == "kubernetes:apps/v1:Deployment")
    assert deployment.props["spec"]["replicas"] == 2
    assert gpu_diagnostics(analyze_stack(resources)) == []
    violations = pack.run_pack(program)  # `make plan`'s way: the pack over what the program registers
    assert violations["gpu-request-limits"] == [] and violations["gpu-placement-order"] == [], violations


def test_a_declared_deployment_that_does_not_fit_is_refused_for_its_tenant() -> None:
    config = copy.deepcopy(lab_config())
    config["tenants"][1]["workloads"] = [{**WEB, "replicas": 3, "gpumem": 20000}]
    messages = gpu_diagnostics(analyze_stack(program_resources(run_program(config))))
    assert len(messages) == 1, messages
    assert messages[0].startswith("error: tenant tenant-b: Deployment/gpu-workloads/web#3"), messages
    assert "ResourceQuotaNotFit" in messages[0]


def _through_tenant_a(resources, kind: str, body: dict):
    """A workload of `kind` sent through tenant-a's provider, next to the lab's trainer-1..3 (in a namespace
    without gpulab's quota, so that the cards decide)."""
    from pulumi_policy import PolicyResource

    from placement.workloads import RESOURCE_TYPES

    trainer = next(r for r in resources if r.resource_type == "kubernetes:core/v1:Pod")
    resource_type = next(t for t, k in RESOURCE_TYPES.items() if k == kind)
    props = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "w", "namespace": "batch"}, **body}
    return PolicyResource(
        # Its URN sorts after the trainers': the pack judges a stack by URN, as the engine's order is not fixed.
        resource_type,
        props,
        f"{trainer.urn.rsplit('::', 1)[0]}::tenant-a-workloads-w-{kind}",
        "w",
        trainer.opts,
        trainer.provider,
        None,
        [],
        {},
    )


def _workload_body(kind: str, count: int | float, limits: dict) -> dict:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]}
    template = {"metadata": {"labels": {"app": "w"}}, "spec": spec}
    if kind == "Pod":
        return {"spec": spec}
    if kind == "CronJob":
        return {"spec": {"schedule": "@daily", "jobTemplate": {"spec": {"parallelism": count, "template": template}}}}
    if kind == "Job":
        return {"spec": {"parallelism": count, "template": template}}
    if kind == "DaemonSet":
        return {"spec": {"template": template}}
    return {"spec": {"replicas": count, "template": template}}


ALL_KINDS = sorted(__import__("placement.workloads", fromlist=["POD_TEMPLATE_PATHS"]).POD_TEMPLATE_PATHS)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_kind_the_pack_reads_as_the_engine_sends_it(kind: str) -> None:
    """Each kind through the analyzer (Struct: counts and quantities as doubles) next to trainer-1..3 on
    tenant-a's A100: 1000 MB / 5 % fits, a pod of 2 x 1000 MB / 5 % replicas too; 20000 MB / 30 % does not."""
    resources = program_resources(reference_program())
    small = {"nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 5}  # numbers, as YAML and Struct give them
    fits = _through_tenant_a(resources, kind, _workload_body(kind, 2, small))
    assert gpu_diagnostics(analyze_stack([*resources, fits])) == []
    share = {"nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30}
    refused = gpu_diagnostics(
        analyze_stack([*resources, _through_tenant_a(resources, kind, _workload_body(kind, 2, share))])
    )
    assert len(refused) == 1 and refused[0].startswith(f"error: tenant tenant-a: {kind}/batch/w"), refused
    assert "CardInsufficientCore" in refused[0]


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicaSet", "ReplicationController", "Job", "CronJob"])
def test_a_fractional_count_stays_invalid(kind: str) -> None:
    resources = program_resources(reference_program())
    odd = _through_tenant_a(resources, kind, _workload_body(kind, 2.5, {"nvidia.com/gpumem": 1000}))
    messages = gpu_diagnostics(analyze_stack([*resources, odd]))
    assert len(messages) == 1 and "InvalidGpuRequest" in messages[0] and "must be an integer, not 2.5" in messages[0]
    assert messages[0].startswith("error: tenant tenant-a: w:"), (
        "a workload sent through tenant-a's provider is tenant-a's"
    )


def test_the_struct_encoding_is_what_the_rules_see() -> None:
    """The harness really hands the rules doubles (else the tests above would prove nothing)."""
    from google.protobuf import json_format, struct_pb2

    value = struct_pb2.Struct()
    value.update({"spec": {"replicas": 2}})
    assert json_format.MessageToDict(value) == {"spec": {"replicas": 2.0}}
    assert isinstance(json_format.MessageToDict(value)["spec"]["replicas"], float)
