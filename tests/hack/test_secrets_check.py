"""`make up` / `make plan` refuse an empty passphrase when the stack holds secrets a user typed in."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import ROOT

from hack import secrets_check

WITH_SECRET = """config:
  gpulab:tenants:
    - name: tenant-a
  gpulab:sshPrivateKey:
    secure: v1:AAAABBBBCCCC:DDDD
"""


def check(tmp_path: Path, text: str | None, **env: str) -> subprocess.CompletedProcess:
    """The script's main() in this process (the Makefile runs the same main() as a module: see
    test_the_hosts_python_hands_the_check_to_the_venv for that boundary)."""
    if text is not None:
        (tmp_path / "Pulumi.dev.yaml").write_text(text)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        code = secrets_check.main(["dev", str(tmp_path)], {**environment, **env})
    return subprocess.CompletedProcess(["secrets_check.py", "dev"], code, "", stderr.getvalue())


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
        ("secretsprovider: awskms://alias/x\n" + WITH_SECRET, {}),
        ("config:\n  gpulab:tenants: []\n", {}),  # the lab's own defaults: no typed secrets
        (None, {}),  # no stack file yet
    ],
    ids=["passphrase", "kms", "no-secrets", "no-file"],
)
def test_allowed(tmp_path: Path, text, env) -> None:
    assert check(tmp_path, text, **env).returncode == 0


def test_a_readable_passphrase_file_is_a_passphrase(tmp_path: Path) -> None:
    phrase = tmp_path / "phrase"
    phrase.write_text("correct horse\n")
    assert check(tmp_path, WITH_SECRET, PULUMI_CONFIG_PASSPHRASE_FILE=str(phrase)).returncode == 0


@pytest.mark.parametrize(
    "text",
    [
        "config:\n  gpulab:sshPrivateKey: {secure: v1:AAAABBBB:CCCC}\n",
        'config:\n  gpulab:sshPrivateKey:\n    "secure": "v1:AAAABBBB:CCCC"\n',
        "config:\n  gpulab:sshPrivateKey: { 'secure' : 'v1:AAAABBBB:CCCC' }\n",
        "config:\n  'gpulab:sshPrivateKey':\n    secure: v1:AAAABBBB:CCCC\n",
        "config:\n  gpulab:tenants:\n    - name: a\n      workers: [{host: h, key: {secure: v1:AAAABBBB:CCCC}}]\n",
    ],
    ids=["flow", "double-quoted", "single-quoted-flow", "quoted-key", "nested-flow"],
)
def test_secrets_in_every_yaml_style_are_recognised(tmp_path: Path, text: str) -> None:
    result = check(tmp_path, text, PULUMI_CONFIG_PASSPHRASE="")
    assert result.returncode == 2, text
    assert "holds secrets you set (gpulab:" in result.stderr
    assert "AAAABBBB" not in result.stderr


def test_a_comment_is_not_a_secret(tmp_path: Path) -> None:
    text = "config:\n  gpulab:tenants: []  # set secure: values with pulumi config set --secret\n"
    assert check(tmp_path, text, PULUMI_CONFIG_PASSPHRASE="").returncode == 0


@pytest.mark.parametrize("case", ["missing", "unreadable", "empty", "whitespace"])
def test_a_passphrase_file_that_gives_no_passphrase_is_refused(tmp_path: Path, case: str) -> None:
    """Pulumi would fail on a file it cannot read, and read an empty or blank one as the empty passphrase."""
    phrase = tmp_path / "phrase"
    if case == "unreadable":
        phrase.mkdir()  # a directory: unreadable as a file even for root
    elif case != "missing":
        phrase.write_text("" if case == "empty" else "  \n\t\n")
    for text in (WITH_SECRET, "config:\n  gpulab:tenants: []\n"):
        result = check(tmp_path, text, PULUMI_CONFIG_PASSPHRASE_FILE=str(phrase))
        assert result.returncode == 2, (case, result.stderr)
        assert f"PULUMI_CONFIG_PASSPHRASE_FILE={phrase}" in result.stderr


def test_an_empty_passphrase_shadowing_a_file_is_refused(tmp_path: Path) -> None:
    """The CLI reads PULUMI_CONFIG_PASSPHRASE first whenever it is set, even empty: the file would be ignored."""
    phrase = tmp_path / "phrase"
    phrase.write_text("correct horse")
    result = check(tmp_path, WITH_SECRET, PULUMI_CONFIG_PASSPHRASE="", PULUMI_CONFIG_PASSPHRASE_FILE=str(phrase))
    assert result.returncode == 2
    assert "unset PULUMI_CONFIG_PASSPHRASE" in result.stderr


def make_environment(**env: str) -> str:
    """What a recipe of the Makefile sees of PULUMI_CONFIG_PASSPHRASE: its value, or <unset>."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    probe = 'gpulab-probe: ; @echo "[$${PULUMI_CONFIG_PASSPHRASE-<unset>}]"'
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", probe, "gpulab-probe"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**environment, **env},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.integration
def test_make_exports_an_empty_passphrase_only_without_a_file(tmp_path: Path) -> None:
    assert make_environment() == "[]"
    assert make_environment(PULUMI_CONFIG_PASSPHRASE="s3cret") == "[s3cret]"
    assert make_environment(PULUMI_CONFIG_PASSPHRASE_FILE=str(tmp_path / "p")) == "[<unset>]"
    assert make_environment(PULUMI_CONFIG_PASSPHRASE="", PULUMI_CONFIG_PASSPHRASE_FILE=str(tmp_path / "p")) == (
        "[<unset>]"
    )


