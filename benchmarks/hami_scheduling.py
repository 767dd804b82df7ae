"""Scheduling through the real HAMi against kube-scheduler alone (the ceiling), on the same pods and KWOK GPU
nodes of 8 A100 cards in one tenant; and gpulab's checker on the same pods and cards.

Per row (N nodes, P pods, node policy) and setting: a fresh process-lab tenant (tenant-a of Pulumi.dev.yaml: a
real control plane, gpulab's admission), its GPU node replaced by N KWOK nodes; once every node is Ready and
untainted, P GPU pods (1 card, 1000 MB, 5 % cores) are created at once in a namespace without quota. The time
runs from the create until every pod is bound (spec.nodeName, seen by one `kubectl get --watch`), or the deadline.

Settings (benchmarks/scheduling_rows.py), each on the HAMi release `--hami-version` names (v2.10.0 by default, or
v2.8.3): `chart`, HAMi as its chart deploys it (client-go's 5 QPS /
burst 10, -v=4); `lab`, the stack's scheduling settings; `lab-v4`, the lab's at -v=4. HAMi runs as extender
and webhook with the bind-time role of process_lab/device_plugin.py; HAMi binds. `ceiling`, kube-scheduler
alone on the nodes' extended resources (no HAMi, as scheduling.scheduler: kube-scheduler): the default profile
scoring nvidia.com/gpu LeastAllocated (spread) or MostAllocated (binpack), its client at its own defaults (50
QPS, burst 100); `ceiling-unthrottled`, the same at 5000 / 10000, to tell the scheduler's limit from its
client's; `dra`, kube-scheduler alone allocating the same cards as DRA devices (docs/dra.md): each node's cards
in a ResourceSlice of gpulab's driver, each pod with its own claim from one ResourceClaimTemplate asking 1000 MB
and 5 % cores of a card (the pods' limits above), bound once allocated. Each row prints HAMi's and DRA's rate over
the ceiling's; the run ends with a Markdown table of every row.

Needs `make tools` and, for HAMi's settings, that release's hami-scheduler (GPULAB_HAMI_SCHEDULER_V2_10_0 ...);
GPULAB_BENCH_KEEP_LOG=FILE keeps the last
HAMi log. Usage (`make bench-scheduling` runs the goal rows, preset `goal`):
  venv/bin/python -m benchmarks.hami_scheduling [--rows goal | 100x1000:spread 10x100:binpack ...]
      [--nodes 10 100 1000 --pods 200 --node-policy spread] [--settings chart lab ceiling ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

from benchmarks import cpu
from benchmarks.multinode_check import inventory
from benchmarks.scheduling_rows import (
    SETTINGS,
    Result,
    Row,
    ceiling_scheduler_config,
    dra_scheduler_config,
    header,
    line,
    parse_rows,
    scoring_strategy,
    summary,
    table,
    unready_nodes,
    watched_binding,
)
from boundary.bounded_run import run_text
from model import dra
from model.catalog import GPU_CATALOG, Card
from model.config import LabConfig
from model.config.loading import load_stack_file
from model.hami_releases import DEFAULT_VERSION, KNOWN_VERSIONS
from placement.wording import evaluate_tenant
from placement.workloads import read_workload
from process_lab import hami_binary
from process_lab.control_plane import ControlPlane, missing_programs
from process_lab.gpu_nodes import node_object, node_status
from process_lab.hami_binary import binary_release
from process_lab.hami_scheduler import SCHEDULER_NAME
from process_lab.preflight import bin_dir
from process_lab.tenant import TenantLab

ROOT = Path(__file__).resolve().parent.parent

CARDS_PER_NODE = 8
NAMESPACE = "bench"
A100 = GPU_CATALOG["A100-80GB"]
LIMITS = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "5"}
CREATORS = 4  # kubectl processes creating the pods side by side, each with its own client rate
TENANT = "tenant-a"  # the tenant of Pulumi.dev.yaml the benchmark's lab is
DRA_TEMPLATE = "bench-gpu"


def node_cards(n: int, cards: int = CARDS_PER_NODE) -> list[Card]:
    return [Card(f"GPU-bench-n{n}-{i}", i, A100.type, A100.memory_mb) for i in range(cards)]


def gpu_nodes(count: int, as_devices: bool = False, cards: int = CARDS_PER_NODE) -> list[dict]:
    """The KWOK nodes with their `cards` A100s as capacity and HAMi's annotation, or (`as_devices`) without: a DRA
    tenant's cards are in its slices (dra_objects)."""
    return [
        {
            **node_object(f"bench-n{n}", [] if as_devices else node_cards(n, cards)),
            **node_status([] if as_devices else node_cards(n, cards)),
        }
        for n in range(count)
    ]


