"""The CEL double against the real thing. Requests that tests/placement/test_gpu_admission.py sends to the harness
(tests/support/cel_harness.py) go to the real API server as well (a server-side dry run in a namespace without quota,
so that only the policies judge), and both must agree on: admitted or denied, the message shown (the first
failing validation), the advice policy's warnings, and the object the policy reads (canonical quantities,
defaulted requests, schedulerName). Boundary: the API server's admission chain (decoding, defaulting,
ValidatingAdmissionPolicy with Kubernetes' CEL libraries) that the harness stands in for everywhere else."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from cel_harness import admitted, canonical_quantity, hami_webhook, run_policy
from hypothesis import HealthCheck, Phase, given, settings

from model.names import DENY_POLICY, WARN_POLICY
from tests.acceptance.helpers import wait_until
from tests.placement.test_gpu_admission import FIXTURES, GPU_CHANGES, RETIRING, deployment, gpu_pod, workloads
from tests.real.cluster import POLL, Refusal

API_VERSIONS = {
    "Pod": "v1",
    "ReplicationController": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
}
HUGE = "9223372036854775808"  # int64 max + 1
NODE, HAMI = "tenant-a-worker", "hami-scheduler"
TOP = str(2**63 - 1)


@dataclass(frozen=True)
class Case:
    id: str
    obj: dict
    webhook: bool = True  # HAMi's webhook handled the Pod (as the harness assumes unless told)
    change: Callable[[dict], None] | None = None  # an UPDATE of the legacy Deployment by this change
    retires: bool = False  # an UPDATE that retires the workload: it must be admitted, whatever the limits

    def __repr__(self) -> str:
        return self.id


@dataclass
class Verdict:
    shown: str | None  # the deny policy's message (None: admitted); an expression error reads "error"
    warnings: list[str]  # the advice policy's messages
    seen: dict | None  # the object as stored (real) or as the policy reads it (harness); None when denied


def annotated(obj: dict, annotations: dict) -> dict:
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"] = annotations
    return obj


def with_containers(obj: dict, count: int) -> dict:
    obj = copy.deepcopy(obj)
    [container] = obj["spec"]["containers"]
    obj["spec"]["containers"] = [{**copy.deepcopy(container), "name": f"c{i}"} for i in range(count)]
    return obj


def with_gpu_init(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "i", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
    return obj


def share(gpumem: object, cores: object = 30) -> dict:
    return gpu_pod({"nvidia.com/gpumem": gpumem, "nvidia.com/gpucores": cores})


def corpus() -> list[Case]:
    """A representative sample of what test_gpu_admission.py judges with the harness: 58 requests, 14 UPDATEs."""
    cases = [Case(f"fixture-{o['kind']}-{o['metadata']['name']}", o) for o in FIXTURES]
    # One request written in every spelling the API server canonicalises (20000 -> "20k", "2e4" -> "20e3").
    for spelling in (20000, "20000", "2e4", "20k", "1024Mi", 90000, "90k", "8192e1"):
        cases.append(Case(f"pod-gpumem-{spelling}", share(spelling)))
    for spelling in (20000, "2e4", "1024Mi", 90000):
        cases.append(Case(f"deployment-gpumem-{spelling}", deployment(share(spelling), replicas=3)))
    cases += [
        Case("two-cards", gpu_pod({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000})),
        Case("three-gpu-containers", with_containers(gpu_pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}), 3)),
        Case("not-handled-by-the-webhook", gpu_pod({"nvidia.com/gpumem": 1000}), webhook=False),
        Case("no-gpu-default-scheduler", gpu_pod({"cpu": "1"}, schedulerName="default-scheduler")),
        Case("cores-120", gpu_pod({"nvidia.com/gpucores": "120"})),
        Case("memory-0-percent", gpu_pod({"nvidia.com/gpumem-percentage": 0})),
        Case("memory-50-percent", gpu_pod({"nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 10})),
        Case("memory-150-percent", gpu_pod({"nvidia.com/gpumem-percentage": 150})),
        Case("use-type-a100", annotated(share(1000), {"nvidia.com/use-gputype": "a100"})),
        Case("use-type-t4", annotated(share(1000), {"nvidia.com/use-gputype": "T4"})),
        Case("nouse-type-a100", annotated(share(1000), {"nvidia.com/nouse-gputype": "A100"})),
        Case("use-type-non-ascii", annotated(share(1000), {"nvidia.com/use-gputype": "nvıdıa"})),
        Case("use-uuid-own", annotated(share(1000), {"nvidia.com/use-gpuuuid": "GPU-MOCK-tenant-a-0"})),
        Case("use-uuid-other", annotated(share(1000), {"nvidia.com/use-gpuuuid": "GPU-MOCK-tenant-b-0,GPU-X"})),
        Case("deployment-gpu-init", with_gpu_init(deployment(share(1000)))),
        # HAMi v2.8.3 (tenant-a's) refuses a GPU pod with a node name unless it names hami-scheduler (webhook.go
        # `Handle` 63-68, 89-98 at v2.8.3): such a Pod reaches the policies only as written.
        Case("pod-node-name", gpu_pod({"nvidia.com/gpumem": 1000}, nodeName=NODE), webhook=False),
        Case("pod-node-name-hami-scheduler", gpu_pod({"nvidia.com/gpumem": 1000}, nodeName=NODE, schedulerName=HAMI)),
        Case("deployment-node-name", deployment(gpu_pod({"nvidia.com/gpumem": 1000}, nodeName=NODE))),
        Case("pod-huge-gpumem", gpu_pod({"nvidia.com/gpumem": HUGE})),
        Case("pod-huge-gpu", gpu_pod({"nvidia.com/gpumem": 1000, "nvidia.com/gpu": HUGE})),
        Case("deployment-huge-gpucores", deployment(gpu_pod({"nvidia.com/gpumem": 1000, "nvidia.com/gpucores": HUGE}))),
        Case(
            "top-values-5-containers",
            with_containers(
                gpu_pod(dict.fromkeys(("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"), TOP)), 5
            ),
        ),
    ]
    # UPDATEs of a Deployment the policy would refuse today (created before it): retiring it is never judged,
    # changing what HAMi reads is, and one request written another way is no change.
    cases += [Case(f"update-{name}", {}, change=change, retires=True) for name, change in sorted(RETIRING.items())]
    cases += [Case(f"update-{name}", {}, change=change) for name, change in sorted(GPU_CHANGES.items())]
    for spelling in ("90k", "9e4"):
        cases.append(Case(f"update-same-gpumem-{spelling}", {}, change=lambda d, s=spelling: respelled(d, s)))
    return cases


def respelled(deployment_: dict, spelling: str) -> None:
    deployment_["spec"]["replicas"] = 1
    deployment_["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = spelling


def valid(obj: dict, name: str, namespace: str) -> dict:
    """What the API server needs and the harness ignores (it validates objects before any policy runs): an
    apiVersion, a name and namespace, images, a selector matching the template's labels, a Job's restartPolicy."""
    obj = copy.deepcopy(obj)
    kind = obj["kind"]
    obj["apiVersion"] = API_VERSIONS[kind]
    obj["metadata"] = {**obj.get("metadata", {}), "name": name, "namespace": namespace}
    if kind == "Pod":
        template = obj
    elif kind == "CronJob":
        template = obj["spec"]["jobTemplate"]["spec"]["template"]
    else:
        template = obj["spec"]["template"]
    spec = template["spec"]
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        container.setdefault("image", "busybox")
    if kind in ("Job", "CronJob"):
        spec.setdefault("restartPolicy", "Never")
    if kind not in ("Pod", "Job", "CronJob"):
        metadata = template.setdefault("metadata", {})
        labels = metadata["labels"] = metadata.get("labels") or {"app": name}
        obj["spec"]["selector"] = dict(labels) if kind == "ReplicationController" else {"matchLabels": dict(labels)}
    if kind == "StatefulSet":
        obj["spec"].setdefault("serviceName", name)
    return obj


def real_verdict(cluster, obj: dict, update: bool) -> Verdict:
    verb = "replace" if update else "create"
    namespace = obj["metadata"]["namespace"]
    result = cluster.kubectl(verb, "--dry-run=server", "-o", "json", "-n", namespace, "-f", "-", stdin=obj)
    marker = f"with binding '{WARN_POLICY}': "
    warnings = [line.split(marker, 1)[1] for line in result.stderr.splitlines() if marker in line]
    if result.returncode == 0:
        return Verdict(None, warnings, json.loads(result.stdout))
    [line] = [line for line in result.stderr.splitlines() if "Error from server" in line] or [result.stderr]
    refusal = Refusal(line)
    assert refusal.policy == DENY_POLICY, f"refused before the policies judged (the case must be valid): {line}"
    message = refusal.message
    return Verdict(
        "error" if message.startswith("expression '") and " resulted in error" in message else message, warnings, None
    )


def harness_verdict(lab, obj: dict, webhook: bool, old: dict | None) -> Verdict:
    seen = admitted(obj, webhook=webhook)
    request = {} if old is None else {"old": admitted(old), "operation": "UPDATE"}
    deny, warn = run_policy(lab.deny, seen, **request), run_policy(lab.warn, seen, **request)
    shown = "error" if deny.shown and deny.shown.startswith("error: ") else deny.shown
    return Verdict(shown, warn.failed, None if shown else seen)


def policy_view(obj: dict) -> dict:
    """What the policies read of an object: each container's resources, and a Pod's schedulerName."""
    if obj["kind"] == "Pod":
        spec = obj["spec"]
    elif obj["kind"] == "CronJob":
        spec = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    else:
        spec = obj["spec"]["template"]["spec"]
    containers = {}
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            resources = container.get("resources") or {}
            containers[f"{field}/{container['name']}"] = {k: v for k, v in resources.items() if v}
    return {"schedulerName": spec.get("schedulerName") if obj["kind"] == "Pod" else None, "containers": containers}


def judge(cluster, lab, obj: dict, webhook: bool = True, old: dict | None = None) -> tuple[Verdict, Verdict]:
    """(real, harness) for one request; the real API server gets the Pod as HAMi's webhook would leave it."""
    sent = hami_webhook(obj) if webhook else obj
    return real_verdict(cluster, sent, update=old is not None), harness_verdict(lab, obj, webhook, old)


