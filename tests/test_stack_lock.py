"""scripts/stack_lock.py: a lock a killed `pulumi` left in the file backend is removed, no other.

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
from pathlib import Path

from shared_data import ROOT


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
        [sys.executable, "scripts/stack_lock.py", "sim"],
        cwd=ROOT,
        env={**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert not stale.exists() and live.exists() and elsewhere.exists() and other_stack.exists()
    assert result.stderr.count("[gpulab] removed the lock") == 1 and "stale.json" in result.stderr
