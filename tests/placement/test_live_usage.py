"""Current usage from a running tenant: HAMi's allocation annotations, read from recorded PodLists."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from model.config import load_stack_file
from placement.inventory import from_lab_config
from placement.live import LiveError, current_usage, live_usage
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


def test_only_the_annotation_hamis_scheduler_counts_is_read() -> None:
    """The scheduler rebuilds its usage from hami.io/vgpu-devices-allocated alone (scheduler.go `onAddPod`: it decodes
    `SupportDevices`), not from -to-allocate, which the device plugin reads; the checker once fell back to it."""
    recorded = json.loads(RECORDED.read_text())
    for pod in recorded["items"]:
        annotations = pod["metadata"].get("annotations") or {}
        if "hami.io/vgpu-devices-allocated" in annotations:
            annotations["hami.io/vgpu-devices-to-allocate"] = annotations.pop("hami.io/vgpu-devices-allocated")
    (use,) = current_usage(tenant_a(), recorded).card_usage
    assert (use.slots, use.memory_mb, use.cores) == (0, 0, 0)


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
    # A native sidecar (restartPolicy: Always) runs beside the app containers and the init containers after it
    # (Kubernetes' helpers.go `aggregateContainerResourcesByFn`; placement/workloads.py `pod_gpus`): 1 + 1, and 2 + 1.
    pod["spec"]["initContainers"] = [{**gpus(1), "restartPolicy": "Always"}, gpus(2)]
    assert current_usage(tenant_a(), {"items": [pod]}).namespace_usage["gpu-workloads"].gpus == 3


# --- Init containers: how each release counts a pod's allocation annotation -----------------------------------------
# v2.10.0 (tag v2.10.0) lists init containers first in hami.io/vgpu-devices-allocated (devices.go `Resourcereqs`
# 639-692, `DecodePodDevices` 529-556) and counts a pod per card as the larger of their peak and the app containers'
# sum (initContainer.go `CollapseInitContainerUsage` 36-113, on `onAddPod` 137-171), the app containers alone once
# every init container has succeeded (scheduler.go `onUpdatePod` 204-222, `AppContainersOnlyDeviceUsage` 116-157).

CARD = "GPU-MOCK-tenant-a-0"


def with_init(annotation: str, init_containers: int = 1, succeeded: bool | None = None) -> dict:
    """A Running pod of tenant-a with `init_containers` init containers (each 8000 MB / 20 % when it asks), one app
    container, and HAMi's `annotation`; `succeeded`: their statuses (None: none reported yet)."""
    pod: dict = {
        "metadata": {
            "name": "p",
            "namespace": "gpu-workloads",
            "annotations": {"hami.io/vgpu-devices-allocated": annotation},
        },
        "spec": {
            "initContainers": [{"name": f"init-{i}"} for i in range(init_containers)],
            "containers": [{"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    if succeeded is not None:
        state = {"terminated": {"exitCode": 0 if succeeded else 1}}
        pod["status"]["initContainerStatuses"] = [{"name": f"init-{i}", "state": state} for i in range(init_containers)]
    return pod


def used(version: str, *pods: dict) -> tuple[tuple[int, int, int], tuple[int, int]]:
    inventory = replace(tenant_a(), hami_version=version)
    now = current_usage(inventory, {"items": list(pods)})
    (card,) = now.card_usage
    held = now.namespace_usage.get("gpu-workloads")
    return (card.slots, card.memory_mb, card.cores), ((held.memory_mb, held.cores) if held else (0, 0))


INIT_AND_APP = f"{CARD},NVIDIA,8000,20:;{CARD},NVIDIA,2000,10:;"


def test_v2_10_0_counts_a_running_init_container_s_peak_not_the_sum() -> None:
    """One init container (8000 MB, 20 %) and one app container (2000 MB, 10 %) on the same card: HAMi v2.10.0 holds
    8000 MB, 20 %, one slot there, and counts the same against the namespace quota; the sum (10000 MB, 30 %, two
    slots) is what a pod of two app containers would hold."""
    assert used("v2.10.0", with_init(INIT_AND_APP)) == ((1, 8000, 20), (8000, 20))
    assert used("v2.10.0", with_init(INIT_AND_APP, succeeded=False)) == ((1, 8000, 20), (8000, 20))
    # The app containers' sum when it is larger: two init containers run one after the other.
    two = f"{CARD},NVIDIA,3000,5:;{CARD},NVIDIA,6000,40:;{CARD},NVIDIA,2000,10:;"
    assert used("v2.10.0", with_init(two, init_containers=2)) == ((1, 6000, 40), (6000, 40))


def test_v2_10_0_counts_the_app_containers_once_the_init_containers_succeeded() -> None:
    now = live_usage(replace(tenant_a(), hami_version="v2.10.0"), {"items": [with_init(INIT_AND_APP, succeeded=True)]})
    (card,) = now.inventory.card_usage
    assert (card.slots, card.memory_mb, card.cores) == (1, 2000, 10)
    (note,) = now.notes
    assert note.startswith("note: pod gpu-workloads/p: its init containers have finished") and "restarted" in note
    # Where both counts agree there is nothing to say: an init container without a card.
    assert (
        live_usage(
            replace(tenant_a(), hami_version="v2.10.0"),
            {"items": [with_init(f";{CARD},NVIDIA,2000,10:;", succeeded=True)]},
        ).notes
        == ()
    )


def test_v2_10_0_keeps_counting_the_peak_while_a_sidecar_runs() -> None:
    """HAMi v2.10.0 counts the app containers alone once every init container has terminated with 0 (util.go
    `AllInitContainersSucceeded` 162-172): a running sidecar never has, so the peak stays (its
    docs/develop/sidecarsContainer-design.md 24-27, "The shrink gate never opens"), as gpulab counts it."""
    pod = with_init(INIT_AND_APP, succeeded=True)
    pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    pod["status"]["initContainerStatuses"][0]["state"] = {"running": {"startedAt": "2026-12-07T18:00:00Z"}}
    assert used("v2.10.0", pod) == ((1, 8000, 20), (8000, 20))


def test_an_entry_is_an_init_container_s_by_its_position() -> None:
    """An init container without a card keeps its (empty) entry: the app container's entry is still the second."""
    assert used("v2.10.0", with_init(f";{CARD},NVIDIA,2000,10:;")) == ((1, 2000, 10), (2000, 10))
    assert used("v2.10.0", with_init(f"{CARD},NVIDIA,8000,20:;;")) == ((1, 8000, 20), (8000, 20))


def test_v2_8_3_counts_every_entry_as_an_app_container_s() -> None:
    """v2.8.3 allocates app containers only (its annotation has no init entries): every entry counts, a slot each,
    as before."""
    assert used("v2.8.3", with_init(INIT_AND_APP)) == ((2, 10000, 30), (10000, 30))


def test_the_checker_says_what_a_restarted_hami_would_count(capsys, tmp_path) -> None:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"items": [with_init(INIT_AND_APP, succeeded=True)]}))
    code = main(["--tenant", "tenant-a", "--stack", "sim", "--project-dir", str(LAB_PROJECT), "--usage-from", str(path),
                 str(MANIFESTS / "fourth-share.yaml")])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"now: {CARD} (NVIDIA-A100-SXM4-80GB): 1 of 10 slots, 2000 of 81920 MB, 10 of 100% cores in use" in out
    assert "note: pod gpu-workloads/p: its init containers have finished" in out
