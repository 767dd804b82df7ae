"""The real engine runs the policy pack (`pulumi preview --policy-pack policies/analyzer`), and its verdicts
equal `make plan`'s (preview/pack.py under the mocks) on the same stacks.

Boundary: the Pulumi engine as the pack's caller. It runs every resource policy on each resource's inputs
(Analyze) and every stack policy once on the outputs (AnalyzeStack); at a first preview the resources sent
through a tenant provider have no outputs (`{}`: the provider's kubeconfig is made in the same run), and
it sends them in no fixed order. Before policies/analyzed_inputs.py, four 30 % pods on one card passed
this preview (seen here, v3.274.0). The streaming JSON events carry each violation with its policy name,
enforcement level and URN.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT, run_program

from preview.pack import run_pack
from tests.real.engine import pulumi

REFERENCE = yaml.safe_load((LAB_PROJECT / "Pulumi.sim.yaml").read_text())["config"]


def with_tenant(name: str, **changes: object) -> dict:
    config = json.loads(json.dumps(REFERENCE))
    tenant = next(t for t in config["gpulab:tenants"] if t["name"] == name)
    for key, value in changes.items():
        if value is None:
            tenant.pop(key, None)
        else:
            tenant[key] = value
    return config


POD = {"gpumem": 20000, "gpucores": 30}
STACKS = {
    "reference": REFERENCE,
    # Two replicas of the seed's share: fits the one A100 (40000 MB, 60 %).
    "deployment": with_tenant("tenant-a", workloads=[{"name": "trainer", "kind": "Deployment", "replicas": 2, **POD}]),
    # The seed's fourth pod: 120 % of the card's cores (CardInsufficientCore).
    "four-pods": with_tenant("tenant-a", workloads=[{"name": f"trainer-{i}", **POD} for i in range(1, 5)]),
    # Several GPU nodes: one L4 each; two 20000 MB pods fit (one per node), a third does not (quota 40960 MB).
    "two-nodes": with_tenant(
        "tenant-b",
        gpus=None,
        nodes=[
            {"name": "gpu-1", "gpus": [{"model": "L4", "count": 1}]},
            {"name": "gpu-2", "gpus": [{"model": "L4", "count": 1}]},
        ],
        workloads=[{"name": f"infer-{i}", "gpumem": 20000, "gpucores": 40} for i in range(1, 4)],
    ),
}


def engine_verdicts(project: Path, stack: str, config: dict) -> set[tuple[str, str]]:
    """(policy, message) for every violation the real engine reports on a first preview of `config`."""
    (project / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    created = pulumi(project, "stack", "init", stack)
    assert created.returncode == 0, created.stderr
    streaming = {"PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "true"}
    result = pulumi(project, "preview", "--stack", stack, "--json", "--policy-pack", "policies/analyzer", env=streaming)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert any("policyLoadEvent" in event for event in events), result.stdout[-2000:] + result.stderr[-2000:]
    found = set()
    for event in events:
        policy = event.get("policyEvent")
        if policy and policy["policyPackName"] == "gpulab-gpu-policies":
            # The engine puts the policy's description before the message.
            found.add((policy["policyName"], policy["message"].split("\n", 1)[1].strip()))
    mandatory = any(policy == "gpu-request-limits" for policy, _ in found)
    assert (result.returncode != 0) == mandatory, (result.returncode, result.stderr[-2000:])
    return found


def plan_verdicts(config: dict) -> set[tuple[str, str]]:
    program = run_program({key.split(":", 1)[1]: value for key, value in config.items()}, preview=True)
    return {(policy, message) for policy, messages in run_pack(program).items() for message in messages}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_real_engine_judges_as_make_plan(project: Path, stack: str) -> None:
    real = engine_verdicts(project, stack, STACKS[stack])
    offline = plan_verdicts(STACKS[stack])
    assert real == offline, {"only the engine": sorted(real - offline), "only make plan": sorted(offline - real)}
    refused = {policy for policy, _ in real}
    if stack == "four-pods":
        assert refused == {"gpu-request-limits"} and "CardInsufficientCore" in str(real), real
    elif stack == "two-nodes":
        assert "gpu-request-limits" in refused and "infer-3" in str(real), real
    else:
        assert not real, real
