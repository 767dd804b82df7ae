"""Each tenant's admission policy follows its HAMi release (model/kube_objects/admission_policy.py `PolicyRules`), as
the pack's per-pod rules do (placement/per_pod.py): v2.8.3's policy is byte for byte what it was before the policy took
a release, but for the PodHasNodeAssigned rule both releases' webhooks have (issue 64), and each difference of v2.10.0
is shown on objects the two releases judge apart, with the pack agreeing per release, and caught when the difference is
taken out of the policy. (Both releases on generated workloads and
the shared fixtures: tests/placement/test_gpu_admission.py, JUDGED.)

Read at Project-HAMi/HAMi tag v2.10.0 (commit 4707fb02c91c):
- GPU init containers are placed: pkg/device/devices.go `Resourcereqs` 639-692, pkg/scheduler/score.go
  `allocateInitContainers` 226-254 (v2.8.3 reads spec.containers only);
- a gpumem-percentage of 0 is not given, so the whole card: pkg/device/nvidia/device.go `GenerateResourceRequests`
  563-577 (v2.8.3: 0 MB);
- above 100 the same function clamps to 100 (559-561), but the webhook refuses the pod first: device.go
  `MutateAdmission` 349-351 and `validateMemoryPercentage` 389-396 ("must be an integer between 0 and 100"), for
  init and app containers (pkg/scheduler/webhook.go `Handle` 74-98), returned as a denial, which the chart's
  `failurePolicy: Ignore` (charts/hami/values.yaml 210) does not cover: InvalidGpumemPercentage (v2.8.3: more memory
  than any card, CardInsufficientMemory; an explicit 101 is "not given");
- the webhook refuses a privileged container in a GPU pod (webhook.go `Handle` 71, 99-102; #2139) and a GPU pod
  with spec.nodeName (104-112): PrivilegedContainer, PodHasNodeAssigned;
- a gpumem beyond int32 is no request at all (device.go `GenerateResourceRequests` 531-543; #2285):
  GpumemNotReadByHami;
- selectors: devices.go `CheckUUID` 693-713 and `CheckType` 719-738 trim entries, skip empty ones, read a blank
  annotation as no constraint and apply use and nouse both (v2.8.3: untrimmed, use-gpuuuid wins);
- hami.io/device-scoring-weights: pkg/util/device_scoring_weights.go `ParseDeviceScoringWeights` 57-102, read by
  score.go `calcScoreWithOptions` 361-364 for a pod with HAMi resources (pkg/scheduler/scheduler.go `Filter`
  1080-1087).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from unittest.mock import patch

import pytest
from cel_harness import admitted, run_policy

from hami import reasons
from hami.cards import parse_scoring_weights
from hami.releases import RULES, V2_10_0
from model.config import Tenant
from model.kube_objects import admission_policy
from model.kube_objects.admission_policy import (
    DENY_POLICY,
    POLICY_RULES,
    TEMPLATE,
    WARN_POLICY,
    PolicyRules,
    policy_objects,
)
from model.kube_objects.admission_v2_10_0 import webhook_signature
from placement import per_pod
from placement.inventory import from_tenant
from placement.workloads import read_workload
from tests.placement import test_gpu_admission
from tests.placement.test_gpu_admission import JUDGED, TENANTS, gpu_pod, vap_order

# sha256 of json.dumps(policy_objects(tenant, hami), sort_keys=True) for the reference stack's tenants (v2.8.3),
# computed before the policy took the tenant's release.
V2_8_3_POLICIES = {
    ("tenant-a", True): "bb9618eaad65331f6de6bd068aac06ea3246ed96dc44ec4509a770fe6f1c5b0b",
    ("tenant-a", False): "e671dea870aab8a1aaabd0672f2667e65c5711cfa4a6f6cb7c24aefa1d26ef85",
    ("tenant-b", True): "9b2ba9be66e075c1e00288d111147c0366d518f40cd41dbff092a20f4f427908",
    ("tenant-b", False): "1a7de1962cbc00df5db257cba8868c57944c7da6a4f836f2f88fd440712d1d36",
}
USE_TYPE, NOUSE_TYPE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"
WEIGHTS = "hami.io/device-scoring-weights"
B1 = "GPU-MOCK-tenant-b-1"


def sha256(objects: list[dict]) -> str:
    return hashlib.sha256(json.dumps(objects, sort_keys=True).encode()).hexdigest()


def without_the_node_rule(objects: list[dict]) -> list[dict]:
    """v2.8.3's policies without what its PodHasNodeAssigned rule added (issue 64): the validation, the
    webhookResource variable it reads, and what the webhook reads in the UPDATE signature."""
    rules = POLICY_RULES["v2.8.3"]
    objects = copy.deepcopy(objects)
    for obj in objects:
        if obj["kind"] != "ValidatingAdmissionPolicy":
            continue
        spec = obj["spec"]
        spec["validations"] = [v for v in spec["validations"] if "PodHasNodeAssigned" not in v.get("message", "")]
        spec["variables"] = [v for v in spec["variables"] if v["name"] != "webhookResource"]
        [condition] = spec["matchConditions"]
        for side in ("object", "oldObject"):
            added = f" + {webhook_signature(f'({TEMPLATE.format(o=side)})', rules)}"
            assert added in condition["expression"]
            condition["expression"] = condition["expression"].replace(added, "")
    return objects


@pytest.mark.parametrize(("tenant", "hami"), sorted(V2_8_3_POLICIES))
def test_the_v2_8_3_policies_of_the_reference_stack_are_unchanged(tenant: str, hami: bool) -> None:
    """All that changed is the node rule: without it, the policies are the ones hashed before."""
    assert TENANTS[tenant].hami_version == "v2.8.3"
    objects = policy_objects(TENANTS[tenant], hami)
    assert sha256(objects) != V2_8_3_POLICIES[(tenant, hami)], "v2.8.3 has the node rule"
    assert sha256(without_the_node_rule(objects)) == V2_8_3_POLICIES[(tenant, hami)]


def test_the_policy_rules_are_the_releases_rules() -> None:
    """model/ takes only names of hami/: the policy's table repeats the fields of hami/releases.py it reads."""
    assert set(POLICY_RULES) == set(RULES)
    for version, rules in RULES.items():
        for field in dataclasses.fields(PolicyRules):
            assert getattr(POLICY_RULES[version], field.name) == getattr(rules, field.name), (version, field.name)
    assert {tenant.hami_version for tenant in JUDGED.values()} == set(RULES), "the agreement runs for each"


