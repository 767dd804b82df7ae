"""gpulab's checker against the real HAMi of each release gpulab knows (v2.10.0, v2.8.3), on seeded random tenants
and pods: the tenant names the release (hamiVersion), and the checker judges with that release's rules.

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
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from model.config import ConfigError, LabConfig, load_stack_file
from model.hami_releases import KNOWN_VERSIONS
from placement.workloads import USE_GPUUUID
from process_lab.commands import run
from process_lab.differential import (
    NAMESPACE,
    TENANT,
    Outcome,
    Scenario,
    compare,
    denial,
    observe,
    predicted,
    random_scenario,
)
from process_lab.hami_binary import variable_for
from process_lab.hami_scheduler import find_hami_scheduler
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


@dataclass
class Compared:
    pod: str
    checker: Outcome
    real: Outcome
    problem: str | None  # None when they agree


def run_pods(scenario: Scenario, lab: TenantLab, project: Path) -> list[Compared]:
    """Each pod in turn: the checker's prediction on the live tenant, then the pod created and its real outcome."""
    control_plane = lab.control_plane
    results = []
    for pod in scenario.pods:
        name = pod["metadata"]["name"]
        pod_file = project / f"{name}.json"
        pod_file.write_text(json.dumps(pod))
        checker = ask_checker(project, control_plane.kubeconfig, pod_file)
        created = control_plane.kubectl("create", "-f", str(pod_file), check=False)
        real = observe(control_plane, name) if created.returncode == 0 else denial(created.stderr)
        results.append(Compared(name, checker, real, compare(checker, real)))
    return results


class SharedLab:
    """One tenant control plane per HAMi release, renewed for each scenario (1-2 s instead of 5)."""

    def __init__(self, real_bin: Path, hami: Path, folder: Path, version: str) -> None:
        self.real_bin, self.hami, self.folder, self.version = real_bin, hami, folder, version
        self.lab: TenantLab | None = None

    def run(self, scenario: Scenario) -> tuple[list[Compared], float]:
        """The scenario's comparisons and the seconds its lab took; ConfigError if the loader refuses it."""
        project = self.folder / f"seed-{scenario.seed}"
        config = scenario_config(scenario, project)
        begun = time.monotonic()
        if self.lab is None:
            self.lab = TenantLab(config.tenants[0], config, self.real_bin, self.folder / "lab", self.hami)
            self.lab.up()
        else:
            self.lab.renew(config.tenants[0], config)
        return run_pods(scenario, self.lab, project), time.monotonic() - begun


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="module", params=KNOWN_VERSIONS)
def shared(request: pytest.FixtureRequest, real_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    version = request.param
    hami = find_hami_scheduler(real_bin, version)
    if hami is None:
        pytest.skip(f"no hami-scheduler of HAMi {version} ({variable_for(version)}): HAMi is not on the proxy")
    folder = tmp_path_factory.mktemp(f"differential-{version}")
    lab = SharedLab(real_bin, hami, folder, version)
    # kwokctl's processes are not this process's children: a TERM (a CI timeout) must end them too, so it
    # unwinds like Ctrl-C, through pytest's teardown.
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield lab
    finally:
        try:
            if lab.lab is not None:
                lab.lab.down()
        finally:
            signal.signal(signal.SIGTERM, previous)
    leftovers = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True, timeout=10).stdout
    assert leftovers == "", f"processes left behind: {leftovers}"
    assert lab.lab is None or lab.lab.bind_time is None or lab.lab.bind_time.errors == []


def test_checker_agrees_with_real_hami(shared: SharedLab) -> None:
    seed = int(os.environ.get("GPULAB_DIFF_SEED", time.time_ns() % 1_000_000))
    budget = float(os.environ.get("GPULAB_DIFF_SECONDS", "120"))
    print(f"\ndifferential: first seed {seed} (replay: GPULAB_DIFF_SEED={seed}), {budget:.0f} s")
    started = time.monotonic()
    compared, disagreements, scenarios = 0, [], []
    next_seed = seed
    while time.monotonic() - started < budget:
        scenario = random_scenario(next_seed, shared.version)
        next_seed += 1
        begun = time.monotonic()
        try:
            results, lab_seconds = shared.run(scenario)
        except ConfigError as refused:
            print(f"seed {scenario.seed}: config refused by the loader, skipped ({str(refused)[:120]})")
            continue
        found = [f"seed {scenario.seed} pod {r.pod}: {r.problem}" for r in results if r.problem is not None]
        scenarios.append(scenario.seed)
        compared += len(results)
        disagreements += found
        print(
            f"seed {scenario.seed}: {len(results)} pods, {len(found)} disagree, "
            f"{time.monotonic() - begun:.1f} s ({lab_seconds:.1f} s lab)"
        )
        for line in found:
            print(f"  {line}")
    print(
        f"differential (HAMi {shared.version}): {compared - len(disagreements)}/{compared} agree over "
        f"{len(scenarios)} scenarios"
    )
    assert scenarios, "no scenario ran within the budget"
    assert disagreements == [], "\n".join(disagreements)


def test_shrunk_a_node_with_too_few_cards_is_never_named_by_hami(shared: SharedLab) -> None:
    """Seeds 1000, 1002, 1004 shrunk: one L4 on node 0, two on node 1, the first of them taken whole. A
    2-card pod: node 0 has too few cards, node 1 one card too few free. HAMi names node 1's reasons only
    (NodeInsufficientDevice is dropped: docs/process-lab.md), and so does the checker now."""
    whole = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}
    two = {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "10"}
    pin = {USE_GPUUUID: f"GPU-MOCK-{TENANT}-worker-1-0"}
    tenant = {
        "name": TENANT,
        "namespaces": [NAMESPACE],
        "hamiVersion": shared.version,
        "nodes": [{"gpus": [{"model": "L4", "count": n}]} for n in (1, 2)],
    }
    config = {"gpulab:runtime": "process", "gpulab:tenants": [tenant]}
    scenario = Scenario(-1, config, [pod("whole", whole, pin), pod("two", two)])
    (first, second), _ = shared.run(scenario)
    assert first.real.placed and first.real.cards == [[pin[USE_GPUUUID]]]
    assert not second.real.placed and second.real.reasons, second.real
    assert "NodeInsufficientDevice" not in second.real.reasons
    assert [first.problem, second.problem] == [None, None]


def pod(name: str, limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    metadata = {"name": name, "namespace": NAMESPACE, **({"annotations": annotations} if annotations else {})}
    container = {"name": "c0", "image": "busybox", "resources": {"limits": limits}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}
