"""The real Pulumi engine (`make tools`: the CLI, the Python language host, the Kubernetes provider) runs
gpulab's program, and the Pulumi mocks the offline suite relies on are checked against it.

Boundary: the engine as it runs a Python program: how it passes a stack file's config (a plain string as
itself, objects as JSON), which resources the program registers with it and under which URNs. The preview
harness (preview/harness.py, `make plan`, every test under mocks) claims the same registrations; here the
real engine says which. The process-mode stack previews without Docker or HAMi (no process starts in a
preview), so this runs in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT, run_program
from shared_data import ROOT

from process_lab.preflight import ENGINE
from tests.real import cluster as kwok

SKIPPED_IN_COPY = {".git", "venv", "bin", ".cache", ".state", "reports", "__pycache__", ".pytest_cache"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout with the tests' own Pulumi.sim.yaml: `pulumi stack init` salts the stack file it
    finds, and the checkout's is the user's."""
    missing = [name for name in ENGINE if not os.access(kwok.bin_dir() / name, os.X_OK)]
    if missing:
        pytest.fail(f"{kwok.NOT_BUILT} ({', '.join(missing)} missing in {kwok.bin_dir()})", pytrace=False)
    copy = tmp_path_factory.mktemp("engine") / "gpulab"
    shutil.copytree(ROOT, copy, ignore=lambda _dir, names: [n for n in names if n in SKIPPED_IN_COPY])
    for stack_file in copy.glob("Pulumi.*.yaml"):
        stack_file.unlink()
    shutil.copy(LAB_PROJECT / "Pulumi.sim.yaml", copy / "Pulumi.sim.yaml")
    (copy / "venv").symlink_to(Path(sys.executable).parents[1])  # Pulumi.yaml's `virtualenv: venv`
    # policies/analyzer runs the pack with policies/venv: the suite's own venv has pulumi-policy too.
    (copy / "policies" / "venv").symlink_to(Path(sys.executable).parents[1])
    return copy


def pulumi(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    home = project.parent / "home"
    env = {
        **os.environ,
        "PATH": f"{kwok.bin_dir()}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "PULUMI_BACKEND_URL": f"file://{project.parent / 'state'}",
        "PULUMI_HOME": str(home),
        "PULUMI_CONFIG_PASSPHRASE": "engine-test",
        "PULUMI_PYTHON_CMD": sys.executable,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "GPULAB_BIN": str(kwok.bin_dir()),
    }
    (project.parent / "state").mkdir(exist_ok=True)
    return subprocess.run(
        [kwok.bin_dir() / "pulumi", *args, "--non-interactive"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def preview(project: Path) -> dict:
    created = pulumi(project, "stack", "init", "sim")
    assert created.returncode == 0, created.stderr
    result = pulumi(project, "preview", "--stack", "sim", "--json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout)


def test_the_real_engine_previews_the_process_mode_stack(preview: dict) -> None:
    steps = preview["steps"]
    assert steps and {step["op"] for step in steps} == {"create"}, {step["op"] for step in steps}
    types = {step["urn"].split("::")[2] for step in steps}
    assert not [t for t in types if t.startswith(("docker:", "command:"))], sorted(types)


def test_the_mocks_register_what_the_real_engine_registers(preview: dict) -> None:
    """Every URN of the real preview, and no other, is what the program registers under the offline suite's
    mocks with the same config (the mocks' stack name is dev: the URNs are compared without it)."""
    config = yaml.safe_load((LAB_PROJECT / "Pulumi.sim.yaml").read_text())["config"]
    mocked = run_program({key.split(":", 1)[1]: value for key, value in config.items()}, preview=True)

    def urn_tail(urn: str) -> str:
        """Type chain and name, without stack and project. The mocks' monitor puts the root Stack's type in
        front of every top-level type chain (`pulumi:pulumi:Stack$gpulab:index:ImageCache`); the real engine
        does not (seen here): that prefix is dropped."""
        return urn.split("::", 2)[2].removeprefix("pulumi:pulumi:Stack$")

    # The engine's default providers are its own (the mocks never see them registered).
    real = {
        urn_tail(s["urn"])
        for s in preview["steps"]
        if "pulumi:providers:" not in s["urn"] or "::default" not in s["urn"]
    }
    offline = {urn_tail(urn) for urn in mocked.registrations}
    real, offline = ({u for u in urns if not u.startswith("pulumi:pulumi:Stack::")} for urns in (real, offline))
    assert len(real) > 30, sorted(real)  # the two tenants' components, processes and objects
    assert real == offline, {"only real": sorted(real - offline), "only mocks": sorted(offline - real)}
