"""The part HAMi's device plugin plays at bind time, for nodes that have no device plugin (KWOK nodes).

HAMi's `/bind` locks the node (`hami.io/mutex.lock`), marks the pod `hami.io/bind-phase=allocating`, then binds
it; the device plugin's Allocate then marks the pod `success` and releases the lock (HAMi v2.8.3
pkg/scheduler/scheduler.go Bind; pkg/device-plugin/nvidiadevice/nvinternal/plugin/util.go;
pkg/util/nodelock/nodelock.go). Without it the next GPU pod on that node waits for the lock timeout.
BindTimeRole does both, for every pod HAMi binds, as soon as the API server says the pod is bound: its lock
lives milliseconds after the bind. It releases the lock before it marks the pod, so that KWOK, which leaves an
`allocating` pod Pending (control_plane.KWOK_PATCHES), runs a pod only once its node is free for the next one.

It watches the pods rather than polling them. On each (re)connect it lists them (a pod bound while nothing
watched is finished from the list), then watches from the list's resourceVersion through the real kubectl's
`get --raw`, which prints the API server's watch events as they come, one JSON object a line. Each watch is
bounded: the API server ends it after `watch_seconds` (timeoutSeconds) and kubectl then exits 0; kubectl gives up
on its own a little later (--request-timeout); a kubectl still running after that is killed. A watch that
ended as asked is started again on a fresh list at once (a quarter of a second later); one that failed (an API
server restarted: kubectl's "unexpected EOF", a refused connection; a 410 Expired, too old resource version,
as an ERROR event or as the answer) is recorded in `errors` and started again on a fresh list after a back-off
that doubles up to 5 s. stop() kills the watch's kubectl, so the role ends at once unless it is in its bounded
list or one of its bounded writes. The writes (the node's lock released, the pod marked) are merge patches on one
kept-alive connection (process_lab/api_connection.py), not a kubectl process each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hami.annotations import ALLOCATING, BIND_PHASE, NODE_LOCK, SUCCESS
from process_lab.api_connection import ApiConnection
from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane

PODS = "/api/v1/pods"  # every namespace's; the list answers with its resourceVersion (kubectl get -o json does not)
WATCH_SECONDS = 60  # the API server ends each watch after this; the fresh list that follows is a resync too
GRACE = 10.0  # seconds past a watch's end before kubectl gives up on it, and as much again before it is killed
BACKOFF = (0.25, 5.0)  # seconds before a reconnect: after a watch that ended as asked, and the most after failures


@dataclass(frozen=True)
class Event:
    """One event of a watch stream (the API's WatchEvent): ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: dict


def parse_event(line: bytes | str) -> Event:
    """One line of `kubectl get --raw <watch>`; ProcessLabError for a line that is no watch event."""
    try:
        event = json.loads(line)
        found = Event(str(event["type"]), event["object"])
    except (ValueError, KeyError, TypeError) as error:
        raise ProcessLabError(f"not a watch event: {str(line)[:200]}") from error
    if not isinstance(found.object, dict):
        raise ProcessLabError(f"not a watch event: {str(line)[:200]}")
    return found


def watch_path(resource_version: str, seconds: int) -> str:
    """The pods' watch from `resource_version`, which the API server ends after `seconds`."""
    query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": str(seconds)}
    return f"{PODS}?{urllib.parse.urlencode(query)}"


def pod_key(pod: dict) -> str:
    metadata = pod.get("metadata") or {}
    return str(metadata.get("uid") or f"{metadata.get('namespace')}/{metadata.get('name')}")


def pod_to_finish(pod: dict) -> tuple[str, str, str] | None:
    """(namespace, pod, node) of a pod HAMi bound that no device plugin has finished; None for any other."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    if annotations.get(BIND_PHASE) == ALLOCATING and node:
        return metadata["namespace"], metadata["name"], node
    return None


def to_finish(event: Event, finished: set[str]) -> tuple[str, str, str] | None:
    """What an added or modified pod asks of the role. None for a pod finished already: a stream may still hold
    events from before the role's own annotation, which say `allocating`, and by then the node's lock may be
    another pod's."""
    if event.type not in ("ADDED", "MODIFIED") or pod_key(event.object) in finished:
        return None
    return pod_to_finish(event.object)


def status_text(status: dict) -> str:
    """An ERROR event's Status in one line (410 Expired: too old resource version)."""
    return f"{status.get('code')} {status.get('reason')}: {status.get('message')}"


def reconnect_delay(failures: int, backoff: tuple[float, float] = BACKOFF) -> float:
    """Seconds before the next list: the shortest after a watch that ended as asked, doubling with each failure
    in a row up to the longest; never 0, so an API server that fails at once is not asked in a busy loop."""
    first, longest = backoff
    return min(first * 2 ** min(failures, 32), longest)


class BindTimeRole:
    def __init__(
        self,
        control_plane: ControlPlane,
        watch_seconds: int = WATCH_SECONDS,
        grace: float = GRACE,
        backoff: tuple[float, float] = BACKOFF,
    ) -> None:
        self.control_plane = control_plane
        self.watch_seconds, self.grace, self.backoff = watch_seconds, grace, backoff
        self.finished: list[str] = []
        self.errors: list[str] = []
        self.lists = 0  # lists taken: the first connect and every reconnect
        self._finished_keys: set[str] = set()
        self._stop = threading.Event()
        self._child_lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._api: ApiConnection | None = None  # made on the first write: the kubeconfig is there by then
        self._thread = threading.Thread(target=self._loop, name=f"bind-time-{control_plane.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self.request_stop()
        self._thread.join(timeout)

    def request_stop(self) -> None:
        """End the role without waiting for it (a signal handler's part): the watch's kubectl is killed."""
        self._stop.set()
        with self._child_lock:
            if self._child is not None:
                self._child.kill()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._list_and_watch()
                failures = 0
            except ProcessLabError as problem:  # an API server restarting: say so, list again after the back-off
                if self._stop.is_set():
                    break
                self.errors.append(str(problem))
                failures += 1
            self._stop.wait(reconnect_delay(failures, self.backoff))
        if self._api is not None:
            self._api.close()

    def _list_and_watch(self) -> None:
        """Finish what the list shows bound, then what the watch from the list's resourceVersion shows, until the
        watch ends as asked (returns) or fails (ProcessLabError)."""
        answer = self.control_plane.kubectl("get", "--raw", PODS, timeout=30).stdout
        try:
            listed = json.loads(answer)
            items, resource_version = listed.get("items") or [], str(listed["metadata"]["resourceVersion"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ProcessLabError(f"listing pods on {self.control_plane.name}: no pod list: {answer[:200]}") from error
        self.lists += 1
        # Only pods still there can have stale events; the watch starts after the list, after every annotation.
        self._finished_keys &= {pod_key(pod) for pod in items}
        for pod in items:
            self._consider(Event("ADDED", pod))
        self._watch(resource_version)

    def _consider(self, event: Event) -> None:
        if event.type == "ERROR":
            raise ProcessLabError(f"watching pods on {self.control_plane.name}: {status_text(event.object)}")
        if event.type == "DELETED":
            self._finished_keys.discard(pod_key(event.object))
            return
        target = to_finish(event, self._finished_keys)
        if target is None:
            return
        namespace, name, node = target
        # The lock first: KWOK runs the pod once it is no longer `allocating` (process_lab/control_plane.py
        # KWOK_PATCHES), so a running pod means its lock is gone, as a kubelet starts it only after Allocate has
        # done both. A pod or node deleted since (TenantLab.renew) needs no finishing.
        released = self._annotate(f"/api/v1/nodes/{node}", {NODE_LOCK: None})
        if released and self._annotate(f"/api/v1/namespaces/{namespace}/pods/{name}", {BIND_PHASE: SUCCESS}):
            self.finished.append(f"{namespace}/{name}")
        self._finished_keys.add(pod_key(event.object))

    def _annotate(self, path: str, annotations: dict[str, str | None]) -> bool:
        """The object's annotations merged (None removes one): True once done; False if the object is gone;
        ProcessLabError on any other answer."""
        if self._api is None:
            self._api = ApiConnection(self.control_plane.kubeconfig)
        status, answer = self._api.merge_patch(path, {"metadata": {"annotations": annotations}})
        if status == 404:
            return False
        if status >= 300:
            raise ProcessLabError(f"annotating {path}: {status} {str(answer.get('message'))[:300]}")
        return True

    def _watch(self, resource_version: str) -> None:
        name = self.control_plane.name
        argv = self.control_plane.kubectl_argv(self.watch_seconds + self.grace)
        argv += ["get", "--raw", watch_path(resource_version, self.watch_seconds)]
        # kubectl's own bound is in whole seconds, rounded up (ControlPlane.kubectl_argv): a grace past that.
        bound = math.ceil(self.watch_seconds + self.grace) + self.grace
        with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: nothing kubectl says can block it
            with self._child_lock:
                if self._stop.is_set():
                    return
                child = self._child = subprocess.Popen(
                    [str(arg) for arg in argv],
                    env=self.control_plane.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                )
            try:
                ended = self._read(child, time.monotonic() + bound)
            finally:
                self._end(child)
            if self._stop.is_set():
                return
            if not ended:
                raise ProcessLabError(
                    f"watching pods on {name}: kubectl still ran {bound:.0f} s after its watch began, past its own "
                    "and the API server's timeouts: killed"
                )
            if child.returncode != 0:
                stderr.seek(0)
                said = stderr.read().decode(errors="replace").strip().splitlines()
                raise ProcessLabError(
                    f"watching pods on {name} failed (kubectl exit {child.returncode}): {' '.join(said[-3:])[:300]}"
                )

    def _read(self, child: subprocess.Popen[bytes], deadline: float) -> bool:
        """Each event the child prints, until its output ends (True) or the deadline passes (False); the time
        spent finishing pods does not count."""
        assert child.stdout is not None
        out: IO[bytes] = child.stdout
        pending = b""
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([out], [], [], min(left, 1.0))[0]:
                continue
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                return True  # a line cut off by a dying connection is dropped: the next list has that pod
            *lines, pending = (pending + chunk).split(b"\n")
            began = time.monotonic()
            for line in lines:
                if line.strip():
                    self._consider(parse_event(line))
            deadline += time.monotonic() - began  # the role's own calls are not kubectl's running late
        return False

    def _end(self, child: subprocess.Popen[bytes]) -> None:
        with self._child_lock:
            self._child = None
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m process_lab.device_plugin NAME BIN_DIR KWOK_WORKDIR`: the role for one tenant's control plane,
    as its own process (process mode under Pulumi), until TERM."""
    parser = argparse.ArgumentParser(prog="python -m process_lab.device_plugin", description=main.__doc__)
    parser.add_argument("name")
    parser.add_argument("bin_dir", type=Path)
    parser.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)
    role = BindTimeRole(ControlPlane(args.name, args.bin_dir, args.workdir))
    signal.signal(signal.SIGTERM, lambda *_: role.request_stop())
    finished = errors = 0
    role.start()
    while role._thread.is_alive():
        role._thread.join(1)
        for pod in role.finished[finished:]:
            print(f"bind finished: {pod}", flush=True)
        for error in role.errors[errors:]:
            print(f"error (retried): {error}", flush=True)
        finished, errors = len(role.finished), len(role.errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
