"""Current usage from a running tenant: HAMi's allocation annotations, read from recorded PodLists."""

from __future__ import annotations

import copy
import json

import pytest
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from model.config import load_stack_file
from placement.inventory import from_lab_config
from placement.live import LiveError, current_usage, parse_allocation
from policies.checker import main

LIVE = ROOT / "tests" / "manifests" / "live"
MANIFESTS = ROOT / "tests" / "manifests"
RECORDED = LIVE / "tenant-a-three-shares.json"


def tenant_a():
    return from_lab_config(load_stack_file(LAB_PROJECT / "Pulumi.dev.yaml"))["tenant-a"]


def check(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--tenant", "tenant-a", "--project-dir", str(LAB_PROJECT), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_allocation_annotation_is_read_per_card_and_container() -> None:
    found = parse_allocation("GPU-0,NVIDIA,20000,30:GPU-1,NVIDIA,20000,30:;GPU-0,NVIDIA,1000,5:;", "ns/p")
    assert [(a.card, a.memory_mb, a.cores) for a in found] == [
        ("GPU-0", 20000, 30),
        ("GPU-1", 20000, 30),
        ("GPU-0", 1000, 5),
    ]


def test_usage_counts_running_pods_only() -> None:
    inventory = current_usage(tenant_a(), json.loads(RECORDED.read_text()))
    (use,) = inventory.card_usage
    assert (use.slots, use.memory_mb, use.cores) == (3, 60000, 90), "the Succeeded pod no longer counts"
    assert inventory.namespace_usage["gpu-workloads"].gpus == 3


def test_fourth_share_is_refused_now(capsys) -> None:
    """The stack's trainer-1..3 are not added again: they are in the live usage already."""
    code, out, err = check(capsys, "--usage-from", str(RECORDED), str(MANIFESTS / "fourth-share.yaml"))
    assert code == 1, (out, err)
    assert "now: GPU-MOCK-tenant-a-0 (NVIDIA-A100-SXM4-80GB): 3 of 10 slots, 60000 of 81920 MB, 90 of 100% cores" in out
    assert "CardInsufficientCore" in out and "next to what already runs" in out


def test_a_small_pod_fits_now_and_says_where(capsys, tmp_path) -> None:
    small = tmp_path / "small.yaml"
    small.write_text((MANIFESTS / "fourth-share.yaml").read_text().replace('"20000"', '"1000"').replace('"30"', '"10"'))
    code, out, err = check(capsys, "--usage-from", str(RECORDED), str(small))
    assert code == 0, (out, err)
    assert "place: Pod/gpu-workloads/trainer-4: cuda -> GPU-MOCK-tenant-a-0" in out
    assert out.strip().endswith("fits tenant tenant-a's cards as they are now, limits and quota")


@pytest.mark.parametrize(
    "annotation, message",
    [
        ("GPU-OTHER,NVIDIA,1000,5:;", "holds card GPU-OTHER, which tenant tenant-a does not declare"),
        ("GPU-MOCK-tenant-a-0,NVIDIA,lots,5:;", "non-numeric"),
        ("GPU-MOCK-tenant-a-0:;", "is not UUID,TYPE,MB,CORES"),
    ],
)
def test_bad_live_data_is_bad_input(capsys, tmp_path, annotation, message) -> None:
    recorded = json.loads(RECORDED.read_text())
    pod = copy.deepcopy(recorded["items"][0])
    pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = annotation
    recorded["items"] = [pod]
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(recorded))
    code, _, err = check(capsys, "--usage-from", str(path), str(MANIFESTS / "fourth-share.yaml"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_not_a_pod_list_is_bad_input() -> None:
    with pytest.raises(LiveError, match="expected a PodList"):
        current_usage(tenant_a(), {"kind": "Pod"})


def test_live_without_a_reachable_api_is_one_line(capsys, tmp_path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )
    code, _, err = check(capsys, "--live", "--kubeconfig", str(kubeconfig), str(MANIFESTS / "fourth-share.yaml"))
    assert code == 2 and err.startswith("error: --live: cannot list the tenant's pods"), err
    assert len(err.strip().splitlines()) == 1


def test_the_gpu_count_quota_counts_a_pod_s_effective_request() -> None:
    """The API server's requests.nvidia.com/gpu counts the larger of the app containers' sum and the largest init
    container (a GPU init container runs where HAMi places them: v2.10.0)."""

    def gpus(n: int) -> dict:
        return {"resources": {"limits": {"nvidia.com/gpu": str(n)}}}

    pod = {
        "metadata": {"name": "p", "namespace": "gpu-workloads"},
        "spec": {"containers": [gpus(1)], "initContainers": [gpus(2), gpus(1)]},
        "status": {"phase": "Pending"},
    }
    usage = current_usage(tenant_a(), {"items": [pod]}).namespace_usage
    assert usage["gpu-workloads"].gpus == 2
