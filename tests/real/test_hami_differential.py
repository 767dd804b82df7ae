"""gpulab's checker against the real HAMi v2.8.3, on seeded random tenants and pods (issue 29 item 2).

Per scenario: a stack file in a temp project dir (validated by gpulab's loader), that tenant on a process
lab (one real control plane for the run, renewed per scenario: KWOK GPU nodes, gpulab's admission and quota,
a fresh real hami-scheduler as extender and webhook); per pod, first `python -m policies check --live
--kubeconfig ... --output json` on that one pod, then the pod is created and its real outcome read.
Boundaries: the checker's CLI as a user runs it against a live tenant, the API server's admission
(gpulab's policies, ResourceQuota, HAMi's webhook), HAMi's filter and bind as kube-scheduler calls them.

GPULAB_DIFF_SEED replays from a scenario seed; GPULAB_DIFF_SECONDS bounds the run (default 120).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model.config import ConfigError, LabConfig, load_stack_file
from process_lab.commands import run
from process_lab.differential import TENANT, Outcome, Scenario, compare, denial, observe, predicted, random_scenario
from process_lab.hami import find_hami_scheduler
from process_lab.tenant import TenantLab

pytestmark = pytest.mark.real
STACK = "diff"


def ask_checker(project: Path, kubeconfig: Path, pod_file: Path) -> Outcome:
    argv = [sys.executable, "-m", "policies", "check", "--tenant", TENANT, "--stack", STACK]
    argv += ["--project-dir", project, "--live", "--kubeconfig", kubeconfig, "--output", "json", pod_file]
    result = run(argv, env=os.environ, what="python -m policies check", timeout=60, check=False)
    assert result.returncode in (0, 1), result.stderr
    return predicted(json.loads(result.stdout))


def scenario_config(scenario: Scenario, project: Path) -> LabConfig:
    """The scenario as Pulumi.diff.yaml in its project dir, read back by gpulab's loader (ConfigError if refused)."""
    project.mkdir(parents=True)
    stack_file = project / f"Pulumi.{STACK}.yaml"
    stack_file.write_text(scenario.stack_file())
    return load_stack_file(stack_file)


def run_pods(scenario: Scenario, lab: TenantLab, project: Path) -> list[str]:
    """Each pod in turn: the checker's prediction, then the real outcome; the disagreements."""
    control_plane = lab.control_plane
    disagreements = []
    for pod in scenario.pods:
        name = pod["metadata"]["name"]
        pod_file = project / f"{name}.json"
        pod_file.write_text(json.dumps(pod))
        checker = ask_checker(project, control_plane.kubeconfig, pod_file)
        created = control_plane.kubectl("create", "-f", str(pod_file), check=False)
        real = observe(control_plane, name) if created.returncode == 0 else denial(created.stderr)
        if (problem := compare(checker, real)) is not None:
            disagreements.append(f"seed {scenario.seed} pod {name}: {problem}")
    return disagreements


def test_checker_agrees_with_real_hami(real_bin: Path, tmp_path: Path) -> None:
    hami = find_hami_scheduler(real_bin)
    if hami is None:
        pytest.skip("no hami-scheduler (GPULAB_HAMI_SCHEDULER or <bin>/hami-scheduler): HAMi is not on the proxy")
    seed = int(os.environ.get("GPULAB_DIFF_SEED", time.time_ns() % 1_000_000))
    budget = float(os.environ.get("GPULAB_DIFF_SECONDS", "120"))
    print(f"\ndifferential: first seed {seed} (replay: GPULAB_DIFF_SEED={seed}), {budget:.0f} s")
    started = time.monotonic()
    compared, disagreements, scenarios = 0, [], []
    lab: TenantLab | None = None
    try:
        next_seed = seed
        while time.monotonic() - started < budget:
            scenario = random_scenario(next_seed)
            next_seed += 1
            project = tmp_path / f"seed-{scenario.seed}"
            try:
                config = scenario_config(scenario, project)
            except ConfigError as refused:
                print(f"seed {scenario.seed}: config refused by the loader, skipped ({str(refused)[:120]})")
                continue
            begun = time.monotonic()
            if lab is None:
                lab = TenantLab(config.tenants[0], config, real_bin, tmp_path / "lab", hami)
                lab.up()
            else:
                lab.renew(config.tenants[0], config)
            ready = time.monotonic()
            found = run_pods(scenario, lab, project)
            scenarios.append(scenario.seed)
            compared += len(scenario.pods)
            disagreements += found
            print(
                f"seed {scenario.seed}: {len(scenario.pods)} pods, {len(found)} disagree, "
                f"{time.monotonic() - begun:.1f} s ({ready - begun:.1f} s lab)"
            )
            for line in found:
                print(f"  {line}")
    finally:
        if lab is not None:
            lab.down()
    print(f"differential: {compared - len(disagreements)}/{compared} agree over {len(scenarios)} scenarios")
    leftovers = subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True, timeout=10).stdout
    assert leftovers == "", f"processes left behind: {leftovers}"
    assert scenarios, "no scenario ran within the budget"
    assert lab is not None and lab.bind_time is not None and lab.bind_time.errors == []
    assert disagreements == [], "\n".join(disagreements)
