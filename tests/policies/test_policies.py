"""Each policy of the pack, with constructed CrossGuard arguments: a pass and each violation."""

from __future__ import annotations

import json

import pytest
from lab_harness import lab_config
from policy_harness import (
    provider_urn,
    resource,
    resource_args,
    run_resource_policy,
    run_stack_policy,
    stack_args,
)

from model.config import parse_config
from model.kube_objects.tenant_objects import inventory_document

LAB = parse_config(lab_config())
TENANT_A, TENANT_B = LAB.tenants


def inventory_configmap(tenant=TENANT_A) -> object:
    document = inventory_document(tenant, LAB, tenant.cards(), f"{tenant.name}-worker")
    return resource(
        "kubernetes:core/v1:ConfigMap",
        {
            "metadata": {
                "name": "gpulab-gpu-inventory",
                "namespace": "kube-public",
                "labels": {"gpulab.io/tenant": tenant.name},
            },
            "data": {"inventory.json": json.dumps(document)},
        },
        name=f"{tenant.name}-inventory",
    )


def pod(name: str, limits: dict, tenant: str | None = "tenant-a", namespace: str = "gpu-workloads", **extra) -> object:
    labels = {"gpulab.io/tenant": tenant} if tenant else {}
    props = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, **extra.pop("metadata", {})},
        "spec": {"containers": [{"name": "cuda", "image": "busybox", "resources": {"limits": limits}}], **extra},
    }
    return resource("kubernetes:core/v1:Pod", props, name=name)


SHARE = {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}


def gpu_violations(resources, config=None, policy="gpu-request-limits"):
    return run_stack_policy(policy, stack_args(resources, config))


def test_three_shares_fit_tenant_a() -> None:
    resources = [inventory_configmap(), *(pod(f"t{i}", SHARE) for i in range(3))]
    assert gpu_violations(resources) == []
    assert gpu_violations(resources, policy="gpu-placement-order") == []


def test_fourth_share_is_card_insufficient_core() -> None:
    resources = [inventory_configmap(), *(pod(f"t{i}", SHARE) for i in range(4))]
    violations = gpu_violations(resources)
    assert len(violations) == 1
    message, urn = violations[0]
    assert "CardInsufficientCore" in message and "Pod/gpu-workloads/t3" in message
    assert "GPU-MOCK-tenant-a-0" in message and "asks 30% cores, 10% free" in message
    assert urn.endswith("::t3"), "the violation is attached to the workload that does not fit"


def test_90000_mb_is_card_insufficient_memory_on_both_tenants() -> None:
    """More than the largest card is a per-pod refusal (as the in-tenant admission policy decides it),
    in a namespace with a quota too."""
    for tenant, namespace in ((TENANT_A, "gpu-workloads"), (TENANT_B, "batch"), (TENANT_B, "gpu-workloads")):
        big = pod("big", {"nvidia.com/gpumem": "90000"}, tenant=tenant.name, namespace=namespace)
        messages = [m for m, _ in gpu_violations([inventory_configmap(tenant), big])]
        assert any("CardInsufficientMemory" in m and "asks 90000 MB" in m for m in messages), messages


