"""The GPU node readiness decision on real-shaped node and EndpointSlice objects."""

from __future__ import annotations

import json

from scripts.gpu_readiness import main, problems, ready_endpoints

EXPECT = {
    "nvidia.com/gpu": 10,
    "nvidia.com/gpumem": 81920,
    "nvidia.com/gpucores": 100,
    "nvidia.com/gpumem-percentage": 100,
}


def node(allocatable: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "tenant-a-worker", "annotations": {"hami.io/node-nvidia-register": "[...]"}},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", **allocatable},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", **allocatable},
        },
    }


def slices(ready: bool | None, addresses: list[str] | None = None) -> dict:
    conditions = {} if ready is None else {"ready": ready, "serving": ready, "terminating": False}
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "hami-scheduler-x7k2p",
                    "labels": {"kubernetes.io/service-name": "hami-scheduler"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": addresses or ["192.168.77.3"], "conditions": conditions}],
                "ports": [{"name": "http", "port": 443, "protocol": "TCP"}],
            }
        ],
    }


ALL_THERE = {key: str(value) for key, value in EXPECT.items()}


def test_ready_when_totals_match_and_webhook_serves() -> None:
    assert problems(node(ALL_THERE), slices(True), EXPECT) == []


def test_totals_not_yet_there() -> None:
    found = problems(node({"nvidia.com/gpu": "10"}), slices(True), EXPECT)
    assert "node tenant-a-worker: nvidia.com/gpumem not advertised yet (declared 81920)" in found
    assert len(found) == 3


def test_wrong_totals_keep_waiting() -> None:
    stale = {**ALL_THERE, "nvidia.com/gpumem": "49152"}
    assert problems(node(stale), slices(True), EXPECT) == [
        "node tenant-a-worker: nvidia.com/gpumem advertises 49152, declared 81920"
    ]


def test_mock_plugin_reporting_zero_is_not_ready() -> None:
    zero = {key: "0" for key in EXPECT}
    assert len(problems(node(zero), slices(True), EXPECT)) == 4


def test_no_ready_webhook_endpoint() -> None:
    found = problems(node(ALL_THERE), slices(False), EXPECT)
    assert found == ["Service hami-scheduler has no ready endpoint yet: HAMi's webhook would fail open"]
    assert problems(node(ALL_THERE), {"items": []}, EXPECT) == found


def test_unset_ready_condition_counts_as_ready() -> None:
    assert ready_endpoints(slices(None)) == ["192.168.77.3"]


def test_cli_exit_codes(tmp_path, capsys) -> None:
    node_file, endpoints_file = tmp_path / "node.json", tmp_path / "eps.json"
    endpoints_file.write_text(json.dumps(slices(True)))
    node_file.write_text(json.dumps(node(ALL_THERE)))
    assert main(["--expect", json.dumps(EXPECT), "--node", str(node_file), "--endpoints", str(endpoints_file)]) == 0
    node_file.write_text(json.dumps(node({})))
    assert main(["--expect", json.dumps(EXPECT), "--node", str(node_file), "--endpoints", str(endpoints_file)]) == 1
    assert "not advertised yet" in capsys.readouterr().err


def test_totals_in_the_api_servers_canonical_form() -> None:
    """The API server sends quantities canonically (apimachinery Quantity.String, boundaries.md): ten
    cards' 1000 gpucores arrive as "1k", 20000 MB as "20k". The node is ready all the same."""
    expect = {"nvidia.com/gpu": 100, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 1000}
    canonical = {"nvidia.com/gpu": "100", "nvidia.com/gpumem": "20k", "nvidia.com/gpucores": "1k"}
    assert problems(node(canonical), slices(True), expect) == []
    assert problems(node({**canonical, "nvidia.com/gpucores": "900"}), slices(True), expect) == [
        "node tenant-a-worker: nvidia.com/gpucores advertises 900, declared 1000"
    ]
