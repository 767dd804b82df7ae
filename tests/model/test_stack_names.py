"""STACK as a newcomer types it, through make as they run it: a stack that does not exist gets one message
from every command, listing the stacks that do, before anything is installed; an invalid stack file stops
`make up` before any tool is downloaded; a failure before `pulumi up` points at what helps, not at
`make diagnose`. Stack files are the tests' own (tests/fixtures/lab copied under a unique name), never the
user's: the checks read the list of stacks, whatever it holds, and never expect it to be one thing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout_bin import the_checkouts_bin
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from model.stack_file import stack_problem, stacks
from tests.hack.test_first_run import DOCKER_UP, fake_bin

MISSING = "no-such-stack"
# The one message, whatever stacks the checkout holds: `Stacks here: <list>.` is read, not expected.
UNKNOWN_STACK = re.compile(
    rf"\[gpulab\] no stack '{MISSING}': there is no Pulumi\.{MISSING}\.yaml in {re.escape(str(ROOT))}\. "
    rf"Stacks here: (?P<stacks>.+?)\. Pick one with STACK=NAME, or copy Pulumi\.dev\.yaml to "
    rf"Pulumi\.{MISSING}\.yaml to make a new one"
)
ROOMY_DF = 'echo "Filesystem 1024-blocks Used Available Capacity Mounted"; echo "/dev/x 1 1 104857600 1% /"'


def own_lines(stderr: str) -> list[str]:
    """stderr without make's own `make: *** [...] Error 2` line."""
    return [line for line in stderr.splitlines() if not re.match(r"make(\[[0-9]+\])?: \*\*\* ", line)]


def make(*args: str, env: dict[str, str] | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(env or {})}
    environ.pop("MAKEFLAGS", None)
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True, env=environ, timeout=timeout
    )


