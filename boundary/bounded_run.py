"""One way to run a bounded program: in a process group of its own, for at most a deadline, then TERM to the
whole group, a short grace, KILL to the whole group, and the child reaped. Used by diagnose (runner.py) and
the process lab (commands.py); plain Python (subprocess, os, signal), no SDK.

Programs hang (an API server that accepts and never answers, an exec credential plugin, a wedged container)
and some ignore TERM; what they start may keep the output pipes open. Signalling the group reaches every
process the program started that stayed in it; reading gives up after the grace, so a process that left the
group and still holds a pipe cannot hang the caller either."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_GRACE = 5.0  # seconds from TERM to KILL, and from KILL to giving up on the pipes


@dataclass(frozen=True)
class BoundedResult:
    """How a bounded run ended: the program's exit code and output, or that it was stopped at its deadline."""

    argv: list[str]
    returncode: int | None  # None: not reaped (stopped, and still not gone after KILL and the grace)
    stdout: bytes
    stderr: bytes
    timed_out: bool  # the deadline passed before the program ended and closed its output
    waited: float  # the deadline it was given, in seconds
    seconds: float  # how long it ran, start to reaped (or given up on)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def start(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    stdin: bool = False,
    preexec_fn: Callable[[], None] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start argv in a session (so a process group) of its own, output piped; stdin piped if `stdin`, else
    /dev/null. Raises OSError when it cannot start (not found, not executable)."""
    return subprocess.Popen(
        [str(arg) for arg in argv],
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec_fn,
        cwd=cwd,
    )


def finish(
    proc: subprocess.Popen[bytes],
    timeout: float,
    *,
    grace: float = DEFAULT_GRACE,
    stdin: bytes | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BoundedResult:
    """Feed `stdin`, read the output and wait for `proc` (started by `start`) for at most `timeout` seconds;
    past it, stop its whole group (`stop_group`)."""
    started = clock()
    argv = [str(arg) for arg in proc.args] if isinstance(proc.args, list | tuple) else [str(proc.args)]
    try:
        out, err = proc.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        out, err = stop_group(proc, grace, expired)
        return BoundedResult(argv, proc.returncode, out, err, True, timeout, clock() - started)
    return BoundedResult(argv, proc.returncode, out, err, False, timeout, clock() - started)


def run_bounded(
    argv: Sequence[str | Path],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    grace: float = DEFAULT_GRACE,
    cwd: Path | None = None,
) -> BoundedResult:
    """Run argv to its end within `timeout` seconds, or stop its whole process group at the deadline."""
    return finish(start(argv, env=env, stdin=stdin is not None, cwd=cwd), timeout, grace=grace, stdin=stdin)


def stop_group(
    proc: subprocess.Popen[bytes], grace: float, expired: subprocess.TimeoutExpired | None = None
) -> tuple[bytes, bytes]:
    """TERM the group of `proc`, wait `grace` seconds for it to end and close its output, then KILL the group
    and wait `grace` again; the output read so far. Whatever still holds the pipes after that (a process that
    left the group) is not waited for: the pipes are closed and the child reaped if it can be."""
    out, err = _partial(expired)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            rest_out, rest_err = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired as again:
            out, err = _partial(again, (out, err))
            continue
        # communicate() returns everything read since the start, the part the first timeout saw too.
        return rest_out or out, rest_err or err
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)  # KILLed: only a process stuck in the kernel is not reaped by now
    return out, err


def _partial(
    expired: subprocess.TimeoutExpired | None, before: tuple[bytes, bytes] = (b"", b"")
) -> tuple[bytes, bytes]:
    """The output a TimeoutExpired carries (everything read so far on POSIX), else what was read before."""
    if expired is None:
        return before

    def data(value: bytes | str | None, old: bytes) -> bytes:
        if value is None:
            return old
        return value.encode() if isinstance(value, str) else value

    return data(expired.output, before[0]), data(expired.stderr, before[1])


class Unfinished(RuntimeError):
    """A bounded program did not end by its deadline: its whole group was stopped."""


def run_text(
    argv: Sequence[str | Path],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """run_bounded, answered as `subprocess.run(capture_output=True, text=True)` answers (an undecodable byte
    replaced); Unfinished, naming the program and the deadline, when it does not end in time."""
    ended = run_bounded(argv, timeout, env=env, cwd=cwd)
    if ended.timed_out:
        shown = " ".join(str(arg) for arg in list(argv)[:4])
        raise Unfinished(f"`{shown}` did not end within {timeout:.0f} s")
    code = ended.returncode if ended.returncode is not None else -1
    return subprocess.CompletedProcess(
        ended.argv, code, ended.stdout.decode(errors="replace"), ended.stderr.decode(errors="replace")
    )
