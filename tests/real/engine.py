"""The real Pulumi engine (`make tools`) on a copy of the checkout: the copy (the `project` fixture in
conftest.py) and the CLI run against it with the local file backend, no Pulumi Cloud, no plugin download."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from process_lab.preflight import ENGINE
from tests.real import cluster as kwok

SKIPPED_IN_COPY = {".git", "venv", "bin", ".cache", ".state", "reports", "__pycache__", ".pytest_cache"}


def engine_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout with the tests' own Pulumi.sim.yaml: `pulumi stack init` salts the stack file it
    finds, and the checkout's is the user's."""
    missing = [name for name in ENGINE if not os.access(kwok.bin_dir() / name, os.X_OK)]
    if missing:
        pytest.fail(f"{kwok.NOT_BUILT} ({', '.join(missing)} missing in {kwok.bin_dir()})", pytrace=False)
    copy = tmp_path_factory.mktemp("engine") / "gpulab"
    shutil.copytree(ROOT, copy, symlinks=True, ignore=lambda _dir, names: [n for n in names if n in SKIPPED_IN_COPY])
    for stack_file in copy.glob("Pulumi.*.yaml"):
        stack_file.unlink()
    shutil.copy(LAB_PROJECT / "Pulumi.sim.yaml", copy / "Pulumi.sim.yaml")
    # Pulumi.yaml's provider folder links to ./bin/pulumi-resource-kubernetes, relative to the project.
    (copy / "bin").symlink_to(kwok.bin_dir())
    (copy / "venv").symlink_to(Path(sys.executable).parents[1])  # Pulumi.yaml's `virtualenv: venv`
    # policies/analyzer runs the pack with policies/venv: the suite's own venv has pulumi-policy too.
    (copy / "policies" / "venv").symlink_to(Path(sys.executable).parents[1])
    return copy


def pulumi(
    project: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The CLI from ./bin in `project`; `env` adds variables (the rest is the suite's environment)."""
    home = project.parent / "home"
    env = {
        **os.environ,
        **(env or {}),
        "PATH": f"{kwok.bin_dir()}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "PULUMI_BACKEND_URL": f"file://{project.parent / 'state'}",
        "PULUMI_HOME": str(home),
        "PULUMI_CONFIG_PASSPHRASE": "engine-test",
        "PULUMI_PYTHON_CMD": sys.executable,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "GPULAB_BIN": str(kwok.bin_dir()),
    }
    # As make runs a process-mode stack: the Docker lab's setting (the suite runs under make's default stack)
    # would hide the provider found on PATH.
    env.pop("PULUMI_IGNORE_AMBIENT_PLUGINS", None)
    (project.parent / "state").mkdir(exist_ok=True)
    return subprocess.run(
        [kwok.bin_dir() / "pulumi", *args, "--non-interactive"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
