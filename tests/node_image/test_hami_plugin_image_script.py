"""node-image/hami-plugin-image.sh (`make lab-images`' image of gpulab-hami-plugin) against a recording fake docker and
a stand-in for make tools' binary: the image it imports (name, entrypoint, labels), its cache by the inputs' hash,
and its refusals. The real image in a real kubelet: tests/real/test_hami_plugin_daemonset.py."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from shared_data import ROOT

from model.versions import HAMI_DEVICE_PLUGIN_IMAGE
from tests.hack.test_first_run import BASH, fake_bin

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration

SCRIPT = ROOT / "node-image" / "hami-plugin-image.sh"
VERSION_LINE = "gpulab-hami-plugin (k8s.io/kubelet v0.36.4)"


def plugin(folder: Path, version_line: str = VERSION_LINE, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "gpulab-hami-plugin"
    program.write_text(f'#!/bin/sh\n{extra}\necho "{version_line}"\n')
    program.chmod(0o755)
    return folder


def run(tmp_path: Path, bin_dir: Path, docker: str = "", **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    calls = tmp_path / "calls"
    body = f'echo "docker $*" >> {calls}\nif [ "$1" = import ]; then cat > {tmp_path}/layer.tar; fi\n{docker}'
    fakes = fake_bin(tmp_path / "fakes", docker=body)
    result = subprocess.run(
        [BASH, str(SCRIPT)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "GPULAB_BIN": str(bin_dir), **env},
        timeout=60,
    )
    return result, calls.read_text().splitlines() if calls.exists() else []


def test_it_imports_the_binary_alone_under_the_pinned_name_labelled_with_its_inputs(tmp_path: Path) -> None:
    # `image inspect` finds nothing: a first build.
    result, calls = run(tmp_path, plugin(tmp_path / "bin"), 'case "$1 $2" in "image inspect") exit 1;; esac')
    assert result.returncode == 0, result.stderr
    [imported] = [call for call in calls if call.startswith("docker import")]
    key = re.search(r"gpulab.io/hami-plugin.inputs=([0-9a-f]{64})", imported).group(1)
    repository = HAMI_DEVICE_PLUGIN_IMAGE.rsplit(":", 1)[0]
    assert imported.endswith(f" - {repository}:{key[:12]}")
    assert 'ENTRYPOINT ["/usr/bin/gpulab-hami-plugin"]' in imported
    assert 'LABEL gpulab.io/built-by="gpulab make lab-images"' in imported
    assert "LABEL gpulab.io/hami-plugin.kubelet-api=v0.36.4" in imported
    assert f"docker tag {repository}:{key[:12]} {HAMI_DEVICE_PLUGIN_IMAGE}" in calls
    listing = subprocess.run(["tar", "-tvf", str(tmp_path / "layer.tar")], capture_output=True, text=True).stdout
    files = sorted(line.split()[-1] for line in listing.splitlines())
    assert files == ["./", "./tmp/", "./usr/", "./usr/bin/", "./usr/bin/gpulab-hami-plugin"]
    assert f"built {repository}:{key[:12]} (also {HAMI_DEVICE_PLUGIN_IMAGE})" in result.stderr


def test_an_image_of_the_same_inputs_is_not_built_again(tmp_path: Path) -> None:
    bin_dir = plugin(tmp_path / "bin")
    first, calls = run(tmp_path, bin_dir, 'case "$1 $2" in "image inspect") exit 1;; esac')
    assert first.returncode == 0, first.stderr
    key = re.search(r"hami-plugin.inputs=([0-9a-f]{64})", " ".join(calls)).group(1)
    (tmp_path / "calls").unlink()
    again, calls = run(tmp_path, bin_dir, f'case "$*" in *Labels*) echo {key};; "image inspect"*) echo 1000000;; esac')
    assert again.returncode == 0, again.stderr
    assert not [call for call in calls if call.startswith("docker import")]
    assert "is up to date" in again.stderr
    # Another binary is another image.
    (tmp_path / "calls").unlink()
    changed, calls = run(
        tmp_path,
        plugin(bin_dir, extra="# rebuilt"),
        f'case "$*" in *Labels*) echo {key};; "image inspect"*) echo 1000000;; esac',
    )
    assert changed.returncode == 0 and [call for call in calls if call.startswith("docker import")]


@pytest.mark.parametrize(
    ("version_line", "extra", "said"),
    [
        (
            "gpulab-hami-plugin (k8s.io/kubelet v0.35.0)",
            "",
            "not the k8s.io/kubelet v0.36.4 of tools/gpulab-hami-plugin",
        ),
        (VERSION_LINE, "# /lib64/ld-linux-x86-64.so.2", "is dynamically linked; the image has no C library"),
    ],
)
def test_a_binary_that_is_not_make_tools_static_plugin_is_refused(
    tmp_path: Path, version_line: str, extra: str, said: str
) -> None:
    result, calls = run(tmp_path, plugin(tmp_path / "bin", version_line, extra))
    assert result.returncode == 1 and said in result.stderr, result.stderr
    assert not [call for call in calls if call.startswith("docker import")]


def test_no_binary_says_how_to_get_one(tmp_path: Path) -> None:
    result, _ = run(tmp_path, tmp_path / "empty")
    assert result.returncode == 1
    assert "gpulab-hami-plugin is missing: `make lab-images` builds it" in result.stderr


def test_another_name_is_taken_but_not_with_a_digest(tmp_path: Path) -> None:
    inspect = 'case "$1 $2" in "image inspect") exit 1;; esac'
    mine = "localhost/me/plugin:v1"
    result, calls = run(tmp_path, plugin(tmp_path / "bin"), inspect, GPULAB_HAMI_PLUGIN_IMAGE=mine)
    assert result.returncode == 0, result.stderr
    assert any(call.startswith("docker tag localhost/me/plugin:") and call.endswith(f" {mine}") for call in calls)
    refused, _ = run(tmp_path, plugin(tmp_path / "bin"), inspect, GPULAB_HAMI_PLUGIN_IMAGE=f"{mine}@sha256:{'a' * 64}")
    assert refused.returncode == 1 and "has a digest" in refused.stderr