def test_per_pod_limits() -> None:
    two_cards = pod("two", {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"})
    messages = [m for m, _ in gpu_violations([inventory_configmap(), two_cards])]
    assert any("PodGpuLimitExceeded" in m and "asks 2 GPUs" in m and "allows 1 GPUs" in m for m in messages)


def test_per_pod_limits_count_a_v2_10_0_pod_s_largest_init_container() -> None:
    """HAMi v2.10.0 places init containers (pkg/device/devices.go `Resourcereqs` 639-692): the per-pod limit counts the
    pod's effective request, here its init container's 2 x 15000 MB against 20000 MB per pod (its app container asks
    1000). The same pod on v2.8.3 is refused for the GPU init container, its app container within the limit."""
    limits = TENANT_B.limits.model_copy(update={"gpumem": 20000})
    init = {
        "name": "warmup",
        "image": "busybox",
        "resources": {"limits": {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "15000"}},
    }
    warm = pod("warm", {"nvidia.com/gpumem": "1000"}, tenant="tenant-b", initContainers=[init])
    said = {}
    for version in ("v2.10.0", "v2.8.3"):
        tenant = TENANT_B.model_copy(update={"hami_version": version, "limits": limits})
        said[version] = [m for m, _ in gpu_violations([inventory_configmap(tenant), warm])]
    assert any("PodGpuLimitExceeded" in m and "asks 30000 MB" in m and "allows 20000 MB" in m for m in said["v2.10.0"])
    assert not any("PodGpuLimitExceeded" in m for m in said["v2.8.3"]), said["v2.8.3"]
    assert any("InitContainerGpuRequest" in m for m in said["v2.8.3"]), said["v2.8.3"]


def test_more_gpus_than_cards() -> None:
    three = pod("three", {"nvidia.com/gpu": "3", "nvidia.com/gpumem": "1000"}, tenant="tenant-b")
    messages = [m for m, _ in gpu_violations([inventory_configmap(TENANT_B), three])]
    # HAMi's fitInDevices answers before trying any card (score.go); not AllocatedCardsInsufficientRequest.
    assert any("NodeInsufficientDevice" in m and "asks 3 cards, the node has 2" in m for m in messages), messages


def test_gpu_only_request_is_exclusive() -> None:
    resources = [inventory_configmap(), pod("share", SHARE), pod("whole", {"nvidia.com/gpu": "1"})]
    messages = [m for m, _ in gpu_violations(resources)]
    assert any("Pod/gpu-workloads/whole" in m and "CardInsufficientMemory" in m for m in messages), messages


def test_type_filter_is_card_type_mismatch() -> None:
    wrong = pod("h100-only", SHARE, metadata={"annotations": {"nvidia.com/use-gputype": "H100"}})
    messages = [m for m, _ in gpu_violations([inventory_configmap(), wrong])]
    assert any("CardTypeMismatch" in m for m in messages)
    right = pod("a100", SHARE, metadata={"annotations": {"nvidia.com/use-gputype": "A100"}})
    assert gpu_violations([inventory_configmap(), right]) == []


def test_split_count_is_card_time_slicing_exhausted() -> None:
    tiny = {"nvidia.com/gpumem": "100", "nvidia.com/gpucores": "1"}
    resources = [inventory_configmap(TENANT_B), *(pod(f"p{i}", tiny, tenant="tenant-b") for i in range(21))]
    messages = [m for m, _ in gpu_violations(resources)]
    assert any("CardTimeSlicingExhausted" in m and "p20" in m for m in messages), messages


def test_hami_quota_is_resource_quota_not_fit() -> None:
    half = {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "50"}
    resources = [inventory_configmap(TENANT_B), *(pod(f"q{i}", half, tenant="tenant-b") for i in range(3))]
    messages = [m for m, _ in gpu_violations(resources)]
    assert any("ResourceQuotaNotFit" in m and "limits.nvidia.com/gpumem=40960" in m and "q2" in m for m in messages)


def test_deployment_replicas_are_counted() -> None:
    deployment = resource(
        "kubernetes:apps/v1:Deployment",
        {
            "metadata": {"name": "serve", "namespace": "gpu-workloads", "labels": {"gpulab.io/tenant": "tenant-a"}},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "serve"}},
                "template": {
                    "metadata": {"labels": {"app": "serve"}},
                    "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": SHARE}}]},
                },
            },
        },
        name="serve",
    )
    messages = [m for m, _ in gpu_violations([inventory_configmap(), deployment])]
    assert any("Deployment/gpu-workloads/serve#4" in m and "CardInsufficientCore" in m for m in messages), messages


def test_order_dependent_set_is_an_advisory_warning() -> None:
    """Two L4s: 12000 + 12000 + 24000 MB fits only if the two small pods share a card; spread separates them.
    (In a namespace without gpulab's quota, so only the cards decide.)"""
    small = {"nvidia.com/gpumem": "12000", "nvidia.com/gpucores": "10"}
    resources = [
        inventory_configmap(TENANT_B),
        pod("small-1", small, tenant="tenant-b", namespace="batch"),
        pod("small-2", small, tenant="tenant-b", namespace="batch"),
        pod("large", {"nvidia.com/gpumem": "24000", "nvidia.com/gpucores": "10"}, tenant="tenant-b", namespace="batch"),
    ]
    assert gpu_violations(resources) == [], "a set some placement fits is not refused"
    warnings = gpu_violations(resources, policy="gpu-placement-order")
    assert len(warnings) == 1
    message = warnings[0][0]
    assert "OrderDependentPlacement" in message and "card policy spread" in message
    assert "Pod/batch/large" in message and "CardInsufficientMemory" in message


