"""The scheduling benchmark's rows, settings and report (benchmarks/hami_scheduling.py runs them): pure logic,
tested offline in tests/benchmarks/test_benchmarks.py.

A row is (KWOK nodes, pods, node policy); a setting is who schedules and how: HAMi with some flags,
kube-scheduler alone (the ceiling) with some client rate, or kube-scheduler alone allocating the same cards as DRA
devices (`dra`: each pod's claim of 1000 MB and 5 % cores from the node's ResourceSlice, as a gpuSharing: dra
tenant's). Each (row, setting) is one measurement; each row reports HAMi's and DRA's rates against the ceiling's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Row:
    nodes: int
    pods: int
    policy: str  # node policy: HAMi's nodeSchedulerPolicy, kube-scheduler's NodeResourcesFit strategy
    goal: float | None = None  # pods/s the issue asks of HAMi on this row

    def __str__(self) -> str:
        return f"{self.nodes} nodes, {self.pods} pods, {self.policy}"


# The goal rows (docs/performance.md): 1,000 pods on 100 nodes spread (under 60 s: 17 pods/s); 100 pods on 10
# nodes binpack (5 pods/s); and the growth of HAMi's per-node scoring with the node count, at 100 pods.
PRESETS: dict[str, list[Row]] = {
    "goal": [
        Row(100, 1000, "spread", goal=17),
        Row(10, 100, "binpack", goal=5),
        Row(10, 100, "spread"),
        Row(100, 100, "spread"),
        Row(1000, 100, "spread"),
    ],
}
ROW = re.compile(r"(\d+)x(\d+)(?::(spread|binpack))?")


def parse_rows(values: list[str]) -> list[Row]:
    """`--rows` values: a preset's name, or NODESxPODS[:POLICY] (policy spread unless given)."""
    rows: list[Row] = []
    for value in values:
        if value in PRESETS:
            rows += PRESETS[value]
            continue
        match = ROW.fullmatch(value)
        if not match or int(match[1]) < 1 or int(match[2]) < 1:
            presets = ", ".join(PRESETS)
            raise argparse.ArgumentTypeError(f"{value!r}: a row is NODESxPODS[:spread|binpack] or one of: {presets}")
        rows.append(Row(int(match[1]), int(match[2]), match[3] or "spread"))
    return rows


@dataclass(frozen=True)
class Setting:
    """HAMi's flags changed from the lab's (`hami`, {} for none), or kube-scheduler alone with its client at
    (`client` qps, burst); with `dra`, kube-scheduler alone allocating the cards as DRA devices."""

    hami: dict | None = None
    client: tuple[int, int] | None = None
    dra: bool = False

    @property
    def ceiling(self) -> bool:
        return self.client is not None and not self.dra

    @property
    def scheduler_alone(self) -> bool:
        """No HAMi in the tenant: kube-scheduler places (and allocates) alone."""
        return self.client is not None


# kube-scheduler's own client defaults (KubeSchedulerConfiguration v1: clientConnection qps 50, burst 100), and the
# rate kwokctl's disableQPSLimits passes it as flags (kwok v0.8.0 pkg/kwokctl/components/kube_scheduler.go,
# pkg/consts). The lab sets that option (process_lab/control_plane.py LAB_OPTIONS): a tenant's kube-scheduler without
# a configuration file (a DRA tenant, or `scheduler: kube-scheduler`) runs at 5000 / 10000; beside a file (HAMi's
# tenants, and every row here) it ignores the flags and takes the file's rate.
SCHEDULER_CLIENT = (50, 100)
UNTHROTTLED_CLIENT = (5000, 10000)
SETTINGS: dict[str, Setting] = {
    "chart": Setting(hami={"hami_kube_qps": 5, "hami_kube_burst": 10, "hami_log_verbosity": 4}),  # client-go's, -v=4
    "lab": Setting(hami={}),
    "lab-v4": Setting(hami={"hami_log_verbosity": 4}),
    "ceiling": Setting(client=SCHEDULER_CLIENT),
    # Tells whether the ceiling is kube-scheduler's or its client's.
    "ceiling-unthrottled": Setting(client=UNTHROTTLED_CLIENT),
    # The same cards shared through DRA (docs/dra.md): kube-scheduler's own allocator, its client at the rate a DRA
    # tenant's kube-scheduler runs with in the lab.
    "dra": Setting(client=UNTHROTTLED_CLIENT, dra=True),
}
CEILING = "ceiling"  # the ceiling each HAMi row is divided by


def scoring_strategy(policy: str) -> str:
    """kube-scheduler's NodeResourcesFit strategy that places GPU pods as HAMi's node policy does."""
    return {"spread": "LeastAllocated", "binpack": "MostAllocated"}[policy]


def dra_scheduler_config(client: tuple[int, int]) -> str:
    """kube-scheduler's configuration for the DRA setting: the default profile (its DynamicResources plugin is the
    allocator; NodeResourcesFit's default scores spread pods that ask nothing by how many each node holds), no
    leader election (as HAMi's rows: process_lab/hami_scheduler.py), and the client rate written out. kwokctl takes
    only this apiVersion and kind, and adds clientConnection.kubeconfig (pkg/kwokctl/runtime/scheduler.go)."""
    qps, burst = client
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  qps: {qps}
  burst: {burst}
"""


def ceiling_scheduler_config(policy: str, client: tuple[int, int]) -> str:
    """kube-scheduler's configuration for the ceiling: the DRA setting's, with the default profile scoring nodes
    by their allocated share of nvidia.com/gpu (its default scores cpu and memory, which these pods do not ask)."""
    return (
        dra_scheduler_config(client)
        + f"""profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: {scoring_strategy(policy)}
        resources:
        - {{name: {GPU}, weight: 1}}
