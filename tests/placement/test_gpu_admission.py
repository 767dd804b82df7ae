"""The in-tenant admission policy decides what the pack decides: its CEL, evaluated offline
(tests/support/cel_harness.py), against placement/per_pod.py on the shared fixtures and generated pods under each
HAMi release (JUDGED; the differences: tests/model/test_admission_policy_releases.py); its objects against the
Kubernetes v1.36 schema; one policy and binding per tenant in the program."""

from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest
import yaml
from cel_harness import admitted, canonical_quantity, run_policy
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lab_harness import lab_config, reference_program
from shared_data import ROOT

from hami.releases import RULES
from model.config import parse_config
from model.kube_objects.admission_policy import DENY_POLICY, WARN_POLICY, deny_validations, policy_objects
from placement import per_pod
from placement.inventory import from_tenant
from placement.workloads import POD_TEMPLATE_PATHS, WorkloadError, read_workload

LAB = parse_config(lab_config())
TENANTS = {tenant.name: tenant for tenant in LAB.tenants}
# Each reference tenant under every release gpulab follows: as configured ("tenant-a"), and "tenant-a@v2.10.0".
JUDGED = TENANTS | {
    f"{t.name}@{version}": t.model_copy(update={"hami_version": version})
    for t in LAB.tenants
    for version in RULES
    if version != t.hami_version
}
SCHEDULER = "SchedulerName"


def _reason(message: str) -> str:
    return message.split(":", 1)[0] if ":" in message.split(" ")[0] else SCHEDULER


def vap_order(policy: dict, obj: dict) -> list[str]:
    """Reason names of the validations `obj` fails, in order (kubectl shows the first), as the API server
    judges it: canonical quantities, Pod defaulting and HAMi's webhook first (cel_harness.admitted)."""
    outcome = run_policy(policy, admitted(obj))
    assert not outcome.errors, outcome.errors
    return [_reason(message) for message in outcome.failed]


def vap_reasons(policy: dict, obj: dict) -> set[str]:
    return set(vap_order(policy, obj))


def pack_order(tenant_name: str, obj: dict) -> list[str]:
    workload = read_workload(obj["kind"], obj)
    if workload is None or not workload.pods:
        return []
    return [r.reason for r in per_pod.per_pod_refusals(from_tenant(JUDGED[tenant_name]), workload.pods[0])]


def pack_reasons(tenant_name: str, obj: dict) -> set[str]:
    return set(pack_order(tenant_name, obj))


def agree(tenant: str, obj: dict) -> None:
    """Same refusals, and the same one first: what kubectl shows is what the pack names first."""
    deny, _ = policies(tenant)
    shown, expected = vap_order(deny, obj), pack_order(tenant, obj)
    assert set(shown) == set(expected), (shown, expected)
    assert shown[:1] == expected[:1], (shown, expected)


def policies(tenant_name: str) -> tuple[dict, dict]:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in policy_objects(JUDGED[tenant_name])}
    return (
        objects[("ValidatingAdmissionPolicy", DENY_POLICY)],
        objects[("ValidatingAdmissionPolicy", WARN_POLICY)],
    )


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


