"""The allocation report from recorded node and pod objects: parsers, model, text and PNG."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from lab_harness import lab_config

from hami.annotations import AnnotationError
from model.catalog import expand_cards, register_annotation
from model.config import parse_config
from model.dra import DRIVER as DRA_DRIVER
from model.dra import resource_slice
from report.dra import dra_report
from report.model import registered_cards, tenant_report
from report.render import render_png, render_text

LAB = parse_config(lab_config())
TENANT_A = LAB.tenants[0]
CARD = "GPU-MOCK-tenant-a-0"


def test_register_annotation_round_trip() -> None:
    (card,) = registered_cards(register_annotation(TENANT_A.cards()))
    assert (card.id, card.type, card.memory_mb, card.cores, card.split_count) == (
        CARD,
        "NVIDIA-A100-SXM4-80GB",
        81920,
        100,
        10,
    )
    with pytest.raises(AnnotationError):
        registered_cards("GPU-0,10,81920,100,NVIDIA,0,true:")  # the pre-2.8 colon format


def node() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "tenant-a-worker",
            "annotations": {
                "hami.io/node-nvidia-register": register_annotation(TENANT_A.cards()),
                "hami.io/node-handshake": "Requesting_2026-11-30 01:00:00",
            },
        },
        "status": {"allocatable": {"nvidia.com/gpumem": "81920"}},
    }


def pod(name: str, allocated: str | None, phase: str = "Running", limits: dict | None = None) -> dict:
    annotations = {"hami.io/vgpu-node": "tenant-a-worker", "hami.io/bind-phase": "allocating"} if allocated else {}
    if allocated:
        annotations["hami.io/vgpu-devices-allocated"] = allocated
    return {
        "metadata": {"name": name, "namespace": "gpu-workloads", "annotations": annotations},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "gpu", "resources": {"limits": limits or {"nvidia.com/gpumem": "20000"}}}],
        },
        "status": {"phase": phase},
    }


RECORDED_PODS = [
    pod("trainer-1", f"{CARD},NVIDIA,20000,30:;"),
    pod("trainer-2", f"{CARD},NVIDIA,20000,30:;"),
    pod("trainer-3", f"{CARD},NVIDIA,20000,30:;"),
    pod("trainer-4", None, phase="Pending"),
    pod("finished", f"{CARD},NVIDIA,5000,5:;", phase="Succeeded"),
    {"metadata": {"name": "coredns", "namespace": "kube-system"}, "spec": {"containers": [{"name": "c"}]}},
]


def test_report_from_recorded_objects() -> None:
    report = tenant_report("tenant-a", [node()], RECORDED_PODS)
    (usage,) = report.cards
    assert (usage.memory_mb, usage.cores) == (60000, 90)
    assert usage.pods == ["gpu-workloads/trainer-1", "gpu-workloads/trainer-2", "gpu-workloads/trainer-3"]
    assert report.pending == ["gpu-workloads/trainer-4"]


def test_text_is_readable_at_a_glance() -> None:
    text = render_text([tenant_report("tenant-a", [node()], RECORDED_PODS)])
    assert "tenant tenant-a" in text
    assert f"{CARD}  NVIDIA-A100-SXM4-80GB  on tenant-a-worker" in text
    assert "memory [###############.....]  60000 / 81920 MB" in text
    assert "cores  [##################..]     90 / 100 %" in text
    assert "pods   3 / 10: gpu-workloads/trainer-1, gpu-workloads/trainer-2, gpu-workloads/trainer-3" in text
    assert "not placed by HAMi: gpu-workloads/trainer-4" in text


# --- a pod's cards, counted as the tenant's release counts them (hami/usage.py), as the checker's live usage does ----
INIT_AND_APP = f"{CARD},NVIDIA,8000,20:;{CARD},NVIDIA,2000,10:;"  # v2.10.0: the init container's entry first


def with_init(name: str, allocated: str, succeeded: bool | None = None) -> dict:
    """A Running pod with one init container and one app container on tenant-a's card (`succeeded`: the init
    container's status; None: none reported yet)."""
    found = pod(name, allocated)
    found["spec"]["initContainers"] = [{"name": "prepare", "resources": {"limits": {"nvidia.com/gpumem": "8000"}}}]
    if succeeded is not None:
        state = {"terminated": {"exitCode": 0 if succeeded else 1}}
        found["status"]["initContainerStatuses"] = [{"name": "prepare", "state": state}]
    return found


