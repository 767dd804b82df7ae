"""The acceptance suite's helpers against a fake Kubernetes client, and its skip when no lab is up."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException
from shared_data import ROOT

from tests.acceptance.helpers import (
    WaitTimeout,
    disposable_namespace,
    gpu_pod,
    hami_reasons,
    image_pull_problem,
    pod_events,
    wait_until,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_until_returns_the_first_truthy_value() -> None:
    clock = FakeClock()
    answers = iter([None, False, "ready"])
    assert wait_until(lambda: next(answers), 10, "x", clock=clock.time, sleep=clock.sleep) == "ready"
    assert clock.now == 4.0


def test_wait_until_names_what_it_waited_for() -> None:
    clock = FakeClock()
    with pytest.raises(WaitTimeout, match=r"timed out after 5s waiting for the node to be Ready \(last seen: False\)"):
        wait_until(lambda: False, 5, "the node to be Ready", clock=clock.time, sleep=clock.sleep)


def test_wait_until_treats_api_errors_as_not_yet() -> None:
    clock = FakeClock()
    calls = {"n": 0}

    def check():
        calls["n"] += 1
        if calls["n"] < 3:
            raise ApiException(status=404, reason="Not Found")
        return True

    assert wait_until(check, 10, "x", clock=clock.time, sleep=clock.sleep) is True
    with pytest.raises(WaitTimeout, match="API error 404"):
        wait_until(
            lambda: (_ for _ in ()).throw(ApiException(status=404, reason="Not Found")),
            1,
            "y",
            clock=clock.time,
            sleep=clock.sleep,
        )


def event(reason: str, message: str, second: int) -> SimpleNamespace:
    return SimpleNamespace(
        reason=reason,
        message=message,
        last_timestamp=second,
        event_time=None,
        metadata=SimpleNamespace(creation_timestamp=second),
    )


class FakeCore:
    """The CoreV1Api calls the helpers make."""

    def __init__(self, events=None, stuck: bool = False) -> None:
        self.namespaces: set[str] = set()
        self.deleted: list[str] = []
        self.events = events or []
        self.stuck = stuck
        self.event_queries: list[tuple[str, str]] = []

    def create_namespace(self, body) -> None:
        self.namespaces.add(body["metadata"]["name"])

    def delete_namespace(self, name) -> None:
        self.deleted.append(name)
        if not self.stuck:
            self.namespaces.discard(name)

    def read_namespace(self, name):
        if name not in self.namespaces:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(metadata=SimpleNamespace(name=name))

    def list_namespaced_event(self, namespace, field_selector):
        self.event_queries.append((namespace, field_selector))
        return SimpleNamespace(items=self.events)


def test_event_reasons_of_a_pending_gpu_pod() -> None:
    core = FakeCore(
        events=[
            event("FailedScheduling", "0/1 nodes are available: 1 node(s) didn't fit.", 3),
            event("FilteringFailed", "1 nodes CardInsufficientCore(tenant-a-worker)", 2),
            event("Scheduled", "nothing to see", 1),
        ]
    )
    events = pod_events(core, "ns", "tc06")
    assert core.event_queries == [("ns", "involvedObject.name=tc06")]
    assert [reason for reason, _ in events] == ["Scheduled", "FilteringFailed", "FailedScheduling"]
    assert hami_reasons(events) == {"CardInsufficientCore"}


def test_default_scheduler_failures_are_not_hami_reasons() -> None:
    """The fail-open symptom: `Insufficient nvidia.com/gpucores` from default-scheduler is not HAMi's verdict."""
    events = [("FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpucores.")]
    assert hami_reasons(events) == set()


def test_disposable_namespace_is_removed_even_when_the_test_fails() -> None:
    core = FakeCore()
    with pytest.raises(RuntimeError), disposable_namespace(core) as namespace:
        assert namespace in core.namespaces
        raise RuntimeError("the test failed")
    assert core.deleted == [namespace] and namespace not in core.namespaces


def test_disposable_namespace_stuck_in_terminating_fails_loudly() -> None:
    core = FakeCore(stuck=True)
    clock = FakeClock()
    with (
        pytest.raises(WaitTimeout, match=r"namespace gpulab-acceptance-\w+ to be deleted"),
        disposable_namespace(core, timeout=6, clock=clock.time, sleep=clock.sleep),
    ):
        pass


def test_gpu_pod_leaves_the_scheduler_to_hamis_webhook() -> None:
    pod = gpu_pod("tc03", "busybox", gpumem=1000, gpucores=5)
    assert "schedulerName" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpumem": "1000",
        "nvidia.com/gpucores": "5",
    }


