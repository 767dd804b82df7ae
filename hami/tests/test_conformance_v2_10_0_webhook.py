"""Conformance with HAMi v2.10.0's admission webhook, beyond the quota (test_conformance_v2_10_0_devices.py has that):
what it refuses whatever else runs (hami/webhook.py `webhook_denial`), on the vectors of pkg/scheduler/webhook_test.go
and pkg/device/nvidia/device_test.go (Project-HAMi/HAMi tag v2.10.0, commit 4707fb02c91c), each by file, test and
case name, and on webhook.go `Handle` itself where no HAMi test covers a refusal (privileged containers, #2139; the
order of the refusals). How a pod spec becomes a `PodAdmission` (the `hasResource` vectors of Test_MutateAdmission)
is placement/workloads.py's: tests/placement/test_hami_v2_10_0_webhook.py.
"""

from __future__ import annotations

import pytest

from hami.reasons import (
    EXCEEDING_RESOURCE_QUOTA,
    INVALID_GPUMEM_PERCENTAGE,
    POD_HAS_NODE_ASSIGNED,
    PRIVILEGED_CONTAINER,
)
from hami.releases import V2_8_3, V2_10_0
from hami.tests.test_conformance_v2_10_0 import DEVICE_TEST, WEBHOOK_TEST
from hami.webhook import (
    QUOTA_DENIAL,
    PodAdmission,
    denied,
    percentage_denial,
    refusal_reason,
    webhook_denial,
)

# --- device_test.go Test_MutateAdmission_MemoryPercentageValidation ------------------------------------------------

PERCENTAGE = [
    # (case, pct, want an error): container "test" with nvidia.com/gpu 1 and the percentage in its limits
    ("percentage of 0 is accepted", 0, False),
    ("percentage of 100 is accepted", 100, False),
    ("percentage of 101 is rejected", 101, True),
    ("percentage above 100 is rejected", 150, True),
]


@pytest.mark.parametrize(
    "case, pct, want_err",
    PERCENTAGE,
    ids=[f"{DEVICE_TEST}::Test_MutateAdmission_MemoryPercentageValidation::{v[0]}" for v in PERCENTAGE],
)
def test_memory_percentage_validation(case: str, pct: int, want_err: bool) -> None:
    admission = PodAdmission((("test", pct),), has_resource=True)
    want = (INVALID_GPUMEM_PERCENTAGE, percentage_denial("test", pct)) if want_err else None
    assert webhook_denial(admission, V2_10_0) == want
    assert webhook_denial(admission, V2_8_3) is None, "v2.8.3's MutateAdmission validates no percentage"


def test_the_percentage_message_is_the_api_server_s() -> None:
    """device.go `validateMemoryPercentage` 389-396 (`%s`, `%d`, `%s`), answered with `admission.Errored`, which the
    API server wraps as for any refusal (apiserver webhook errors.go `ToStatusErr`)."""
    assert percentage_denial("init", 101) == (
        'admission webhook "vgpu.hami.io" denied the request: invalid nvidia.com/gpumem-percentage value 101 in '
        "container init: must be an integer between 0 and 100"
    )


# --- webhook_test.go TestPodHasNodeName, TestHandle, TestNonGPUPodAllowedAdmission --------------------------------

HANDLE = [
    # (test, admission (as placement/workloads.py reads the test's pod), denied)
    ("TestPodHasNodeName", PodAdmission(has_resource=True, node_name="test-node"), True),
    ("TestHandle", PodAdmission(has_resource=True), False),
    ("TestNonGPUPodAllowedAdmission", PodAdmission(), False),  # cpu and memory only: no hasResource
    ("TestSchedulerNameEmptyNoOverwrite", PodAdmission(has_resource=True), False),
]


@pytest.mark.parametrize("test, admission, want_denied", HANDLE, ids=[f"{WEBHOOK_TEST}::{v[0]}" for v in HANDLE])
def test_handle(test: str, admission: PodAdmission, want_denied: bool) -> None:
    denial = webhook_denial(admission, V2_10_0)
    assert (denial is not None) is want_denied
    if want_denied:
        assert denial == (
            POD_HAS_NODE_ASSIGNED,
            'admission webhook "vgpu.hami.io" denied the request: pod has node assigned',
        )


# --- webhook.go `Handle` 71-113 (no HAMi test): privileged containers, and which refusal comes first ---------------