def test_workload_without_tenant_is_reported() -> None:
    messages = [m for m, _ in gpu_violations([inventory_configmap(), pod("stray", SHARE, tenant=None)])]
    assert any("TenantUnknown" in m and "gpulab.io/tenant" in m for m in messages)


# The URN of tenant-a's provider as gpulab creates it (a child of the tenant's components).
TENANT_A_PROVIDER = provider_urn("tenant-a-provider", "gpulab:index:Tenant$gpulab:index:TenantControlPlane$")


def through(workload, provider: str, urn: str | None = None):
    """`workload` sent through the provider named `provider` (URN `urn`, else a top-level one of that name)."""
    return resource(workload.resource_type, workload.props, name=workload.name, provider=provider, provider_urn_=urn)


def lab_inventory(tenant=TENANT_A):
    """The inventory ConfigMap as the lab declares it: through the tenant's own provider."""
    return through(inventory_configmap(tenant), f"{tenant.name}-provider", TENANT_A_PROVIDER)


def test_tenant_from_the_lab_providers_identity() -> None:
    """Through the provider the tenant's inventory goes through, a workload is that tenant's, label or not."""
    unlabelled = [through(pod(f"t{i}", SHARE, tenant=None), "tenant-a-provider", TENANT_A_PROVIDER) for i in range(3)]
    assert gpu_violations([lab_inventory(), *unlabelled]) == []
    fourth = through(pod("t3", SHARE, tenant=None), "tenant-a-provider", TENANT_A_PROVIDER)
    messages = [m for m, _ in gpu_violations([lab_inventory(), *unlabelled, fourth])]
    assert len(messages) == 1 and "tenant tenant-a: Pod/gpu-workloads/t3" in messages[0], messages
    assert "CardInsufficientCore" in messages[0]


@pytest.mark.parametrize(
    "provider, urn",
    [("tenant-b-sink", None), ("tenant-a-provider", None)],
    ids=["another-provider", "same-name-other-urn"],
)
def test_another_provider_cannot_carry_a_tenant_label_and_pass(provider: str, urn: str | None) -> None:
    """A workload through any provider but the tenant providers gpulab creates (however it
    is named) cannot be attributed by its label; it is an error, not a pass judged on tenant-b's cards."""
    sneaky = through(pod("sneaky", SHARE, tenant="tenant-b"), provider, urn)
    messages = [m for m, _ in gpu_violations([lab_inventory(), lab_inventory_b(), sneaky])]
    assert len(messages) == 1, messages
    assert "TenantUnverified" in messages[0] and "Pod/gpu-workloads/sneaky" in messages[0]
    assert f"provider {provider} (" in messages[0] and "not one of the tenant providers" in messages[0]
    assert f"tenant-a: {TENANT_A_PROVIDER}" in messages[0]


def lab_inventory_b():
    return through(inventory_configmap(TENANT_B), "tenant-b-provider", provider_urn("tenant-b-provider", "x$"))


def test_default_provider_in_the_lab_stack_is_not_a_tenant() -> None:
    stray = pod("stray", SHARE, tenant="tenant-a")
    messages = [m for m, _ in gpu_violations([lab_inventory(), stray])]
    assert len(messages) == 1 and "TenantUnverified" in messages[0] and "the default provider" in messages[0]


def test_an_unreadable_workload_of_a_tenant_names_that_tenant() -> None:
    odd = through(pod("odd", {"nvidia.com/gpumem": "lots"}, tenant=None), "tenant-a-provider", TENANT_A_PROVIDER)
    messages = [m for m, _ in gpu_violations([lab_inventory(), odd])]
    assert len(messages) == 1 and messages[0].startswith("error: tenant tenant-a: odd: InvalidGpuRequest"), messages