@pytest.mark.parametrize("name", sorted(JUDGED))
def test_every_refusal_and_advice_begins_with_a_reason_name_of_hami_reasons(name: str) -> None:
    """The messages are built from hami/reasons.py, the names the pack and the engine give the same refusals; the
    one message without a name is the schedulerName rule's, which only the policy asks."""
    said = []
    for obj in policy_objects(JUDGED[name]):
        if obj["kind"] == "ValidatingAdmissionPolicy":
            said += [v.get("message") or v["messageExpression"] for v in obj["spec"]["validations"]]
    first = [text.lstrip("'\"").partition(":")[0] for text in said]
    unnamed = [word for word in first if " " in word]
    assert [word.startswith("a GPU pod must be scheduled by") for word in unnamed] == [True], first
    assert set(first) - set(unnamed) <= set(reasons.GPULAB_REASONS) | set(reasons.HAMI_REASONS), first


def policy(tenant: Tenant, name: str = DENY_POLICY, **without: object) -> dict:
    """`tenant`'s policy `name`; `without`: PolicyRules fields set to the other release's value, taking that
    difference out."""
    rules = dataclasses.replace(POLICY_RULES[tenant.hami_version], **without)
    with patch.dict(admission_policy.POLICY_RULES, {tenant.hami_version: rules}):
        objects = policy_objects(tenant)
    return next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == name)


