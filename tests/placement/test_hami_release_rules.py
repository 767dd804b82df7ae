"""A tenant's HAMi release reaches the placement engine (placement/inventory.py builds its Cluster with
hami/releases.py `rules_for(tenant.hami_version)`), and the requests placement/workloads.py reads become what
v2.10.0's `GenerateResourceRequests` stores once hami/cards.py `resolve_request` applies v2.10.0's rules.

The GenerateResourceRequests vectors are HAMi's (Project-HAMi/HAMi tag v2.10.0, pkg/device/nvidia/device_test.go
TestGenerateResourceRequests, by case name). Their Coresreq is not compared: gpulab's reader applies the webhook's
exclusive-core default first (tests/placement/test_hami_webhook_defaults.py), the Go test calls the function alone.
"""

from __future__ import annotations

import pytest
from lab_harness import lab_config

from hami.cards import NO_PERCENTAGE, CardSpec, ContainerRequest, PodRequest, resolve_request
from hami.cluster import Candidates
from hami.releases import RULES, V2_8_3, V2_10_0, rules_for
from model.config import PodLimits, parse_config
from model.hami_releases import RELEASES
from placement.inventory import (
    TenantInventory,
    from_inventory_document,
    from_policy_config,
    from_tenant,
    parse_policy_config,
)
from placement.orders import find_stranding
from placement.workloads import WorkloadError, container_request

DEVICE_TEST = "pkg/device/nvidia/device_test.go"
LAB = parse_config(lab_config())
SIZES = (CardSpec("a100", "NVIDIA-A100-SXM4-80GB", 81920), CardSpec("l4", "NVIDIA-L4", 24576))


def test_the_rules_and_the_releases_name_the_same_versions() -> None:
    """model/hami_releases.py and hami/releases.py: one set of versions."""
    assert set(RULES) == set(RELEASES)


@pytest.mark.parametrize("version", sorted(RULES))
def test_from_tenant_builds_the_cluster_with_the_tenant_s_release(version: str) -> None:
    tenant = LAB.tenants[0].model_copy(update={"hami_version": version})
    inventory = from_tenant(tenant)
    assert inventory.hami_version == version
    cluster = inventory.cluster([])
    assert cluster.rules is rules_for(version)
    assert all(node.rules is cluster.rules for node in cluster.nodes)
    assert cluster.copy().rules is cluster.rules


def test_an_inventory_document_and_a_policy_config_name_the_release() -> None:
    document = {"tenant": "t", "cards": [{"id": "g0", "type": "NVIDIA-L4", "memoryMb": 24576}]}
    assert from_inventory_document(document).hami_version == "v2.8.3"  # written before releases were named
    assert from_inventory_document({**document, "hamiVersion": "v2.10.0"}).cluster([]).rules is V2_10_0
    with pytest.raises(ValueError, match=r"v2\.9\.9"):
        from_inventory_document({**document, "hamiVersion": "v2.9.9"})
    config = {"tenants": {"team": {"cards": [{"model": "L4"}], "hamiVersion": "v2.10.0"}}}
    assert from_policy_config(parse_policy_config(config))["team"].cluster([]).rules is V2_10_0
    unnamed = {"tenants": {"team": {"cards": [{"model": "L4"}]}}}
    assert from_policy_config(parse_policy_config(unnamed))["team"].hami_version == "v2.8.3"
    with pytest.raises(ValueError, match=r"invalid policy config: tenants\.team\.hamiVersion"):
        parse_policy_config({"tenants": {"team": {"cards": [{"model": "L4"}], "hamiVersion": "v2.9.9"}}})


@pytest.mark.parametrize(("version", "card"), [("v2.8.3", "a100"), ("v2.10.0", "l4")])
def test_the_tenant_s_release_decides_the_card(version: str, card: str) -> None:
    """An empty A100 and an empty L4, a 20000 MB pod, spread: v2.8.3's score counts the request (it weighs less on
    the A100); v2.10.0's does not on a card of type NVIDIA-... (gpu_policy.go ComputeScore 203-205): node order."""
    inventory = TenantInventory("t", SIZES, PodLimits(), None, (), "spread", hami_version=version)
    pod = PodRequest("Pod/ns/p", "ns", (ContainerRequest("c", 1, 20000, NO_PERCENTAGE, 30),))
    cluster = inventory.cluster([pod])
    outcome = cluster.candidates(pod, "spread", "binpack")
    assert isinstance(outcome, Candidates)
    assert cluster.card_ids(outcome.choices[0]) == [[card]]


