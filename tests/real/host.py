"""What the real tier's Docker cases share: the engine's command line, and how a missing piece of the host is told
(CI has every piece, so there it fails; elsewhere the case is skipped with one line saying how to get it)."""

from __future__ import annotations

import os
import subprocess

import pytest


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