def pack(tenant: Tenant, obj: dict) -> list[str]:
    workload = read_workload(obj["kind"], obj)
    assert workload is not None and workload.pods
    return [r.reason for r in per_pod.per_pod_refusals(from_tenant(tenant), workload.pods[0])]


def judged(tenant: Tenant, obj: dict, **without: object) -> list[str]:
    """The policy's refusals of `obj` (reason names, in order), after checking the pack names the same first."""
    order = vap_order(policy(tenant, **without), obj)
    if not without:
        expected = pack(tenant, obj)
        assert set(order) == set(expected) and order[:1] == expected[:1], (tenant.hami_version, order, expected)
    return order


def both(name: str = "tenant-b", **limits: int) -> tuple[Tenant, Tenant]:
    """The reference tenant `name` under v2.8.3 and under v2.10.0, with `limits` changed."""
    old, new = JUDGED[name], JUDGED[f"{name}@v2.10.0"]
    return tuple(t.model_copy(update={"limits": t.limits.model_copy(update=limits)}) for t in (old, new))


def annotated(pod: dict, annotations: dict[str, str]) -> dict:
    pod["metadata"]["annotations"] = annotations
    return pod


def deployment(pod: dict) -> dict:
    """A Deployment of `pod`, its annotations on the pod template (where HAMi reads them from the pods)."""
    obj = test_gpu_admission.deployment(pod)
    obj["spec"]["template"]["metadata"]["annotations"] = dict(pod["metadata"].get("annotations", {}))
    return obj


def with_gpu_init(pod: dict) -> dict:
    init = {"name": "warmup", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000}}}
    pod["spec"]["initContainers"] = [init]
    return pod


def test_v2_10_0_places_gpu_init_containers_and_v2_8_3_refuses_them() -> None:
    old, new = both("tenant-a")
    pod = with_gpu_init(gpu_pod({"nvidia.com/gpumem": 1000}))
    for obj in (pod, deployment(pod)):
        assert judged(old, obj) == ["InitContainerGpuRequest"]
        assert judged(new, obj) == []
        assert judged(new, obj, init_containers_counted=False) == ["InitContainerGpuRequest"] != pack(new, obj)
    # A pod of GPU init containers only is a GPU pod to v2.10.0: its selectors are judged, and it must be HAMi's.
    only = with_gpu_init(annotated(gpu_pod({"cpu": "1"}), {USE_TYPE: "T4"}))
    assert judged(old, only) == ["InitContainerGpuRequest"]
    assert judged(new, only) == ["CardTypeMismatch"]
    assert judged(new, only, init_containers_counted=False) == ["InitContainerGpuRequest"]
    unhandled = admitted(with_gpu_init(gpu_pod({"cpu": "1"})), webhook=False)
    assert run_policy(policy(new), unhandled).shown.startswith("a GPU pod must be scheduled by hami-scheduler")
    assert run_policy(policy(new, init_containers_counted=False), unhandled).shown.startswith("InitContainerGpuRequest")


def gpu_container(name: str, gpus: int, gpumem: int, cores: int | None = None) -> dict:
    limits = {"nvidia.com/gpu": gpus, "nvidia.com/gpumem": gpumem}
    if cores is not None:
        limits["nvidia.com/gpucores"] = cores
    return {"name": name, "image": "x", "resources": {"limits": limits}}


def with_inits(app: list[dict], inits: list[dict]) -> dict:
    pod = gpu_pod({"cpu": "1"})
    pod["spec"]["containers"], pod["spec"]["initContainers"] = app, inits
    return pod


# v2.10.0 pkg/scheduler/webhook_test.go TestFitResourceQuota (1000 MB of quota left): HAMi's own count of a pod's
# init containers, "max(sum(app containers), max(init containers))" (webhook.go `fitResourceQuota` 157-180), the
# per-pod limit's count too (placement/per_pod.py `pod_asks`), here with a gpumem limit of 1000 MB.
SEQUENTIAL = with_inits(  # 393-438 "InitContainers run sequentially: max init fits quota, but simple sum would exceed"
    [gpu_container("app1", 1, 500)], [gpu_container("init1", 1, 800), gpu_container("init2", 1, 800)]
)
MASSIVE = with_inits([gpu_container("app1", 1, 100)], [gpu_container("init-massive", 1, 1500)])  # 441-473