def assert_agree(real: Verdict, double: Verdict) -> None:
    assert real.shown == double.shown, f"first message differs: real {real.shown!r}, harness {double.shown!r}"
    assert sorted(real.warnings) == sorted(double.warnings), (real.warnings, double.warnings)
    if real.seen is not None:
        assert policy_view(real.seen) == policy_view(double.seen), "the object the policy reads differs"


@pytest.mark.parametrize("case", corpus(), ids=repr)
def test_the_harness_judges_as_the_api_server(cluster, tenant_lab, case: Case) -> None:
    if case.change is None:
        obj, old = valid(case.obj, f"judged-{case.id.lower()}"[:63].rstrip("-"), tenant_lab.judged), None
    else:
        old = cluster.get("deployment", "-n", tenant_lab.judged, tenant_lab.legacy["metadata"]["name"])
        obj = copy.deepcopy(tenant_lab.legacy)
        case.change(obj)
    real, double = judge(cluster, tenant_lab, obj, case.webhook, old)
    assert_agree(real, double)
    if case.retires:
        assert real.shown is None, "a workload admitted earlier can always be retired"


def test_the_corpus_covers_both_verdicts_warnings_and_updates(cluster, tenant_lab) -> None:
    """The sample is representative: it is admitted and denied, warned, and matched and unmatched on UPDATE."""
    cases = corpus()
    assert 30 <= len(cases) <= 60
    shown = {
        case.id: harness_verdict(tenant_lab, valid(case.obj, "x", tenant_lab.judged), case.webhook, None).shown
        for case in cases
        if case.change is None
    }
    assert None in shown.values() and {
        "CardInsufficientMemory",
        "CardTypeMismatch",
        "InitContainerGpuRequest",
        "GpuQuantityOutOfRange",
        "NodeInsufficientDevice",
        "PodGpuLimitExceeded",
        "PodHasNodeAssigned",
    } <= {message.split(":")[0] for message in shown.values() if message}
    assert sum(case.change is not None for case in cases) >= 10


