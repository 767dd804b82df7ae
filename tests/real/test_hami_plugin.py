"""gpulab's HAMi device plugin (tools/gpulab-hami-plugin), as make tools built it and as Go builds its tests.

Boundary: the kubelet's device plugin API v1beta1 of k8s.io/kubelet v0.36.4, compiled, and HAMi's wire formats as
HAMi v2.10.0 and v2.8.3 write them: the plugin's own Go tests (grpc_test.go: registration with a fake kubelet over
unix sockets, the ListAndWatch counts of nvidia.com/gpu, gpumem and gpucores, re-registration after a kubelet
restart; allocate_test.go: Allocate on pods annotated as HAMi's own tests annotate them, bind-phase and the node lock
after it; register_test.go: the node's register annotation) run against the pinned modules, and the built program
refuses a bad cards file with what is wrong before it touches a kubelet or an API server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from shared_data import ROOT

from boundary.bounded_run import run_bounded
from model.catalog import Card
from tests.real import cluster as kwok
from tools.manifest import required_version

PLUGIN = ROOT / "tools" / "gpulab-hami-plugin"


def missing(what: str) -> None:
    """CI has every program (make tools builds them): there a missing one fails; elsewhere the test is skipped."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI")
    pytest.skip(f"{what} is missing")


def test_the_plugins_go_tests_pass_against_the_pinned_modules() -> None:
    go = shutil.which(os.environ.get("GO", "go"))
    if go is None:
        missing("go (make tools needs it; the plugin's Go tests run with it)")
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}  # the go.sum of tools/gpulab-hami-plugin holds every module
    ended = run_bounded([go, "test", "-count=1", "./..."], 900, env=env, cwd=PLUGIN)
    output = (ended.stdout + ended.stderr).decode(errors="replace")
    assert not ended.timed_out and ended.returncode == 0, output[-3000:]
    assert "ok  \tgpulab.local/tools/gpulab-hami-plugin" in output, output[-3000:]


def test_the_built_plugin_refuses_a_bad_cards_file_naming_what_is_wrong(tmp_path: Path) -> None:
    program = kwok.bin_dir() / "gpulab-hami-plugin"
    if not os.access(program, os.X_OK):
        missing(f"{program} (make tools builds it)")
    kubelet_api = required_version((PLUGIN / "go.mod").read_text(), "k8s.io/kubelet")
    shown = run_bounded([str(program), "--version"], 30)
    assert shown.returncode == 0, shown
    assert shown.stdout.decode().strip() == f"gpulab-hami-plugin (k8s.io/kubelet {kubelet_api})", shown.stdout

    card = Card(id="GPU-MOCK-t-0", index=0, type="NVIDIA-L4", memory_mb=24576, cores=0, split_count=10)
    cards = tmp_path / "hami-cards.json"
    cards.write_text(json.dumps([dataclasses.asdict(card)]))
    sockets = tmp_path / "device-plugins"
    sockets.mkdir()
    ended = run_bounded(
        [
            str(program),
            f"--cards={cards}",
            "--node-name=t-worker",
            f"--kubeconfig={tmp_path / 'none'}",
            f"--socket-dir={sockets}",
        ],
        30,
    )
    said = ended.stderr.decode().splitlines()
    assert ended.returncode == 1, ended
    assert len(said) == 1, said
    assert said[0].startswith(f"gpulab-hami-plugin: --cards {cards}: "), said
    assert 'card #0 (id "GPU-MOCK-t-0"): cores 0 is not in 1..100' in said[0], said
    assert not list(sockets.iterdir()), "the plugin touched the kubelet's folder before refusing its input"


def test_the_built_plugin_refuses_an_unknown_hami_version(tmp_path: Path) -> None:
    program = kwok.bin_dir() / "gpulab-hami-plugin"
    if not os.access(program, os.X_OK):
        missing(f"{program} (make tools builds it)")
    ended = run_bounded([str(program), "--hami-version=v2.9.0", "--node-name=t-worker"], 30)
    said = ended.stderr.decode().splitlines()
    assert ended.returncode == 1 and len(said) == 1, ended
    assert '--hami-version "v2.9.0"' in said[0] and "pass v2.10.0" in said[0] and "v2.8.3" in said[0], said
