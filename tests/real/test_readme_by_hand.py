"""README's by-hand Pulumi lines, as a user types them in a clean shell.

With README's exports alone the language host `make tools` builds ran the program with the system python:
`No module named 'pulumi'` (it does not honour Pulumi.yaml's `virtualenv: venv`). Boundary: the real CLI
and language host, started with nothing of the suite's environment but what README exports.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import ROOT

from tests.real.engine import engine_project

pytestmark = pytest.mark.real


def readme_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## The three Pulumi commands", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.strip().splitlines()]


def test_readmes_by_hand_lines_preview_the_process_mode_stack(tmp_path_factory: pytest.TempPathFactory) -> None:
    project = engine_project(tmp_path_factory)
    (project / "venv").unlink()
    (project / "venv").symlink_to(Path(sys.executable).parents[1])
    lines = readme_lines()
    assert lines[0].startswith("export ") and lines[1].endswith("pulumi stack select --create dev"), lines
    by_hand = [lines[0], lines[1].replace(" dev", " sim"), "pulumi preview --stack sim --policy-pack policies/analyzer"]
    home = project.parent / "home"
    home.mkdir()
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(by_hand)],
        cwd=project,
        env={"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "PULUMI_SKIP_UPDATE_CHECK": "true"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "No module named" not in result.stdout + result.stderr
    # The providers are Pulumi.yaml's: the one "from $PATH" warning left is the engine's check, at start, of the
    # SDK's own release (tests/real/test_engine.py); without the project plugin, one more per provider started.
    diagnostics = result.stdout.split("Diagnostics:", 1)[-1].split("Outputs:", 1)[0]
    assert diagnostics.count("warning: using pulumi-resource-kubernetes from $PATH") == 1, diagnostics
    # The sim stack's 39 resources (no management cluster or image cache in process mode).
    assert re.search(r"\+ 39 to create", result.stdout), result.stdout[-2000:]