PATCH = {
    "metadata": {"name": "serve", "namespace": "gpu-workloads"},
    "spec": {
        "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "9e4"}}}]}}
    },
}


@pytest.mark.parametrize(
    "resource_type, props, what",
    [
        ("kubernetes:apps/v1:DeploymentPatch", PATCH, "DeploymentPatch serve sets GPU requests"),
        ("kubernetes:core/v1:PodPatch", {"spec": PATCH["spec"]["template"]["spec"]}, "PodPatch x sets GPU requests"),
        (
            "kubernetes:helm.sh/v3:Release",
            {"chart": "inference", "values": {"server": {"resources": {"limits": {"nvidia.com/gpu": 2}}}}},
            "Helm chart x is given GPU requests",
        ),
        (
            "kubernetes:helm.sh/v4:Chart",
            {"chart": "jobs", "values": {"podAnnotations": {"nvidia.com/use-gputype": "A100"}}},
            "Helm chart x is given GPU requests",
        ),
    ],
    ids=["DeploymentPatch", "PodPatch", "helm-v3-Release", "helm-v4-Chart"],
)
def test_kinds_the_pack_cannot_read_are_reported(resource_type: str, props: dict, what: str) -> None:
    name = props.get("metadata", {}).get("name", "x")
    unread = resource(resource_type, props, name=name)
    messages = [m for m, _ in gpu_violations([inventory_configmap(), unread])]
    assert len(messages) == 1 and "GpuWorkloadNotChecked" in messages[0] and what in messages[0], messages


def test_patches_and_charts_without_gpu_requests_pass() -> None:
    """HAMi's own chart names its resources as values (`resourceMem: nvidia.com/gpumem`), never as keys."""
    from components.docker.hami_chart import hami_values

    hami = resource("kubernetes:helm.sh/v3:Release", {"chart": "hami", "values": hami_values(TENANT_A, LAB)})
    scale = resource("kubernetes:apps/v1:DeploymentPatch", {"metadata": {"name": "web"}, "spec": {"replicas": 3}})
    assert gpu_violations([inventory_configmap(), hami, scale]) == []


def test_a_replication_controller_is_read() -> None:
    """A kind the pack used to pass silently; now its pods are judged like a ReplicaSet's."""
    template = {"metadata": {"labels": {"gpulab.io/tenant": "tenant-a"}}, "spec": pod("x", SHARE).props["spec"]}
    rc = resource(
        "kubernetes:core/v1:ReplicationController",
        {"metadata": {"name": "rc", "namespace": "gpu-workloads"}, "spec": {"replicas": 4, "template": template}},
        name="rc",
    )
    messages = [m for m, _ in gpu_violations([inventory_configmap(), rc])]
    assert len(messages) == 1 and "ReplicationController/gpu-workloads/rc#4" in messages[0], messages
    assert "CardInsufficientCore" in messages[0]


def test_other_stack_uses_policy_config_and_default_tenant() -> None:
    config = {
        "tenants": {"team-x": {"cards": [{"model": "L4", "count": 1}], "limits": {"gpumem": 10000}}},
        "defaultTenant": "team-x",
    }
    ok = pod("fits", {"nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "20"}, tenant=None)
    assert gpu_violations([ok], config) == []
    too_big = pod("big", {"nvidia.com/gpumem": "12000"}, tenant=None)
    messages = [m for m, _ in gpu_violations([too_big], config)]
    assert any("PodGpuLimitExceeded" in m and "tenant team-x" in m for m in messages)
    explicit = {"tenants": {"team-y": {"cards": [{"type": "NVIDIA-T4", "memoryMb": 15360}]}}, "defaultTenant": "team-y"}
    messages = [m for m, _ in gpu_violations([pod("t4", {"nvidia.com/gpumem": "16000"}, tenant=None)], explicit)]
    assert any("CardInsufficientMemory" in m and "NVIDIA-T4" in m for m in messages)


def test_invalid_policy_config_is_reported() -> None:
    violations = gpu_violations([pod("x", SHARE)], {"tenants": {"t": {"cards": [{"model": "A200"}]}}})
    assert any("invalid policy config" in m and "unknown GPU model 'A200'" in m for m, _ in violations)


def test_unknown_tenant_is_reported() -> None:
    messages = [m for m, _ in gpu_violations([inventory_configmap(), pod("elsewhere", SHARE, tenant="tenant-z")])]
    assert any("tenant tenant-z has no declared GPU cards" in m for m in messages)


def test_non_gpu_workloads_are_ignored() -> None:
    plain = resource("kubernetes:core/v1:Pod", {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "n"}]}})
    assert gpu_violations([plain]) == []