def card_use(version: str, *pods: dict) -> tuple[int, int]:
    (usage,) = tenant_report("tenant-a", [node()], list(pods), version).cards
    return usage.memory_mb, usage.cores


def test_a_v2_10_0_pods_init_containers_count_at_their_peak_not_added_to_its_app_containers() -> None:
    """HAMi v2.10.0 lists a pod's init containers first and holds, per card, the larger of their peak and the app
    containers' sum (pkg/device/initContainer.go `CollapseInitContainerUsage`): 8000 MB / 20 %, not the 10000 MB /
    30 % the report once added up. v2.8.3 writes app containers only: every entry adds up, as before."""
    assert card_use("v2.10.0", with_init("p", INIT_AND_APP)) == (8000, 20)
    assert card_use("v2.10.0", with_init("p", INIT_AND_APP, succeeded=False)) == (8000, 20)
    # Once the init container has succeeded, HAMi counts the app container alone (scheduler.go `onUpdatePod`).
    assert card_use("v2.10.0", with_init("p", INIT_AND_APP, succeeded=True)) == (2000, 10)
    assert card_use("v2.8.3", with_init("p", INIT_AND_APP)) == (10000, 30)


@pytest.mark.parametrize("version", ["v2.8.3", "v2.10.0"])
def test_the_report_counts_a_card_as_the_checkers_live_usage_does(version: str) -> None:
    from placement.inventory import from_tenant
    from placement.live import current_usage

    pods = [*RECORDED_PODS, with_init("i1", INIT_AND_APP), with_init("i2", INIT_AND_APP, succeeded=True)]
    (live,) = current_usage(replace(from_tenant(TENANT_A), hami_version=version), {"items": pods}).card_usage
    assert card_use(version, *pods) == (live.memory_mb, live.cores)


def test_an_entry_of_more_than_four_fields_is_read_as_hami_reads_it() -> None:
    """devices.go `DecodeContainerDevices` refuses fewer than four fields, not more (the report once wanted exactly
    four)."""
    assert card_use("v2.8.3", pod("p", f"{CARD},NVIDIA,20000,30,extra:;")) == (20000, 30)


def test_an_annotation_hami_did_not_write_is_a_line_of_the_report_not_a_crash() -> None:
    bad_node = node()
    bad_node["metadata"]["name"] = "other-worker"
    bad_node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "GPU-0,10,81920,100,NVIDIA,0,true:"
    pods = [*RECORDED_PODS, pod("broken", f"{CARD},NVIDIA,lots,30:;")]
    report = tenant_report("tenant-a", [node(), bad_node], pods, "v2.10.0")
    (usage,) = report.cards
    assert (usage.memory_mb, usage.cores) == (60000, 90), "the other pods are counted"
    broken, register = sorted(report.unreadable, reverse=True)
    assert broken.startswith(f"pod gpu-workloads/broken: hami.io/vgpu-devices-allocated '{CARD},NVIDIA,lots,30:;': ")
    assert "non-numeric MB or cores" in broken and broken.endswith("(not counted)")
    assert register.startswith("node other-worker: hami.io/node-nvidia-register 'GPU-0,10,81920,100,NVIDIA,0,true:'")
    assert "not JSON" in register and register.endswith("(its cards are not shown)")
    text = render_text([report])
    assert f"  unreadable: {broken}" in text.splitlines()