def test_v2_10_0_s_per_pod_limits_count_the_largest_init_container() -> None:
    """A pod asks its effective request (Kubernetes' PodRequests; HAMi v2.10.0's own quota count): the larger of its
    app containers' sum and its largest init container, per resource. Under v2.8.3 a GPU init container is refused
    first (InitContainerGpuRequest) and the limits count the app containers."""
    old, new = both(gpumem=1000)
    for obj in (SEQUENTIAL, deployment(SEQUENTIAL)):
        assert judged(new, obj) == [], "800 MB at most: the init containers run one after the other"
        assert judged(old, obj) == ["InitContainerGpuRequest"]
    for obj in (MASSIVE, deployment(MASSIVE)):
        assert judged(new, obj) == ["PodGpuLimitExceeded"]
        assert judged(old, obj) == ["InitContainerGpuRequest"], "its app container asks 100 MB"
    assert run_policy(policy(new), admitted(MASSIVE)).failed == [
        "PodGpuLimitExceeded: each pod asks 1500 MB in total; tenant tenant-b allows 1000 MB per pod"
    ]
    # Each resource on its own: cards (2 > 1) and cores (2 x 60 > 100), whichever container asks them.
    old, new = both(gpus=1, gpucores=100)
    two_cards = with_inits([gpu_container("app", 1, 1000, 10)], [gpu_container("init", 2, 1000, 60)])
    assert run_policy(policy(new), admitted(two_cards)).failed == [
        "PodGpuLimitExceeded: each pod asks 2 GPUs in total; tenant tenant-b allows 1 GPUs per pod",
        "PodGpuLimitExceeded: each pod asks 120% cores in total; tenant tenant-b allows 100% cores per pod",
    ]
    assert judged(new, two_cards) == ["PodGpuLimitExceeded", "PodGpuLimitExceeded"]
    only_inits = with_inits([{"name": "app", "image": "x"}], [gpu_container("init", 2, 1000, 60)])
    assert judged(new, deployment(only_inits)) == ["PodGpuLimitExceeded", "PodGpuLimitExceeded"]


REFUSES = "HAMi v2.10.0's webhook refuses the pod (each of a workload's pods, at create)"


def test_v2_10_0_refuses_a_memory_percentage_its_webhook_refuses() -> None:
    """v2.10.0's scheduler would clamp 150 % to 100, but its webhook refuses the pod first, in HAMi's words: so does the
    policy (the Deployment itself, whose pods the webhook would refuse one by one). v2.8.3 takes 150 % as asked: more
    memory than any card. An explicit 101 (HAMi's own "not given") is refused by v2.10.0 only."""
    old, new = both()
    over = gpu_pod({"nvidia.com/gpumem-percentage": 150})
    sentinel = gpu_pod({"nvidia.com/gpumem": 1000, "nvidia.com/gpumem-percentage": 101})
    for obj in (over, deployment(over)):
        assert judged(old, obj) == ["CardInsufficientMemory"]
        assert judged(new, obj) == ["InvalidGpumemPercentage"]
        assert judged(new, obj, memory_percentage_range_checked=False) == [] != pack(new, obj), "clamped to 100 %"
    for obj in (sentinel, deployment(sentinel)):
        assert judged(old, obj) == []
        assert judged(new, obj) == ["InvalidGpumemPercentage"]
        assert judged(new, obj, memory_percentage_range_checked=False) == []
    assert run_policy(policy(new), admitted(deployment(sentinel))).shown == (
        f"InvalidGpumemPercentage: {REFUSES}: invalid nvidia.com/gpumem-percentage value 101 in container c: must be "
        "an integer between 0 and 100"
    )
    assert run_policy(policy(new), admitted(gpu_pod({"nvidia.com/gpumem-percentage": 100}))).failed == []