def test_unreadable_quantity_is_reported() -> None:
    messages = [m for m, _ in gpu_violations([inventory_configmap(), pod("odd", {"nvidia.com/gpumem": "lots"})])]
    assert any("InvalidGpuRequest" in m and "'lots'" in m for m in messages)


# Lab safety policies


def tcp(version: str, tenant: str = "tenant-a", annotations: dict | None = None) -> dict:
    return {
        "metadata": {"name": tenant, "labels": {"gpulab.io/tenant": tenant}, "annotations": annotations or {}},
        "spec": {
            "kubernetes": {"version": version, "kubelet": {}},
            "controlPlane": {"service": {"serviceType": "LoadBalancer"}},
        },
    }


def container(image: str, tenant: str = "tenant-a") -> object:
    return resource(
        "docker:index/container:Container",
        {
            "image": "sha256:" + "ab" * 32,
            "labels": [
                {"label": "gpulab.io/tenant", "value": tenant},
                {"label": "gpulab.io/node-image", "value": image},
            ],
        },
        name=f"{tenant}-worker-node",
    )


TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def test_worker_version_must_match_its_control_plane() -> None:
    control_plane = resource(TCP_TYPE, tcp("v1.36.4"), name="tenant-a-tcp")
    good = container("kindest/node:v1.36.4@sha256:" + "0" * 64)
    bad = container("kindest/node:v1.35.1@sha256:" + "0" * 64)
    assert run_stack_policy("worker-version-matches-control-plane", stack_args([control_plane, good])) == []
    violations = run_stack_policy("worker-version-matches-control-plane", stack_args([control_plane, bad]))
    assert len(violations) == 1 and "runs image tag v1.35.1" in violations[0][0] and "v1.36.4" in violations[0][0]


def test_tenant_version_within_kamaji_support() -> None:
    assert run_resource_policy("tenant-version-supported-by-kamaji", resource_args(TCP_TYPE, tcp("v1.36.4"))) == []
    violations = run_resource_policy("tenant-version-supported-by-kamaji", resource_args(TCP_TYPE, tcp("v1.37.0")))
    assert violations and "accepts up to v1.36.x" in violations[0]
    newer = tcp("v1.37.0", annotations={"gpulab.io/kamaji-max-kubernetes": "v1.37"})
    assert run_resource_policy("tenant-version-supported-by-kamaji", resource_args(TCP_TYPE, newer)) == []


def test_metallb_pool_must_be_ipv4() -> None:
    pool_type = "kubernetes:metallb.io/v1beta1:IPAddressPool"
    good = {"spec": {"addresses": ["172.30.255.239-172.30.255.254", "172.31.0.0/28"]}}
    assert run_resource_policy("metallb-pool-ipv4", resource_args(pool_type, good)) == []
    glued = {"spec": {"addresses": ["fc00:f853:ccd:e793::1172.18.0.1.255.200-fc00:f853:ccd:e793::1172.18.0.1.255.250"]}}
    assert run_resource_policy("metallb-pool-ipv4", resource_args(pool_type, glued))
    ipv6 = {"spec": {"addresses": ["fc00::10-fc00::20"]}}
    assert "is not IPv4" in run_resource_policy("metallb-pool-ipv4", resource_args(pool_type, ipv6))[0]