def test_make_report_counts_each_tenant_as_its_hami_release_does(monkeypatch, capsys) -> None:
    """`python -m report` takes each tenant's hamiVersion from the stack's config."""
    from types import SimpleNamespace

    from kubernetes import client

    import report.__main__ as entry

    lab = SimpleNamespace(tenants=[SimpleNamespace(name="tenant-a", hami_version="v2.10.0")])
    monkeypatch.setattr(entry, "tenant_kubeconfigs", lambda stack: {"tenant-a": {}})
    monkeypatch.setattr(entry, "stack_config", lambda stack: lab)
    monkeypatch.setattr(entry, "dra_objects", lambda api_client: ([], []))
    monkeypatch.setattr("boundary.kube_client.api_client", lambda kubeconfig: None)

    class Api:
        def __init__(self, api_client: object) -> None:
            self.api_client = SimpleNamespace(sanitize_for_serialization=lambda obj: obj)

        def list_pod_for_all_namespaces(self) -> SimpleNamespace:
            return SimpleNamespace(items=[with_init("p", INIT_AND_APP)])

        def list_node(self) -> SimpleNamespace:
            return SimpleNamespace(items=[node()])

    monkeypatch.setattr(client, "CoreV1Api", Api)
    assert entry.main([]) == 0
    assert "memory [##..................]   8000 / 81920 MB" in capsys.readouterr().out


@pytest.mark.integration  # matplotlib runs fc-list where it has no font cache yet (a first run)
def test_png_chart(tmp_path: Path) -> None:
    tenant_b = LAB.tenants[1]
    node_b = {
        "metadata": {
            "name": "tenant-b-worker",
            "annotations": {"hami.io/node-nvidia-register": register_annotation(tenant_b.cards())},
        }
    }
    reports = [
        tenant_report("tenant-a", [node()], RECORDED_PODS),
        tenant_report("tenant-b", [node_b], [pod("infer", "GPU-MOCK-tenant-b-1,NVIDIA,12000,50:;")]),
    ]
    path = render_png(reports, tmp_path / "allocation.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


# --- a DRA tenant (gpuSharing: dra): report/dra.py ------------------------------------------------------------


def served_claim(name: str, memory: str | None, cores: str | None, pod: str | None) -> dict:
    """A ResourceClaim as the API server returns it once kube-scheduler has allocated it (quantities canonical:
    20000 arrives as "20k"); unallocated when `memory` is None."""
    claim: dict = {"metadata": {"namespace": "gpu-workloads", "name": name}, "status": {}}
    if memory is not None:
        result = {"request": "gpu", "driver": DRA_DRIVER, "pool": "tenant-b-worker", "device": "gpu-0"}
        result["consumedCapacity"] = {"memory": memory, "cores": cores}
        claim["status"]["allocation"] = {"devices": {"results": [result]}}
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": "4f1e"}]
    return claim


def test_a_dra_tenants_card_is_its_slice_and_its_use_the_claims_consumed_capacity() -> None:
    cards = expand_cards("tenant-b", [("A100-80GB", 1)])
    slices = [resource_slice("tenant-b", "tenant-b-worker", cards)]
    claims = [served_claim(f"trainer-{i}-gpu-x7k2p", "20k", "30", f"trainer-{i}") for i in (1, 2, 3)]
    refused = served_claim("tc16-cores-gpu-9q2lm", None, None, None)
    refused["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "tc16-cores", "uid": "9c3a"}]
    verdict = "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes"
    pod = {
        "metadata": {"namespace": "gpu-workloads", "name": "tc16-cores", "uid": "9c3a"},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": verdict}]},
    }  # fmt: skip
    report = dra_report("tenant-b", slices, [*claims, refused], [pod])
    [usage] = report.cards
    assert (usage.card.id, usage.card.memory_mb, usage.card.cores) == (cards[0].id, 81920, 100)
    assert (usage.memory_mb, usage.cores, usage.node) == (60000, 90, "tenant-b-worker")
    assert usage.pods == [f"gpu-workloads/trainer-{i}" for i in (1, 2, 3)]
    assert report.pending == [f"claim gpu-workloads/tc16-cores-gpu-9q2lm ({verdict})"]
    text = render_text([report])
    assert "memory [###############.....]  60000 / 81920 MB" in text
    assert "pods   3: gpu-workloads/trainer-1" in text  # no slot limit under DRA
    assert "not placed by kube-scheduler's DRA allocator: claim gpu-workloads/tc16-cores-gpu-9q2lm (0/1 nodes" in text


def test_a_tenant_without_gpulabs_slices_is_left_to_hamis_report() -> None:
    other = resource_slice("tenant-b", "tenant-b-worker", expand_cards("tenant-b", [("L4", 1)]))
    other["spec"]["driver"] = "gpu.nvidia.com"
    assert dra_report("tenant-a", [], []) is None
    assert dra_report("tenant-a", [other], []) is None