def test_v2_10_0_judges_the_percentage_of_init_containers_first() -> None:
    """webhook.go `Handle` walks the init containers first (74-85): the percentage it names is theirs."""
    old, new = both()
    pod = gpu_pod({"nvidia.com/gpumem-percentage": 200})
    pod["spec"]["initContainers"] = [
        {"name": "warmup", "image": "x", "resources": {"limits": {"nvidia.com/gpumem-percentage": 150}}}
    ]
    assert judged(old, pod) == ["CardInsufficientMemory", "InitContainerGpuRequest"]
    assert judged(new, pod) == ["InvalidGpumemPercentage"]
    assert run_policy(policy(new), admitted(deployment(pod))).shown == (
        f"InvalidGpumemPercentage: {REFUSES}: invalid nvidia.com/gpumem-percentage value 150 in container warmup: "
        "must be an integer between 0 and 100"
    )


def with_sidecar(pod: dict, **fields: object) -> dict:
    pod["spec"]["containers"].append({"name": "debug", "image": "x", **fields})
    return pod


def test_v2_10_0_refuses_a_privileged_container_in_a_gpu_pod() -> None:
    """webhook.go `Handle` 99-102 (#2139): any privileged container, GPU or not, in a pod with a GPU resource."""
    old, new = both()
    pod = with_sidecar(gpu_pod({"nvidia.com/gpumem": 1000}), securityContext={"privileged": True})
    for obj in (pod, deployment(pod)):
        assert judged(old, obj) == []
        assert judged(new, obj) == ["PrivilegedContainer"]
        assert judged(new, obj, privileged_refused=False) == [] != pack(new, obj)
    assert run_policy(policy(new), admitted(deployment(pod))).shown == (
        f"PrivilegedContainer: {REFUSES}: container debug is privileged"
    )
    unprivileged = with_sidecar(gpu_pod({"nvidia.com/gpumem": 1000}), securityContext={"privileged": False})
    assert judged(new, unprivileged) == []
    cpu_only = with_sidecar(gpu_pod({"cpu": "1"}), securityContext={"privileged": True})
    assert vap_order(policy(new), cpu_only) == [], "no GPU resource: the webhook lets it through"


def without_rule(policy: dict, reason: str) -> dict:
    """`policy` with the validation of `reason` taken out."""
    policy = copy.deepcopy(policy)
    validations = policy["spec"]["validations"]
    policy["spec"]["validations"] = [v for v in validations if reason not in v.get("message", "")]
    assert len(policy["spec"]["validations"]) == len(validations) - 1
    return policy


def test_both_releases_refuse_a_gpu_pod_with_a_node_name() -> None:
    """HAMi's "pod has node assigned": v2.10.0 webhook.go `Handle` 104-112, v2.8.3 89-98, each tag's webhook_test.go
    TestPodHasNodeName (a GPU limit and spec.nodeName: denied). A Deployment's pods would all be refused; a Pod with a
    node name reaches the policy as written (cel_harness.hami_webhook: refused by HAMi, or HAMi is down)."""
    pod = gpu_pod({"nvidia.com/gpumem": 1000}, nodeName="tenant-b-worker")
    for tenant in both():
        obj = deployment(pod)
        assert judged(tenant, obj) == ["PodHasNodeAssigned"]
        assert vap_order(without_rule(policy(tenant), "PodHasNodeAssigned"), obj) == [] != pack(tenant, obj)
        # The Pod is not handed to hami-scheduler either (the policy's own last rule), but HAMi's reason comes first.
        assert vap_order(policy(tenant), pod) == ["PodHasNodeAssigned", "SchedulerName"]
        assert pack(tenant, pod) == ["PodHasNodeAssigned"]
        refuses = f"HAMi {tenant.hami_version}'s webhook refuses the pod (each of a workload's pods, at create)"
        shown = run_policy(policy(tenant), admitted(pod)).shown
        assert shown == f"PodHasNodeAssigned: {refuses}: pod has node assigned"
        assert vap_order(policy(tenant), gpu_pod({"cpu": "1"}, nodeName="n")) == []
    assert REFUSES.startswith("HAMi v2.10.0's")


