"""Remove a stack's stale lock in gpulab's local state: one left by a `pulumi` killed on this host.

The Pulumi CLI's file backend locks a stack during an update with a file under
`<backend>/.pulumi/locks/<org>/<project>/<stack>/`, holding the locker's pid and hostname (pulumi
pkg/backend/diy/lock.go). A `pulumi up` killed with KILL, or by a reboot, leaves it, and every later
`pulumi up` or `destroy` stops with "the stack is currently locked". A lock whose process still runs, or
that another host made, is never touched. With a stale lock gone, the plugins the killed CLI left (its
language host and providers, in this directory, serving an engine address nothing answers any more) are
stopped too. Standard library only (run before ./venv exists); prints one line per lock removed.
Usage: python3 -m hack.stack_lock STACK (exit 0; 2 on bad usage).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from boundary.kube_client import pid_running  # standard library only at import time

ROOT = Path(__file__).resolve().parents[1]


def stale_locks(backend: Path, stack: str, project: str = "gpulab") -> list[Path]:
    locks = backend / ".pulumi" / "locks"
    found = []
    for path in sorted(locks.glob(f"*/{project}/{stack}/*.json")) if locks.is_dir() else []:
        try:
            content = json.loads(path.read_text())
            pid, host = int(content["pid"]), str(content["hostname"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a lock we can judge: leave it to `pulumi cancel`
        if host == socket.gethostname() and not pid_running(pid):
            found.append(path)
    return found


PLUGIN = re.compile(r"(pulumi-language-\S+|pulumi-resource-\S+|pulumi-analyzer-\S+|pulumi\.dynamic) (127\.0\.0\.1:\d+)")


def answers(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def orphaned_plugins(project: Path) -> list[int]:
    """Plugins (language host, providers) a killed `pulumi` left running in `project`: each names the engine
    address it serves on its command line, and nothing answers there any more."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        match = PLUGIN.search(cmdline)
        if match and cwd == project and not answers(match.group(2)):
            found.append(int(entry.name))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m hack.stack_lock STACK", file=sys.stderr)
        return 2
    url = os.environ.get("PULUMI_BACKEND_URL", "")
    if not url.startswith("file://"):
        return 0  # a service backend keeps its own locks
    stale = stale_locks(Path(unquote(urlparse(url).path)), argv[0])
    for path in stale:
        path.unlink(missing_ok=True)
        print(
            f"[gpulab] removed the lock a killed pulumi (no longer running) left on stack {argv[0]}: {path.name}",
            file=sys.stderr,
        )
    orphans = orphaned_plugins(ROOT) if stale else []
    for pid in orphans:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # serving a dead engine: nothing left to finish
    if orphans:
        print(f"[gpulab] stopped {len(orphans)} plugin processes the killed pulumi left: {orphans}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