def test_a_privileged_container_is_refused_only_in_a_pod_with_a_gpu_resource() -> None:
    """`hasPrivileged && hasResource` (99-102): the privileged container need not ask for the GPU itself."""
    assert webhook_denial(PodAdmission(privileged="debug", has_resource=True), V2_10_0) == (
        PRIVILEGED_CONTAINER,
        denied("container debug is privileged"),
    )
    assert webhook_denial(PodAdmission(privileged="debug"), V2_10_0) is None, "no GPU resource: allowed"
    assert webhook_denial(PodAdmission(privileged="debug", has_resource=True), V2_8_3) is None


def test_the_first_refusal_in_handle_s_order_is_the_one_given() -> None:
    """Percentages are validated while the containers are walked (74-98), before the privileged check (99-102) and
    the node name (104-112); init containers come first (74-85), so their percentage is the one named."""
    everything = PodAdmission((("init", 150), ("app", 200)), privileged="debug", has_resource=True, node_name="n")
    assert webhook_denial(everything, V2_10_0) == (INVALID_GPUMEM_PERCENTAGE, percentage_denial("init", 150))
    no_percentage = PodAdmission((("app", 50),), privileged="debug", has_resource=True, node_name="n")
    assert webhook_denial(no_percentage, V2_10_0) == (PRIVILEGED_CONTAINER, denied("container debug is privileged"))
    assert webhook_denial(PodAdmission(has_resource=True, node_name="n"), V2_10_0) == (
        POD_HAS_NODE_ASSIGNED,
        denied("pod has node assigned"),
    )


def test_a_percentage_is_validated_in_every_container_even_without_a_gpu_resource() -> None:
    """`validateMemoryPercentage` runs first in `MutateAdmission` (349-351), for every container of the pod."""
    assert webhook_denial(PodAdmission((("sidecar", 101),)), V2_10_0) == (
        INVALID_GPUMEM_PERCENTAGE,
        percentage_denial("sidecar", 101),
    )


def test_an_unread_pod_is_never_refused() -> None:
    assert webhook_denial(None, V2_10_0) is None


def test_each_refusal_is_read_back_by_its_name() -> None:
    """`refusal_reason` reads what `webhook_denial` and `quota_refusal` write, inside kubectl's words too (the
    quota's as kubectl printed it in the real differential, docs/process-lab.md); another webhook answer, or
    gpulab's admission policy's, is none of them."""
    refused = [
        webhook_denial(PodAdmission((("init-0", 150),)), V2_10_0),
        webhook_denial(PodAdmission((("c1", -5),)), V2_10_0),
        webhook_denial(PodAdmission(privileged="c0", has_resource=True), V2_10_0),
        webhook_denial(PodAdmission(has_resource=True, node_name="n"), V2_10_0),
        (EXCEEDING_RESOURCE_QUOTA, QUOTA_DENIAL),
    ]
    assert [name for name, _ in filter(None, refused)] == [
        INVALID_GPUMEM_PERCENTAGE,
        INVALID_GPUMEM_PERCENTAGE,
        PRIVILEGED_CONTAINER,
        POD_HAS_NODE_ASSIGNED,
        EXCEEDING_RESOURCE_QUOTA,
    ]
    for reason, message in filter(None, refused):
        assert refusal_reason(message) == reason, message
        assert refusal_reason(f'Error from server (Forbidden): error when creating "p1.json": {message}\n') == reason
    assert refusal_reason(denied("pod has no containers")) is None
    policy = "ValidatingAdmissionPolicy 'gpulab-gpu-requests' with binding 'x' denied request: PrivilegedContainer: ..."
    assert refusal_reason(policy) is None


# --- What the engine does not express -----------------------------------------------------------------------------

NOT_MODELLED = {
    f"{WEBHOOK_TEST}::TestPodHasDifferentScheduler": "a pod naming another scheduler passes the webhook unjudged "
    "(Handle 64-69); gpulab's admission policy refuses a GPU pod HAMi's webhook did not handle anyway",
    f"{WEBHOOK_TEST}::TestEmptyContainersDenied": "a pod without containers: no GPU pod (the API server refuses it)",
    f"{DEVICE_TEST}::Test_MutateAdmission_MemoryPercentageValidation (negative)": "not in HAMi's table; a negative "
    "percentage is refused by gpulab's reader as bad input (the API server refuses it too, after the webhook's words)",
    "pkg/scheduler/webhook.go Handle (a pod whose only HAMi resource is nvidia.com/gpu: 0)": "HAMi's webhook finds a "
    "resource in it (its privileged and nodeName refusals apply), the engine no GPU pod: not judged",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
