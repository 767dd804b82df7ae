"""The Filter benchmark's pure logic (benchmarks/hami_filter.py), offline: the ExtenderArgs it sends as
kube-scheduler's HTTP extender would, the pods it creates and places, which rows fit, its statistics and what it
reads of HAMi's log and metrics."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.hami_filter import (
    ALLOCATED,
    ASSIGNED_NODE,
    GATE,
    PRESETS,
    TO_ALLOCATE,
    FilterRow,
    Run,
    Stats,
    extender_args,
    fits,
    gated_pods,
    hami_spent,
    parse_rows,
    percentile,
    placed_pods,
    shared_count,
    table,
)
from benchmarks.hami_scheduling import node_cards


def test_rows_parse_presets_and_nodes_by_cards_with_pods_placed() -> None:
    assert parse_rows(["issue-3021"]) == PRESETS["issue-3021"]
    assert parse_rows(["50x8:1000", "3x16:0"]) == [FilterRow(50, 8, 1000), FilterRow(3, 16, 0)]
    for wrong in ("50x8", "0x8:10", "50x0:0", "goal"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rows([wrong])


def test_a_row_fits_while_every_measured_pod_finds_a_card() -> None:
    """1000 MB / 5 % pods on 80 GB cards: the split count (10) binds first, then the cores (20 a card)."""
    assert all(fits(row, calls=100, split_count=10) for row in PRESETS["issue-3021"])
    assert fits(FilterRow(1, 2, 10), calls=10, split_count=10)
    assert not fits(FilterRow(1, 2, 10), calls=11, split_count=10)
    assert fits(FilterRow(1, 1, 0), calls=20, split_count=50) and not fits(FilterRow(1, 1, 0), 21, split_count=50)
    assert not fits(FilterRow(1, 1, 0), calls=2, split_count=10, memory_mb=1999)


def test_pods_leave_the_scheduler_name_to_hamis_webhook_and_wait_at_a_gate() -> None:
    pods = gated_pods(2)
    assert [p["metadata"]["name"] for p in pods] == ["p-0", "p-1"]
    for pod in pods:
        assert "schedulerName" not in pod["spec"]
        assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == "1000"


def test_placed_pods_carry_what_hamis_filter_writes_round_robin_over_real_cards() -> None:
    """As HAMi's Filter wrote it on a pod (seen on v2.10.0: "GPU-bench-n26-15,NVIDIA,1000,5:;"), each card of the
    nodes in turn, so that no card holds more than its share."""
    pods = placed_pods(FilterRow(2, 3, 7))
    assert [p["metadata"]["name"] for p in pods] == [f"placed-{j}" for j in range(7)]
    first, second, seventh = (p["metadata"]["annotations"] for p in (pods[0], pods[1], pods[6]))
    assert first[ASSIGNED_NODE] == "bench-n0" and second[ASSIGNED_NODE] == "bench-n1"
    assert first[ALLOCATED] == first[TO_ALLOCATE] == "GPU-bench-n0-0,NVIDIA,1000,5:;"
    assert pods[2]["metadata"]["annotations"][ALLOCATED].startswith("GPU-bench-n0-1,")
    assert seventh[ALLOCATED].startswith("GPU-bench-n0-0,")  # 2 x 3 cards: the 7th goes round again
    uuids = {card.id for n in range(2) for card in node_cards(n, 3)}
    assert {p["metadata"]["annotations"][ALLOCATED].split(",")[0] for p in pods} == uuids
    assert all(p["metadata"]["labels"] == {ASSIGNED_NODE: p["metadata"]["annotations"][ASSIGNED_NODE]} for p in pods)
    assert all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in pods)


def test_extender_args_are_kube_schedulers_with_node_cache_capable() -> None:
    """extender/v1 ExtenderArgs has no JSON tags: Pod, Nodes (null when nodeCacheCapable) and NodeNames; the pod
    goes as it would be scheduled, its gate lifted, and the stored pod is left as it is."""
    stored = gated_pods(1)[0] | {"status": {"phase": "Pending"}}
    stored["spec"]["schedulerName"] = "hami-scheduler"
    args = extender_args(stored, ["bench-n0", "bench-n1"])
    assert set(args) == {"Pod", "Nodes", "NodeNames"}
    assert args["Nodes"] is None and args["NodeNames"] == ["bench-n0", "bench-n1"]
    assert "schedulingGates" not in args["Pod"]["spec"] and args["Pod"]["spec"]["schedulerName"] == "hami-scheduler"
    assert stored["spec"]["schedulingGates"] == [{"name": GATE}]
    assert json.loads(json.dumps(args))["Nodes"] is None  # sent as null, which HAMi decodes as no Nodes


def test_statistics_are_nearest_rank() -> None:
    values = [float(v) for v in range(10, 0, -1)]  # 10 .. 1, unordered on purpose
    assert percentile(values, 0.9) == 9 and percentile(values, 0.5) == 5 and percentile(values, 1.0) == 10
    assert percentile([3.0], 0.9) == 3
    stats = Stats.of(values)
    assert (stats.count, stats.min, stats.median, stats.p90, stats.max) == (10, 1, 5.5, 9, 10)
    assert Stats.of([0.004, 0.018]).ms() == "4.0 / 11.0 / 18.0 / 18.0"
    with pytest.raises(ValueError):
        Stats.of([])


def test_hamis_part_is_read_from_its_log_per_pod() -> None:
    log = "\n".join(
        [
            'I1207 23:59:59.990000   41 scheduler.go:1068] "Starting schedule filter process" pod="p-0" uuid="u0"'
            ' namespace="bench"',
            'I1207 23:59:59.995000   41 scheduler.go:1068] "Starting schedule filter process" pod="p-1" uuid="u1"'
            ' namespace="bench"',
            'I1207 23:59:59.996500   41 scheduler.go:1119] "Scheduling pod to node" podNamespace="bench"'
            ' podName="p-0" nodeID="bench-n3" devices=[[{"Idx":0}]]',
            'I1208 00:00:00.001000   41 scheduler.go:1119] "Scheduling pod to node" podNamespace="bench"'
            ' podName="p-1" nodeID="bench-n4" devices=[]',
            'I1208 00:00:00.002000   41 scheduler.go:1068] "Starting schedule filter process" pod="p-2" uuid="u2"'
            ' namespace="bench"',
        ]
    )
    spent = hami_spent(log)
    assert set(spent) == {"p-0", "p-1"}  # p-2 never chose a node
    assert spent["p-0"] == pytest.approx(0.0065) and spent["p-1"] == pytest.approx(0.006)  # across midnight


def test_hamis_metrics_count_the_pods_on_its_cards_under_either_releases_name() -> None:
    metrics = "\n".join(
        [
            "# HELP hami_gpu_shared_count Number of containers sharing this GPU",
            'hami_gpu_shared_count{device_index="0",device_uuid="GPU-a",node="bench-n0",zone="vGPU"} 3',
            'hami_gpu_shared_count{device_index="1",device_uuid="GPU-b",node="bench-n0",zone="vGPU"} 2',
            'GPUDeviceSharedNum{deviceidx="0",deviceuuid="GPU-c",nodeid="bench-n1",zone="vGPU"} 1',
            'hami_gpu_memory_allocated_bytes{device_uuid="GPU-a",node="bench-n0",zone="vGPU"} 3e+09',
        ]
    )
    assert shared_count(metrics) == 6
    assert shared_count("") == 0


def test_a_run_is_one_row_of_the_table() -> None:
    run = Run(FilterRow(2, 8, 1000), "v2.10.0", "2026-12-07 18:00:00 UTC", [0.001, 0.002, 0.003], [0.0005], 0, 3072)
    lines = table([run])
    assert len(lines) == 3 and lines[0].startswith("| release | nodes x cards | pods placed before | calls |")
    assert lines[2] == (
        "| v2.10.0 | 2 x 8 | 1000 | 3 | 1.0 / 2.0 / 3.0 / 3.0 | 0.5 / 0.5 / 0.5 / 0.5 | 0 | 1 | "
        "2026-12-07 18:00:00 UTC |"
    )
    assert "not in log" in Run(FilterRow(1, 1, 0), "v2.8.3", "", [0.001], [], 1, 0).line()