@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(generated=workloads())
def test_the_harness_judges_generated_workloads_as_the_api_server(cluster, tenant_lab, generated: dict) -> None:
    """test_gpu_admission's generated workloads (derandomized: the same ones every run), without shrinking."""
    real, double = judge(cluster, tenant_lab, valid(generated, "generated", tenant_lab.judged))
    assert_agree(real, double)


# Spellings of quantities: the harness's canonical_quantity() against what the API server stores.
WHOLE = (
    20000,
    "20000",
    "2e4",
    "20k",
    "1024Mi",
    90000,
    "90k",
    81920,
    "8192e1",
    1000,
    "1.5k",
    "0.09M",
    30,
    0,
    "1Gi",
    "1536Mi",
    "100Ki",
    "1e3",
    "12e2",
    "30e0",
    "020k",
    "+1",
    "1e+3",
    "1024Ki",
    "12Ki",
    "8Ei",
    TOP,
    HUGE,
)
FRACTIONAL = ("0.5", "1.5", "100m", "1e-3", "0.1", "2.5e3", "1500m", "0.001", "1.05", "15e-4", "5e-1", "1.5e-9")


def test_canonical_quantities_are_what_the_api_server_stores(cluster, tenant_lab) -> None:
    """One Pod (no GPU: the policies let it through) with a container per spelling: an extended resource for
    whole values (the API server refuses fractions there), cpu for fractional ones."""
    written = [("example.com/widgets", value) for value in WHOLE] + [("cpu", value) for value in FRACTIONAL]
    containers = [
        {"name": f"q{i}", "image": "busybox", "resources": {"limits": {key: value}}}
        for i, (key, value) in enumerate(written)
    ]
    obj = valid({"kind": "Pod", "metadata": {}, "spec": {"containers": containers}}, "quantities", tenant_lab.judged)
    real = real_verdict(cluster, obj, update=False)
    assert real.shown is None
    stored = {c["name"]: c["resources"] for c in real.seen["spec"]["containers"]}
    differences = []
    for i, (key, value) in enumerate(written):
        limits, requests = stored[f"q{i}"]["limits"][key], stored[f"q{i}"]["requests"][key]
        assert limits == requests, "requests defaulted from limits"
        if canonical_quantity(str(value)) != limits:
            differences.append(f"{value!r}: API server {limits!r}, harness {canonical_quantity(str(value))!r}")
    assert not differences, differences