"""
    )


def unready_nodes(items: list[dict], gpus: bool = True) -> list[str]:
    """Nodes a scheduler cannot place a GPU pod on yet: not Ready, tainted (the node lifecycle controller's
    not-ready taint until KWOK reports Ready), or without allocatable nvidia.com/gpu (unless `gpus` is False: a
    DRA node's cards are its ResourceSlice's)."""
    names = []
    for node in items:
        conditions = {c.get("type"): c.get("status") for c in node.get("status", {}).get("conditions", [])}
        count = node.get("status", {}).get("allocatable", {}).get(GPU, "0")
        if conditions.get("Ready") != "True" or node.get("spec", {}).get("taints") or (gpus and count in ("0", "")):
            names.append(node["metadata"]["name"])
    return names


def watched_binding(line: str) -> tuple[str, str | None] | None:
    """One line of the benchmark's pod watch (`kubectl get --raw` of a watch: the API server's WatchEvent as JSON,
    one a line): (pod, its node or None until bound); None for a blank line or an event that is not a pod's."""
    if not line.strip():
        return None
    event = json.loads(line)
    if event.get("type") not in ("ADDED", "MODIFIED"):
        return None
    pod = event.get("object") or {}
    return pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName") or None


@dataclass(frozen=True)
class Result:
    row: Row
    setting: str
    flags: str  # what the setting ran with, in words
    bound: int
    seconds: float  # from the pods' create until the last was bound, or the deadline
    created: float  # seconds until every pod was created
    at: str  # UTC time the measurement ended
    cpu: tuple[tuple[str, float], ...] = ()  # CPU seconds per program while the pods were bound (benchmarks/cpu.py)

    @property
    def rate(self) -> float:
        return self.bound / self.seconds if self.seconds > 0 else 0.0


def ceiling_ratio(result: Result, results: list[Result]) -> float | None:
    """HAMi's (or DRA's) rate over the ceiling's on the same row; None for a ceiling row or a row without one."""
    if SETTINGS[result.setting].ceiling:
        return None
    ceiling = next((r for r in results if r.row == result.row and r.setting == CEILING), None)
    return result.rate / ceiling.rate if ceiling and ceiling.rate > 0 else None


def goal_met(result: Result) -> str:
    """Whether a HAMi row meets its row's goal (every pod bound, at the goal's rate or above)."""
    goal = result.row.goal
    if goal is None or SETTINGS[result.setting].scheduler_alone:  # the goals are HAMi's
        return ""
    met = result.bound == result.row.pods and result.rate >= goal
    return f"{'met' if met else 'not met'} (>= {goal:g})"


def line(result: Result) -> str:
    """A measurement as the benchmark prints it when it ends."""
    return (
        f"{result.at} {result.row}, {result.setting} ({result.flags}): bound {result.bound}/{result.row.pods} in "
        f"{result.seconds:.1f} s (all created after {result.created:.1f} s): {result.rate:.1f} pods/s"
    )


def summary(row: Row, results: list[Result], checker: str) -> str:
    """A row's HAMi / ceiling for each HAMi setting, its goal, and `checker` (gpulab's checker on the same pods)."""
    measured = [r for r in results if r.row == row]
    ceiling = next((r for r in measured if r.setting == CEILING), None)
    parts = []
    ratios = [f"{r.setting} {ratio:.2f}" for r in measured if (ratio := ceiling_ratio(r, results)) is not None]
    if ceiling and ratios:
        parts.append(f"HAMi or DRA / ceiling ({ceiling.rate:.1f} pods/s): {', '.join(ratios)}")
    goals = [f"{r.setting} {goal_met(r)}" for r in measured if goal_met(r)]
    if goals:
        parts.append(f"goal: {', '.join(goals)}")
    return f"{row}: " + "; ".join([*parts, checker])


def table(results: list[Result]) -> list[str]:
    """The run as a Markdown table for docs/performance.md, in the order measured."""
    lines = [
        "| nodes | pods | node policy | setting | bound | time | pods/s | HAMi or DRA / ceiling | goal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        ratio = ceiling_ratio(r, results)
        lines.append(
            f"| {r.row.nodes} | {r.row.pods} | {r.row.policy} | {r.setting} | {r.bound}/{r.row.pods} | "
            f"{r.seconds:.1f} s | {r.rate:.1f} | {'' if ratio is None else f'{ratio:.2f}'} | {goal_met(r)} |"
        )
    return lines


def machine(proc: Path = Path("/proc")) -> str:
    """nproc (the CPUs this process may run on), the CPU model, memory and the kernel."""
    cpuinfo = (proc / "cpuinfo").read_text() if (proc / "cpuinfo").exists() else ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    memory_kib = next(
        (int(line.split()[1]) for line in (proc / "meminfo").read_text().splitlines() if line.startswith("MemTotal:")),
        0,
    )
    cpus = len(os.sched_getaffinity(0))
    model = f" ({models[0]})" if models else ""
    return f"{cpus} CPUs{model}, {memory_kib / 1024 / 1024:.1f} GiB, {platform.system()} {platform.release()}"


def header(command: str, tools: str, proc: Path = Path("/proc")) -> list[str]:
    """Date, machine, command and programs: the lines that make a run's figures citable."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [f"# date: {now}", f"# machine: {machine(proc)}", f"# command: {command}", f"# programs: {tools}"]
