"""`make check` on a DRA tenant (tenant-b of Pulumi.dra.yaml): its manifests' pods and claim templates after the
stack's three declared 20000 MB / 30 % claims, through the allocator model (placement/dra_fit.py). Boundary: the
manifests a user writes (ResourceClaimTemplate and Pod, as model/dra.py and the Kubernetes docs shape them) and the
verdicts kube-scheduler v1.36.4 gives the same claims (make verify's TC-15/16 and tests/real/test_dra_allocation.py
see them from the real allocator)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from model.dra import claim_template
from policies.checker import main


def manifest(tmp_path: Path, name: str, memory: int | str | None, cores: int | None, **change: object) -> Path:
    template = claim_template("tenant-b", f"{name}-gpu", "gpu-workloads", None, None)
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    requests = {key: str(value) for key, value in (("memory", memory), ("cores", cores)) if value is not None}
    if requests:
        exactly["capacity"] = {"requests": requests}
    exactly.update(change)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu-workloads"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"{name}-gpu"}],
            "containers": [{"name": "work", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all([template, pod]))
    return path


def check(capsys, *files: Path) -> tuple[int, str]:
    code = main(["--tenant", "tenant-b", "--stack", "dra", "--project-dir", str(LAB_PROJECT), *map(str, files)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_fourth_share_is_refused_for_what_the_card_has_left(tmp_path: Path, capsys) -> None:
    code, out = check(capsys, manifest(tmp_path, "fourth", 20000, 30))
    assert code == 1, out
    assert "running: Pod/gpu-workloads/trainer-3 on GPU-MOCK-tenant-b-0" in out
    assert "error: tenant tenant-b: Pod/gpu-workloads/fourth: cannot allocate all claims: asks 1 card(s) with " in out
    assert "free beside the claims before it: GPU-MOCK-tenant-b-0: 21920 MB, 10 %" in out


def test_a_90000_mb_claim_is_refused_and_a_small_one_placed(tmp_path: Path, capsys) -> None:
    code, out = check(capsys, manifest(tmp_path, "small", 1000, 5), manifest(tmp_path, "huge", 90000, 10))
    assert code == 1, out
    assert "place: Pod/gpu-workloads/small: GPU-MOCK-tenant-b-0" in out
    assert "Pod/gpu-workloads/huge: cannot allocate all claims: asks 1 card(s) with 90000 MB" in out
    assert "free beside the claims before it: GPU-MOCK-tenant-b-0: 20920 MB, 5 %" in out  # after small


def test_a_claim_that_names_no_memory_takes_the_whole_card_and_does_not_fit_beside_the_three(tmp_path, capsys):
    code, out = check(capsys, manifest(tmp_path, "whole", None, None))
    assert code == 1 and "asks 1 card(s) with a whole card's memory and 0 %" in out, out


@pytest.mark.parametrize(
    ("memory", "change", "says"),
    [
        ("20Gi", {}, "memory 20Gi is a binary quantity of bytes; gpulab's cards count memory in MB"),
        (20000, {"deviceClassName": "gpulab-tenant-a-gpu"}, "asks device class 'gpulab-tenant-a-gpu', which is not "),
        ("20.5", {}, "memory (MB): '20.5' is not a whole number"),
    ],
)
def test_a_claim_in_another_unit_or_of_another_tenants_class_is_bad_input(
    tmp_path: Path, capsys, memory, change, says
) -> None:
    code, out = check(capsys, manifest(tmp_path, "odd", memory, 10, **change))
    assert code == 2 and says in out, out


def test_the_hami_tenant_beside_it_is_checked_as_before(capsys) -> None:
    fourth = ROOT / "tests" / "manifests" / "fourth-share.yaml"
    code = main(["--tenant", "tenant-a", "--stack", "dra", "--project-dir", str(LAB_PROJECT), str(fourth)])
    out = capsys.readouterr().out
    assert code == 1 and "CardInsufficientCore" in out, out


def claims_list(*consumed: tuple[str, str], device: str = "gpu-0", pool: str = "tenant-b-worker") -> dict:
    """A recorded `kubectl get resourceclaims -A -o json`: allocated claims as kube-scheduler v1.36.4 leaves them,
    with consumedCapacity as the API server writes it back ("20k" for 20000), beside a claim not allocated."""
    items = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"run-{i}-gpu-abcde", "namespace": "gpu-workloads"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.gpulab.io",
                                "pool": pool,
                                "device": device,
                                "shareID": f"share-{i}",
                                "consumedCapacity": {"memory": memory, "cores": cores},
                            }
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": f"run-{i}", "uid": f"uid-{i}"}],
            },
        }
        for i, (memory, cores) in enumerate(consumed)
    ]
    items.append({"kind": "ResourceClaim", "metadata": {"name": "pending", "namespace": "gpu-workloads"}})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def check_now(capsys, recorded: dict, tmp_path: Path, *files: Path) -> tuple[int, str]:
    usage = tmp_path / "claims.json"
    usage.write_text(yaml.safe_dump(recorded))
    argv = ["--tenant", "tenant-b", "--stack", "dra", "--project-dir", str(LAB_PROJECT), "--usage-from", str(usage)]
    code = main([*argv, *map(str, files)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_with_live_claims_the_manifest_is_judged_after_what_is_allocated_now_not_the_declared_three(
    tmp_path: Path, capsys
) -> None:
    """Two claims allocated now (not the stack's three): a share that the declared three would refuse fits now, and
    a fourth beside it is refused with what the card has free now."""
    recorded = claims_list(("20k", "30"), ("20k", "30"))
    code, out = check_now(capsys, recorded, tmp_path, manifest(tmp_path, "third", 20000, 30))
    assert code == 0, out
    assert (
        "now: GPU-MOCK-tenant-b-0 (NVIDIA-A100-SXM4-80GB): 40000 of 81920 MB, 60 of 100% cores in use (2 claims)" in out
    )
    assert "running:" not in out and "place: Pod/gpu-workloads/third: GPU-MOCK-tenant-b-0" in out
    recorded = claims_list(("20k", "30"), ("20k", "30"), ("20k", "30"))
    code, out = check_now(capsys, recorded, tmp_path, manifest(tmp_path, "fourth", 20000, 30))
    assert code == 1 and "free beside the claims before it: GPU-MOCK-tenant-b-0: 21920 MB, 10 %" in out, out


@pytest.mark.parametrize(
    ("recorded", "says"),
    [
        (claims_list(("20k", "30"), device="gpu-7"), "holds device gpu-7 of pool tenant-b-worker, which tenant"),
        (claims_list(("20k", "30"), pool="tenant-a-worker"), "is this the right tenant and stack?"),
        ({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}}]}, "give a recorded `kubectl get "),
        ({"kind": "PodList", "items": [{"metadata": {"name": "p"}}]}, "give a recorded `kubectl get "),
        ({"kind": "List", "items": ["x", None]}, "give a recorded `kubectl get "),
    ],
)
def test_live_claims_of_another_tenant_or_a_pod_list_are_bad_input(tmp_path: Path, capsys, recorded, says) -> None:
    code, out = check_now(capsys, recorded, tmp_path, manifest(tmp_path, "small", 1000, 5))
    assert code == 2 and says in out, out


def test_a_claim_with_two_shares_of_one_card_counts_once_and_both_shares_are_used(tmp_path: Path, capsys) -> None:
    recorded = claims_list(("20k", "30"))
    results = recorded["items"][0]["status"]["allocation"]["devices"]["results"]
    results.append({**results[0], "request": "second", "consumedCapacity": {"memory": "10k", "cores": "10"}})
    recorded["items"].append({**recorded["items"][0], "metadata": {"name": "other", "namespace": "gpu-workloads"}})
    code, out = check_now(capsys, recorded, tmp_path, manifest(tmp_path, "small", 1000, 5))
    assert code == 0, out
    assert "60000 of 81920 MB, 80 of 100% cores in use (2 claims)" in out, out
