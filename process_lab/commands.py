"""Bounded subprocess calls: every program the process lab runs may hang, so every call has a deadline."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


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
    """Run argv to its end within `timeout` seconds; ProcessLabError names `what` when it fails or hangs."""
    try:
        result = subprocess.run(
            [str(arg) for arg in argv], env=dict(env), input=stdin, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as expired:
        raise ProcessLabError(f"{what}: no answer within {timeout:.0f} s ({Path(str(argv[0])).name})") from expired
    if check and result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise ProcessLabError(f"{what} failed (exit {result.returncode}): {' '.join(message[-3:])[:600]}")
    return result
