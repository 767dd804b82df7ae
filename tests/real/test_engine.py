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
import subprocess
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT, run_program

from tests.real.engine import pulumi


@pytest.fixture(scope="module")
def previewed(project: Path) -> subprocess.CompletedProcess[str]:
    created = pulumi(project, "stack", "init", "sim")
    assert created.returncode == 0, created.stderr
    result = pulumi(project, "preview", "--stack", "sim", "--json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def preview(previewed: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(previewed.stdout)


def test_the_engine_starts_the_built_provider_without_a_warning(previewed: subprocess.CompletedProcess[str]) -> None:
    """Boundary: the CLI's plugin lookup. The providers ask for the release make tools built, and Pulumi.yaml
    names ./bin's provider for it, so the engine neither finds it on PATH ("using pulumi-resource-kubernetes
    from $PATH", once per provider start) nor warns of another version; ./bin is on PATH, as make has it."""
    said = previewed.stdout + previewed.stderr
    # Once, before any provider starts: the engine checks the plugins the language host reports (the SDK's
    # 4.34.2, requirements.txt) and finds that release only on PATH. Without Pulumi.yaml's plugin, once more
    # for every provider the program starts.
    assert said.count("using pulumi-resource-kubernetes from $PATH") == 1, said[-3000:]
    assert "is expected to have version" not in said, said[-3000:]


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
