"""hack/stack_lock.py: a lock a killed `pulumi` left in the file backend is removed, no other.

Boundary: the Pulumi CLI's file backend (pulumi pkg/backend/diy/lock.go at v3.274.0, the pinned CLI):
`.pulumi/locks/<org>/<project>/<stack>/<id>.json` holding {"pid", "username", "hostname", "timestamp"},
written at the start of an update and removed at its end; a CLI killed with KILL leaves it, and the next
`pulumi up` stops with "the stack is currently locked".
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shared_data import ROOT

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration


def lock(backend: Path, name: str, pid: int, host: str | None = None, stack: str = "sim") -> Path:
    folder = backend / ".pulumi" / "locks" / "organization" / "gpulab" / stack
    folder.mkdir(parents=True, exist_ok=True)
    content = {
        "pid": pid,
        "username": "root",
        "hostname": host or socket.gethostname(),
        "timestamp": "2026-12-01T22:40:00.123456789Z",
    }
    (folder / f"{name}.json").write_text(json.dumps(content))
    return folder / f"{name}.json"


def test_only_the_lock_of_a_pulumi_no_longer_running_here_is_removed(tmp_path: Path) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    stale = lock(tmp_path, "stale", ended.pid)
    live = lock(tmp_path, "live", os.getpid())
    elsewhere = lock(tmp_path, "elsewhere", ended.pid, host="another-host")
    other_stack = lock(tmp_path, "other", ended.pid, stack="dev")
    (tmp_path / ".pulumi" / "locks" / "organization" / "gpulab" / "sim" / "broken.json").write_text("{")
    result = subprocess.run(
        [sys.executable, "-m", "hack.stack_lock", "sim"],
        cwd=ROOT,
        env={**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert not stale.exists() and live.exists() and elsewhere.exists() and other_stack.exists()
    assert result.stderr.count("[gpulab] removed the lock") == 1 and "stale.json" in result.stderr


def test_the_plugins_a_killed_pulumi_left_are_found_and_no_others(tmp_path: Path) -> None:
    """Seen: after `kill -9` of `pulumi up`, its language host and the dynamic provider (parent: init) kept
    running, serving an engine address nothing answered any more."""
    import socket as sockets

    from hack.stack_lock import orphaned_plugins

    engine = sockets.socket()
    engine.bind(("127.0.0.1", 0))
    engine.listen()
    dead = sockets.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()  # nothing answers there any more
    other = tmp_path / "other"
    other.mkdir()

    def plugin(name: str, port: int, cwd: Path) -> subprocess.Popen:
        return subprocess.Popen(["bash", "-c", f'exec -a "{name} 127.0.0.1:{port}" sleep 30'], cwd=cwd)

    started = {
        "orphan": plugin("pulumi-language-python", dead_port, tmp_path),
        "served": plugin("pulumi-resource-kubernetes", engine.getsockname()[1], tmp_path),
        "elsewhere": plugin("pulumi-language-python", dead_port, other),
    }
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and started["orphan"].pid not in orphaned_plugins(tmp_path):
            time.sleep(0.05)  # until bash has exec'd
        assert orphaned_plugins(tmp_path) == [started["orphan"].pid]
    finally:
        engine.close()
        for process in started.values():
            process.kill()
            process.wait()
