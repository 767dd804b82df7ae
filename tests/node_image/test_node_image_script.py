"""node-image/build.sh's choice of Debian source, and the node's runc wrapper, offline.

The mirror: read from the machine's apt sources (one-line and deb822), first source of the release's main
component, an error naming the folder when there is none. The wrapper (node-image/files/usr/local/sbin/gpulab-runc,
sh + jq) against a fake runc and a fake /proc/self/status: a passthrough where the bounding set holds
CAP_SYS_RESOURCE, an edit of the spec where it does not. The real image and containerd: tests/real/test_node_image.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "node-image" / "build.sh"
WRAPPER = ROOT / "node-image" / "files" / "usr" / "local" / "sbin" / "gpulab-runc"
WITH_CAPABILITY = "000001ffffffffff"
WITHOUT_CAPABILITY = "000001fffeffffff"  # bit 24 clear: this machine's bounding set


def mirror(apt: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--mirror"], env={"PATH": "/usr/bin:/bin", "APT_DIR": str(apt)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_a_deb822_source_of_the_release_is_chosen(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\nTypes: deb-src deb\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    (tmp_path / "sources.list.d" / "other.sources.disabled").write_text(
        "Types: deb\nURIs: http://x/\nSuites: bookworm\n"
    )
    found = mirror(tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["http://mirror.example/debian", "/usr/share/keyrings/debian-archive-keyring.gpg"]


def test_a_one_line_source_with_options_is_read(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "deb http://other.example/debian bookworm contrib\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n"
    )
    assert mirror(tmp_path).stdout.split() == ["http://mirror.example/debian", "/k.gpg"]


def test_a_disabled_source_is_not_used_and_none_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n"
    )
    found = mirror(tmp_path)
    assert found.returncode == 1
    assert f"no Debian source for bookworm (main) in {tmp_path}" in found.stderr


@pytest.fixture
def fake_runc(tmp_path: Path) -> Path:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed here (the node image has it)")
    runc = tmp_path / "runc"
    runc.write_text('#!/bin/sh\necho "runc $*"\n')
    runc.chmod(0o755)
    return runc


def wrap(tmp_path: Path, runc: Path, bounding: str, *args: str) -> str:
    status = tmp_path / "status"
    status.write_text(f"Name:\tsh\nCapBnd:\t{bounding}\n")
    env = {"PATH": "/usr/bin:/bin", "GPULAB_RUNC": str(runc), "GPULAB_PROC_STATUS": str(status)}
    result = subprocess.run(
        ["sh", str(WRAPPER), *args], env={**env, "GPULAB_OOM_SCORE_ADJ": "-500"},
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return result.stdout.strip()


def spec_file(path: Path, process: dict) -> Path:
    path.write_text(json.dumps({"ociVersion": "1.0.2", "process": process, "root": {"path": "rootfs"}}))
    return path


SANDBOX = {
    "capabilities": {"bounding": ["CAP_KILL", "CAP_SYS_RESOURCE"], "effective": ["CAP_SYS_RESOURCE"]},
    "oomScoreAdj": -998,
}


def test_the_wrapper_passes_through_where_the_capability_is_there(tmp_path: Path, fake_runc: Path) -> None:
    spec = spec_file(tmp_path / "config.json", SANDBOX)
    before = spec.read_text()
    args = ("--root", "/run/r", "create", "--bundle", str(tmp_path), "id")
    assert wrap(tmp_path, fake_runc, WITH_CAPABILITY, *args) == "runc " + " ".join(args)
    assert spec.read_text() == before


def test_the_wrapper_drops_the_capability_and_raises_oom_score_adj(tmp_path: Path, fake_runc: Path) -> None:
    spec = spec_file(tmp_path / "config.json", SANDBOX)
    args = ("--root", "/run/r", "--log-format", "json", "create", "--bundle", str(tmp_path), "--pid-file", "p", "id")
    assert wrap(tmp_path, fake_runc, WITHOUT_CAPABILITY, *args) == "runc " + " ".join(args)
    edited = json.loads(spec.read_text())
    assert edited["process"] == {"capabilities": {"bounding": ["CAP_KILL"], "effective": []}, "oomScoreAdj": -500}
    assert edited["root"] == {"path": "rootfs"}


def test_the_wrapper_leaves_a_higher_oom_score_adj_and_edits_an_exec_process(tmp_path: Path, fake_runc: Path) -> None:
    process = spec_file(tmp_path / "process.json", {})
    process.write_text(
        json.dumps({"args": ["sh"], "capabilities": {"permitted": ["CAP_SYS_RESOURCE"]}, "oomScoreAdj": 5})
    )
    wrap(tmp_path, fake_runc, WITHOUT_CAPABILITY, "exec", f"--process={process}", "id")
    assert json.loads(process.read_text()) == {"args": ["sh"], "capabilities": {"permitted": []}, "oomScoreAdj": 5}


def test_the_wrapper_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck") or str(ROOT / "venv" / "bin" / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("shellcheck is not installed")
    result = subprocess.run([shellcheck, str(WRAPPER)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout
