"""Helpers of the acceptance suite: waiting on conditions, HAMi event reasons, disposable namespaces.

Written against the Kubernetes Python client's CoreV1Api; tested offline with a fake of it
(tests/test_acceptance_helpers.py).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

from model.kube_objects.workload_manifests import IDLE_COMMAND

T = TypeVar("T")
HAMI_REASONS = {
    "CardNotHealth",
    "CardCordoned",
    "CardTypeMismatch",
    "NumaNotFit",
    "CardUuidMismatch",
    "CardTimeSlicingExhausted",
    "ExclusiveDeviceAllocateConflict",
    "ResourceQuotaNotFit",
    "CardInsufficientMemory",
    "CardInsufficientCore",
    "CardComputeUnitsExhausted",
    "AllocatedCardsInsufficientRequest",
    "NodeInsufficientDevice",
    "NodeUnfitPod",
}
SUITE_LABEL = "gpulab.io/acceptance"


class WaitTimeout(AssertionError):
    """A condition did not hold by its deadline."""


def wait_until(
    check: Callable[[], T],
    timeout: float,
    what: str,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Poll `check` until it returns something truthy and return that; fail naming `what` at the deadline.

    `check` may raise ApiException (for example 404 while an object is being created): that counts
    as not yet, and the last error is part of the timeout message."""
    deadline = clock() + timeout
    last: Any = None
    while True:
        try:
            result = check()
            if result:
                return result
            last = result
        except ApiException as error:
            last = f"API error {error.status}: {error.reason}"
        if clock() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what} (last seen: {last!r})")
        sleep(interval)


# A container waiting in one of these states wants an image its node does not hold (kubelet's images/types.go).
PULL_STATES = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}


def image_pull_problem(pod: Any) -> str | None:
    """What a pod waits for when its node lacks one of its images, as a lab error; None otherwise. Every image a
    lab's node runs is in its containerd before it is needed: a pull is the lab's fault, never a wait."""
    status = pod.status
    for container in [*(status.init_container_statuses or []), *(status.container_statuses or [])]:
        waiting = container.state.waiting if container.state else None
        if waiting and waiting.reason in PULL_STATES:
            return (
                f"lab error: node {pod.spec.node_name} does not hold image {container.image} of pod "
                f"{pod.metadata.namespace}/{pod.metadata.name} ({waiting.reason}: {waiting.message}); every image a "
                "node runs must be in its containerd before it is needed (make node-image, or the lab's image loader)"
            )
    return None


def pod_events(core, namespace: str, pod: str) -> list[tuple[str, str]]:
    """(reason, message) of the events about one pod, oldest first."""
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
    events = sorted(events, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp or 0)
    return [(event.reason or "", event.message or "") for event in events]


def hami_reasons(events: list[tuple[str, str]]) -> set[str]:
    """HAMi reason names in FilteringFailed events, e.g. `1 nodes CardInsufficientCore(tenant-a-worker)`."""
    found: set[str] = set()
    for reason, message in events:
        if reason == "FilteringFailed" or any(name in message for name in HAMI_REASONS):
            found.update(word for word in re.findall(r"[A-Z][A-Za-z]+", message) if word in HAMI_REASONS)
    return found


def suite_pod(name: str, image: str, resources: dict, **spec: Any) -> dict:
    """A pod of the suite that idles, with `resources` for its one container and `spec` beside it."""
    container = {"name": "gpu", "image": image, "command": IDLE_COMMAND, "resources": resources}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {SUITE_LABEL: "true"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container], **spec},
    }


def gpu_pod(
    name: str, image: str, gpumem: int | None = None, gpucores: int | None = None, gpus: int | None = None
) -> dict:
    """A GPU pod that leaves schedulerName to HAMi's webhook (so the webhook path is exercised)."""
    limits = {}
    if gpus is not None:
        limits["nvidia.com/gpu"] = str(gpus)
    if gpumem is not None:
        limits["nvidia.com/gpumem"] = str(gpumem)
    if gpucores is not None:
        limits["nvidia.com/gpucores"] = str(gpucores)
    return suite_pod(name, image, {"limits": limits})


def claim_pod(name: str, image: str, template: str) -> dict:
    """A pod asking its card through a claim made from `template` (a DRA tenant's)."""
    claims = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return suite_pod(name, image, {"claims": [{"name": "gpu"}]}, resourceClaims=claims)


def tenants_sharing(lab: Any, sharing: str) -> list:
    """The stack's tenants whose cards `sharing` (hami or dra) shares; the test skips, in one line, without any."""
    import pytest

    found = [tenant for tenant in lab.config.tenants if tenant.gpu_sharing == sharing]
    if not found:
        pytest.skip(f"no tenant of this stack shares its cards through {sharing} (gpuSharing: {sharing})")
    return found


@contextmanager
def disposable_namespace(core, prefix: str = "gpulab-acceptance", timeout: float = 180, **wait: Any) -> Iterator[str]:
    """A namespace for one test's pods, deleted afterwards even when the test fails, and waited on
    until it is really gone so the next run starts clean."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {SUITE_LABEL: "true"}}})
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise

        def gone() -> bool:
            try:
                core.read_namespace(name)
            except ApiException as error:
                if error.status == 404:
                    return True
                raise
            return False

        wait_until(gone, timeout, f"namespace {name} to be deleted", **wait)