@pytest.mark.parametrize("tenant", sorted(JUDGED))
@pytest.mark.parametrize("obj", FIXTURES, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_policy_and_pack_agree_on_the_shared_fixtures(tenant: str, obj: dict) -> None:
    agree(tenant, obj)


def gpu_pod(limits: dict, name: str = "p", **spec) -> dict:
    """A Pod as a user writes it (numbers as YAML gives them; the harness canonicalises them)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu-workloads"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}], **spec},
    }


def deployment(pod: dict, replicas: int = 1, name: str = "d") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "gpu-workloads", "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": copy.deepcopy(pod["spec"])},
        },
    }


def shown(policy: dict, obj: dict, **request) -> str | None:
    """What kubectl prints for `obj`: the first failing validation's message (None: admitted)."""
    outcome = run_policy(policy, admitted(obj), **request)
    assert not outcome.errors, outcome.errors
    return outcome.shown


def test_quantities_reach_the_policy_in_canonical_form() -> None:
    """What the API server stores (apimachinery quantity.go CanonicalizeBytes); boundaries.md's vectors."""
    for written, stored in (
        (20000, "20k"), ("20000", "20k"), (90000, "90k"), (81920, "81920"), (1000, "1k"), ("2e4", "20e3"),
        ("1.5k", "1500"), ("1024Mi", "1Gi"), (30, "30"), (100, "100"), (0, "0"),
        # Read from the real API server (tests/real): a text that looks canonical is kept as written, a value
        # is rounded up to milli precision, a binary one beyond int64 is capped.
        ("30e0", "30e0"), ("1e3", "1e3"), ("12e2", "1200"), ("020k", "020k"), ("+1", "+1"), ("12Ki", "12Ki"),
        ("1024Ki", "1Mi"), ("15e-4", "2e-3"), ("1.5e-9", "1e-3"), ("8Ei", "9223372036854775807"),
    ):  # fmt: skip
        assert canonical_quantity(str(written)) == stored, written
    limits = admitted(gpu_pod({"nvidia.com/gpumem": 90000, "nvidia.com/gpucores": 10}))["spec"]["containers"][0]
    assert limits["resources"]["limits"] == {
        "nvidia.com/gpumem": "90k", "nvidia.com/gpucores": "10", "nvidia.com/gpu": "1"
    }, "HAMi's webhook adds the card count"  # fmt: skip
    # The API server defaults the pod again after a mutating webhook (apiserver mutating/dispatcher.go), so the
    # card count reaches the requests too: the tenant quota's requests.nvidia.com/gpu counts it.
    assert limits["resources"]["requests"] == {
        "nvidia.com/gpumem": "90k", "nvidia.com/gpucores": "10", "nvidia.com/gpu": "1"
    }  # fmt: skip


def test_is_integer_follows_how_the_api_server_holds_a_quantity() -> None:
    """`isInteger()` is false for a value held as an inf.Dec, however small (apimachinery ParseQuantity's fast
    path: at most 18 digits, fewer under a large binary suffix); read from the real API server (tests/real)."""
    from cel_harness import evaluate

    for text, integer in (
        ("1Ti", True),
        ("100Ti", False),
        ("1Pi", False),
        ("999999999999999999", True),
        ("1000000000000000000", False),
        ("1e18", True),
        ("1000m", False),
        (str(2**63 - 1), False),
    ):
        assert evaluate(f"quantity('{text}').isInteger()", {}) == integer, text


def test_kubectl_shows_the_reason_hami_would_give() -> None:
    """90000 MB on tenant-a breaks the 81920 MB per-pod limit too, but kubectl shows only the
    first failing validation, and HAMi would say CardInsufficientMemory: so must the policy."""
    deny, _ = policies("tenant-a")
    assert shown(deny, gpu_pod({"nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30})) is None
    big = gpu_pod({"nvidia.com/gpumem": 90000, "nvidia.com/gpucores": 10})
    assert run_policy(deny, admitted(big)).failed[1:] == [
        "PodGpuLimitExceeded: each pod asks 90000 MB in total; tenant tenant-a allows 81920 MB per pod"
    ], "the limit fails too, behind HAMi's reason"
    expected = (
        "CardInsufficientMemory: a container asks 90000 MB per card; the largest card of tenant tenant-a has 81920 MB"
    )
    assert shown(deny, big) == expected
    assert shown(deny, deployment(big)) == expected, "TC-10's Deployment"
    # Two cards on a one-card node: HAMi's NodeInsufficientDevice, before gpulab's per-pod GPU limit.
    two = gpu_pod({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000})
    assert (
        shown(deny, two)
        == "NodeInsufficientDevice: a container asks for more cards than tenant tenant-a's node has (1)"
    )
    assert run_policy(deny, admitted(two)).failed[-1] == (
        "PodGpuLimitExceeded: each pod asks 2 GPUs in total; tenant tenant-a allows 1 GPUs per pod"
    )
    # On tenant-b (two L4s, 2 cards allowed), 3 x 1000 MB per container is gpulab's limit alone.
    deny_b, _ = policies("tenant-b")
    three = gpu_pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}, name="three")
    three["spec"]["containers"] *= 3
    assert shown(deny_b, three) == (
        "PodGpuLimitExceeded: each pod asks 3 GPUs in total; tenant tenant-b allows 2 GPUs per pod"
    )
    unhandled = admitted(gpu_pod({"nvidia.com/gpumem": 1000}), webhook=False)
    assert run_policy(deny, unhandled).shown.startswith("a GPU pod must be scheduled by hami-scheduler")
    no_gpu = admitted(gpu_pod({"cpu": "1"}, schedulerName="default-scheduler"))
    assert run_policy(deny, no_gpu).failed == [], "pods without GPU requests are never touched (HAMi's own, too)"


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
# Spaces, empty entries and blank values: v2.10.0 trims and skips them, v2.8.3 does not.
CARD_TYPES = st.sampled_from(["A100", "L4", "H100", "nvidia", "l4,a100", "T4", "", " l4 ", "a100,", " , "])
UUIDS = st.sampled_from(
    ["GPU-MOCK-tenant-a-0", "GPU-MOCK-tenant-b-1", "GPU-MOCK-tenant-b-0,GPU-X", "nope", "", " GPU-MOCK-tenant-b-1 "]
)
WEIGHTS = st.sampled_from(  # read by v2.10.0 only (hami/cards.py parse_scoring_weights)
    ["slot=1,core=1,memory=3", " memory = 007 ,slot=+0, core=-0", "slot=0,core=0,memory=0", "slot=1,core=1",
     "slot=1,slot=1,memory=1", "slot=-1,core=1,memory=1", "slot=1,core=1,gpu=1", "slot=1,core=x,memory=1",
     "slot=1,core=1,memory=9223372036854775808", "slot=1,core==1,memory=1", ""]
)  # fmt: skip


@st.composite
def container(draw, name: str) -> dict:
    resources = {}
    for key, values in (
        ("nvidia.com/gpu", st.integers(0, 3)),
        ("nvidia.com/gpumem", st.sampled_from([0, 1000, 20000, 24576, 30000, 81920, 90000, 2**31])),
        ("nvidia.com/gpumem-percentage", st.sampled_from([0, 10, 50, 100, 101, 150])),
        ("nvidia.com/gpucores", st.sampled_from([0, 10, 30, 100, 120])),
    ):
        if draw(st.booleans()):
            resources[key] = draw(QUANTITY_FORMS).format(draw(values))
    where = draw(st.sampled_from(["limits", "limits", "both"]))
    spec: dict = {"name": name, "image": "x"}
    if draw(st.integers(0, 5)) == 0:  # HAMi v2.10.0's webhook refuses a privileged container in a GPU pod
        spec["securityContext"] = {"privileged": draw(st.booleans())}
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
        ("hami.io/device-scoring-weights", WEIGHTS),
    ):
        if draw(st.integers(0, 3)) == 0:
            annotations[key] = draw(values)
    pod_spec = {"containers": [draw(container(f"c{i}")) for i in range(draw(st.integers(1, 3)))]}
    if draw(st.integers(0, 3)) == 0:  # v2.10.0 fits each (a native sidecar too: it reads no restartPolicy)
        pod_spec["initContainers"] = [draw(container(f"init{i}")) for i in range(draw(st.integers(1, 2)))]
        for init in pod_spec["initContainers"]:
            if draw(st.integers(0, 2)) == 0:
                init["restartPolicy"] = "Always"
    if draw(st.integers(0, 6)) == 0:  # and a GPU pod with a node name
        pod_spec["nodeName"] = "tenant-a-worker"
    kind = draw(st.sampled_from(["Pod", "Pod", "Deployment", "Job", "CronJob", "StatefulSet", "ReplicationController"]))
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


def _init_case(limits: dict, restart: str | None = None) -> dict:
    """A Pod whose init container alone breaks a per-container rule under v2.10.0 (app: one card, 1000 MB)."""
    init = {"name": "init0", "image": "x", "resources": {"limits": limits}}
    if restart:
        init["restartPolicy"] = restart
    app = {"name": "c0", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g"},
            "spec": {"containers": [app], "initContainers": [init], "schedulerName": "hami-scheduler"}}  # fmt: skip


# Generated pods seldom give an init container alone more cards or memory than any app container: these do.
@example(_init_case({"nvidia.com/gpu": "3"}), "tenant-b@v2.10.0")
@example(_init_case({"nvidia.com/gpu": "2"}, "Always"), "tenant-a@v2.10.0")
@example(_init_case({"nvidia.com/gpumem": "90k"}, "Always"), "tenant-a@v2.10.0")
@example(_init_case({"nvidia.com/gpumem": "30000"}), "tenant-b@v2.10.0")
@settings(max_examples=300, deadline=None, derandomize=True)
@given(workloads(), st.sampled_from(sorted(JUDGED)))
def test_policy_and_pack_agree_on_generated_workloads(obj: dict, tenant: str) -> None:
    try:
        expected = pack_reasons(tenant, obj)
    except WorkloadError:  # not an object the API server would accept; nothing to compare
        return
    deny, _ = policies(tenant)
    order = vap_order(deny, obj)
    assert set(order) == expected, json.dumps(obj)
    assert order[:1] == pack_order(tenant, obj)[:1], json.dumps(obj)


def test_the_agreement_check_has_teeth(monkeypatch) -> None:
    """Changing either side's rule alone is caught on the fixtures."""
    tenant = "tenant-b"
    deny, _ = policies(tenant)
    weakened = copy.deepcopy(deny)
    weakened["spec"]["validations"] = [
        v for v in deny["spec"]["validations"] if "NodeInsufficientDevice" not in v.get("message", "")
    ]
    two_l4 = next(f for f in FIXTURES if f["metadata"]["name"] == "three-cards")
    assert vap_reasons(weakened, two_l4) != pack_reasons(tenant, two_l4)

    original = per_pod.per_pod_refusals
    monkeypatch.setattr(
        per_pod,
        "per_pod_refusals",
        lambda inventory, pod: [r for r in original(inventory, pod) if r.reason != "NodeInsufficientDevice"],
    )
    assert vap_reasons(deny, two_l4) != pack_reasons(tenant, two_l4)


@pytest.mark.parametrize("tenant", sorted(JUDGED))
def test_objects_validate_against_the_kubernetes_1_36_schema(tenant: str) -> None:
    for obj in policy_objects(JUDGED[tenant]):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)


