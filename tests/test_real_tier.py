"""The real tier's own plumbing, offline: how it reads /proc's socket tables and kubectl's refusals, and how it
reports itself when it cannot run (one skipped line under `make test`; a failure when asked for)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from shared_data import ROOT

from tests.real.cluster import NOT_BUILT, Refusal, _address


def test_proc_net_addresses_are_read_in_host_byte_order() -> None:
    assert _address("0100007F:1F90", 4) == "127.0.0.1:8080"
    assert _address("00000000:0050", 4) == "0.0.0.0:80"
    assert _address("00000000000000000000000001000000:2379", 6) == "[::1]:9081"


def test_a_refusal_names_the_policy_and_its_first_message() -> None:
    text = (
        'Error from server (Forbidden): error when creating "STDIN": pods "p" is forbidden: ValidatingAdmissionPolicy '
        "'gpulab-gpu-requests' with binding 'gpulab-gpu-requests' denied request: CardInsufficientMemory: a container"
        " asks 90000 MB per card"
    )
    assert Refusal(text).policy == "gpulab-gpu-requests"
    assert Refusal(text).message == "CardInsufficientMemory: a container asks 90000 MB per card"
    assert Refusal("Error from server (Invalid): ...").policy is None


def run_tier(tmp_path, requested: bool) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "GPULAB_"))}
    env.update(GPULAB_BIN=str(tmp_path / "no-programs"), **({"GPULAB_REAL": "1"} if requested else {}))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/real", "-p", "no:xdist", "-p", "no:cacheprovider", "-rs", "-q",
         "--basetemp", str(tmp_path / "t")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.integration
def test_without_the_programs_the_tier_is_one_skipped_line_or_a_failure_when_asked_for(tmp_path) -> None:
    quiet = run_tier(tmp_path, requested=False)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    skipped = [line for line in quiet.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and NOT_BUILT in skipped[0], quiet.stdout
    asked = run_tier(tmp_path, requested=True)
    assert asked.returncode == 4, asked.stdout + asked.stderr  # pytest's usage error: nothing ran, nothing passed
    assert f"ERROR: {NOT_BUILT}" in asked.stderr, asked.stderr
