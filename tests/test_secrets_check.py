"""`make up` / `make plan` refuse an empty passphrase when the stack holds secrets a user typed in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import ROOT

SCRIPT = ROOT / "scripts" / "secrets_check.py"
WITH_SECRET = """config:
  gpulab:tenants:
    - name: tenant-a
  gpulab:sshPrivateKey:
    secure: v1:AAAABBBBCCCC:DDDD
"""


def check(tmp_path: Path, text: str | None, **env: str) -> subprocess.CompletedProcess:
    if text is not None:
        (tmp_path / "Pulumi.dev.yaml").write_text(text)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "dev", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**environment, **env},
        timeout=30,
    )


def test_typed_secret_with_empty_passphrase_is_refused(tmp_path: Path) -> None:
    result = check(tmp_path, WITH_SECRET, PULUMI_CONFIG_PASSPHRASE="")
    assert result.returncode == 2
    assert "holds secrets you set (gpulab:sshPrivateKey)" in result.stderr
    assert "pulumi stack change-secrets-provider passphrase --stack dev" in result.stderr
    assert "v1:AAAA" not in result.stderr, "the ciphertext is not echoed either"


@pytest.mark.parametrize(
    "text, env",
    [
        (WITH_SECRET, {"PULUMI_CONFIG_PASSPHRASE": "correct horse"}),
        (WITH_SECRET, {"PULUMI_CONFIG_PASSPHRASE_FILE": "/run/secrets/pulumi"}),
        ("secretsprovider: awskms://alias/x\n" + WITH_SECRET, {}),
        ("config:\n  gpulab:tenants: []\n", {}),  # the lab's own defaults: no typed secrets
        (None, {}),  # no stack file yet
    ],
    ids=["passphrase", "passphrase-file", "kms", "no-secrets", "no-file"],
)
def test_allowed(tmp_path: Path, text, env) -> None:
    assert check(tmp_path, text, **env).returncode == 0


def test_make_up_and_plan_run_the_check_before_anything_is_deployed_or_planned() -> None:
    for target in ("up", "plan", "deploy"):
        dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        lines = [line for line in dry.stdout.splitlines() if line.strip()]
        first = next(i for i, line in enumerate(lines) if "secrets_check.py" in line)
        action = next(i for i, line in enumerate(lines) if "pulumi up" in line or "-m preview" in line)
        assert first < action, (target, lines)