def dra_objects(count: int) -> list[dict]:
    """The tenant's DeviceClass and one ResourceSlice per node, as a gpuSharing: dra tenant's (model/dra.py)."""
    return [dra.device_class(TENANT), *(dra.resource_slice(TENANT, f"bench-n{n}", node_cards(n)) for n in range(count))]


def claim_template() -> dict:
    """The one template every DRA pod's claim is made from: a card's 1000 MB and 5 % cores, as LIMITS ask."""
    return dra.claim_template(
        TENANT, DRA_TEMPLATE, NAMESPACE, int(LIMITS["nvidia.com/gpumem"]), int(LIMITS["nvidia.com/gpucores"])
    )


def pods(count: int, scheduler: str = SCHEDULER_NAME, claims: bool = False) -> list[dict]:
    """The pods, limiting HAMi's resources, or (`claims`) each with a claim from the DRA template."""
    container: dict = {"name": "c", "image": "busybox", "resources": {"limits": LIMITS}}
    spec: dict = {"schedulerName": scheduler}
    if claims:
        container = {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p-{i}", "namespace": NAMESPACE},
            "spec": {**spec, "containers": [container]},
        }
        for i in range(count)
    ]


def kubectl_argv(plane: ControlPlane, *args: str) -> list[str]:
    return [str(plane.bin_dir / "kubectl"), "--kubeconfig", str(plane.kubeconfig), *args]


