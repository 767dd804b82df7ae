"""The process lab on the real programs: the reference tenants' control planes (real etcd, kube-apiserver,
kube-controller-manager, kube-scheduler by kwokctl), KWOK GPU nodes, gpulab's admission and quotas, and,
where a hami-scheduler binary of the stack's release exists, the real HAMi (v2.10.0, Pulumi.sim.yaml's) deciding
the seed's case.

Boundaries: the Kubernetes API server (admission order, canonical quantities, defaulting, quota objects),
kubectl, kwokctl's process management, HAMi's extender/webhook/registration. Nothing here is a double.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from model.config.loading import load_stack_file
from process_lab.commands import ProcessLabError
from process_lab.hami_scheduler import find_hami_scheduler
from process_lab.tenant import TenantLab

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.real
SHARE = {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}


def gpu_pod(name: str, namespace: str, limits: dict[str, str]) -> dict:
    """As a user writes it: no schedulerName (HAMi's webhook sets it), limits only (defaulting copies them)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]},
    }


def wait_for(what: str, check, timeout: float = 30, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def reference(real_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    # The reference tenants in process mode, on the release the stack file names (v2.10.0, the seed's).
    lab = load_stack_file(ROOT / "Pulumi.sim.yaml")
    folder = tmp_path_factory.mktemp("process-lab")
    [release] = {t.hami_version for t in lab.tenants}
    hami = find_hami_scheduler(real_bin, release)
    tenants = {t.name: TenantLab(t, lab, real_bin, folder / t.name, hami) for t in lab.tenants}
    started = time.monotonic()
    try:
        for tenant in tenants.values():
            tenant.up()
        yield tenants, hami, time.monotonic() - started
    finally:
        for tenant in tenants.values():
            tenant.down()
    # Destroy leaves nothing: no process of either cluster, no kubeconfig.
    leftovers = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True, timeout=30).stdout
    assert leftovers == "", f"processes left behind: {leftovers}"
    assert not list(folder.rglob("*.kubeconfig"))


def test_each_tenant_has_its_own_api_server_with_its_gpu_nodes(reference) -> None:
    tenants, _, _ = reference
    a, b = tenants["tenant-a"].control_plane, tenants["tenant-b"].control_plane
    nodes_a = a.get("nodes")["items"]
    nodes_b = b.get("nodes")["items"]
    assert [n["metadata"]["name"] for n in nodes_a] == ["tenant-a-worker"]
    assert [n["metadata"]["name"] for n in nodes_b] == ["tenant-b-worker"]
    # Canonical quantities as the API server stores them: 81920 stays, 49152 stays.
    assert nodes_a[0]["status"]["allocatable"]["nvidia.com/gpumem"] == "81920"
    assert nodes_b[0]["status"]["allocatable"]["nvidia.com/gpumem"] == "49152"
    register = json.loads(nodes_b[0]["metadata"]["annotations"]["hami.io/node-nvidia-register"])
    assert [(c["devmem"], c["devcore"]) for c in register] == [(24576, 100), (24576, 100)]
    # Neither tenant sees the other's objects: separate API servers, separate stores.
    assert a.kubeconfig.read_text() != b.kubeconfig.read_text()
    assert "tenant-b" not in json.dumps(a.get("configmaps", "-A")) and "tenant-a" not in json.dumps(
        b.get("configmaps", "-A")
    )


def test_quotas_and_inventory_are_the_docker_labs_objects(reference) -> None:
    tenants, _, _ = reference
    b = tenants["tenant-b"].control_plane
    quota = b.get("resourcequota", "-n", "gpu-workloads", "gpulab-gpu-quota")
    # What the API server keeps of 40960 and 150: its canonical form.
    assert quota["spec"]["hard"] == {
        "limits.nvidia.com/gpumem": "40960",
        "limits.nvidia.com/gpucores": "150",
        "requests.nvidia.com/gpu": "8",
    }
    inventory = json.loads(b.get("configmap", "-n", "kube-public", "gpulab-gpu-inventory")["data"]["inventory.json"])
    assert inventory["tenant"] == "tenant-b" and len(inventory["cards"]) == 2


def test_the_90000_mb_pod_is_refused_at_apply_with_card_insufficient_memory_first(reference) -> None:
    tenants, hami, _ = reference
    a = tenants["tenant-a"].control_plane
    pod = gpu_pod("too-big", "gpu-workloads", {"nvidia.com/gpumem": "90000", "nvidia.com/gpucores": "30"})
    if not hami:  # without HAMi's webhook the pod keeps the default scheduler: set what the webhook sets
        pod["spec"]["schedulerName"] = "hami-scheduler"
    result = a.kubectl("create", "-f", "-", stdin=json.dumps(pod), check=False)
    assert result.returncode == 1
    assert "denied request: CardInsufficientMemory:" in result.stderr, result.stderr


def test_the_lab_enforces_its_policies_without_the_controller_that_type_checks_them(reference) -> None:
    """Boundary: the real API server enforcing a ValidatingAdmissionPolicy whose status no controller wrote (the lab's
    tenants run kube-controller-manager without POLICY_STATUS_CONTROLLER); the refusal above is that enforcement."""
    tenants, _, _ = reference
    a = tenants["tenant-a"].control_plane
    found = a.kubectl("get", "validatingadmissionpolicy", "gpulab-gpu-requests", "-o", "json", check=False)
    assert found.returncode == 0, found.stderr
    status = json.loads(found.stdout).get("status") or {}
    assert "typeChecking" not in status and "observedGeneration" not in status, status


def test_seed_case_three_pods_share_the_card_and_the_fourth_is_refused_for_cores(reference) -> None:
    tenants, hami, _ = reference
    if not hami:
        pytest.skip(
            "hami-scheduler not built: the Go module proxy refuses HAMi (tools/README.md); "
            "set GPULAB_HAMI_SCHEDULER_V2_10_0 to a HAMi v2.10.0 scheduler binary (docs/process-lab.md)"
        )
    a = tenants["tenant-a"].control_plane
    for index in range(1, 5):
        a.kubectl("create", "-f", "-", stdin=json.dumps(gpu_pod(f"share-{index}", "gpu-workloads", SHARE)))
        name = f"share-{index}"
        if index < 4:

            def running_pod(n: str = name) -> dict | None:
                pod = a.get("pod", "-n", "gpu-workloads", n)
                return pod if pod["status"].get("phase") == "Running" else None

            running = wait_for(f"{name} Running on tenant-a's card", running_pod)
            assert running["spec"]["schedulerName"] == "hami-scheduler"  # HAMi's webhook
            allocated = running["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
            assert allocated == "GPU-MOCK-tenant-a-0,NVIDIA,20000,30:;"
    events = wait_for(
        "HAMi's FilteringFailed event for share-4",
        lambda: [
            e["message"]
            for e in a.get(
                "events",
                "-n",
                "gpu-workloads",
                "--field-selector",
                "involvedObject.name=share-4,reason=FilteringFailed",
            )["items"]
        ],
    )
    assert any("CardInsufficientCore" in message for message in events), events
    assert a.get("pod", "-n", "gpu-workloads", "share-4")["status"]["phase"] == "Pending"
    assert tenants["tenant-a"].bind_time.errors == []


def test_a_missing_program_is_named_with_the_fix(tmp_path: Path) -> None:
    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    empty = tmp_path / "bin"
    empty.mkdir()
    tenant = TenantLab(lab.tenants[0], lab, empty, tmp_path / "lab", None)
    with pytest.raises(ProcessLabError, match=r"kube-apiserver, .* not in .*: run `make tools` first"):
        tenant.up()
