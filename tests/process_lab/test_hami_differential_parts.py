"""The offline parts of the differential against the real HAMi (process_lab/differential.py): its scenarios
are stacks gpulab's loader takes, and it reads HAMi's and the API server's answers as they are written
(the strings below are copied from the real programs' output in tests/real/test_hami_differential.py runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hami.webhook import QUOTA_DENIAL, denied, percentage_denial
from model.config import ConfigError, load_stack_file
from model.hami_releases import DEFAULT_VERSION, KNOWN_VERSIONS
from policies.checker import main as check
from process_lab.differential import (
    UNREADABLE_ALLOCATION,
    Outcome,
    compare,
    denial,
    filtering_reasons,
    predicted,
    random_scenario,
    running,
)


@pytest.mark.parametrize("hami_version", [None, *KNOWN_VERSIONS])
def test_scenarios_are_stacks_the_loader_takes_and_replay_from_their_seed(tmp_path: Path, hami_version) -> None:
    """The differential's ranges, each reached: 1-12 pods of 1-2 containers, 1-4 GPU nodes, on stacks the loader
    takes, on each HAMi release (process-mode stacks: a Docker-lab stack refuses v2.10.0 with the upstream mock)."""
    refused = 0
    pods, containers, nodes = set(), set(), set()
    for seed in range(40):
        scenario = random_scenario(seed, hami_version)
        assert random_scenario(seed, hami_version) == scenario
        pods.add(len(scenario.pods))
        containers.update(len(pod["spec"]["containers"]) for pod in scenario.pods)
        stack = tmp_path / f"Pulumi.s{seed}.yaml"
        stack.write_text(scenario.stack_file())
        try:
            lab = load_stack_file(stack)
        except ConfigError:
            refused += 1
            continue
        nodes.add(len(lab.tenants[0].gpu_nodes()))
        assert lab.process_mode and lab.tenants[0].hami_version == (hami_version or DEFAULT_VERSION)
    assert min(pods) == 1 and max(pods) == 12 and pods <= set(range(1, 13)), sorted(pods)
    assert containers == {1, 2}, containers
    assert nodes == {1, 2, 3, 4}, nodes
    assert refused < 10  # most draws are valid configs, so the real run spends its time on HAMi


def test_the_checkers_json_is_read_as_the_cli_writes_it(tmp_path: Path, capsys) -> None:
    scenario = random_scenario(1)
    (tmp_path / "Pulumi.diff.yaml").write_text(scenario.stack_file())
    (tmp_path / "none.json").write_text('{"items": []}')
    pod = tmp_path / "pod.json"
    pod.write_text(
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "gpu-workloads"}, "spec":'
        ' {"containers": [{"name": "c0", "image": "busybox", "resources": {"limits": {"nvidia.com/gpumem": "1000"}}}]}}'
    )
    argv = ["--tenant", "tenant-d", "--stack", "diff", "--project-dir", str(tmp_path), "--output", "json"]
    assert check([*argv, "--usage-from", str(tmp_path / "none.json"), str(pod)]) == 0
    outcome = predicted(json.loads(capsys.readouterr().out))
    assert outcome.placed and outcome.node and outcome.node.startswith("tenant-d-worker")
    assert len(outcome.cards) == 1 and len(outcome.cards[0]) == 1


def test_hamis_annotation_and_events_and_the_api_servers_denials() -> None:
    placed = running("n1", "GPU-A,NVIDIA,20000,30:;GPU-B,NVIDIA,100,0:GPU-C,NVIDIA,100,0:;")
    assert placed.placed and placed.node == "n1" and placed.cards == [["GPU-A"], ["GPU-B", "GPU-C"]]
    events = [
        {"message": "1 nodes CardTypeMismatch(tenant-d-worker-1)"},
        {"message": "2 nodes ResourceQuotaNotFit(tenant-d-worker-0,tenant-d-worker-1)"},
        {"message": "no available node, 2 nodes do not meet"},
    ]
    assert filtering_reasons(events) == {"CardTypeMismatch", "ResourceQuotaNotFit"}
    quota = denial('pods "p1" is forbidden: exceeded quota: gpulab-gpu-quota, requested: requests.nvidia.com/gpu=1')
    assert quota.reasons == {"ExceededQuota"}
    policy = denial(
        "ValidatingAdmissionPolicy 'gpulab-gpu-requests' with binding 'gpulab-gpu-requests' denied request: "
        "NodeInsufficientDevice: a container asks for more cards"
    )
    assert policy.reasons == {"NodeInsufficientDevice"} and policy.first_only
    # HAMi v2.10.0's webhook, as kubectl printed it in the real differential (2026-12-07, seed 5001 pod p1).
    webhook = denial(
        'Error from server (Forbidden): error when creating "p1.json": admission webhook "vgpu.hami.io" denied the '
        "request: exceeding resource quota"
    )
    assert webhook.reasons == {"ExceedingResourceQuota"}


def test_what_counts_as_agreement() -> None:
    both = frozenset({"CardInsufficientMemory", "NodeInsufficientDevice"})
    checker = Outcome(False, reasons=both)
    # The API server names only the first denying validation: one of the checker's reasons is agreement.
    assert compare(checker, Outcome(False, reasons=frozenset({"NodeInsufficientDevice"}), first_only=True)) is None
    # HAMi names every reason (one event each): the same set is needed.
    assert compare(checker, Outcome(False, reasons=frozenset({"NodeInsufficientDevice"}))) is not None
    placed = Outcome(True, "n1", [["GPU-1"]], tied=frozenset({"n1", "n2"}))
    assert compare(placed, Outcome(True, "n2", [["GPU-9"]])) is None  # a tie HAMi breaks either way
    assert compare(placed, Outcome(True, "n1", [["GPU-2"]])) is not None
    assert compare(placed, Outcome(False, reasons=frozenset({"CardInsufficientCore"}))) is not None


def test_the_allocation_is_read_by_hamis_one_reader() -> None:
    """hami/annotations.py `parse_allocation` reads it (values written here, not copied): what the differential's
    own parser took (a container without cards keeps its empty part; an entry of more than four fields, which HAMi's
    decoder reads, gives its first field), and what that reader refuses is an outcome that never agrees, not a crash
    of the run."""
    assert running("n", "GPU-A,NVIDIA,1000,10:;;").cards == [["GPU-A"], []]
    assert running("n", ";GPU-B,NVIDIA,0,100:;").cards == [[], ["GPU-B"]]
    assert running("n", "GPU-A,NVIDIA,1000,10,extra:GPU-B,NVIDIA-T4,0,0,x,y:;").cards == [["GPU-A", "GPU-B"]]
    assert running("n", "GPU-A,NVIDIA,1000,10:").cards == [["GPU-A"]]  # no last `;` (HAMi writes one): kept
    for bad in ("GPU-A:;", "GPU-A,NVIDIA:;", "GPU-A,NVIDIA,lots,10:;"):  # the old parser read each as GPU-A
        unread = running("n", bad)
        assert not unread.placed and unread.reasons == {UNREADABLE_ALLOCATION}, bad
        assert "hami.io/vgpu-devices-allocated" in unread.detail
        assert compare(Outcome(True, "n", [["GPU-A"]]), unread) is not None


WEBHOOK_REFUSALS = {
    # kubectl's stderr around each refusal of HAMi v2.10.0's webhook, as hami/webhook.py words it
    "InvalidGpumemPercentage": percentage_denial("c0", 150),
    "PrivilegedContainer": denied("container c1 is privileged"),
    "PodHasNodeAssigned": denied("pod has node assigned"),
    "ExceedingResourceQuota": QUOTA_DENIAL,
}


@pytest.mark.parametrize("reason", WEBHOOK_REFUSALS)
def test_a_refusal_at_create_is_compared_with_the_checkers_verdict(reason: str) -> None:
    """HAMi's webhook refuses at create, so only its first refusal is shown: the checker agrees when it names it
    among its reasons, and disagrees when it names others or places the pod; a refusal on the checker's side
    only disagrees too."""
    stderr = f'Error from server (Forbidden): error when creating "w.json": {WEBHOOK_REFUSALS[reason]}\n'
    real = denial(stderr)
    assert real.reasons == {reason} and real.first_only and not real.placed
    assert compare(Outcome(False, reasons=frozenset({reason})), real) is None
    assert compare(Outcome(False, reasons=frozenset({reason, "PodGpuLimitExceeded"})), real) is None
    assert compare(Outcome(False, reasons=frozenset({"CardInsufficientMemory"})), real) is not None
    assert compare(Outcome(True, "tenant-d-worker-0", [["GPU-A"]]), real) is not None
    assert compare(Outcome(False, reasons=frozenset({reason})), Outcome(True, "n", [["GPU-A"]])) is not None