@pytest.mark.integration
def test_make_up_and_plan_run_the_check_before_anything_is_deployed_or_planned() -> None:
    for target in ("up", "plan", "deploy", "destroy"):
        dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        lines = [line for line in dry.stdout.splitlines() if line.strip()]
        first = next(i for i, line in enumerate(lines) if "-m hack.secrets_check" in line)
        # A plan or a deployment; `preview --validate` (make up, before any download) only reads the config.
        actions = ("pulumi up", "pulumi destroy", "-m preview")
        action = next(
            i for i, line in enumerate(lines) if any(word in line for word in actions) and "--validate" not in line
        )
        assert first < action, (target, lines)


# --- the guard reads the file as the loader does (safe_yaml.load_stack), not by its lines ---


@pytest.mark.parametrize(
    "text",
    [
        'config:\n  gpulab:sshPrivateKey: {"secure":"v1:AAAABBBB:CCCC"}\n',  # JSON-style flow, no space after `:`
        "config:\n  gpulab:sshPrivateKey:\n    ? secure\n    : v1:AAAABBBB:CCCC\n",  # an explicit key
        'config:\n  gpulab:sshPrivateKey:\n    "\\x73ecure": v1:AAAABBBB:CCCC\n',  # an escaped key
        'config:\n  gpulab:sshPrivateKey: {"secur\\u0065": v1:AAAABBBB:CCCC}\n',
        "config: {gpulab:sshPrivateKey: {secure: v1:AAAABBBB:CCCC}}\n",  # the whole config in flow style
        "config:\n  gpulab:sshPrivateKey: &k\n    secure: v1:AAAABBBB:CCCC\n  gpulab:boxKey: *k\n",
    ],
    ids=["json-flow", "explicit-key", "escaped-key", "unicode-escape", "flow-config", "alias"],
)
def test_every_spelling_the_loader_reads_as_secure_is_a_secret(tmp_path: Path, text: str) -> None:
    """Boundary: the stack file as written (by a person or another tool), which the Pulumi CLI reads as YAML."""
    from model.config import stack_file_config

    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    assert "sshPrivateKey" in stack_file_config(tmp_path / "Pulumi.dev.yaml")[1], "the loader sees a secret"
    result = check(tmp_path, text, PULUMI_CONFIG_PASSPHRASE="")
    assert result.returncode == 2, (text, result.stderr)
    assert "holds secrets you set (gpulab:sshPrivateKey" in result.stderr
    assert "AAAABBBB" not in result.stderr


def test_a_secret_of_another_namespace_counts_too(tmp_path: Path) -> None:
    result = check(tmp_path, "config:\n  aws:secretKey: {secure: v1:AAAABBBB:CCCC}\n", PULUMI_CONFIG_PASSPHRASE="")
    assert result.returncode == 2 and "holds secrets you set (aws:secretKey)" in result.stderr


def test_a_secure_word_in_a_value_is_not_a_secret(tmp_path: Path) -> None:
    text = "config:\n  gpulab:note: 'secure: not really'\n  gpulab:tags: [secure, {secure: 1, other: 2}]\n"
    assert check(tmp_path, text, PULUMI_CONFIG_PASSPHRASE="").returncode == 0


def test_a_stack_file_the_loader_cannot_read_is_refused_with_its_one_line(tmp_path: Path) -> None:
    result = check(tmp_path, "config:\n  gpulab:sshPrivateKey: {secure: [\n", PULUMI_CONFIG_PASSPHRASE="")
    assert result.returncode == 2
    assert "Pulumi.dev.yaml: not valid YAML at line" in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.integration
def test_the_hosts_python_hands_the_check_to_the_venv(tmp_path: Path) -> None:
    """Boundary: `make up` runs the check with the host's python3 (PYTHON_HOST), which may lack PyYAML and pydantic
    (-S: no site-packages); with ./venv present the venv's python reads the file."""
    host_python = Path(sys.base_prefix) / "bin" / "python3"
    (tmp_path / "Pulumi.dev.yaml").write_text(WITH_SECRET)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    result = subprocess.run(
        [str(host_python), "-S", "-m", "hack.secrets_check", "dev", str(tmp_path)],
        cwd=ROOT,  # as make runs it: a module, from the project folder
        capture_output=True,
        text=True,
        env={**environment, "PULUMI_CONFIG_PASSPHRASE": ""},
        timeout=30,
    )
    assert result.returncode == 2 and "holds secrets you set (gpulab:sshPrivateKey)" in result.stderr, result.stderr


@pytest.mark.integration
def test_make_down_checks_once_the_venv_exists() -> None:
    """Boundary: the Makefile's destroy recipe (`make -n`): without ./venv the host's python3 cannot read the
    stack, so the check runs after prereqs has made ./venv, and before pulumi destroy."""
    dry = subprocess.run(["make", "-n", "destroy"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = dry.stdout.splitlines()
    order = [next(i for i, line in enumerate(lines) if word in line) for word in ("prereqs.sh", "hack.secrets_check")]
    assert order == sorted(order), lines