def test_no_gpu_on_label_on_a_mock_node() -> None:
    patch_type = "kubernetes:core/v1:NodePatch"
    labelled = resource(patch_type, {"metadata": {"name": "tenant-a-worker", "labels": {"gpu": "on"}}}, name="p")
    violations = run_stack_policy("mock-gpu-node-not-labelled-gpu-on", stack_args([inventory_configmap(), labelled]))
    assert len(violations) == 1 and "mock GPU node" in violations[0][0]
    other = resource(patch_type, {"metadata": {"name": "tenant-a-worker", "labels": {"team": "ml"}}}, name="p")
    assert run_stack_policy("mock-gpu-node-not-labelled-gpu-on", stack_args([inventory_configmap(), other])) == []


@pytest.mark.parametrize(
    ("name", "level"),
    [
        ("gpu-request-limits", "mandatory"),
        ("gpu-placement-order", "advisory"),
        ("mock-gpu-node-not-labelled-gpu-on", "mandatory"),
        ("worker-version-matches-control-plane", "mandatory"),
        ("tenant-version-supported-by-kamaji", "mandatory"),
        ("metallb-pool-ipv4", "mandatory"),
    ],
)
def test_enforcement_levels(name: str, level: str) -> None:
    from policy_harness import policy

    assert policy(name).enforcement_level.value == level


def test_gpumem_zero_takes_the_whole_card() -> None:
    """HAMi reads gpumem: 0 as 100 % of the card; two such pods cannot share tenant-a's A100."""
    zero = {"nvidia.com/gpumem": "0", "nvidia.com/gpucores": "10"}
    messages = [m for m, _ in gpu_violations([inventory_configmap(), pod("z1", zero), pod("z2", zero)])]
    assert any("CardInsufficientMemory" in m and "z2" in m and "asks 81920 MB" in m for m in messages), messages


def test_card_uuid_selectors() -> None:
    on_second = {"annotations": {"nvidia.com/use-gpuuuid": "GPU-MOCK-tenant-b-1"}}
    big = {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "10"}
    resources = [
        inventory_configmap(TENANT_B),
        pod("first", big, tenant="tenant-b", namespace="batch", metadata=on_second),
        pod("second", big, tenant="tenant-b", namespace="batch", metadata=on_second),
    ]
    messages = [m for m, _ in gpu_violations(resources)]
    assert any("second" in m and "CardUuidMismatch" in m and "CardInsufficientMemory" in m for m in messages), messages
    avoid = {"annotations": {"nvidia.com/nouse-gpuuuid": "GPU-MOCK-tenant-b-1"}}
    resources[2] = pod("second", big, tenant="tenant-b", namespace="batch", metadata=avoid)
    assert gpu_violations(resources) == []


def test_current_usage_in_policy_config() -> None:
    config = {
        "tenants": {
            "team-x": {
                "cards": [{"model": "A100-80GB", "count": 1}],
                "usage": {"cards": {"0": {"slots": 3, "memoryMb": 60000, "cores": 90}}},
            }
        },
        "defaultTenant": "team-x",
    }
    share = {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}
    messages = [m for m, _ in gpu_violations([pod("fourth", share, tenant=None)], config)]
    assert any("CardInsufficientCore" in m and "next to what already runs" in m for m in messages), messages
    bad = {"tenants": {"t": {"cards": [{"model": "L4"}], "usage": {"cards": {"3": {"slots": 1}}}}}}
    messages = [m for m, _ in gpu_violations([pod("x", share, tenant=None)], bad)]
    assert any("usage.cards has card 3" in m for m in messages), messages


def test_unknown_values_in_preview_are_not_read() -> None:
    """On a first preview a chart's values may be unknown; the pack must not trip on them (reading an unknown
    through the analyzer's proxy raises, and `in` reads)."""
    from pulumi_policy.proxy import unknown_checking_proxy

    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown sentinel
    for values in (unknown, {"image": unknown, "gpu": {"nvidia.com/gpu": 1}}, {"list": [unknown, {"a": unknown}]}):
        props = unknown_checking_proxy({"chart": "x", "values": values})
        chart = resource("kubernetes:helm.sh/v3:Release", props, name="x")
        found = [m for m, _ in gpu_violations([inventory_configmap(), chart])]
        gpu = isinstance(values, dict) and "gpu" in values
        assert [("GpuWorkloadNotChecked" in m) for m in found] == ([True] if gpu else []), found