def test_the_every_order_search_judges_with_the_tenant_s_release() -> None:
    """v2.10.0 places init containers: one bigger than the only card strands its pod in every order."""
    inventory = TenantInventory("t", SIZES[1:], PodLimits(), None, (), "spread", hami_version="v2.10.0")
    init = ContainerRequest("warmup", 1, 30000, NO_PERCENTAGE, 10)
    pod = PodRequest("Pod/ns/p", "ns", (ContainerRequest("c", 1, 1000, NO_PERCENTAGE, 10),), init_containers=(init,))
    cluster = inventory.cluster([pod])
    assert not isinstance(cluster.candidates(pod, "spread", "binpack"), Candidates)  # Cluster: refused
    assert find_stranding(cluster, [pod], "spread", "binpack").stranding is not None


# --- device_test.go TestGenerateResourceRequests, through placement/workloads.py and resolve_request ---------------

GENERATE = [
    # (case, limits, requests, want (Nums, Memreq, MemPercentagereq) or None for the empty request)
    ("gpu count only — defaults to 100% memory", {"nvidia.com/gpu": "1"}, {}, (1, 0, 100)),
    ("gpu count + explicit memory", {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4096"}, {}, (2, 4096, 101)),
    (
        "gpu count + memory percentage",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"},
        {},
        (1, 0, 50),
    ),
    (
        "gpu count + memory percentage above 100 — clamped to 100",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"},
        {},
        (1, 0, 100),
    ),
    (
        "gpu count + memory percentage beyond int32 range — clamped to 100 without wrapping",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": str((1 << 32) + 50)},
        {},
        (1, 0, 100),
    ),
    (
        "gpu count + memory percentage equal to sentinel 101 — clamped to 100",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "101"},
        {},
        (1, 0, 100),
    ),
    ("gpu count + explicit cores", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"}, {}, (1, 0, 100)),
    ("no gpu resource — returns empty request", {}, {}, None),
    ("gpu in Requests (not Limits) — falls back to Requests", {}, {"nvidia.com/gpu": "1"}, (1, 0, 100)),
    (
        "gpu count + memory percentage of 0 — treated as unset",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0"},
        {},
        (1, 0, 100),
    ),
    (
        "memory percentage of 0 in Requests — treated as unset",
        {},
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0"},
        (1, 0, 100),
    ),
    (
        "memory percentage of 0 + explicit memory — explicit memory wins",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000", "nvidia.com/gpumem-percentage": "0"},
        {},
        (1, 2000, 101),
    ),
]


@pytest.mark.parametrize(
    "case, limits, requests, want",
    GENERATE,
    ids=[f"{DEVICE_TEST}::TestGenerateResourceRequests::{v[0]}" for v in GENERATE],
)
def test_generate_resource_requests(case, limits, requests, want) -> None:
    read = container_request({"name": "c", "resources": {"limits": limits, "requests": requests}}, "Pod/p")
    if want is None:
        assert read is None
        return
    assert read is not None
    got = resolve_request(read, V2_10_0)
    assert (got.nums, got.memreq, got.mem_percentage) == want


def test_v2_8_3_keeps_the_percentage_as_given() -> None:
    """The same reading under v2.8.3: 0 % stays 0 (0 MB on every card), 150 % stays 150."""
    for percentage in ("0", "150"):
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": percentage}
        read = container_request({"name": "c", "resources": {"limits": limits}}, "Pod/p")
        assert read is not None and resolve_request(read, V2_8_3) is read
        assert read.mem_percentage == int(percentage)


def test_a_negative_percentage_never_reaches_hami() -> None:
    """TestGenerateResourceRequests "negative memory percentage — treated as unset": Kubernetes refuses a negative
    extended-resource quantity (v2.10.0's webhook refuses it before, `validateMemoryPercentage`), and so does gpulab's
    reader, as bad input; the scheduler's rule for it is not reached."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "-1"}
    with pytest.raises(WorkloadError, match="negative"):
        container_request({"name": "c", "resources": {"limits": limits}}, "Pod/p")


NOT_MODELLED = {
    f"{DEVICE_TEST}::TestGenerateResourceRequests::byte-scale memory quantity that overflows int32 is rejected, "
    "decimal-form memory request is rejected, not treated as zero": "v2.10.0 turns a gpumem beyond int32 into no "
    "request at all; gpulab's reader keeps the number and the engine says HAMi drops it (GpumemNotReadByHami): "
    "tests/placement/test_hami_v2_10_0_webhook.py",
    f"{DEVICE_TEST}::TestGenerateResourceRequests_MemoryFactor, _DefaultMemory": "memoryFactor and defaultMemory "
    "(gpulab keeps 1 and 0)",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
