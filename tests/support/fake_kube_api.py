"""The fake API server of process_lab.device_plugin's tests: the objects tests/fakes/kube-api/kubectl serves
($FAKE_DIR/state.json, its lists and watches) and the role's writes to them, merge patches of a pod's or a node's
annotations over plain HTTP (a kubeconfig's `http://` server, which client-go and process_lab.api_connection speak
to in the clear).

The writes answer as kube-apiserver does: 200 with the object, 404 with a NotFound Status for an object that is
gone; a `null` in the patch removes the annotation (RFC 7386). While $FAKE_DIR/down counts calls to refuse (an API
server restarting), each request's connection is closed unanswered, and counts as one of them.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def fake_dir() -> Path:
    return Path(os.environ["FAKE_DIR"])


@contextmanager
def state() -> Iterator[dict]:
    """The stored objects, read and written back under the fake's lock."""
    with open(fake_dir() / "state.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = fake_dir() / "state.json"
        data = json.loads(path.read_text()) if path.exists() else {"rv": 1, "pods": {}, "nodes": {}}
        yield data
        path.write_text(json.dumps(data))


def record(line: str) -> None:
    with open(fake_dir() / "calls", "a") as calls:
        calls.write(line + "\n")


def refused(what: str) -> bool:
    """One call refused while the API server is down (it counts the calls left)."""
    down = fake_dir() / "down"
    if not down.exists():
        return False
    left = int(down.read_text() or 0) - 1
    down.write_text(str(left)) if left > 0 else down.unlink()
    record(f"refused {what}")
    return True


def patch_annotations(kind: str, key: str, annotations: dict[str, str | None]) -> dict | None:
    """Merge `annotations` into the stored pod (`namespace/name`) or node (`name`); None when it is not there."""
    with state() as data:
        found = data["pods" if kind == "pod" else "nodes"].get(key)
        if found is None:
            return None
        stored = found["metadata"].setdefault("annotations", {})
        for name, value in annotations.items():
            if value is None:
                stored.pop(name, None)
            else:
                stored[name] = value
        data["rv"] += 1
        found["metadata"]["resourceVersion"] = str(data["rv"])
    change = " ".join(f"{name}-" if value is None else f"{name}={value}" for name, value in annotations.items())
    record(f"patch {kind} {key} {change}")
    return found


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive, as kube-apiserver keeps a client's connection

    def do_PATCH(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if refused(f"PATCH {self.path}"):
            self.close_connection = True
            return
        parts = self.path.strip("/").split("/")
        if self.headers["Content-Type"] != "application/merge-patch+json":
            self._answer(415, {"kind": "Status", "code": 415, "message": "unsupported patch type"})
            return
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            kind, key, name = "node", parts[3], parts[3]
        elif parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
            kind, key, name = "pod", f"{parts[3]}/{parts[5]}", parts[5]
        else:
            self._answer(404, {"kind": "Status", "code": 404, "message": f"no route {self.path}"})
            return
        found = patch_annotations(kind, key, (body.get("metadata") or {}).get("annotations") or {})
        if found is None:
            status = {"kind": "Status", "reason": "NotFound", "code": 404, "message": f'{kind}s "{name}" not found'}
            self._answer(404, status)
            return
        self._answer(200, found)

    def _answer(self, code: int, document: dict) -> None:
        data = json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def serving(kubeconfig: Path) -> Iterator[str]:
    """The fake API server on a free loopback port, and `kubeconfig` naming it; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        )
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