@pytest.mark.integration
def test_acceptance_suite_is_collected_and_skips_with_a_reason() -> None:
    """Without `make verify` (or without a live lab) every case skips with one line, none passes."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/acceptance", "-o", "addopts=", "-rs", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "GPULAB_ACCEPTANCE"},
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "26 skipped" in result.stdout and "passed" not in result.stdout
    )  # TC-01..10, TC-11 (3), TC-12 (2), TC-13, TC-14..18, TC-19 (2: one per HAMi release), TC-20..22
    assert "acceptance cases run against a live lab with `make verify`" in result.stdout


@pytest.mark.integration
def test_acceptance_without_a_lab_fails_and_says_how_to_get_one(tmp_path) -> None:
    """The live suite asked for (GPULAB_ACCEPTANCE=1) with no Pulumi CLI / no stack: every case fails, with the
    reason and the command to run; never a green run without a lab."""
    env = {**{k: v for k, v in os.environ.items()}, "GPULAB_ACCEPTANCE": "1", "PATH": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/acceptance", "-o", "addopts=", "-rs", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "skipped" not in result.stdout and "passed" not in result.stdout
    assert "no live gpulab lab: the Pulumi CLI is not on PATH: run `make up`" in result.stdout


@pytest.mark.integration
@pytest.mark.parametrize(
    ("fake_pulumi", "line"),
    [
        (None, "the Pulumi CLI is not on PATH: run `make up` (make tools first for a process-mode stack)"),
        ("echo 'error: no stack named dev found' >&2; exit 255", "cannot read outputs of stack 'dev'"),
        ("echo '{}'", "stack 'dev' has no lab outputs (never deployed, or destroyed): run `make up`"),
        # Whichever tenant the checkout's Pulumi.dev.yaml names first (users edit it): its output is missing.
        ('echo \'{"management_kubeconfig": "x"}\'', "_kubeconfig is missing: run `make up`"),
    ],
    ids=["no-cli", "no-stack", "destroyed", "missing-output"],
)
def test_make_verify_stops_with_one_line_without_a_lab(tmp_path, fake_pulumi: str | None, line: str) -> None:
    """`make verify`'s first step (python -m model.stack STACK): exit 1, one line naming what is missing."""
    if fake_pulumi is not None:
        (tmp_path / "pulumi").write_text(f"#!/bin/sh\n{fake_pulumi}\n")
        (tmp_path / "pulumi").chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "model.stack", "dev"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[gpulab] verify: no lab to verify: "), result.stderr
    assert line in lines[0]


@pytest.mark.integration
def test_the_hint_without_a_lab_names_the_stack_it_was_given(tmp_path) -> None:
    """`make verify|report|check LIVE=1 STACK=sim` without a lab pointed at `make up`, which builds
    the Docker lab (and pulls images); the hint carries the stack."""
    (tmp_path / "pulumi").write_text("#!/bin/sh\necho '{}'\n")
    (tmp_path / "pulumi").chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "model.stack", "sim"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        "stack 'sim' has no lab outputs (never deployed, or destroyed): run `make up STACK=sim`"
    ), result.stderr


def pod_waiting(reason: str, message: str, image: str = "localhost/gpulab/busybox:1.35.0") -> SimpleNamespace:
    """A pod as the Kubernetes client reads it back while a container waits (V1ContainerStateWaiting)."""
    waiting = SimpleNamespace(reason=reason, message=message)
    container = SimpleNamespace(image=image, state=SimpleNamespace(waiting=waiting))
    return SimpleNamespace(
        metadata=SimpleNamespace(namespace="ns", name="p"),
        spec=SimpleNamespace(node_name="tenant-a-worker"),
        status=SimpleNamespace(init_container_statuses=None, container_statuses=[container]),
    )


def test_a_pod_whose_node_lacks_its_image_is_a_lab_error_naming_node_and_image() -> None:
    """Boundary: the kubelet's waiting reasons for an image it does not hold (ErrImageNeverPull under
    imagePullPolicy: Never, ImagePullBackOff after a refused pull)."""
    message = 'Container image "localhost/gpulab/busybox:1.35.0" is not present with pull policy of Never'
    problem = image_pull_problem(pod_waiting("ErrImageNeverPull", message))
    assert problem == (
        "lab error: node tenant-a-worker does not hold image localhost/gpulab/busybox:1.35.0 of pod ns/p "
        f"(ErrImageNeverPull: {message}); every image a node runs must be in its containerd before it is needed "
        "(make node-image, or the lab's image loader)"
    )
    assert "ImagePullBackOff" in (image_pull_problem(pod_waiting("ImagePullBackOff", "Back-off pulling")) or "")


def test_a_pod_still_creating_its_container_is_no_pull_problem() -> None:
    assert image_pull_problem(pod_waiting("ContainerCreating", "")) is None
