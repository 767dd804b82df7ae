"""GPULAB_HOST_TOOLS: a user's own kind, kubectl and Pulumi CLI, used as they are instead of the pins.

Boundary: hack/prereqs.sh as make runs it, with stand-ins for the tools (their version answers as the real
ones print them) and a curl that records any download; the real prereqs run on a host without a network is
what this stands for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_bin import the_checkouts_bin
from shared_data import ROOT

from tests.hack.test_first_run import BASH, fake_bin

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration


def prereqs(tmp_path: Path, tools: dict[str, str]) -> subprocess.CompletedProcess:
    own = fake_bin(tmp_path / "own", **tools)
    curl = fake_bin(tmp_path / "fakes", curl=f'echo "$*" >>{tmp_path}/downloads; exit 22', docker="echo 27.0.0")
    env = {
        **os.environ,
        "PATH": f"{curl}:{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        "GPULAB_HOST_TOOLS": str(own),
    }
    with the_checkouts_bin():  # prereqs.sh makes ./bin and its install lock there, as under make
        return subprocess.run(
            [BASH, str(ROOT / "hack" / "prereqs.sh")], capture_output=True, text=True, env=env, timeout=60
        )


TOOLS = {
    "kind": "echo 'kind v0.33.0 go1.26.8 linux/amd64'",
    "kubectl": "echo 'Client Version: v1.36.4'",
    "pulumi": "echo v3.274.0",
    "pulumi-language-python": "exit 0",
}


def test_the_users_own_tools_are_used_as_they_are_and_nothing_is_downloaded(tmp_path: Path) -> None:
    result = prereqs(tmp_path, TOOLS)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "downloads").exists()
    assert "host tools of GPULAB_HOST_TOOLS, not the pins" in result.stderr
    assert "kubectl v1.36.4, pulumi v3.274.0" in result.stderr
    assert not (ROOT / "bin" / ".download").exists()


def test_a_tool_missing_from_the_folder_is_named(tmp_path: Path) -> None:
    result = prereqs(tmp_path, {name: body for name, body in TOOLS.items() if name != "pulumi-language-python"})
    assert result.returncode == 1
    assert "has no pulumi-language-python" in result.stderr
    assert not (tmp_path / "downloads").exists()
