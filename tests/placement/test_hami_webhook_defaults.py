"""HAMi v2.8.3's webhook defaults and resource reading (its Test_MutateAdmission and Test_Resourcereqs
vectors) against gpulab's reading of a container's limits (placement.workloads.container_request): the part
of HAMi's semantics that starts from a manifest, beside the hami/ package's card and node rules."""

from __future__ import annotations

import pytest

from hami.cards import NO_PERCENTAGE
from placement.workloads import container_request

DEVICE_TEST = "pkg/device/nvidia/device_test.go"
CONFIG_TEST = "pkg/scheduler/config/config_test.go"


# --- Request normalisation: TestMutateAdmissionDefaultsExclusiveCore, Test_MutateAdmission, Test_Resourcereqs

NORMALISE = [
    # (test, case, limits, requests, want (nums, memreq, mem_percentage, cores) or None)
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "exclusive via percentage",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"},
        {},
        (1, 0, 100, 100),
    ),
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "exclusive via percentage in requests only",
        {},
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"},
        (1, 0, 100, 100),
    ),
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "non-exclusive percentage",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"},
        {},
        (1, 0, 50, 0),
    ),
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "no memory fields defaults to exclusive",
        {"nvidia.com/gpu": "1"},
        {},
        (1, 0, 100, 100),
    ),
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "explicit cores remains unchanged",
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "70"},
        {},
        (1, 0, 100, 70),
    ),
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "explicit cores in requests remains unchanged",
        {},
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "55"},
        (1, 0, 100, 55),
    ),
    (
        "TestMutateAdmissionDefaultsExclusiveCore",
        "memory size present treated as shareable",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"},
        {},
        (1, 8192, NO_PERCENTAGE, 0),
    ),
    (
        "Test_MutateAdmission",
        "having ResourceName set to resource limits.",
        {"nvidia.com/gpu": "1"},
        {},
        (1, 0, 100, 100),
    ),
    (
        "Test_MutateAdmission",
        "don't having ResourceName, but having ResourceCores set to resource limits",
        {"nvidia.com/gpucores": "1"},
        {},
        (1, 0, 100, 1),
    ),
    (
        "Test_MutateAdmission",
        "don't having ResourceName, but having ResourceMem set to resource limits",
        {"nvidia.com/gpumem": "1"},
        {},
        (1, 1, NO_PERCENTAGE, 0),
    ),
    (
        "Test_MutateAdmission",
        "don't having ResourceName, but having ResourceMemPercentage set to resource limits",
        {"nvidia.com/gpumem-percentage": "1"},
        {},
        (1, 0, 1, 0),
    ),
    ("Test_MutateAdmission", "don't having math resources.", {}, {}, None),
    ("Test_Resourcereqs", "don't resource", {"cpu": "1"}, {}, None),
    (
        "Test_Resourcereqs",
        "one container use gpu",
        {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "1000"},
        {},
        (1, 1000, NO_PERCENTAGE, 30),
    ),
]


@pytest.mark.parametrize(
    "test, case, limits, requests, want",
    NORMALISE,
    ids=[f"{DEVICE_TEST if v[0] != 'Test_Resourcereqs' else CONFIG_TEST}::{v[0]}::{v[1]}" for v in NORMALISE],
)
def test_normalisation(test, case, limits, requests, want) -> None:
    """The webhook's defaults, then GenerateResourceRequests (chart 2.8.3: defaultMemory 0, defaultCores 0,
    defaultGPUNum 1)."""
    got = container_request({"name": "c", "resources": {"limits": limits, "requests": requests}}, "Pod/p")
    if want is None:
        assert got is None
    else:
        assert got is not None and (got.nums, got.memreq, got.mem_percentage, got.cores) == want
