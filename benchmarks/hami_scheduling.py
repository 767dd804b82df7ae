"""Scheduling through the real HAMi: pods per second at N KWOK GPU nodes of 8 A100 cards in one tenant, and
gpulab's checker on the same pods and cards, in one run (issue 29's figures).

Per node count: a fresh process-lab tenant (tenant-a of Pulumi.dev.yaml: real control plane, gpulab's
admission, HAMi v2.8.3 as extender and webhook, the bind-time role of process_lab/device_plugin.py), its
GPU node replaced by N KWOK nodes; then P GPU pods (1 card, 1000 MB, 5 % cores) created at once in a
namespace without quota. HAMi's time runs from the create until every pod is bound (spec.nodeName set by
HAMi's /bind); the checker's is evaluate_tenant over the same pods and cards (best of three).

Needs `make tools` and GPULAB_HAMI_SCHEDULER; GPULAB_BENCH_KEEP_LOG=FILE keeps the last HAMi log (its
`client-side throttling` lines show the client rate at work). Each setting is a row: `chart`, HAMi as its chart
deploys it (client-go's 5 QPS / burst 10, -v=4); `lab`, the stack's scheduling settings (hamiKubeQps,
hamiKubeBurst, hamiLogVerbosity); `lab-v4`, the lab's rate at the chart's verbosity (what -v=4 costs). Usage:
  venv/bin/python benchmarks/hami_scheduling.py [--nodes 10 100 1000] [--pods 200] [--settings chart lab lab-v4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.multinode_check import inventory  # noqa: E402
from model.catalog import GPU_CATALOG, Card  # noqa: E402
from model.config.loading import load_stack_file  # noqa: E402
from policies.evaluate import evaluate_tenant  # noqa: E402
from policies.workloads import read_workload  # noqa: E402
from process_lab.gpu_nodes import node_object, node_status  # noqa: E402
from process_lab.hami_scheduler import find_hami_scheduler  # noqa: E402
from process_lab.preflight import bin_dir  # noqa: E402
from process_lab.tenant import TenantLab  # noqa: E402

CARDS_PER_NODE = 8
NAMESPACE = "bench"
A100 = GPU_CATALOG["A100-80GB"]
LIMITS = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "5"}


def gpu_nodes(count: int) -> list[dict]:
    nodes = []
    for n in range(count):
        cards = [Card(f"GPU-bench-n{n}-{i}", i, A100.type, A100.memory_mb) for i in range(CARDS_PER_NODE)]
        nodes.append({**node_object(f"bench-n{n}", cards), **node_status(cards)})
    return nodes


def pods(count: int) -> list[dict]:
    container = {"name": "c", "image": "busybox", "resources": {"limits": LIMITS}}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p-{i}", "namespace": NAMESPACE},
            "spec": {"schedulerName": "hami-scheduler", "containers": [container]},
        }
        for i in range(count)
    ]


def hami_seconds(lab: TenantLab, nodes: int, count: int, deadline: float) -> tuple[float, int]:
    """Seconds until every pod is bound (or the deadline), and how many were bound."""
    plane = lab.control_plane
    plane.kubectl("delete", "node", "--all", timeout=60)  # tenant-a's own node: only the benchmark's nodes
    created = gpu_nodes(nodes)
    for start in range(0, nodes, 100):  # server-side apply in lists of 100 nodes
        plane.apply(created[start : start + 100])
    assert lab.hami is not None
    lab.hami.wait_for_nodes([f"bench-n{n}" for n in range(nodes)], timeout=300)
    plane.kubectl("create", "namespace", NAMESPACE)
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": pods(count)})
    started = time.monotonic()
    plane.kubectl("create", "-f", "-", stdin=document, timeout=120)
    bound = 0
    while time.monotonic() - started < deadline:
        listed = json.loads(plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json", timeout=60).stdout)
        bound = sum(1 for pod in listed["items"] if pod["spec"].get("nodeName"))
        if bound == count:
            break
        time.sleep(0.2)  # a poll interval: the condition is read from the API each round
    return time.monotonic() - started, bound


def checker_seconds(nodes: int, count: int, node_policy: str) -> tuple[float, int]:
    """Best of three evaluate_tenant calls over the same pods and cards; and the errors it finds."""
    workloads = [read_workload("Pod", pod) for pod in pods(count)]
    tenant = inventory("bench", nodes, CARDS_PER_NODE, node_policy=node_policy)
    best, errors = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        findings = evaluate_tenant(tenant, workloads)
        best = min(best, time.perf_counter() - started)
        errors = sum(f.severity == "error" for f in findings)
    return best, errors


# What each row changes of the stack's scheduling settings (None: nothing, the lab's own).
SETTINGS: dict[str, dict | None] = {
    "chart": {"hami_kube_qps": 5, "hami_kube_burst": 10, "hami_log_verbosity": 4},  # client-go's defaults, -v=4
    "lab": None,
    "lab-v4": {"hami_log_verbosity": 4},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--deadline", type=float, default=900, help="seconds per node count for HAMi")
    parser.add_argument("--node-policy", choices=["spread", "binpack"], default="spread")
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=["chart", "lab"])
    args = parser.parse_args()
    tools = bin_dir()
    hami = find_hami_scheduler(tools)
    if hami is None:
        print("hami-scheduler not found: set GPULAB_HAMI_SCHEDULER (docs/process-lab.md)", file=sys.stderr)
        return 1
    lab_config = load_stack_file(ROOT / "Pulumi.dev.yaml")
    scheduling = lab_config.scheduling.model_copy(update={"node_scheduler_policy": args.node_policy})
    lab_config = lab_config.model_copy(update={"scheduling": scheduling})
    tenant = lab_config.tenants[0]
    print(
        f"{os.cpu_count()} CPUs; {args.pods} pods of {LIMITS} per node count; {CARDS_PER_NODE} cards per node; "
        f"node policy {args.node_policy}, card policy {scheduling.gpu_scheduler_policy}"
    )
    for setting, nodes in ((setting, nodes) for setting in args.settings for nodes in args.nodes):
        rated = lab_config.model_copy(update={"scheduling": scheduling.model_copy(update=SETTINGS[setting] or {})})
        with tempfile.TemporaryDirectory(prefix="gpulab-bench-hami-") as scratch:
            lab = TenantLab(tenant, rated, tools, Path(scratch), hami)
            try:
                lab.up()
                seconds, bound = hami_seconds(lab, nodes, args.pods, args.deadline)
            finally:
                if os.environ.get("GPULAB_BENCH_KEEP_LOG") and lab.hami:
                    Path(os.environ["GPULAB_BENCH_KEEP_LOG"]).write_bytes(lab.hami.log.read_bytes())
                lab.down()
        checker, errors = checker_seconds(nodes, args.pods, args.node_policy)
        flags = " ".join(rated.scheduling.hami_flags())
        rate = f"{setting} ({flags})"
        print(
            f"{nodes} nodes, {rate}: HAMi bound {bound}/{args.pods} pods in {seconds:.1f} s "
            f"({bound / seconds:.1f} pods/s); "
            f"checker {checker * 1000:.1f} ms ({errors} refused); HAMi/checker {seconds / checker:,.0f}x",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
