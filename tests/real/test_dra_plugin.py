"""gpulab's DRA kubelet plugin (tools/gpulab-dra-plugin), as make tools built it and as Go builds its tests.

Boundary: k8s.io/dynamic-resource-allocation v0.36.4's kubelet plugin helper, compiled: the plugin's own Go tests
(driver_test.go: prepare writes a claim's CDI spec from kube-scheduler's allocation with "20k" as the API server
writes it, unprepare removes it, a claim this node cannot hold is refused) run against the pinned module, and the
built program refuses a bad devices file with what is wrong before it touches a kubelet. The kubelet's side (it
registers the plugin, deletes a starting node's slices, asks for prepare and unprepare) is judged by `make verify`
on a nodes stack with a DRA tenant (tests/acceptance/test_dra_lab.py TC-17, test_real_nodes.py TC-12), which CI runs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from shared_data import ROOT

from boundary.bounded_run import run_bounded
from model import dra
from model.catalog import Card
from tests.real import cluster as kwok

PLUGIN = ROOT / "tools" / "gpulab-dra-plugin"


def test_the_plugins_go_tests_pass_against_the_pinned_helper() -> None:
    go = shutil.which(os.environ.get("GO", "go"))
    if go is None:
        if os.environ.get("CI"):
            pytest.fail("CI has Go (make tools needs it): the plugin's Go tests must run")
        pytest.skip("no go on PATH: the plugin's Go tests need it (as make tools does)")
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}  # the go.sum of tools/gpulab-dra-plugin holds every module
    ended = run_bounded([go, "test", "-count=1", "./..."], 900, env=env, cwd=PLUGIN)
    output = (ended.stdout + ended.stderr).decode(errors="replace")
    assert not ended.timed_out and ended.returncode == 0, output[-3000:]
    assert "ok  \tgpulab.local/tools/gpulab-dra-plugin" in output, output


def test_the_built_plugin_refuses_a_bad_devices_file_naming_what_is_wrong(tmp_path: Path) -> None:
    program = kwok.bin_dir() / "gpulab-dra-plugin"
    if not os.access(program, os.X_OK):
        pytest.fail(f"{program} is missing: make tools builds it")
    shown = run_bounded([str(program), "--version"], 30)
    assert shown.returncode == 0 and b"k8s.io/dynamic-resource-allocation v0.36.4" in shown.stdout, shown.stdout
    card = Card(id="GPU-MOCK-t-0", index=0, type="NVIDIA-A100-SXM4-80GB", memory_mb=81920, cores=100, split_count=10)
    devices = dra.node_devices("t", "t-worker", [card])
    del devices["devices"][0]["capacity"][dra.CORES]
    path = tmp_path / "devices.json"
    path.write_text(json.dumps(devices))
    ended = run_bounded([str(program), f"--devices={path}", f"--kubeconfig={tmp_path / 'none'}"], 30)
    assert ended.returncode == 1, ended
    assert f'device "gpu-0" has no "{dra.CORES}" capacity' in ended.stderr.decode(), ended.stderr