def test_v2_8_3_finds_the_gpu_in_the_unprivileged_app_containers_of_the_pods_it_handles() -> None:
    """v2.8.3 webhook.go `Handle`: a pod naming hami-scheduler passes untouched (63-68, `A && B || C && D`); the
    webhook walks spec.containers only and skips a privileged one (70-87), so finds no GPU resource and refuses no
    node name there. v2.10.0 handles hami-scheduler (64-69) and walks every container (74-98)."""
    old, new = both()
    named = gpu_pod({"nvidia.com/gpumem": 1000}, nodeName="n", schedulerName="hami-scheduler")
    privileged = gpu_pod({"nvidia.com/gpumem": 1000}, nodeName="n")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    init_only = with_gpu_init(gpu_pod({"cpu": "1"}, nodeName="n"))
    for obj in (deployment(named), named):
        assert judged(old, obj) == []
        assert judged(new, obj) == ["PodHasNodeAssigned"]
        assert judged(old, obj, webhook_scheduler_names=None) == ["PodHasNodeAssigned"] != pack(old, obj)
    obj = deployment(privileged)
    assert judged(old, obj) == []
    assert judged(new, obj) == ["PrivilegedContainer"]
    assert judged(old, obj, webhook_resource_in_every_container=True) == ["PodHasNodeAssigned"] != pack(old, obj)
    obj = deployment(init_only)
    assert judged(old, obj) == ["InitContainerGpuRequest"]
    assert judged(new, obj) == ["PodHasNodeAssigned"]
    unprivileged_too = with_sidecar(copy.deepcopy(privileged), resources={"limits": {"nvidia.com/gpucores": 10}})
    assert judged(old, deployment(unprivileged_too)) == ["PodHasNodeAssigned"], "one unprivileged GPU container"


def test_v2_10_0_s_webhook_gives_one_refusal() -> None:
    """A percentage, a privileged container and a node name: the webhook answers the first, in `Handle`'s order."""
    new = both()[1]
    pod = with_sidecar(
        gpu_pod({"nvidia.com/gpumem-percentage": 120}, nodeName="n", schedulerName="hami-scheduler"),
        securityContext={"privileged": True},
    )
    assert judged(new, pod) == ["InvalidGpumemPercentage"]
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem-percentage"] = 20
    assert judged(new, pod) == ["PrivilegedContainer"]


def test_v2_10_0_says_it_cannot_predict_a_gpumem_beyond_int32() -> None:
    """device.go `GenerateResourceRequests` 531-543 (#2285): a gpumem above 2147483647 (MB) is no request at all:
    HAMi allocates and accounts nothing for the container. The policy refuses it by that name, not as a card too
    small; a gpumem of exactly 2147483647 is read (and is more than any card)."""
    old, new = both()
    beyond = gpu_pod({"nvidia.com/gpumem": 2**31})
    for obj in (beyond, deployment(beyond)):
        assert judged(old, obj)[:1] == ["CardInsufficientMemory"]
        assert judged(new, obj)[:1] == ["GpumemNotReadByHami"]
        assert "GpumemNotReadByHami" not in judged(new, obj, gpumem_beyond_int32_dropped=False) != pack(new, obj)
    assert judged(new, gpu_pod({"nvidia.com/gpumem": 2**31 - 1}))[:1] == ["CardInsufficientMemory"]


