"""Which hami-scheduler runs a tenant's HAMi release in process mode (process_lab/hami_binary.py).

Boundary: the Go linker's build information as it is written into a binary (runtime/debug.BuildInfo, what
`go version -m` prints): a build's `-ldflags` setting as text, e.g.
`build\t-ldflags="-s -w -X github.com/Project-HAMi/HAMi/pkg/version.version=v2.8.3 -X ..."`, and
`build\tvcs.revision=<commit>` for a build in a git checkout. The files here carry those lines as a Go 1.26 build
writes them (checked against a binary built here with `go build -ldflags`); tests/real/test_hami_binary_real.py
reads the real HAMi binaries where a developer has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from process_lab import hami_binary, preflight
from process_lab.hami_binary import binary_release, find, variable_for

STAMP = 'build\t-ldflags="-s -w -X github.com/Project-HAMi/HAMi/pkg/version.version={v} -X github.com/x/y.z=1"\n'


def binary(path: Path, *, version: str | None = None, revision: str | None = None) -> Path:
    """An executable whose build information says `version` (its ldflags) and/or `revision` (vcs)."""
    text = "\x7fELF...\xff Go buildinf:\npath\tgithub.com/Project-HAMi/HAMi/cmd/scheduler\n"
    if version:
        text += STAMP.format(v=version)
    if revision:
        text += f"build\tvcs=git\nbuild\tvcs.revision={revision}\nbuild\tvcs.modified=false\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1") + b"\x00" * 64)
    path.chmod(0o755)
    return path


def test_a_binary_says_its_release_by_its_ldflags_or_its_commit(tmp_path: Path) -> None:
    assert binary_release(binary(tmp_path / "a", version="v2.10.0")) == "v2.10.0"
    assert binary_release(binary(tmp_path / "b", revision="8f039ad22bfc14970e2ea557f24c411c34203079")) == "v2.8.3"
    assert binary_release(binary(tmp_path / "c", revision="0" * 40)) == "commit 000000000000"
    assert binary_release(binary(tmp_path / "d")) is None
    assert binary_release(tmp_path / "missing") is None
    (tmp_path / "empty").write_bytes(b"")
    assert binary_release(tmp_path / "empty") is None


def test_each_release_is_found_under_its_own_variable_or_name(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    new = binary(tmp_path / "built" / "new", version="v2.10.0")
    old = binary(bin_dir / "hami-scheduler-v2.8.3", version="v2.8.3")
    env = {variable_for("v2.10.0"): str(new)}
    assert variable_for("v2.10.0") == "GPULAB_HAMI_SCHEDULER_V2_10_0"
    assert find(bin_dir, "v2.10.0", env).path == new
    assert find(bin_dir, "v2.8.3", env).path == old


def test_a_binary_named_for_its_release_that_does_not_say_is_taken(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    unstamped = binary(bin_dir / "hami-scheduler-v2.10.0")
    assert find(bin_dir, "v2.10.0", {}).path == unstamped


def test_the_generic_name_serves_the_release_it_says_it_is_and_no_other(tmp_path: Path) -> None:
    """GPULAB_HAMI_SCHEDULER (what gpulab always took, a v2.8.3 build per docs/process-lab.md) keeps serving a
    v2.8.3 tenant; a v2.10.0 tenant is not given it, and the line says why and what to do."""
    given = binary(tmp_path / "hami" / "hami-scheduler", version="v2.8.3")
    env = {"GPULAB_HAMI_SCHEDULER": str(given)}
    assert find(tmp_path / "bin", "v2.8.3", env).path == given
    found = find(tmp_path / "bin", "v2.10.0", env)
    assert found.path is None
    assert f"GPULAB_HAMI_SCHEDULER ({given}) is HAMi v2.8.3" in found.problem
    assert "GPULAB_HAMI_SCHEDULER_V2_10_0" in found.problem and "pkg/version.version=v2.10.0" in found.problem


def test_a_generic_binary_that_does_not_say_is_not_run_for_any_release(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    binary(bin_dir / "hami-scheduler")
    found = find(bin_dir, "v2.8.3", {})
    assert found.path is None and "does not say which HAMi release it is" in found.problem


def test_a_release_variable_naming_another_release_is_refused(tmp_path: Path) -> None:
    wrong = binary(tmp_path / "wrong", version="v2.8.3")
    found = find(tmp_path / "bin", "v2.10.0", {variable_for("v2.10.0"): str(wrong)})
    assert found.path is None and f"GPULAB_HAMI_SCHEDULER_V2_10_0 ({wrong}) is HAMi v2.8.3" in found.problem


def test_a_release_variable_naming_nothing_says_so(tmp_path: Path) -> None:
    found = find(tmp_path / "bin", "v2.10.0", {variable_for("v2.10.0"): str(tmp_path / "nope")})
    assert found.path is None and "GPULAB_HAMI_SCHEDULER_V2_10_0=" in found.problem
    assert "is not an executable file" in found.problem


def test_the_preflight_names_each_missing_release_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(hami_binary.os.environ):
        if name.startswith("GPULAB_HAMI_SCHEDULER"):
            monkeypatch.delenv(name)
    binary(tmp_path / "hami-scheduler-v2.8.3", version="v2.8.3")
    lines = [line for line in preflight.problems(tmp_path, hami_versions=("v2.10.0", "v2.8.3")) if "HAMi" in line]
    assert len(lines) == 1 and lines[0].startswith("no hami-scheduler of HAMi v2.10.0"), lines
    assert preflight.hami_missing(tmp_path, ("v2.10.0", "v2.8.3")) == ["hami-scheduler (HAMi v2.10.0)"]
    assert not [line for line in preflight.problems(tmp_path, hami_versions=()) if "HAMi" in line]
