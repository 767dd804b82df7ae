"""The bind-time role (process_lab/device_plugin.py) watches the pods and finishes each HAMi bound.

Boundary: kubectl in front of an API server, and the API server's PATCH. The pure parts (an event's line, what it
asks, the back-off) are checked as functions; the role itself against tests/fakes/kube-api/kubectl, which answers
as the real kubectl did (`get --raw` streaming a watch, its exit codes and messages when the stream ends, dies,
times out or is refused) and as the API server does (a list's resourceVersion, the 410 Expired ERROR event), and
its writes against tests/support/fake_kube_api.py (merge patches, 404 for an object gone). The real API server,
restarted under the role, is tests/real/test_bind_time_watch.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_kube_api import serving
from shared_data import ROOT

from process_lab.api_connection import ApiConnection
from process_lab.commands import ProcessLabError, pids_of, start_detached
from process_lab.control_plane import ControlPlane
from process_lab.device_plugin import (
    BIND_PHASE,
    NODE_LOCK,
    BindTimeRole,
    Event,
    parse_event,
    reconnect_delay,
    to_finish,
    watch_path,
)
from tests.acceptance.helpers import wait_until

FAKE_BIN = ROOT / "tests" / "fakes" / "kube-api"
NODE = "gpu-0"
LOCK = "2026-12-02T10:00:00Z,gpu-workloads,a"
WAIT = 30  # seconds for any one condition: the role's steps take well under one


def pod(name: str, phase: str | None = "allocating", node: str | None = NODE) -> dict:
    annotations = {BIND_PHASE: phase} if phase else {}
    made = {"metadata": {"name": name, "namespace": "gpu-workloads", "uid": f"uid-{name}", "annotations": annotations}}
    made["spec"] = {"nodeName": node} if node else {}
    return made


class Api:
    """The fake's API server: its objects, the watches it plays next, and the calls it was asked."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder = folder
        monkeypatch.setenv("FAKE_DIR", str(folder))

    def objects(self, pods: list[dict], locked: bool = True) -> None:
        node = {"metadata": {"name": NODE, "annotations": {NODE_LOCK: LOCK} if locked else {}}}
        pods_by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
        (self.folder / "state.json").write_text(json.dumps({"rv": 10, "pods": pods_by_key, "nodes": {NODE: node}}))

    def watches(self, *scripts: dict) -> None:
        (self.folder / "watches.json").write_text(json.dumps(list(scripts)))

    def calls(self) -> list[str]:
        path = self.folder / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def pod(self, name: str) -> dict:
        return json.loads((self.folder / "state.json").read_text())["pods"][f"gpu-workloads/{name}"]


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    with serving(tmp_path / "kwok" / "gpulab-tenant-a.kubeconfig"):
        yield Api(tmp_path, monkeypatch)


def role_on(api: Api, **bounds) -> BindTimeRole:
    # Short bounds: the API server ends each watch after 1 s; kubectl gives up 1 s later, the role 1 s after that.
    bounds = {"watch_seconds": 1, "grace": 1, "backoff": (0.05, 0.2), **bounds}
    return BindTimeRole(ControlPlane("gpulab-tenant-a", FAKE_BIN, api.folder / "kwok"), **bounds)


def finishes(role: BindTimeRole, *names: str) -> None:
    expected = sorted(f"gpu-workloads/{name}" for name in names)
    try:
        wait_until(lambda: sorted(role.finished) == expected, WAIT, f"pods {names} finished", interval=0.05)
    finally:
        role.stop()
    assert not role._thread.is_alive()


# --- the pure parts ----------------------------------------------------------------------------------------


def test_an_event_line_is_read_and_anything_else_is_refused() -> None:
    line = json.dumps({"type": "MODIFIED", "object": pod("a")})
    assert parse_event(line) == Event("MODIFIED", pod("a"))
    for bad in ("error: unexpected EOF", '{"type": "ADDED"}', '{"type": "ADDED", "object": "x"}', "[]"):
        with pytest.raises(ProcessLabError, match="not a watch event"):
            parse_event(bad)


def test_only_a_bound_allocating_pod_not_finished_yet_is_finished() -> None:
    assert to_finish(Event("ADDED", pod("a")), set()) == ("gpu-workloads", "a", NODE)
    assert to_finish(Event("MODIFIED", pod("a")), set()) == ("gpu-workloads", "a", NODE)
    assert to_finish(Event("MODIFIED", pod("a", node=None)), set()) is None  # annotated, not bound yet
    assert to_finish(Event("MODIFIED", pod("a", phase="success")), set()) is None
    assert to_finish(Event("MODIFIED", pod("a", phase=None)), set()) is None  # not HAMi's
    assert to_finish(Event("DELETED", pod("a")), set()) is None
    assert to_finish(Event("BOOKMARK", {"metadata": {"resourceVersion": "9"}}), set()) is None
    # A stale event from before the role's own annotation: finishing again would remove another pod's lock.
    assert to_finish(Event("MODIFIED", pod("a")), {"uid-a"}) is None