def test_one_policy_and_binding_per_tenant_generated_from_config() -> None:
    program = reference_program()
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
    from model.kube_objects.workload_manifests import workload_manifest

    for lab in (LAB, parse_config(copy.deepcopy(lab_config()))):
        for tenant in lab.tenants:
            deny, warn = policies(tenant.name)
            for workload in tenant.workloads:
                manifest = admitted(workload_manifest(tenant, workload, lab.versions.workload_image))
                assert run_policy(deny, manifest).failed == [], (tenant.name, workload.name)
                assert run_policy(warn, manifest).failed == [], (tenant.name, workload.name)


# --- Updates never wedge a workload ------------------------------------------------


def lowered(tenant: str = "tenant-a", gpumem: int = 10000) -> dict:
    """The deny policy after the tenant's per-pod gpumem limit was lowered in config."""
    config = copy.deepcopy(lab_config())
    index = next(i for i, t in enumerate(config["tenants"]) if t["name"] == tenant)
    config["tenants"][index]["limits"]["gpumem"] = gpumem
    lab = parse_config(config)
    objects = policy_objects(lab.tenants[index])
    return next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == DENY_POLICY)


ADMITTED_EARLIER = deployment(gpu_pod({"nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30}), replicas=3)


def updated(change) -> dict:
    new = copy.deepcopy(ADMITTED_EARLIER)
    change(new)
    return new


RETIRING = {
    "scale down": lambda d: d["spec"].update(replicas=1),
    "scale to zero": lambda d: d["spec"].update(replicas=0),
    "remove a finalizer": lambda d: d["metadata"].update(finalizers=[]),
    "orphan (kubectl delete --cascade=orphan adds the orphan finalizer)": lambda d: d["metadata"].update(
        finalizers=["orphan"]
    ),
    "change labels": lambda d: d["metadata"]["labels"].update(team="b"),
    "change the pod template's labels": lambda d: d["spec"]["template"]["metadata"]["labels"].update(v="2"),
    "change the image": lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image="y"),
}


@pytest.mark.parametrize("operation", sorted(RETIRING))
def test_an_update_that_leaves_the_gpu_requests_alone_is_never_judged(operation: str) -> None:
    """A Deployment admitted under the old limits violates the lowered one; retiring it must still work."""
    deny = lowered()
    assert shown(deny, ADMITTED_EARLIER) == (
        "PodGpuLimitExceeded: each pod asks 20000 MB in total; tenant tenant-a allows 10000 MB per pod"
    ), "it does violate the lowered limit"
    old = admitted(ADMITTED_EARLIER)
    if "finalizer" in operation:
        old["metadata"]["finalizers"] = ["example.com/cleanup"]
    new = admitted(updated(RETIRING[operation]))
    outcome = run_policy(deny, new, old=old, operation="UPDATE")
    assert outcome.matched is False and outcome.failed == [], outcome


GPU_CHANGES = {
    "more memory": lambda d: d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
        {"nvidia.com/gpumem": 30000}
    ),
    "a GPU container added": lambda d: d["spec"]["template"]["spec"]["containers"].append(
        {"name": "c2", "image": "x", "resources": {"limits": {"nvidia.com/gpumem": 1000}}}
    ),
    "a card type selector": lambda d: d["spec"]["template"]["metadata"].update(
        annotations={"nvidia.com/use-gputype": "T4"}
    ),
    "a GPU init container": lambda d: d["spec"]["template"]["spec"].update(
        initContainers=[{"name": "i", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
    ),
    "a node name": lambda d: d["spec"]["template"]["spec"].update(nodeName="tenant-a-worker"),  # PodHasNodeAssigned
}


@pytest.mark.parametrize("change", sorted(GPU_CHANGES))
def test_an_update_that_changes_what_hami_reads_is_judged(change: str) -> None:
    deny = lowered()
    outcome = run_policy(
        deny, admitted(updated(GPU_CHANGES[change])), old=admitted(ADMITTED_EARLIER), operation="UPDATE"
    )
    assert outcome.matched and outcome.failed and not outcome.errors, outcome


def test_create_is_always_judged_and_the_match_condition_needs_no_old_object() -> None:
    outcome = run_policy(lowered(), admitted(ADMITTED_EARLIER), old=None, operation="CREATE")
    assert outcome.matched and outcome.shown.startswith("PodGpuLimitExceeded"), outcome


def test_equal_requests_written_differently_are_no_change() -> None:
    """The API server canonicalises both objects: 20000 and "20k" and "2e4" are one request."""
    deny = lowered()
    for written in ("20k", "2e4", "20000"):
        new = updated(
            lambda d, w=written: d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
                {"nvidia.com/gpumem": w}
            )
        )
        new["spec"]["replicas"] = 1
        outcome = run_policy(deny, admitted(new), old=admitted(ADMITTED_EARLIER), operation="UPDATE")
        assert outcome.matched is False, written


# --- Values CEL cannot hold ---------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"]
)
@pytest.mark.parametrize("kind", ["Pod", "Deployment"])
def test_a_quantity_beyond_int64_gets_a_gpu_message(key: str, kind: str) -> None:
    """Before: `expression ... resulted in error: cannot convert value to integer`. (Requests of extended
    resources equal their limits, or the API server refuses the object; a Pod's are defaulted from them.)"""
    deny, _ = policies("tenant-a")
    huge = "9223372036854775808"
    pod = gpu_pod({"nvidia.com/gpumem": 1000, key: huge})
    obj = pod if kind == "Pod" else deployment(pod)
    outcome = run_policy(deny, admitted(obj))
    assert not outcome.errors, outcome.errors
    assert outcome.shown == (
        "GpuQuantityOutOfRange: container c asks a nvidia.com/gpu, gpumem, gpumem-percentage or gpucores quantity "
        "above 9223372036854775807, which neither HAMi nor a ResourceQuota can count; ask for at most what a card has"
    )
    with pytest.raises(WorkloadError, match="out of range"):
        read_workload(kind, obj)  # the pack refuses it as bad input (InvalidGpuRequest)


def test_huge_values_and_sums_never_overflow() -> None:
    """Values inside int64 whose products and sums are not: still a GPU message, never a CEL error."""
    deny, warn = policies("tenant-b")
    top = str(2**63 - 1)
    pod = gpu_pod({"nvidia.com/gpu": top, "nvidia.com/gpumem": top, "nvidia.com/gpucores": top})
    pod["spec"]["containers"] *= 5
    outcome = run_policy(deny, admitted(pod))
    assert not outcome.errors, outcome.errors
    assert (
        outcome.shown == "NodeInsufficientDevice: a container asks for more cards than tenant tenant-b's node has (2)"
    )
    assert any(m.startswith("PodGpuLimitExceeded: each pod asks more than") for m in outcome.failed)
    assert not run_policy(warn, admitted(pod)).errors
    percentage = gpu_pod({"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": top})
    percentage["spec"]["containers"] *= 40
    outcome = run_policy(deny, admitted(percentage))
    assert not outcome.errors, outcome.errors
    assert outcome.shown.startswith("CardInsufficientMemory: a container asks "), outcome.shown
    assert vap_reasons(deny, percentage) == pack_reasons("tenant-b", percentage)
