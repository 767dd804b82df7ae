"""`make down` after manual damage: what makes the destroy finish without hand surgery on the state.

The Releases' deletedWith is tested with the program (test_management_cluster.py), the scripts' behaviour
with a cluster or tenant gone in test_scripts.py; here: the destroy command itself."""

from __future__ import annotations

import subprocess

import pytest
from shared_data import ROOT

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration


def test_destroy_refreshes_first() -> None:
    """A worker container deleted by hand: the Docker provider stops a container before removing it and fails on
    one that is gone; a refresh drops it (and, through deleteUnreachable, the objects of a cluster that no longer
    answers) from the state before the destroy."""
    dry = subprocess.run(["make", "-n", "destroy"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    destroy = [line for line in dry.stdout.splitlines() if "pulumi destroy" in line and not line.startswith("echo")]
    # Through up_outcome.py: with a private TMPDIR removed afterwards (test_up_outcome.py).
    assert destroy == ["python3 -m hack.up_outcome --passthrough dev pulumi destroy --yes --refresh --stack dev"], (
        dry.stdout
    )


def test_a_process_mode_destroy_starts_stopped_control_plane_programs_first() -> None:
    """A tenant whose kube-controller-manager is gone never finishes a foreground deletion (its garbage collector
    removes the `foregroundDeletion` finalizer): seen, a ValidatingAdmissionPolicyBinding held `make down` for over
    35 minutes. The destroy starts what stopped on the tenant's data (process_lab/resume.py) before pulumi runs."""
    dry = subprocess.run(["make", "-n", "destroy", "STACK=sim"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = dry.stdout.splitlines()
    resume = next(i for i, line in enumerate(lines) if line.endswith("-m process_lab.resume sim"))
    destroy = next(i for i, line in enumerate(lines) if "pulumi destroy" in line and not line.startswith("echo"))
    assert resume < destroy, dry.stdout
