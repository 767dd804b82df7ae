"""`python -m policies check --output json` and the checker on a tenant with
several GPU nodes: placements per node under binpack and spread, a pod no node holds, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from hami.cards import CardSpec, CardUse
from model.config import PodLimits
from placement.inventory import TenantInventory
from policies.check_output import describe_usage
from policies.checker import main

MANIFESTS = ROOT / "tests" / "manifests"


def check(capsys, *args: str, project_dir: Path = ROOT) -> tuple[int, str, str]:
    code = main([*args, "--project-dir", str(project_dir)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_of_a_refusal_has_the_schema_and_exit_1(capsys) -> None:
    code, out, _ = check(capsys, "--tenant", "tenant-a", "--output", "json", str(MANIFESTS / "fourth-share.yaml"))
    assert code == 1
    document = json.loads(out)
    assert document["tenant"] == "tenant-a" and document["placements"] == []
    (finding,) = document["findings"]
    assert {key: finding[key] for key in ("severity", "reason", "workload")} == {
        "severity": "error",
        "reason": "CardInsufficientCore",
        "workload": "Pod/gpu-workloads/trainer-4",
    }
    assert "10% free" in finding["message"]


def test_json_of_a_fit_lists_node_and_cards_and_exit_0(capsys) -> None:
    code, out, _ = check(capsys, "--tenant", "tenant-a", "--output", "json", str(MANIFESTS / "fits.yaml"))
    assert code == 0
    document = json.loads(out)
    assert document["findings"] == []
    assert document["placements"] == [
        {
            "workload": "Pod/gpu-workloads/notebook",
            "pod": "Pod/gpu-workloads/notebook",
            "node": "tenant-a-worker",
            "containers": [{"name": "cuda", "cards": ["GPU-MOCK-tenant-a-0"]}],
        }
    ]


def test_json_on_bad_input_is_still_one_document_and_exit_2(capsys) -> None:
    code, out, err = check(capsys, "--tenant", "nobody", "--output", "json", str(MANIFESTS / "fits.yaml"))
    assert code == 2
    document = json.loads(out)
    assert "unknown tenant 'nobody'" in document["error"] and document["findings"] == []
    assert err.startswith("error: unknown tenant")


def test_text_output_is_unchanged(capsys) -> None:
    code, out, _ = check(capsys, "--tenant", "tenant-a", str(MANIFESTS / "fits.yaml"))
    assert code == 0
    assert "place: Pod/gpu-workloads/notebook: cuda -> GPU-MOCK-tenant-a-0" in out.splitlines()


# --- a tenant with two GPU nodes ------------------------------------------------------------------------

SMALL = """
apiVersion: v1
kind: Pod
metadata: {name: small-%d, namespace: gpu-workloads}
spec:
  containers:
    - name: cuda
      image: busybox
      resources: {limits: {nvidia.com/gpumem: "4000", nvidia.com/gpucores: "20"}}
"""
PAIR = """
apiVersion: v1
kind: Pod
metadata: {name: pair, namespace: gpu-workloads}
spec:
  containers:
    - {name: a, image: busybox, resources: {limits: {nvidia.com/gpumem: "16000", nvidia.com/gpucores: "30"}}}
    - {name: b, image: busybox, resources: {limits: {nvidia.com/gpumem: "16000", nvidia.com/gpucores: "30"}}}
