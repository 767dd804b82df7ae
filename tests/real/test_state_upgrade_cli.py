"""The state upgrade against the real Pulumi CLI (`make tools`' ./bin/pulumi) and a file backend of its own.

Boundary: the CLI's `stack export --show-secrets` and `stack import` on stdin, and its checkpoint. A stack whose
dynamic resources hold the provider records a state made before components/process/ holds (RECORDS_BEFORE_THE_FOLDERS),
as secrets, the way pulumi.dynamic keeps `__provider`, is rewritten by process_lab/state_upgrade.py: the CLI's own
export afterwards shows today's records, still secrets, with every other value as it was; the checkpoint holds no
plaintext; a second run exports and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from process_lab import state_upgrade
from tests.real import cluster as kwok
from tests.test_layout import RECORDS_BEFORE_THE_FOLDERS

SIGNATURE = {state_upgrade.SECRET_SIGNATURE: "1b47061264138c4ac30d75fd1eb44270"}


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with a stack `sim` on a file backend, the real CLI first on PATH; the folder."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: gpulab\nruntime: python\n")
    monkeypatch.setenv("PATH", f"{kwok.bin_dir()}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'backend'}")
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "a passphrase")
    monkeypatch.setenv("PULUMI_SKIP_UPDATE_CHECK", "true")
    (tmp_path / "backend").mkdir()
    pulumi(project, "stack", "init", "sim")
    return project


def pulumi(project: Path, *args: str, given: str | None = None) -> str:
    done = subprocess.run(
        ["pulumi", *args], cwd=project, input=given, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def secret(value: str) -> dict:
    return {**SIGNATURE, "plaintext": json.dumps(value)}


def old_stack(project: Path) -> dict:
    """The empty stack's export with a provider and one dynamic resource per old record (secrets in plaintext,
    which the CLI encrypts at import), imported; the deployment as given."""
    document = json.loads(pulumi(project, "stack", "export", "--stack", "sim"))
    stack_urn = "urn:pulumi:sim::gpulab::pulumi:pulumi:Stack::gpulab-sim"
    provider_urn = "urn:pulumi:sim::gpulab::pulumi:providers:pulumi-python::default"
    provider_id = "6f0c1a52-7e3b-4bb1-9c77-3f1d0e0b6a11"
    resources = [
        {"urn": stack_urn, "custom": False, "type": "pulumi:pulumi:Stack"},
        {"urn": provider_urn, "custom": True, "id": provider_id, "type": "pulumi:providers:pulumi-python"},
    ]
    for name, record in RECORDS_BEFORE_THE_FOLDERS.items():
        resources.append(
            {
                "urn": f"urn:pulumi:sim::gpulab::pulumi-python:dynamic:Resource::{name}",
                "custom": True,
                "id": name.lower(),
                "type": "pulumi-python:dynamic:Resource",
                "inputs": {"__provider": secret(record), "cluster": name},
                "outputs": {"__provider": secret(record), "cluster": name, "kubeconfig": secret("a kubeconfig")},
                "parent": stack_urn,
                "provider": f"{provider_urn}::{provider_id}",
            }
        )
    document["deployment"]["resources"] = resources
    pulumi(project, "stack", "import", "--stack", "sim", given=json.dumps(document))
    return document


def providers(document: dict) -> dict[tuple[str, str], object]:
    return {
        (resource["urn"], part): (resource.get(part) or {}).get("__provider")
        for resource in document["deployment"]["resources"]
        for part in ("inputs", "outputs")
        if "__provider" in (resource.get(part) or {})
    }


def without_providers(document: dict) -> list[dict]:
    return [
        {key: ({k: v for k, v in value.items() if k != "__provider"} if key in ("inputs", "outputs") else value)
         for key, value in resource.items()}
        for resource in document["deployment"]["resources"]
    ]  # fmt: skip


def test_the_cli_takes_back_todays_records_as_secrets(cli: Path, tmp_path: Path) -> None:
    before = old_stack(cli)
    exported = json.loads(pulumi(cli, "stack", "export", "--stack", "sim", "--show-secrets"))
    assert all(state_upgrade.stale(record) for record in providers(exported).values())

    changed = state_upgrade.upgrade("sim", cwd=cli, backend=tmp_path / "backend")

    assert len(changed) == len(RECORDS_BEFORE_THE_FOLDERS)
    after = json.loads(pulumi(cli, "stack", "export", "--stack", "sim", "--show-secrets"))
    records = providers(after)
    assert len(records) == 2 * len(RECORDS_BEFORE_THE_FOLDERS)
    for (urn, _), record in records.items():
        assert isinstance(record, dict) and set(record) == {*SIGNATURE, "plaintext"}, record  # still a secret
        name = urn.rsplit("::", 1)[1]
        assert json.loads(record["plaintext"]) == state_upgrade.upgraded(RECORDS_BEFORE_THE_FOLDERS[name])
    assert without_providers(after) == without_providers(exported)
    checkpoint = (tmp_path / "backend" / ".pulumi" / "stacks" / "gpulab" / "sim.json").read_text()
    assert "plaintext" not in checkpoint and "a kubeconfig" not in checkpoint
    assert before["deployment"]["resources"][2]["urn"] in changed

    assert state_upgrade.upgrade("sim", cwd=cli, backend=tmp_path / "backend") == []