class BindWatch:
    """One `kubectl get pods --watch` of the namespace, read by a thread: each pod's node as it is bound, with the
    moment it was seen. One long-lived client instead of a list per poll, which would take CPU from what is
    measured."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane, self.events = plane, queue.Queue[tuple[float, str]]()
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """The namespace listed, then watched from the list's resourceVersion (the API server sends every change
        after it): from then on every binding is seen as it happens. `kubectl get --watch` cannot be used: it prints
        nothing for an empty namespace, so nothing would say when its watch began."""
        version, _ = self._list()
        self._watch_from(version)

    def _list(self) -> tuple[str, set[str]]:
        """The namespace's resourceVersion now and the pods bound by then."""
        listed = json.loads(
            self.plane.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods", timeout=60).stdout
        )
        bound = {p["metadata"]["name"] for p in listed.get("items") or [] if (p.get("spec") or {}).get("nodeName")}
        return listed["metadata"]["resourceVersion"], bound

    def _watch_from(self, version: str) -> None:
        query = urllib.parse.urlencode({"watch": "1", "resourceVersion": version})
        argv = kubectl_argv(self.plane, "get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods?{query}")
        self.process = subprocess.Popen(
            argv,
            env=self.plane.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()

    def _pump(self, stream) -> None:
        for text in stream:
            self.events.put((time.monotonic(), text))

    def wait_bound(self, names: set[str], started: float, deadline: float) -> tuple[float, int]:
        """Seconds from `started` until every pod named was seen bound (or the deadline), and how many were. A watch
        the API server ends (seen once on 1000 pods) is listed and watched again, as a client's informer does: a pod
        bound meanwhile counts from the list, a little later than it was bound."""
        bound: set[str] = set()
        last = started
        while bound != names:
            left = started + deadline - time.monotonic()
            if left <= 0:
                return deadline, len(bound)
            try:
                seen, text = self.events.get(timeout=min(left, 1.0))
            except queue.Empty:
                if self.process and self.process.poll() is not None:
                    version, listed = self._list()
                    if newly := (listed & names) - bound:
                        bound |= newly
                        last = max(last, time.monotonic())
                    print(f"# the pod watch ended (exit {self.process.returncode}); listed, watched again", flush=True)
                    self._watch_from(version)
                continue
            event = watched_binding(text)
            if event and event[1] and event[0] in names and event[0] not in bound:
                bound.add(event[0])
                last = max(last, seen)
        return last - started, len(bound)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def add_nodes(lab: TenantLab, nodes: int, as_devices: bool = False, cards: int = CARDS_PER_NODE) -> None:
    """Only the benchmark's nodes of `cards` cards (tenant-a's own deleted), each Ready, untainted and seen by HAMi
    if it runs; with `as_devices`, their cards in ResourceSlices."""
    plane = lab.control_plane
    plane.kubectl("delete", "node", "--all", timeout=60)
    created = gpu_nodes(nodes, as_devices, cards) + (dra_objects(nodes) if as_devices else [])
    for start in range(0, len(created), 100):  # server-side apply in lists of 100 objects
        plane.apply(created[start : start + 100])
    if lab.hami is not None:
        lab.hami.wait_for_nodes([f"bench-n{n}" for n in range(nodes)], timeout=300)
    give_up = time.monotonic() + 300
    while waiting := unready_nodes(plane.get("nodes")["items"], gpus=not as_devices):
        if time.monotonic() > give_up:
            raise RuntimeError(f"{len(waiting)} nodes not schedulable within 300 s, e.g. {waiting[:3]}")
        time.sleep(1)  # before the clock starts: nothing measured yet


def create_pods(plane: ControlPlane, items: list[dict]) -> None:
    """The pods by CREATORS kubectl processes side by side, so that one client's rate is not what is measured."""
    chunks = [items[i::CREATORS] for i in range(CREATORS) if items[i::CREATORS]]
    creators = [
        subprocess.Popen(
            kubectl_argv(plane, "create", "-f", "-", "-o", "name"),
            env=plane.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in chunks
    ]
    for creator, chunk in zip(creators, chunks, strict=True):
        assert creator.stdin is not None
        creator.stdin.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": chunk}))
        creator.stdin.close()
    for creator in creators:
        assert creator.stderr is not None  # stdin is closed already: communicate() would flush it
        errors = creator.stderr.read()
        creator.wait(300)
        if creator.returncode != 0:
            raise RuntimeError(f"kubectl create failed (exit {creator.returncode}): {errors.strip()[-300:]}")


def measure(
    lab: TenantLab, row: Row, scheduler: str, deadline: float, claims: bool = False
) -> tuple[float, int, float, dict[str, float]]:
    """(seconds until every pod was bound or the deadline, pods bound, seconds until every pod was created, CPU
    seconds per program meanwhile); with `claims`, the cards as DRA devices and each pod with a claim."""
    add_nodes(lab, row.nodes, as_devices=claims)
    lab.control_plane.kubectl("create", "namespace", NAMESPACE)
    if claims:
        lab.control_plane.apply([claim_template()])  # before the clock: one template for every pod
    items = pods(row.pods, scheduler, claims)
    watch = BindWatch(lab.control_plane)
    watch.start()
    try:
        before = cpu.sample(lab.folder)
        started = time.monotonic()
        create_pods(lab.control_plane, items)
        created = time.monotonic() - started
        seconds, bound = watch.wait_bound({pod["metadata"]["name"] for pod in items}, started, deadline)
        spent = cpu.spent(before, cpu.sample(lab.folder))
    finally:
        watch.stop()
    return seconds, bound, created, spent


def checker_seconds(row: Row) -> tuple[float, int]:
    """Best of three evaluate_tenant calls over the same pods and cards; and the errors it finds."""
    workloads = [read_workload("Pod", pod) for pod in pods(row.pods)]
    tenant = inventory("bench", row.nodes, CARDS_PER_NODE, node_policy=row.policy)
    best, errors = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        findings = evaluate_tenant(tenant, workloads)
        best = min(best, time.perf_counter() - started)
        errors = sum(f.severity == "error" for f in findings)
    return best, errors


def run_one(lab_config: LabConfig, row: Row, name: str, tools: Path, hami: Path | None, deadline: float) -> Result:
    setting = SETTINGS[name]
    scheduling = lab_config.scheduling.model_copy(update={"node_scheduler_policy": row.policy, **(setting.hami or {})})
    if setting.scheduler_alone:
        scheduling = scheduling.model_copy(update={"scheduler": "kube-scheduler"})
    rated = lab_config.model_copy(update={"scheduling": scheduling})
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-scheduling-") as scratch:
        config = None
        if setting.dra and setting.client:
            config = Path(scratch) / "kube-scheduler.yaml"
            config.write_text(dra_scheduler_config(setting.client))
            qps, burst = setting.client
            flags = f"kube-scheduler alone, DRA's allocator (consumable capacity), client {qps} QPS / {burst}"
        elif setting.client:
            config = Path(scratch) / "kube-scheduler.yaml"
            config.write_text(ceiling_scheduler_config(row.policy, setting.client))
            qps, burst = setting.client
            flags = (
                f"kube-scheduler alone, {scoring_strategy(row.policy)} on nvidia.com/gpu, client {qps} QPS / {burst}"
            )
        else:
            flags = " ".join(scheduling.hami_flags())
        lab = TenantLab(
            lab_config.tenants[0],
            rated,
            tools,
            Path(scratch) / "lab",
            hami if not setting.scheduler_alone else None,
            config,
        )
        try:
            lab.up()
            seconds, bound, created, spent = measure(lab, row, scheduling.scheduler_name, deadline, setting.dra)
        finally:
            if os.environ.get("GPULAB_BENCH_KEEP_LOG") and lab.hami:
                Path(os.environ["GPULAB_BENCH_KEEP_LOG"]).write_bytes(lab.hami.log.read_bytes())
            lab.down()
    at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Result(row, name, flags, bound, seconds, created, at, tuple(spent.items()))


def program_versions(tools: Path, hami: Path | None) -> str:
    answer = run_text([tools / "kube-scheduler", "--version"], 30)
    found = f"kube-scheduler {answer.stdout.strip().removeprefix('Kubernetes ')}"
    if not hami:
        return found + "; no HAMi"
    return found + f"; HAMi's scheduler {hami} (HAMi {binary_release(hami) or 'release unknown'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", help="a preset (goal) or NODESxPODS[:POLICY]; else --nodes/--pods")
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--node-policy", choices=["spread", "binpack"], default="spread")
    parser.add_argument(
        "--hami-version", choices=KNOWN_VERSIONS, default=DEFAULT_VERSION, help="the HAMi release of HAMi's settings"
    )
    parser.add_argument("--deadline", type=float, default=900, help="seconds per measurement")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["chart", "lab", "ceiling"])
    args = parser.parse_args(argv)
    try:
        rows = parse_rows(args.rows) if args.rows else [Row(n, args.pods, args.node_policy) for n in args.nodes]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    tools = bin_dir()
    if missing := missing_programs(tools):
        print(f"{', '.join(missing)} not in {tools}: run `make tools` first (or set GPULAB_BIN)", file=sys.stderr)
        return 1
    found = hami_binary.find(tools, args.hami_version)
    hami = found.path
    if hami is None and any(not SETTINGS[name].scheduler_alone for name in args.settings):
        print(found.problem, file=sys.stderr)
        return 1
    lab_config = load_stack_file(ROOT / "Pulumi.dev.yaml")
    # tenant-a on the release measured (its rules are the checker's too)
    tenant = lab_config.tenants[0].model_copy(update={"hami_version": args.hami_version})
    lab_config = lab_config.model_copy(update={"tenants": [tenant, *lab_config.tenants[1:]]})
    command = shlex.join(
        ["venv/bin/python", "-m", "benchmarks.hami_scheduling", *(sys.argv[1:] if argv is None else argv)]
    )
    for text in header(command, program_versions(tools, hami)):
        print(text)
    print(
        f"# pods of {LIMITS}; {CARDS_PER_NODE} {A100.type} cards per KWOK node; card policy "
        f"{lab_config.scheduling.gpu_scheduler_policy}; deadline {args.deadline:g} s",
        flush=True,
    )
    results: list[Result] = []
    for row in rows:
        for name in args.settings:
            results.append(run_one(lab_config, row, name, tools, hami, args.deadline))
            print(line(results[-1]), flush=True)
            print("\n".join(cpu.table(dict(results[-1].cpu), results[-1].seconds)), flush=True)
        checker, errors = checker_seconds(row)
        print(summary(row, results, f"checker {checker * 1000:.1f} ms ({errors} refused)"), flush=True)
    print()
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