"""


def two_node_project(tmp_path: Path, node_policy: str) -> Path:
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config["gpulab:scheduling"]["nodeSchedulerPolicy"] = node_policy
    tenant = config["gpulab:tenants"][1]
    del tenant["gpus"]
    tenant["nodes"] = [
        {"name": "gpu-1", "gpus": [{"model": "L4", "count": 1}]},
        {"name": "gpu-2", "gpus": [{"model": "L4", "count": 1}]},
    ]
    tenant["limits"] = {}
    tenant.pop("quota")
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    (tmp_path / "small.yaml").write_text("---".join(SMALL % i for i in (1, 2)))
    (tmp_path / "pair.yaml").write_text(PAIR)
    return tmp_path


@pytest.mark.parametrize(("policy", "nodes"), [("binpack", 1), ("spread", 2)])
def test_two_small_pods_land_per_the_node_policy(capsys, tmp_path: Path, policy: str, nodes: int) -> None:
    project = two_node_project(tmp_path, policy)
    code, out, _ = check(
        capsys, "--tenant", "tenant-b", "--output", "json", str(project / "small.yaml"), project_dir=project
    )
    assert code == 0, out
    placed = json.loads(out)["placements"]
    assert [p["pod"] for p in placed] == ["Pod/gpu-workloads/small-1", "Pod/gpu-workloads/small-2"]
    assert len({p["node"] for p in placed}) == nodes
    assert placed[0]["tiedNodes"] == ["tenant-b-gpu-1", "tenant-b-gpu-2"], "both nodes empty: HAMi picks any"
    assert "tiedNodes" not in placed[1]


def test_text_placement_names_the_node(capsys, tmp_path: Path) -> None:
    project = two_node_project(tmp_path, "binpack")
    code, out, _ = check(capsys, "--tenant", "tenant-b", str(project / "small.yaml"), project_dir=project)
    assert code == 0
    assert (
        "place: Pod/gpu-workloads/small-1 on tenant-b-gpu-1: cuda -> GPU-MOCK-tenant-b-gpu-1-0 "
        "(tied with tenant-b-gpu-2: HAMi picks any)"
    ) in out.splitlines()
    assert "place: Pod/gpu-workloads/small-2 on tenant-b-gpu-1: cuda -> GPU-MOCK-tenant-b-gpu-1-0" in out.splitlines()


def test_a_pod_no_single_node_holds_is_refused_with_hamis_reason(capsys, tmp_path: Path) -> None:
    project = two_node_project(tmp_path, "binpack")
    code, out, _ = check(
        capsys, "--tenant", "tenant-b", "--output", "json", str(project / "pair.yaml"), project_dir=project
    )
    assert code == 1
    (finding,) = json.loads(out)["findings"]
    assert finding["reason"] == "CardInsufficientMemory" and finding["workload"] == "Pod/gpu-workloads/pair"
    assert "2 nodes CardInsufficientMemory(tenant-b-gpu-1,tenant-b-gpu-2)" in finding["message"]


def readme_tenant_c() -> dict:
    """The two-node tenant docs/configuration.md shows, as written there."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    block = text[text.index("    - name: tenant-c") :]
    return yaml.safe_load(block[: block.index("```")])[0]


WHOLE_CORES = "nvidia.com/gpumem: '1000', nvidia.com/gpucores: '100'"
THREE_WHOLE_CARDS = """
apiVersion: v1
kind: Pod
metadata: {name: three, namespace: gpu-workloads}
spec:
  containers:
""" + "".join(f"    - {{name: c{i}, image: busybox, resources: {{limits: {{{WHOLE_CORES}}}}}}}\n" for i in range(3))
THREE_CARDS = """
apiVersion: v1
kind: Pod
metadata: {name: three-cards, namespace: gpu-workloads}
spec:
  containers:
    - {name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "3", nvidia.com/gpumem: "1000"}}}
"""


def test_what_the_readme_says_about_its_two_node_tenant(capsys, tmp_path: Path) -> None:
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpulab:tenants"].append(readme_tenant_c())
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    (tmp_path / "three.yaml").write_text(THREE_WHOLE_CARDS)
    (tmp_path / "three-cards.yaml").write_text(THREE_CARDS)
    (tmp_path / "small.yaml").write_text("---".join(SMALL % i for i in (1, 2)))
    args = ("--tenant", "tenant-c", "--output", "json")
    code, out, _ = check(capsys, *args, str(tmp_path / "three.yaml"), project_dir=tmp_path)
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and finding["reason"] == "CardInsufficientCore"
    assert "2 nodes CardInsufficientCore(tenant-c-gpu-1,tenant-c-gpu-2)" in finding["message"]
    code, out, _ = check(capsys, *args, str(tmp_path / "three-cards.yaml"), project_dir=tmp_path)
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and finding["reason"] == "NodeInsufficientDevice"
    code, out, _ = check(capsys, *args, str(tmp_path / "small.yaml"), project_dir=tmp_path)
    placed = json.loads(out)["placements"]
    assert code == 0 and placed[0]["node"] == placed[1]["node"], "binpack (the default): one node"


def test_usage_lines_are_labelled_by_the_caller() -> None:
    a100 = CardSpec("GPU-0", "NVIDIA-A100-SXM4-80GB", 81920)
    busy = TenantInventory("t", (a100,), PodLimits(), None, (), "binpack", card_usage=(CardUse(1, 1000, 10),))
    assert describe_usage(busy) == [
        "now: GPU-0 (NVIDIA-A100-SXM4-80GB): 1 of 10 slots, 1000 of 81920 MB, 10 of 100% cores in use"
    ]
    assert describe_usage(busy, "running")[0].startswith("running: GPU-0 (NVIDIA-A100-SXM4-80GB): 1 of 10 slots")
