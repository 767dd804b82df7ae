"""Each policy of the pack, with constructed CrossGuard arguments: a pass and each violation."""

from __future__ import annotations

import json

import pytest
from lab_harness import lab_config
from policy_harness import resource, resource_args, run_resource_policy, run_stack_policy, stack_args

from components.config import parse_config
from components.mock_gpu_node import inventory_document

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


def test_tenant_from_the_lab_provider_name() -> None:
    stray = pod("via-provider", SHARE, tenant=None)
    stray = resource(stray.resource_type, stray.props, name="via-provider", provider="tenant-a-provider")
    assert gpu_violations([inventory_configmap(), stray]) == []


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
