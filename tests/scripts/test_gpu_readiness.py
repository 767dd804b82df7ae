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


# --- where gpulab's device plugin registers the node (devicePlugin: gpulab) ------------------------------------

# What gpulab-hami-plugin writes for tenant-a's A100 as HAMi v2.8.3's plugin (tools/gpulab-hami-plugin
# register_test.go: zero index left out, every device ending with "devicepairscore":{}) and as v2.10.0's (no pair
# score, numa 0 left out).
WRITTEN_V2_8_3 = (
    '[{"id":"GPU-MOCK-tenant-a-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB",'
    '"mode":"hami-core","health":true,"devicepairscore":{}}]'
)
WRITTEN_V2_10_0 = (
    '[{"id":"GPU-MOCK-tenant-a-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB",'
    '"mode":"hami-core","health":true}]'
)


def declared() -> str:
    from model.catalog import expand_cards, register_annotation

    return register_annotation(expand_cards("tenant-a", [("A100-80GB", 1)]))


def registered(annotation: str | None) -> dict:
    found = node(ALL_THERE)
    found["metadata"]["annotations"] = {} if annotation is None else {"hami.io/node-nvidia-register": annotation}
    return found


def plugin_pods(waiting: dict | None, node_name: str = "tenant-a-worker") -> dict:
    state = {"waiting": waiting} if waiting else {"running": {"startedAt": "2026-12-04T05:31:00Z"}}
    return {
        "items": [
            {
                "metadata": {"name": "gpulab-hami-device-plugin-x2v9k"},
                "spec": {"nodeName": node_name},
                "status": {"containerStatuses": [{"name": "plugin", "state": state, "restartCount": 3}]},
            }
        ]
    }


def test_the_plugins_annotation_of_either_release_is_the_declared_cards() -> None:
    for written in (WRITTEN_V2_8_3, WRITTEN_V2_10_0):
        assert problems(registered(written), slices(True), EXPECT, declared()) == []
        assert problems(registered(written), None, EXPECT, declared()) == [], "before HAMi: no webhook asked"


def test_no_annotation_or_other_cards_keep_waiting() -> None:
    assert problems(registered(None), None, EXPECT, declared()) == [
        "node tenant-a-worker: hami.io/node-nvidia-register not written yet (the device plugin writes it)"
    ]
    other = WRITTEN_V2_10_0.replace("81920", "40960")
    assert problems(registered(other), None, EXPECT, declared()) == [
        "node tenant-a-worker: hami.io/node-nvidia-register holds other cards (GPU-MOCK-tenant-a-0), declared 1"
    ]
    assert "holds other cards (none readable)" in problems(registered("[...]"), None, EXPECT, declared())[0]


def test_while_waiting_the_plugin_pods_state_is_named() -> None:
    image = {"reason": "ErrImageNeverPull", "message": 'Container image "localhost/gpulab/hami-device-plugin:v0.36.4"'}
    found = problems(registered(None), None, EXPECT, declared(), plugin_pods(image))
    assert found[-1] == (
        'pod gpulab-hami-device-plugin-x2v9k: ErrImageNeverPull: Container image "localhost/gpulab/hami-device-'
        'plugin:v0.36.4" (restarts: 3)'
    )
    assert problems(registered(None), None, EXPECT, declared(), plugin_pods(None, "elsewhere"))[-1] == (
        "no device plugin pod on node tenant-a-worker yet"
    )
    assert problems(registered(WRITTEN_V2_10_0), None, EXPECT, declared(), plugin_pods(image)) == [], (
        "a node that carries it all is ready"
    )


def test_cli_without_endpoints_and_with_the_register_and_pods(tmp_path, capsys) -> None:
    node_file, pods_file = tmp_path / "node.json", tmp_path / "pods.json"
    node_file.write_text(json.dumps(registered(None)))
    pods_file.write_text(json.dumps(plugin_pods({"reason": "CrashLoopBackOff", "message": "back-off 40s"})))
    args = [
        "--expect",
        json.dumps(EXPECT),
        "--node",
        str(node_file),
        "--register",
        declared(),
        "--pods",
        str(pods_file),
    ]
    assert main(args) == 1
    said = capsys.readouterr().err
    assert "not written yet" in said and "CrashLoopBackOff: back-off 40s (restarts: 3)" in said
    node_file.write_text(json.dumps(registered(WRITTEN_V2_8_3)))
    assert main(args) == 0


def test_an_annotation_hamis_decoder_refuses_is_not_the_declared_cards() -> None:
    """Read as HAMi reads it (hami/annotations.py `parse_register`, Go's decoder): a number as a string, or not a
    whole one, makes the whole annotation unreadable, so HAMi's scheduler sees no cards on the node. The wait once
    read `"81920"` as 81920 and called such a node ready."""
    for wrong in (WRITTEN_V2_10_0.replace("81920", '"81920"'), WRITTEN_V2_10_0.replace('"count":10', '"count":10.0')):
        assert problems(registered(wrong), None, EXPECT, declared()) == [
            "node tenant-a-worker: hami.io/node-nvidia-register holds other cards (none readable), declared 1"
        ], wrong
    # Go matches a key whatever its case: still the declared cards (the wait once read no `ID` as none readable).
    assert problems(registered(WRITTEN_V2_10_0.replace('"id"', '"ID"')), None, EXPECT, declared()) == []
