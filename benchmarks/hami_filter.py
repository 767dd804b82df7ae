"""HAMi's Filter cost per call: the extender's `/filter` HTTP round trip, timed as kube-scheduler makes it, on
HAMi releases side by side (issue 64 item 5, beside HAMi issue #3021's 4.2 ms at 50 nodes x 8 cards).

Per row (N KWOK nodes of C A100 cards, F pods already placed) and release: a fresh process-lab tenant as
benchmarks/hami_scheduling.py makes it (tenant-a of Pulumi.dev.yaml: a real control plane, gpulab's admission, HAMi
as extender and webhook over TLS with the lab's settings, process_lab/hami_scheduler.py; node policy spread), its GPU
node replaced by the N nodes. Every pod asks 1 card, 1000 MB, 5 % cores, is created without a schedulerName (HAMi's
webhook gives it hami-scheduler and gpulab's admission lets it in, as in the lab) and carries a scheduling gate, so
the tenant's kube-scheduler holds it and never calls the extender for it.

- The F placed pods also carry what HAMi's Filter writes on a pod it placed (`placement`: the node, and one card's
  1000 MB / 5 % in hami.io/vgpu-devices-allocated, HAMi pkg/device/devices.go EncodePodDevices, the same text in
  v2.8.3 and v2.10.0), round robin over the cards: HAMi's pod informer takes them into its cache as it would after
  a restart (pkg/scheduler/scheduler.go onAddPod), and the run waits until HAMi's metrics count them all.
- Then, for each of K measured pods in turn, the benchmark sends what kube-scheduler's HTTP extender sends with
  `nodeCacheCapable: true` (the lab's extender configuration): a POST to `<urlPrefix>/filter` of an ExtenderArgs
  (k8s.io/kube-scheduler/extender/v1: `Pod`, the pod as the API server holds it, its gate lifted; `Nodes` null;
  `NodeNames`, all N nodes), on one kept-alive HTTPS connection, and times the round trip: HAMi's decode, its Filter
  (every node's usage from its cache, every node scored, the pod's annotations patched in the API server, an event)
  and the answer. Filter keeps each allocation in its cache, so measured call k runs with F + k - 1 pods in it; the
  run refuses a row where F + K pods would not all find a card (`fits`), and checks every call chose one node.

Also per call, from HAMi's log (klog's microseconds): from its "Starting schedule filter process" to its
"Scheduling pod to node", i.e. getNodesUsage, calcScore and the sort, before the patch; and HAMi's log bytes a call.

Needs `make tools` and each release's hami-scheduler (GPULAB_HAMI_SCHEDULER_V2_10_0, ..._V2_8_3). Usage:
  venv/bin/python -m benchmarks.hami_filter [--rows issue-3021 | 50x8:1000 ...] [--hami-versions v2.10.0 v2.8.3]
      [--repeats 3] [--calls 100] [--setting lab] [--hami-verbosity N]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import http.client
import json
import math
import re
import shlex
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from benchmarks.hami_scheduling import A100, LIMITS, NAMESPACE, add_nodes, create_pods, pods
from benchmarks.scheduling_rows import SETTINGS, header
from hami.annotations import ALLOCATED, ASSIGNED_NODE, ASSIGNED_TIME, TO_ALLOCATE, CardShare, format_allocation
from hami.cards import NVIDIA
from model.config import LabConfig
from model.config.loading import load_stack_file
from model.hami_releases import KNOWN_VERSIONS
from process_lab import hami_binary
from process_lab.control_plane import missing_programs
from process_lab.hami_binary import binary_release
from process_lab.hami_scheduler import SCHEDULER_NAME
from process_lab.preflight import bin_dir
from process_lab.tenant import TenantLab

ROOT = Path(__file__).resolve().parent.parent

GATE = "gpulab.io/filter-benchmark"  # a scheduling gate no one lifts: kube-scheduler leaves the pods alone
# The per-card count of pods in HAMi's metrics: v2.10.0's name, v2.8.3's (v2.10.0 writes it only with
# --legacy-metrics, which the lab does not pass).
SHARED_COUNT = re.compile(r"^(?:hami_gpu_shared_count|GPUDeviceSharedNum)\{[^}]*\} (\S+)$", re.M)
HAMI_SETTINGS = [name for name, setting in SETTINGS.items() if setting.hami is not None]


@dataclass(frozen=True)
class FilterRow:
    nodes: int
    cards: int  # A100 80 GB cards per node
    placed: int  # pods in HAMi's cache before the first measured call

    def __str__(self) -> str:
        return f"{self.nodes} nodes x {self.cards} cards, {self.placed} pods placed"


# #3021's fixtures (50 x 8 with 1000 pods, 100 x 16 with 5000), each also empty, and a small row.
PRESETS: dict[str, list[FilterRow]] = {
    "issue-3021": [
        FilterRow(10, 8, 0),
        FilterRow(50, 8, 0),
        FilterRow(50, 8, 1000),
        FilterRow(100, 16, 0),
        FilterRow(100, 16, 5000),
    ],
}
ROW = re.compile(r"(\d+)x(\d+):(\d+)")


def parse_rows(values: list[str]) -> list[FilterRow]:
    """`--rows` values: a preset's name, or NODESxCARDS:PLACED."""
    rows: list[FilterRow] = []
    for value in values:
        if value in PRESETS:
            rows += PRESETS[value]
            continue
        match = ROW.fullmatch(value)
        if not match or min(int(match[1]), int(match[2])) < 1:
            raise argparse.ArgumentTypeError(f"{value!r}: a row is NODESxCARDS:PLACED or one of: {', '.join(PRESETS)}")
        rows.append(FilterRow(int(match[1]), int(match[2]), int(match[3])))
    return rows