# The quantity library itself: what `isInteger()`, `asInteger()` and `isGreaterThan()` answer for a spelling.
LIBRARY_SPELLINGS = (
    "0",
    "1",
    "30",
    "20k",
    "20e3",
    "1000m",
    "1.5",
    "81920",
    "1Gi",
    "1Ti",
    "1023Ti",
    "100Ti",
    "1Pi",
    "4Ei",
    "8Ei",
    "9E",
    "10E",
    "1e18",
    "999999999999999999",
    "1000000000000000000",
    TOP,
    HUGE,
)
PROBE_NAME = "gpulab-real-quantity-probe"
PROBE = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": PROBE_NAME},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["CREATE"]}
            ]
        },
        "matchConditions": [{"name": "the-probe-only", "expression": f"object.metadata.name == '{PROBE_NAME}'"}],
        "validations": [
            {
                "expression": "false",  # always shown: the message is the answer
                "messageExpression": "object.data.q.split(',').map(s, s + '=' + (quantity(s).isInteger() ? "
                "string(quantity(s).asInteger()) : 'no') + (quantity(s).isGreaterThan(quantity('" + TOP + "')) ? "
                "'>int64' : '')).join(' ')",
            }
        ],
    },
}


def test_the_harness_quantity_library_answers_as_the_api_servers(cluster, tenant_lab) -> None:
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": PROBE_NAME},
        "spec": {"policyName": PROBE_NAME, "validationActions": ["Deny"]},
    }
    cluster.ok("apply", "--server-side", "-f", "-", stdin=[PROBE, binding])
    probe = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PROBE_NAME, "namespace": tenant_lab.judged},
        "data": {"q": ",".join(LIBRARY_SPELLINGS)},
    }

    def answer() -> str:
        result = cluster.kubectl("create", "--dry-run=server", "-f", "-", stdin=probe)
        return Refusal(result.stderr.strip()).message if f"'{PROBE_NAME}'" in result.stderr else ""

    try:
        real = wait_until(answer, 60, f"{PROBE_NAME} to judge ConfigMaps", interval=POLL)
    finally:
        cluster.ok("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", PROBE_NAME)
    assert real == run_policy(PROBE, probe).shown
    assert "1Pi=no" in real and f"{TOP}=no" in real and f"{HUGE}=no>int64" in real, "as boundaries.md reads upstream"