def test_an_update_that_changes_what_the_release_s_webhook_reads_is_judged() -> None:
    """Both read spec.nodeName and the app containers' privileged; v2.8.3 the schedulerName (`Handle` 63-68),
    v2.10.0 the init containers' privileged (74-85, `privilegedContainerName`)."""
    before = deployment(gpu_pod({"nvidia.com/gpumem": 1000}, initContainers=[{"name": "setup", "image": "x"}]))
    privileged = {"securityContext": {"privileged": True}}
    changes = {  # how the pod template changes, and whether (v2.8.3, v2.10.0) judge the UPDATE
        "privileged": (lambda spec: spec["containers"][0].update(privileged), (True, True)),
        "node name": (lambda spec: spec.update(nodeName="n"), (True, True)),
        "scheduler name": (lambda spec: spec.update(schedulerName="hami-scheduler"), (True, False)),
        "privileged init container": (lambda spec: spec["initContainers"][0].update(privileged), (False, True)),
    }
    for name, (change, matched) in changes.items():
        after = copy.deepcopy(before)
        change(after["spec"]["template"]["spec"])
        for tenant, judged_ in zip(both(), matched, strict=True):
            outcome = run_policy(policy(tenant), admitted(after), old=admitted(before), operation="UPDATE")
            assert outcome.matched is judged_, (name, tenant.hami_version)


def test_zero_percent_is_the_whole_card_under_v2_10_0_and_0_mb_under_v2_8_3() -> None:
    old, new = both("tenant-a", gpumem=40000)
    zero = gpu_pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0})
    assert judged(old, zero) == []  # 0 MB
    assert judged(new, zero) == ["PodGpuLimitExceeded"]  # 81920 MB, over the 40000 MB per pod
    assert judged(new, zero, clamp_memory_percentage=False) == [] != pack(new, zero)
    assert run_policy(policy(new), admitted(zero)).failed == [
        "PodGpuLimitExceeded: each pod asks 81920 MB in total; tenant tenant-a allows 40000 MB per pod"
    ]
    warned = {t.hami_version: run_policy(policy(t, WARN_POLICY), admitted(zero)).failed for t in (old, new)}
    assert warned == {
        "v2.8.3": ["ZeroMemoryPercentage: a container asks 0% of the card's memory; HAMi gives it 0 MB"],
        "v2.10.0": [
            "ZeroMemoryPercentage: a container asks 0% of the card's memory; HAMi v2.10.0 reads 0% as not given and "
            "gives it all of each card's memory; write the share it needs"
        ],
    }
    [advice] = per_pod.per_pod_advisories(read_workload("Pod", zero).pods[0], V2_10_0)
    assert (advice.reason, advice.whole_card) == ("ZeroMemoryPercentage", True), "the pack says the same"


SELECTORS = [  # (annotations, v2.8.3's refusals, v2.10.0's) on tenant-b's two L4s
    ({USE_TYPE: " L4"}, ["CardTypeMismatch"], []),  # trimmed
    ({USE_TYPE: "A100,"}, [], ["CardTypeMismatch"]),  # v2.8.3: the empty entry matches every type
    ({NOUSE_TYPE: "a100,"}, ["CardTypeMismatch"], []),  # the same, for nouse: no card left
    ({USE_TYPE: " "}, ["CardTypeMismatch"], []),  # blank: no constraint
    ({USE_UUID: f"{B1} ,GPU-X"}, ["CardUuidMismatch"], []),
    ({USE_UUID: ""}, ["CardUuidMismatch"], []),
    ({USE_UUID: B1, NOUSE_UUID: B1}, [], ["CardUuidMismatch"]),  # v2.8.3: use-gpuuuid wins; v2.10.0: both apply
    ({NOUSE_UUID: "GPU-MOCK-tenant-b-0, GPU-MOCK-tenant-b-1"}, [], ["CardUuidMismatch"]),
]


@pytest.mark.parametrize(("annotations", "v2_8_3", "v2_10_0"), SELECTORS, ids=lambda v: json.dumps(v))
def test_v2_10_0_reads_selectors_trimmed(annotations: dict, v2_8_3: list, v2_10_0: list) -> None:
    old, new = both()
    pod = gpu_pod({"nvidia.com/gpumem": 1000})
    pod["metadata"]["annotations"] = annotations
    for obj in (pod, deployment(pod)):
        assert judged(old, obj) == v2_8_3
        assert judged(new, obj) == v2_10_0
        assert judged(new, obj, trimmed_selectors=False) == v2_8_3 != pack(new, obj)