def pods_per_card(split_count: int, memory_mb: int, limits: dict[str, str] = LIMITS) -> int:
    """How many of the benchmark's pods one card takes: HAMi's split count, its memory and its 100 % of cores."""
    return min(split_count, memory_mb // int(limits["nvidia.com/gpumem"]), 100 // int(limits["nvidia.com/gpucores"]))


def fits(row: FilterRow, calls: int, split_count: int, memory_mb: int = A100.memory_mb) -> bool:
    """Whether every measured pod finds a card with the placed ones (round robin over the cards: no card holds more
    than its share while the total fits) and the earlier measured ones allocated."""
    return row.placed + calls <= row.nodes * row.cards * pods_per_card(split_count, memory_mb)


def gated_pods(count: int, prefix: str = "p") -> list[dict]:
    """The benchmark's pods named `prefix`-i, without a schedulerName (HAMi's webhook sets it), gated."""
    items = pods(count)
    for i, pod in enumerate(items):
        pod["metadata"]["name"] = f"{prefix}-{i}"
        del pod["spec"]["schedulerName"]
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
    return items


def placement(j: int, nodes: int, cards: int) -> dict[str, str]:
    """The annotations HAMi's Filter writes on the j-th placed pod, its card chosen round robin: node j mod N, then
    the next card of that node (HAMi pkg/scheduler/scheduler.go Filter, pkg/device/devices.go EncodePodDevices:
    "UUID,NVIDIA,MB,CORES:" a device, ";" a container; hami/annotations.py `format_allocation`). The card names are
    hami_scheduling.node_cards'."""
    node, card = j % nodes, (j // nodes) % cards
    share = CardShare(
        f"GPU-bench-n{node}-{card}", NVIDIA, int(LIMITS["nvidia.com/gpumem"]), int(LIMITS["nvidia.com/gpucores"])
    )
    devices = format_allocation([[share]])
    return {ASSIGNED_NODE: f"bench-n{node}", ASSIGNED_TIME: "0", TO_ALLOCATE: devices, ALLOCATED: devices}


def placed_pods(row: FilterRow) -> list[dict]:
    items = gated_pods(row.placed, prefix="placed")
    for j, pod in enumerate(items):
        pod["metadata"]["annotations"] = placement(j, row.nodes, row.cards)
        pod["metadata"]["labels"] = {ASSIGNED_NODE: pod["metadata"]["annotations"][ASSIGNED_NODE]}
    return items


def extender_args(pod: dict, node_names: list[str]) -> dict:
    """What kube-scheduler's HTTP extender POSTs to `filter` with nodeCacheCapable (kubernetes
    pkg/scheduler/extender.go HTTPExtender.Filter; extender/v1 ExtenderArgs has no JSON tags, so the Go names): the
    pod as it would be scheduled (its gate lifted), no Nodes, the candidate nodes' names."""
    sent = copy.deepcopy(pod)
    sent["spec"].pop("schedulingGates", None)
    return {"Pod": sent, "Nodes": None, "NodeNames": list(node_names)}


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `share` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass(frozen=True)
class Stats:
    count: int
    min: float
    median: float
    p90: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        if not values:
            raise ValueError("no values")
        return cls(len(values), min(values), statistics.median(values), percentile(values, 0.9), max(values))

    def ms(self) -> str:
        return " / ".join(f"{v * 1000:.1f}" for v in (self.min, self.median, self.p90, self.max))


_KLOG = r"^I\d{4} (\d\d):(\d\d):(\d\d\.\d+)\s+\d+ [^\]]+\] "
STARTED = re.compile(_KLOG + r'"Starting schedule filter process" pod="([^"]+)"', re.M)
CHOSEN = re.compile(_KLOG + r'"Scheduling pod to node" podNamespace="[^"]*" podName="([^"]+)"', re.M)


def _seconds(hours: str, minutes: str, seconds: str) -> float:
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def hami_spent(log: str) -> dict[str, float]:
    """Per pod, the seconds from HAMi's "Starting schedule filter process" to its "Scheduling pod to node" (klog's
    time of day; a call across midnight counts the day)."""
    started = {m[4]: _seconds(m[1], m[2], m[3]) for m in STARTED.finditer(log)}
    spent = {}
    for m in CHOSEN.finditer(log):
        if m[4] in started:
            spent[m[4]] = (_seconds(m[1], m[2], m[3]) - started[m[4]]) % 86400
    return spent


def shared_count(metrics: str) -> int:
    """Pods on cards, summed over HAMi's per-card metric."""
    return round(sum(float(value) for value in SHARED_COUNT.findall(metrics)))


@dataclass(frozen=True)
class Run:
    row: FilterRow
    version: str
    at: str  # UTC, when the calls ended
    seconds: list[float]  # round trip per call, in the order sent
    hami: list[float]  # HAMi's start to choice, of the calls its log shows both lines for
    refused: int  # calls whose answer was not one node
    log_bytes: int  # HAMi's log written during the calls

    def line(self) -> str:
        """The run as a row of the Markdown table `table` heads."""
        own = Stats.of(self.hami).ms() if self.hami else "not in log"
        per_call = self.log_bytes / len(self.seconds) / 1024
        return (
            f"| {self.version} | {self.row.nodes} x {self.row.cards} | {self.row.placed} | {len(self.seconds)} | "
            f"{Stats.of(self.seconds).ms()} | {own} | {self.refused} | {per_call:.0f} | {self.at} |"
        )


def table(runs: list[Run]) -> list[str]:
    lines = [
        "| release | nodes x cards | pods placed before | calls | round trip ms: min / median / p90 / max | "
        "HAMi's start to choice ms: min / median / p90 / max | refused | HAMi log KB a call | ended |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    return lines + [run.line() for run in runs]


def hami_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as answer:
        return answer.read().decode()


def wait_placed(port: int, count: int, timeout: float = 600) -> None:
    """Until HAMi's metrics count `count` pods on cards: its informer has taken the placed pods in."""
    give_up, seen = time.monotonic() + timeout, -1
    while (seen := shared_count(hami_metrics(port))) != count:
        if time.monotonic() > give_up:
            raise RuntimeError(f"HAMi counts {seen} pods on its cards, not the {count} placed, after {timeout:.0f} s")
        time.sleep(2)  # before the clock
    print(f"# HAMi counts the {count} placed pods on its cards", flush=True)


def call_filter(connection: http.client.HTTPSConnection, body: bytes) -> tuple[float, dict]:
    """One POST to /filter: (seconds from the request to the answer read, the answer)."""
    headers = {"Content-Type": "application/json"}
    started = time.perf_counter()
    connection.request("POST", "/filter", body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    spent = time.perf_counter() - started
    if response.status != 200:
        raise RuntimeError(f"/filter answered {response.status}: {data[:300]!r}")
    return spent, json.loads(data)


def list_pods(lab: TenantLab) -> list[dict]:
    raw = lab.control_plane.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods", timeout=300).stdout
    return json.loads(raw)["items"]


def measure(lab: TenantLab, row: FilterRow, calls: int) -> tuple[list[float], list[str], int, int]:
    """The row's pods created, the measured ones read back, one Filter call each: (round trips, their pods' names,
    refusals, HAMi's log bytes meanwhile)."""
    assert lab.hami is not None
    add_nodes(lab, row.nodes, cards=row.cards)
    lab.control_plane.kubectl("create", "namespace", NAMESPACE)
    create_pods(lab.control_plane, placed_pods(row) + gated_pods(calls))
    stored = [p for p in list_pods(lab) if p["metadata"]["name"].startswith("p-")]
    stored.sort(key=lambda p: int(p["metadata"]["name"].removeprefix("p-")))
    unmutated = [p["metadata"]["name"] for p in stored if p["spec"].get("schedulerName") != SCHEDULER_NAME]
    if len(stored) != calls or unmutated:
        raise RuntimeError(f"{len(stored)} of {calls} pods stored; not given {SCHEDULER_NAME}: {unmutated[:3]}")
    wait_placed(lab.hami.metrics_port, row.placed)
    names = [f"bench-n{n}" for n in range(row.nodes)]
    bodies = [json.dumps(extender_args(pod, names)).encode() for pod in stored]
    tls = ssl.create_default_context(cafile=str(lab.folder / "tls" / "ca.crt"))
    connection = http.client.HTTPSConnection("127.0.0.1", lab.hami.port, context=tls, timeout=60)
    connection.connect()  # the handshake once, before the clock: kube-scheduler keeps its connection alive
    seconds, refused, log_before = [], 0, lab.hami.log.stat().st_size
    try:
        for i, body in enumerate(bodies):
            spent, answer = call_filter(connection, body)
            seconds.append(spent)
            if answer.get("Error") or len(answer.get("NodeNames") or []) != 1:
                refused += 1
                if refused <= 3:
                    print(f"# call {i + 1} refused: {json.dumps(answer)[:300]}", flush=True)
    finally:
        connection.close()
    log_bytes = lab.hami.log.stat().st_size - log_before
    annotated = sum(ASSIGNED_NODE in (p["metadata"].get("annotations") or {}) for p in list_pods(lab)) - row.placed
    print(f"# {annotated} of {calls} measured pods annotated {ASSIGNED_NODE} by HAMi's Filter", flush=True)
    if annotated != calls - refused:
        raise RuntimeError(f"{calls - refused} calls chose a node but {annotated} pods carry {ASSIGNED_NODE}")
    return seconds, [p["metadata"]["name"] for p in stored], refused, log_bytes


def run_one(
    lab_config: LabConfig, row: FilterRow, version: str, flags: dict, calls: int, tools: Path, hami: Path
) -> Run:
    scheduling = lab_config.scheduling.model_copy(update={"node_scheduler_policy": "spread", **flags})
    tenant = lab_config.tenants[0].model_copy(update={"hami_version": version})
    rated = lab_config.model_copy(update={"scheduling": scheduling, "tenants": [tenant, *lab_config.tenants[1:]]})
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-filter-") as scratch:
        lab = TenantLab(tenant, rated, tools, Path(scratch) / "lab", hami)
        try:
            lab.up()
            seconds, names, refused, log_bytes = measure(lab, row, calls)
            assert lab.hami is not None
            spent = hami_spent(lab.hami.log.read_text(errors="replace"))
        finally:
            lab.down()
    at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Run(row, version, at, seconds, [spent[name] for name in names if name in spent], refused, log_bytes)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=["issue-3021"], help="a preset (issue-3021) or NODESxCARDS:PLACED")
    parser.add_argument("--hami-versions", nargs="+", choices=KNOWN_VERSIONS, default=list(KNOWN_VERSIONS))
    parser.add_argument("--repeats", type=int, default=1, help="runs of every row and release, alternating")
    parser.add_argument("--calls", type=int, default=100, help="measured Filter calls a run, one pod each")
    parser.add_argument("--setting", choices=HAMI_SETTINGS, default="lab", help="HAMi's flags (scheduling_rows.py)")
    parser.add_argument("--hami-verbosity", type=int, help="HAMi's -v, instead of the setting's")
    args = parser.parse_args(argv)
    try:
        rows = parse_rows(args.rows)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    tools = bin_dir()
    if missing := missing_programs(tools):
        print(f"{', '.join(missing)} not in {tools}: run `make tools` first (or set GPULAB_BIN)", file=sys.stderr)
        return 1
    binaries: dict[str, Path] = {}
    for version in args.hami_versions:
        found = hami_binary.find(tools, version)
        if found.path is None:
            print(found.problem, file=sys.stderr)
            return 1
        binaries[version] = found.path
    lab_config = load_stack_file(ROOT / "Pulumi.dev.yaml")
    split = lab_config.tenants[0].split_count
    if too_many := [str(row) for row in rows if not fits(row, args.calls, split)]:
        parser.error(f"{args.calls} more pods would not all find a card (split count {split}): {', '.join(too_many)}")
    flags = dict(SETTINGS[args.setting].hami or {})
    if args.hami_verbosity is not None:
        flags["hami_log_verbosity"] = args.hami_verbosity
    command = shlex.join(["venv/bin/python", "-m", "benchmarks.hami_filter", *(sys.argv[1:] if argv is None else argv)])
    programs = "; ".join(f"HAMi {v}: {p} ({binary_release(p) or 'release unknown'})" for v, p in binaries.items())
    for text in header(command, programs):
        print(text)
    hami_flags = " ".join(lab_config.scheduling.model_copy(update=flags).hami_flags())
    print(f"# pods of {LIMITS}; {A100.type} cards; HAMi {hami_flags}; node policy spread", flush=True)
    print(f"# uptime: {uptime()}", flush=True)
    runs: list[Run] = []
    for repeat in range(args.repeats):
        for row in rows:
            for version in args.hami_versions if repeat % 2 == 0 else args.hami_versions[::-1]:
                runs.append(run_one(lab_config, row, version, flags, args.calls, tools, binaries[version]))
                print(runs[-1].line(), flush=True)
    print(f"# uptime: {uptime()}")
    print()
    print("\n".join(table(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
