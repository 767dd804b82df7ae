"""Bounded subprocess calls: every program the process lab runs may hang, so every call has a deadline."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from boundary import bounded_run

# Seconds from TERM to KILL of a call's group at its deadline (and from KILL to giving up on its pipes).
STOP_GRACE = 5.0


class ProcessLabError(RuntimeError):
    """A step of the process lab failed: the message says which step, what it waited for and what it saw."""


def run(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str],
    what: str,
    timeout: float = 60,
    stdin: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run argv to its end within `timeout` seconds; ProcessLabError names `what` when it fails or hangs.

    Every call runs in a session of its own (boundary.bounded_run), so that at the deadline TERM, then KILL,
    reach everything it started, not only the program itself; and so that what a call leaves running
    (kwokctl's control plane) outlives the caller's process group, which the Pulumi engine kills with a
    dynamic provider's process."""
    ended = bounded_run.run_bounded(
        argv, timeout, env=env, stdin=None if stdin is None else stdin.encode(), grace=STOP_GRACE
    )
    if ended.timed_out:
        raise ProcessLabError(f"{what}: no answer within {timeout:.0f} s ({Path(str(argv[0])).name})")
    result = subprocess.CompletedProcess(
        ended.argv, ended.returncode if ended.returncode is not None else -1, _text(ended.stdout), _text(ended.stderr)
    )
    if check and result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise ProcessLabError(f"{what} failed (exit {result.returncode}): {' '.join(message[-3:])[:600]}")
    return result


def _text(data: bytes) -> str:
    """Output as text mode reads it (universal newlines), an undecodable byte replaced rather than raised."""
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's choice) and never handed out before by this process: two
    control planes created at once (Pulumi creates tenants in parallel) must not pick the same one, as
    kwokctl's own choice does (it takes the highest free port below 32767 for each, at the same moment)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def lasting(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a program that outlives this `pulumi up`: TMPDIR as the user had it (GPULAB_TMPDIR). make runs the
    engine with a private TMPDIR and removes it once pulumi exits (hack/up_outcome.py): a program still running
    then would find its temporary folder gone (Python's tempfile keeps the folder it chose first)."""
    found = dict(env)
    if found.get("GPULAB_TMPDIR"):
        found["TMPDIR"] = found["GPULAB_TMPDIR"]
    return found


def start_detached(argv: Sequence[str | Path], *, env: Mapping[str, str], log: Path) -> int:
    """Start a long-running program in a session of its own, output to `log`; its pid."""
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(arg) for arg in argv],
            env=lasting(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return process.pid


def is_ours(pid: int, marker: str) -> bool:
    """Whether `pid` still runs a program of ours: its command line names `marker` (a folder of the lab), so a
    pid the kernel gave to something else since is never signalled."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline


def stop_session(pid: int, marker: str, timeout: float = 10) -> None:
    """TERM the session `start_detached` made, KILL what is left after `timeout` seconds; gone already is fine."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_ours(pid, marker):
            return
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reaped, _ = os.waitpid(pid, os.WNOHANG)  # our child (tests): reap it
            except ChildProcessError:
                reaped = 0
            if reaped or not is_ours(pid, marker) or zombie(pid):
                return
            time.sleep(0.1)
    raise ProcessLabError(f"process {pid} ({marker}) still runs after TERM and KILL")


def pids_of(marker: str) -> list[int]:
    """Every process (but this one) whose command line names `marker`, a lab's own folder."""
    found = []
    for entry in Path("/proc").iterdir():
        pid = int(entry.name) if entry.name.isdigit() else os.getpid()
        if pid != os.getpid() and is_ours(pid, marker) and not zombie(pid):
            found.append(pid)
    return found


def stop_all(marker: str, timeout: float = 10) -> None:
    """TERM, then KILL after `timeout` seconds, every process that names `marker`: what an interrupted
    `pulumi up` started without recording it, or what outlived a kill by hand. None left, or ProcessLabError."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_of(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while pids_of(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pids_of(marker):
            return
    raise ProcessLabError(f"processes {pids_of(marker)} ({marker}) still run after TERM and KILL")


def zombie(pid: int) -> bool:
    """Whether pid is gone or a zombie (dead, not yet reaped: it still answers signal 0)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True