WEIGHT_VALUES = [
    "slot=1,core=1,memory=3", " memory = 007 ,slot=+0, core=-0", "\u00a0slot=1,core=0,memory=0\u3000",
    "slot=0,core=0,memory=0", "slot=1,core=1", "slot=1,core=1,memory=1,", "slot=1,slot=1,memory=1",
    "Slot=1,core=1,memory=1",
    "slot=-1,core=1,memory=1", "slot=1,core=1,gpu=1", "slot=1,core=1.5,memory=1", "slot=1,core=1e2,memory=1",
    "slot=1,core=9223372036854775807,memory=1", "slot=1,core=9223372036854775808,memory=1", "slot=1,core==1,memory=1",
    "slot=1,core=1,memory", "slot=1,core=١,memory=1", "", " ",
]  # fmt: skip


@pytest.mark.parametrize("value", WEIGHT_VALUES)
def test_v2_10_0_refuses_scoring_weights_its_scheduler_cannot_read(value: str) -> None:
    old, new = both()
    try:
        parse_scoring_weights(value)
        expected = []
    except ValueError:
        expected = ["InvalidDeviceScoringWeights"]
    pod = annotated(gpu_pod({"nvidia.com/gpumem": 1000}), {WEIGHTS: value})
    for obj in (pod, deployment(pod)):
        assert judged(old, obj) == []  # v2.8.3 reads no weights
        assert judged(new, obj) == expected
        assert judged(new, obj, scoring_weights=False) == []
    cpu_only = annotated(gpu_pod({"cpu": "1"}), {WEIGHTS: value})  # no pod of the pack's: none to judge
    assert vap_order(policy(new), cpu_only) == [], "HAMi's Filter passes a pod without HAMi resources unread"


def test_the_weights_teeth_and_updates() -> None:
    new = both()[1]
    pod = annotated(gpu_pod({"nvidia.com/gpumem": 1000}), {WEIGHTS: "slot=1"})
    assert judged(new, pod, scoring_weights=False) == [] != pack(new, pod)
    # Under v2.10.0 an UPDATE that changes only the weights changes what HAMi reads: it is judged.
    before = deployment(gpu_pod({"nvidia.com/gpumem": 1000}))
    after = json.loads(json.dumps(before))
    after["spec"]["template"]["metadata"]["annotations"] = {WEIGHTS: "slot=1"}
    for tenant, matched in zip(both(), (False, True), strict=True):
        outcome = run_policy(policy(tenant), admitted(after), old=admitted(before), operation="UPDATE")
        assert outcome.matched is matched, tenant.hami_version


@pytest.mark.parametrize("tenant", both(), ids=lambda t: t.hami_version)
def test_a_type_selector_with_non_ascii_letters_is_left_to_hami(tenant: Tenant) -> None:
    """Go's strings.ToUpper("nvıdıa") is "NVIDIA" (dotless ı upper-cases to I): HAMi admits and places the
    pod on any NVIDIA card. CEL's upperAscii() cannot say so, so the policy must not refuse it, in either release."""
    for selector in ("nvıdıa", "l4,ſomething", " nvıdıa ,"):
        assert judged(tenant, annotated(gpu_pod({"nvidia.com/gpumem": 1000}), {USE_TYPE: selector})) == []
    assert "nvıdıa".upper() == "NVIDIA", "Python's upper() follows Unicode like Go's ToUpper here"
    ascii_mismatch = annotated(gpu_pod({"nvidia.com/gpumem": 1000}), {USE_TYPE: "a100"})
    assert judged(tenant, ascii_mismatch) == ["CardTypeMismatch"], "ASCII selectors are still judged"
    nouse = annotated(gpu_pod({"nvidia.com/gpumem": 1000}), {NOUSE_TYPE: "nvıdıa"})
    assert judged(tenant, nouse) == [], "left to HAMi, which refuses it with its own event"