def test_each_watch_starts_at_the_lists_version_and_is_ended_by_the_api_server() -> None:
    assert watch_path("12345", 60) == "/api/v1/pods?watch=1&resourceVersion=12345&timeoutSeconds=60"


def test_reconnects_back_off_doubling_to_a_bound_and_never_come_at_once() -> None:
    assert [reconnect_delay(n) for n in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert reconnect_delay(10_000) == 5.0


# --- the role against kubectl --------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_pod_bound_before_the_role_is_finished_from_its_list_one_bound_later_from_its_watch(api: Api) -> None:
    api.objects([pod("a")])
    api.watches({"events": [["ADDED", pod("b", node=None)], ["MODIFIED", pod("b")]], "then": "idle"})
    role = role_on(api)
    role.start()
    finishes(role, "a", "b")
    assert api.pod("a")["metadata"]["annotations"][BIND_PHASE] == "success"
    assert api.pod("b")["metadata"]["annotations"][BIND_PHASE] == "success"
    calls = api.calls()
    # From the list's version, not from after the role's own annotations of a (its events are seen, and skipped).
    assert [c for c in calls if not c.startswith("patch")][:2] == ["list rv=10", "watch rv=10 timeoutSeconds=1"]
    first_watch = calls.index("watch rv=10 timeoutSeconds=1")
    assert calls.index("patch pod gpu-workloads/a hami.io/bind-phase=success") < first_watch
    # Each pod's lock released before the pod is marked: KWOK runs a pod once it is no longer `allocating`, and
    # the next GPU pod's bind must find its node free then (process_lab/control_plane.py KWOK_PATCHES).
    release = f"patch node {NODE} {NODE_LOCK}-"
    marks = [f"patch pod gpu-workloads/{name} hami.io/bind-phase=success" for name in ("a", "b")]
    assert [c for c in calls if c.startswith("patch")] == [release, marks[0], release, marks[1]], calls
    assert role.errors == []


@pytest.mark.integration
def test_every_watch_that_ends_or_fails_is_followed_by_a_fresh_list_and_a_watch_from_it(api: Api) -> None:
    api.objects([])
    api.watches(
        {"events": [["MODIFIED", pod("a")]], "then": "end"},  # the API server's timeoutSeconds
        # The API server killed: the stream dies, it is down for two calls, and b is bound meanwhile.
        {"events": [], "unseen": [pod("b")], "then": "die", "down_for": 2},
        {"answer": "gone"},  # 410 Expired as the watch's answer
        {"events": [["MODIFIED", pod("c")]], "then": "expire"},  # 410 Expired as an ERROR event
        {"events": [], "then": "hang"},  # nothing, until kubectl's --request-timeout
        {"events": [["MODIFIED", pod("d")]], "then": "idle"},
    )
    role = role_on(api)
    role.start()
    finishes(role, "a", "b", "c", "d")
    said = "\n".join(role.errors)
    for problem in ("unexpected EOF", "was refused", "(Expired): too old resource version", "410 Expired"):
        assert problem in said, said
    assert "request canceled (Client.Timeout" in said
    calls = [call for call in api.calls() if not call.startswith("patch")]
    watches = [n for n, call in enumerate(calls) if call.startswith("watch")]
    assert len(watches) >= 6, calls
    for n in watches:  # always from the list just before it: never from a version the server said is gone
        assert calls[n - 1].startswith("list") and calls[n].split()[1] == calls[n - 1].split()[1], calls


@pytest.mark.integration
def test_stale_events_after_the_roles_own_annotation_do_not_release_the_lock_again(api: Api) -> None:
    api.objects([])
    # Both events say allocating: the second was on its way before the role's annotation.
    api.watches({"events": [["MODIFIED", pod("a")], ["MODIFIED", pod("a")]], "then": "idle"})
    role = role_on(api, watch_seconds=5)
    role.start()
    wait_until(lambda: any(c.startswith("watch") for c in api.calls()), WAIT, "the watch", interval=0.05)
    finishes(role, "a")
    assert api.calls().count(f"patch node {NODE} {NODE_LOCK}-") == 1, api.calls()


@pytest.mark.integration
def test_a_kubectl_past_every_timeout_is_killed_and_the_role_lists_again(api: Api) -> None:
    api.objects([])
    api.watches({"events": [], "then": "wedged"}, {"events": [["MODIFIED", pod("a")]], "then": "idle"})
    role = role_on(api)
    role.start()
    finishes(role, "a")
    assert any("killed" in error for error in role.errors), role.errors
    assert pids_of(str(api.folder)) == []


@pytest.mark.integration
def test_stop_ends_a_watch_at_once(api: Api) -> None:
    api.objects([])
    api.watches({"events": [], "then": "idle"})
    role = role_on(api, watch_seconds=3600)  # the fake watch would run an hour
    role.start()
    wait_until(lambda: any(c.startswith("watch") for c in api.calls()), WAIT, "the watch", interval=0.05)
    role.stop(timeout=WAIT)
    assert not role._thread.is_alive(), "stop() waited for the watch to end on its own"
    assert pids_of(str(api.folder)) == [], "the watch's kubectl outlived stop()"


@pytest.mark.integration
def test_term_ends_the_roles_process_and_its_watch_even_a_kubectl_deaf_to_term(api: Api) -> None:
    """Process mode: HamiProvider starts the role with start_detached and stops it with TERM to its session."""
    api.objects([])
    api.watches({"events": [], "then": "wedged"})
    argv = [sys.executable, "-m", "process_lab.device_plugin", "gpulab-tenant-a", FAKE_BIN, api.folder / "kwok"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pid = start_detached(argv, env=env, log=api.folder / "bind-time.log")

    def ended() -> tuple[int, int] | None:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        return (reaped, status) if reaped else None

    try:
        wait_until(lambda: any(c.startswith("watch") for c in api.calls()), WAIT, "the watch", interval=0.05)
        os.killpg(pid, signal.SIGTERM)
        _, status = wait_until(ended, WAIT, "the role's process ended by TERM", interval=0.05)
        assert os.waitstatus_to_exitcode(status) == 0
        wait_until(lambda: not pids_of(str(api.folder)), WAIT, "the watch's kubectl gone", interval=0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        for left in pids_of(str(api.folder)):
            os.kill(left, signal.SIGKILL)
    assert "Traceback" not in (api.folder / "bind-time.log").read_text()


def test_a_timeout_under_a_second_is_not_kubectls_zero_which_waits_forever() -> None:
    control_plane = ControlPlane("gpulab-tenant-a", FAKE_BIN, Path("/nonexistent"))
    assert control_plane.kubectl_argv(0.5)[-2:] == ["--request-timeout", "1s"]
    assert control_plane.kubectl_argv(70)[-2:] == ["--request-timeout", "70s"]


@pytest.mark.integration
def test_a_pod_or_node_gone_before_its_write_is_left_and_is_no_error(api: Api) -> None:
    """The API server answers 404 for an object deleted since its event (TenantLab.renew deletes nodes): the
    role finishes nothing for it and goes on with the next pod."""
    api.objects([pod("a"), pod("b", node="gone-node")])
    role = role_on(api)
    role.start()
    finishes(role, "a")
    assert role.errors == []
    assert api.pod("b")["metadata"]["annotations"][BIND_PHASE] == "allocating"


@pytest.mark.integration
def test_a_write_the_api_server_refuses_is_said_and_the_pod_is_finished_from_the_next_list(api: Api) -> None:
    """An API server restarting between the event and the write: the connection closed unanswered. The role
    says so, lists again after its back-off, and finishes the pod from that list."""
    api.objects([])
    api.watches({"events": [["MODIFIED", pod("a")]], "then": "idle"})
    original = ApiConnection.merge_patch

    def flaky(self: ApiConnection, path: str, patch: dict) -> tuple[int, dict]:
        if not any(c.startswith("refused") for c in api.calls()):
            (api.folder / "down").write_text("2")  # this write and its one retry on a new connection
        return original(self, path, patch)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(ApiConnection, "merge_patch", flaky)
        role = role_on(api)
        role.start()
        finishes(role, "a")
    assert any(error.startswith("PATCH /api/v1/nodes/gpu-0 on http://127.0.0.1:") for error in role.errors), role.errors
    assert api.calls().count(f"patch node {NODE} {NODE_LOCK}-") == 1, api.calls()


def test_a_kubeconfig_without_a_server_is_named(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    kubeconfig.write_text(json.dumps({"clusters": [], "users": [], "contexts": [], "current-context": ""}))
    with pytest.raises(ProcessLabError, match=r"admin.kubeconfig: no API server \(https://HOST:PORT\)"):
        ApiConnection(kubeconfig)


def test_an_inline_client_key_is_refused_not_copied_to_disk(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    user = {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}
    document = {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    kubeconfig.write_text(json.dumps(document))
    with pytest.raises(ProcessLabError, match="an inline client key is not read here"):
        ApiConnection(kubeconfig)
