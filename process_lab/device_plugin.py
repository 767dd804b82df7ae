"""The part HAMi's device plugin plays at bind time, for nodes that have no device plugin (KWOK nodes).

HAMi's `/bind` locks the node (`hami.io/mutex.lock`) and marks the pod `hami.io/bind-phase=allocating`;
the device plugin's Allocate then marks the pod `success` and releases the lock (HAMi v2.8.3
pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go, plugin/util.go; notes/hami.md section 3).
Without it the next GPU pod on that node waits for the lock timeout. BindTimeRole does both, for every
pod bound by HAMi, from a polling thread with a bounded call each time.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane

BIND_PHASE = "hami.io/bind-phase"
NODE_LOCK = "hami.io/mutex.lock"


def pods_to_finish(pods: list[dict]) -> list[tuple[str, str, str]]:
    """(namespace, pod, node) of each pod HAMi bound that no device plugin has finished."""
    found = []
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        node = pod.get("spec", {}).get("nodeName")
        if annotations.get(BIND_PHASE) == "allocating" and node:
            found.append((pod["metadata"]["namespace"], pod["metadata"]["name"], node))
    return found


class BindTimeRole:
    def __init__(self, control_plane: ControlPlane, interval: float = 0.25) -> None:
        self.control_plane, self.interval = control_plane, interval
        self.finished: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"bind-time-{control_plane.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _annotate(self, *args: str) -> bool:
        """True once annotated; False if the object is gone; ProcessLabError on any other failure."""
        result = self.control_plane.kubectl("annotate", *args, check=False)
        if result.returncode == 0:
            return True
        if "NotFound" in result.stderr:
            return False
        raise ProcessLabError(f"kubectl annotate {' '.join(args)}: {result.stderr.strip()[:300]}")

    def _loop(self) -> None:
        kubectl = self.control_plane.kubectl
        while not self._stop.is_set():
            try:
                pods = json.loads(kubectl("get", "pods", "--all-namespaces", "-o", "json", timeout=10).stdout)
                for namespace, name, node in pods_to_finish(pods["items"]):
                    # A pod or node deleted since the list (TenantLab.renew) needs no finishing.
                    done = self._annotate("pod", "-n", namespace, name, "--overwrite", f"{BIND_PHASE}=success")
                    if done and self._annotate("node", node, f"{NODE_LOCK}-"):
                        self.finished.append(f"{namespace}/{name}")
            except ProcessLabError as problem:  # an API server restarting: say so, try again next round
                self.errors.append(str(problem))
            self._stop.wait(self.interval)


def main(argv: list[str] | None = None) -> int:
    """`python -m process_lab.device_plugin NAME BIN_DIR KWOK_WORKDIR`: the role for one tenant's control plane,
    as its own process (process mode under Pulumi), until TERM."""
    parser = argparse.ArgumentParser(prog="python -m process_lab.device_plugin", description=main.__doc__)
    parser.add_argument("name")
    parser.add_argument("bin_dir", type=Path)
    parser.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)
    role = BindTimeRole(ControlPlane(args.name, args.bin_dir, args.workdir))
    signal.signal(signal.SIGTERM, lambda *_: role._stop.set())
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
