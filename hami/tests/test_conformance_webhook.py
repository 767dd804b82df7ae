"""Conformance with HAMi v2.8.3's admission webhook: what it refuses whatever else runs (hami/webhook.py
`webhook_denial`), on the vectors of pkg/scheduler/webhook_test.go (Project-HAMi/HAMi tag v2.8.3, commit
8f039ad22bfc14970e2ea557f24c411c34203079), each by test name, and on pkg/scheduler/webhook.go `Handle` (52-105)
itself where no HAMi test covers a case. Its one refusal is "pod has node assigned" (89-98), for a pod it handles
(its schedulerName empty or default-scheduler, 63-68, with the chart's forceOverwriteDefaultScheduler true) in whose
spec.containers it finds a GPU resource, skipping a privileged one (70-87). How a pod spec becomes a `PodAdmission`
is placement/workloads.py's: tests/placement/test_hami_v2_8_3_webhook.py. v2.10.0's webhook:
test_conformance_v2_10_0_webhook.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hami.cards import PodAdmission
from hami.reasons import POD_HAS_NODE_ASSIGNED
from hami.releases import V2_8_3
from hami.webhook import denied, webhook_denial

WEBHOOK_TEST = "pkg/scheduler/webhook_test.go"
REFUSED = (POD_HAS_NODE_ASSIGNED, 'admission webhook "vgpu.hami.io" denied the request: pod has node assigned')
GPU = PodAdmission(has_resource=True, app_resource=True)  # a GPU limit in an unprivileged app container

# --- webhook_test.go TestHandle (36-93), TestPodHasNodeName (95-170), TestPodHasDifferentScheduler (172-242) --------

HANDLE = [
    # (test, admission as placement/workloads.py reads the test's pod, denied)
    ("TestHandle", GPU, False),  # nvidia.com/gpu 1, no node name: allowed
    ("TestPodHasNodeName", PodAdmission(has_resource=True, app_resource=True, node_name="test-node"), True),
    ("TestPodHasDifferentScheduler", replace(GPU, scheduler_name="different-scheduler"), False),
]


@pytest.mark.parametrize("test, admission, want_denied", HANDLE, ids=[f"{WEBHOOK_TEST}::{v[0]}" for v in HANDLE])
def test_handle(test: str, admission: PodAdmission, want_denied: bool) -> None:
    assert webhook_denial(admission, V2_8_3) == (REFUSED if want_denied else None)


def test_the_message_is_the_api_server_s() -> None:
    """webhook.go 96 `admission.Denied("pod has node assigned")`, as the API server wraps a webhook's refusal."""
    assert REFUSED[1] == denied("pod has node assigned")


# --- webhook.go `Handle` (no HAMi test): which pods it handles, where it finds a GPU resource ---------------------


def test_a_pod_naming_a_scheduler_other_than_default_scheduler_passes_untouched_hami_scheduler_included() -> None:
    """63-68: `SchedulerName != "" && SchedulerName != "default-scheduler" || !Force && (...)`, Go's && binding
    tighter than ||: with Force (the chart's and the flag's default, cmd/scheduler/main.go 82) any other name
    returns `admission.Allowed` before the containers are walked; v2.10.0 parenthesises it (its 64-69)."""
    node = "tenant-b-worker"
    for name, refused in (("", True), ("default-scheduler", True), ("hami-scheduler", False), ("other", False)):
        admission = PodAdmission(has_resource=True, app_resource=True, node_name=node, scheduler_name=name)
        assert webhook_denial(admission, V2_8_3) == (REFUSED if refused else None), name


def test_only_an_unprivileged_app_container_s_gpu_resource_counts() -> None:
    """70-87: the loop walks spec.containers (no init containers) and `continue`s past a privileged one before
    `MutateAdmission`, so a GPU resource found only there (has_resource) leaves `hasResource` false: no refusal."""
    assert webhook_denial(PodAdmission(has_resource=True, node_name="n"), V2_8_3) is None
    assert webhook_denial(PodAdmission(has_resource=True, app_resource=True, node_name="n"), V2_8_3) == REFUSED
    assert webhook_denial(PodAdmission(node_name="n"), V2_8_3) is None, "no GPU resource: allowed"


def test_v2_8_3_refuses_nothing_else() -> None:
    """No percentage check, no privileged refusal (its device.go `MutateAdmission` 342-379 never returns an error);
    the quota is not checked at create (hami/webhook.py `quota_refusal`)."""
    everything = PodAdmission((("init", 150), ("app", 200)), privileged="debug", has_resource=True, app_resource=True)
    assert webhook_denial(everything, V2_8_3) is None
    assert webhook_denial(replace(everything, node_name="n"), V2_8_3) == REFUSED