def test_the_list_of_stacks_is_the_project_folder_s(tmp_path: Path) -> None:
    """Boundary: the project folder as the user keeps it (any Pulumi.<name>.yaml files)."""
    for name in ("Pulumi.yaml", "Pulumi.alpha.yaml", "Pulumi.dev.yaml", "Pulumi.ci.yaml", "notes.yaml"):
        (tmp_path / name).write_text("config: {}\n")
    assert stacks(tmp_path) == ["alpha", "ci", "dev"]
    assert stack_problem("dev", tmp_path) is None
    assert stack_problem("prod", tmp_path) == (
        f"no stack 'prod': there is no Pulumi.prod.yaml in {tmp_path}. Stacks here: alpha, ci, dev. "
        "Pick one with STACK=NAME, or copy Pulumi.dev.yaml to Pulumi.prod.yaml to make a new one"
    )
    for bad in ("../x", "", ".", "a b", "x" * 101):
        assert "is not valid: use letters, digits" in stack_problem(bad, tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize("target", ["plan", "up", "verify", "report", "diagnose", "check"])
def test_every_command_says_the_same_for_a_stack_that_does_not_exist(tmp_path: Path, target: str) -> None:
    """Boundary: `make TARGET STACK=...` as typed, before anything is installed (a venv of its own here)."""
    venv = tmp_path / "venv"
    result = make(  # its timeout ends a hang; that nothing is installed is checked below, not the clock
        target,
        f"STACK={MISSING}",
        f"VENV={venv}",
        "TENANT=tenant-a",
        "FILES=pod.yaml",
        env={"PULUMI_BACKEND_URL": f"file://{tmp_path}"},
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    lines = own_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    match = UNKNOWN_STACK.fullmatch(lines[0])
    assert match, lines[0]
    assert "dev" in match.group("stacks").split(", ")
    assert not venv.exists(), "nothing installed for a stack that does not exist"


@pytest.mark.integration
@pytest.mark.parametrize("module", ["preview", "diagnose"])
def test_the_commands_run_directly_say_the_same(tmp_path: Path, module: str) -> None:
    """Boundary: `venv/bin/python -m preview|diagnose --stack NAME`, what scripts run."""
    result = subprocess.run(
        [sys.executable, "-m", module, "--stack", MISSING],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}"},
    )
    assert result.returncode == 2
    assert UNKNOWN_STACK.fullmatch(result.stderr.strip()), result.stderr


def invalid_stack(path: Path) -> None:
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpulab:tenants"][0]["gpus"][0]["model"] = "A200"
    path.write_text(yaml.safe_dump(document))


@pytest.mark.integration
def test_make_up_of_an_invalid_stack_stops_before_any_download(
    tmp_path: Path, project_stack_file: tuple[str, Path]
) -> None:
    """Boundary: `make up STACK=...` on a ready host (Docker answers) with a mistake in the stack file: the
    config errors, and no tool downloaded (a curl that records every call), no Pulumi stack selected."""
    name, path = project_stack_file
    invalid_stack(path)
    calls = tmp_path / "curl-calls"
    fakes = fake_bin(tmp_path / "fakes", docker=DOCKER_UP, df=ROOMY_DF, curl=f'echo "$*" >> {calls}; exit 7')
    result = make("up", f"STACK={name}", env={"PATH": f"{fakes}:{os.environ['PATH']}"}, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "gpulab:tenants[0].gpus[0].model = 'A200': unknown GPU model" in result.stderr
    assert not calls.exists(), f"downloads started before the stack was validated: {calls.read_text()}"
    assert "pulumi stack select" not in result.stdout
    assert "make diagnose" not in result.stderr, "nothing was deployed: there is nothing to diagnose"


@pytest.mark.integration
def test_make_up_after_a_failed_download_says_what_helps(tmp_path: Path, project_stack_file: tuple[str, Path]) -> None:
    """Boundary: `make up` where the pinned CLIs cannot be downloaded (a curl that fails): the hint names the
    download and what to do about it, not `make diagnose` (there is no lab yet)."""
    name, path = project_stack_file
    path.write_text((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    fakes = fake_bin(tmp_path / "fakes", docker=DOCKER_UP, df=ROOMY_DF, curl="exit 7")
    with the_checkouts_bin(needs_it_empty=True):
        result = make("up", f"STACK={name}", env={"PATH": f"{fakes}:/usr/bin:/bin"}, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = own_lines(result.stderr)
    assert any("download failed: https://" in line for line in lines), result.stderr
    assert lines[-1].startswith("[gpulab] could not install the pinned kind v"), lines
    assert "make diagnose" not in result.stderr


@pytest.mark.integration
def test_make_up_after_a_failed_preflight_points_at_preflight_s_lines(
    tmp_path: Path, project_stack_file: tuple[str, Path]
) -> None:
    """Boundary: `make up` on a host without Docker: preflight's own line says what to do; no `make diagnose`
    (there is no lab to diagnose), and nothing installed."""
    name, path = project_stack_file
    path.write_text((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    fakes = fake_bin(tmp_path / "fakes", docker="exit 1", df=ROOMY_DF)
    venv = tmp_path / "venv"
    result = make("up", f"STACK={name}", f"VENV={venv}", env={"PATH": f"{fakes}:/usr/bin:/bin"})
    assert result.returncode == 2
    lines = own_lines(result.stderr)
    assert lines[-1].startswith("[gpulab] preflight: the Docker daemon is not reachable"), lines
    assert "make diagnose" not in result.stderr
    assert not venv.exists()


@pytest.mark.integration
def test_make_diagnose_where_make_up_never_deployed_points_at_make_up(
    tmp_path: Path, project_stack_file: tuple[str, Path]
) -> None:
    """Boundary: `make diagnose` in a folder where `make up` stopped before installing the Pulumi CLI (no
    ./bin): its fix for the missing lab is `make up`, not `make diagnose` again."""
    if (ROOT / "bin" / "pulumi").exists():
        pytest.skip("./bin/pulumi exists here: `make diagnose` finds the CLI")
    name, path = project_stack_file
    path.write_text((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    result = make(
        "diagnose",
        f"STACK={name}",
        "DIAGNOSE_ARGS=--call-timeout 5",
        f"PYTHON_HOST={sys.executable}",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2, result.stderr
    fixes = [line for line in result.stdout.splitlines() if line.startswith("    fix:")]
    assert any(f"run `make up STACK={name}`" in line for line in fixes), result.stdout
    assert not any("make diagnose" in line for line in fixes), result.stdout
    for archive in (ROOT / "reports").glob(f"diagnose-{name}-*.tar.gz"):
        archive.unlink()


@pytest.mark.integration
def test_make_up_of_an_existing_cluster_with_ssh_workers_downloads_no_kind(
    tmp_path: Path, project_stack_file: tuple[str, Path]
) -> None:
    """Boundary: `make up` of a stack with an existing management cluster and SSH workers (no Docker here):
    the first download it tries is kubectl's, never kind's (a curl that records every call and fails)."""
    name, path = project_stack_file
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config["gpulab:management"] = {"mode": "existing"}
    for i, tenant in enumerate(config["gpulab:tenants"]):
        tenant.update(workerMode="ssh", workers=[{"host": f"10.0.0.{10 + i}"}])
    config["gpulab:managementKubeconfig"] = {"secure": "v1:AAAA"}
    config["gpulab:sshPrivateKey"] = {"secure": "v1:BBBB"}
    path.write_text(yaml.safe_dump(document))
    calls = tmp_path / "curl-calls"
    fakes = fake_bin(tmp_path / "fakes", df=ROOMY_DF, curl=f'echo "$*" >> {calls}; exit 7')
    with the_checkouts_bin(needs_it_empty=True):
        result = make(
            "up", f"STACK={name}", env={"PATH": f"{fakes}:/usr/bin:/bin", "PULUMI_CONFIG_PASSPHRASE": "x"}, timeout=120
        )
    assert result.returncode == 2, result.stderr
    assert calls.read_text().splitlines()[0].endswith("/bin/linux/amd64/kubectl"), calls.read_text()
    assert "kind" not in calls.read_text()
