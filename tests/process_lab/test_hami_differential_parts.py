"""The offline parts of the differential against the real HAMi (process_lab/differential.py): its scenarios
are stacks gpulab's loader takes, and it reads HAMi's and the API server's answers as they are written
(the strings below are copied from the real programs' output in tests/real/test_hami_differential.py runs)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from hami.releases import rules_for
from hami.webhook import QUOTA_DENIAL, denied, percentage_denial, webhook_denial
from model.config import ConfigError, load_stack_file
from model.hami_releases import DEFAULT_VERSION, KNOWN_VERSIONS
from placement.inventory import from_lab_config
from placement.per_pod import per_pod_refusals
from placement.workloads import read_workload
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
        drawn = [pod for pod in scenario.pods if not pod["metadata"]["name"].startswith("w-")]  # webhook pods aside
        pods.add(len(drawn))
        containers.update(len(pod["spec"]["containers"]) for pod in drawn)
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
    # Its other refusals, as kubectl printed them in the real differential (2026-12-07, seeds 1691, 1692, 1694 on
    # v2.10.0; the file's path shortened).
    printed = {
        'Error from server (Forbidden): error when creating "w-node-name.json": admission webhook "vgpu.hami.io" '
        "denied the request: pod has node assigned": "PodHasNodeAssigned",
        'Error from server (Forbidden): error when creating "w-privileged.json": admission webhook "vgpu.hami.io" '
        "denied the request: container c0 is privileged": "PrivilegedContainer",
        'Error from server: error when creating "w-percentage.json": admission webhook "vgpu.hami.io" denied the '
        "request: invalid nvidia.com/gpumem-percentage value 200 in container c0: must be an integer between 0 and "
        "100": "InvalidGpumemPercentage",
    }
    for stderr, reason in printed.items():
        assert denial(stderr).reasons == {reason}, stderr


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


# (seed, the pod random_scenario adds on v2.10.0, its place, its reason, made on v2.8.3 too): the first seeds of each.
WEBHOOK_SEEDS = [
    (4, "w-node-name", 0, "PodHasNodeAssigned", True),  # both releases refuse a node name
    (10, "w-privileged", 2, "PrivilegedContainer", False),
    (13, "w-percentage", 2, "InvalidGpumemPercentage", False),  # 101: HAMi's "not given" under v2.8.3
    (104, "w-percentage", 3, "InvalidGpumemPercentage", True),  # 150
]


def _webhook_pods(seed: int, hami_version: str | None) -> list[tuple[int, dict]]:
    pods = random_scenario(seed, hami_version).pods
    return [(i, pod) for i, pod in enumerate(pods) if pod["metadata"]["name"].startswith("w-")]


@pytest.mark.parametrize("seed, name, place, reason, older_too", WEBHOOK_SEEDS)
def test_the_webhooks_refusals_appear_for_their_seeds_as_well_formed_pods(
    tmp_path: Path, seed: int, name: str, place: int, reason: str, older_too: bool
) -> None:
    """Each is a pod the pack reads (placement/workloads.py), of a DNS-1123 name, in the tenant's namespace, that
    v2.10.0's webhook refuses for its reason (hami/webhook.py); v2.8.3 gets a node name, which its webhook refuses
    as well, and a percentage above 101, which gpulab judges CardInsufficientMemory there; the seed's other pods are
    the same on either release."""
    ((at, pod),) = _webhook_pods(seed, "v2.10.0")
    assert (pod["metadata"]["name"], at) == (name, place)
    assert _webhook_pods(seed, None) == [(at, pod)]  # the process runtime's default is v2.10.0
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and pod["metadata"]["namespace"] == "gpu-workloads"
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert all(c["name"] and c["image"] and c["resources"]["limits"] for c in pod["spec"]["containers"])
    workload = read_workload("Pod", pod)
    assert workload is not None and len(workload.pods) == 1
    refused = webhook_denial(workload.pods[0].admission, rules_for("v2.10.0"))
    assert refused is not None and refused[0] == reason
    older_refusal = webhook_denial(workload.pods[0].admission, rules_for("v2.8.3"))
    assert (older_refusal and older_refusal[0]) == (reason if reason == "PodHasNodeAssigned" else None)
    older = _webhook_pods(seed, "v2.8.3")
    assert older == ([(at, pod)] if older_too else [])
    if older and reason != "PodHasNodeAssigned":
        stack = tmp_path / "Pulumi.s.yaml"
        stack.write_text(random_scenario(seed, "v2.8.3").stack_file())
        inventory = from_lab_config(load_stack_file(stack))["tenant-d"]
        assert "CardInsufficientMemory" in {r.reason for r in per_pod_refusals(inventory, workload.pods[0])}
    others = [
        [p for p in random_scenario(seed, version).pods if not p["metadata"]["name"].startswith("w-")]
        for version in KNOWN_VERSIONS
    ]
    assert all(pods == others[0] for pods in others)


def test_the_webhook_cases_come_now_and_then_in_each_kind() -> None:
    """About one scenario in five on v2.10.0 (WEBHOOK_ODDS), each kind alike; on v2.8.3 every node name's and some
    of the percentage's (those above 101)."""
    counts: dict[str | None, Counter[str]] = {version: Counter() for version in KNOWN_VERSIONS}
    for seed in range(300):
        for version in KNOWN_VERSIONS:
            counts[version].update(pod["metadata"]["name"] for _, pod in _webhook_pods(seed, version))
    newer, older = counts["v2.10.0"], counts["v2.8.3"]
    assert set(newer) == {"w-percentage", "w-privileged", "w-node-name"} and 40 <= sum(newer.values()) <= 80, newer
    assert min(newer.values()) >= 10
    assert set(older) == {"w-percentage", "w-node-name"} and 0 < older["w-percentage"] < newer["w-percentage"]
    assert older["w-node-name"] == newer["w-node-name"]


def test_the_seeds_runs_were_made_of_draw_the_same_pods_as_before() -> None:
    """The documented runs' seeds (docs/process-lab.md) give the tenants and pods the generator gave before the
    webhook's cases (digests taken at 7d3b728), those cases aside: they are drawn from a stream of their own."""
    seeds = [*range(5000, 5004), *range(7000, 7009), *range(9000, 9014)]
    before = {
        "v2.10.0": "d921c3ea7db5cd64a986461c5b07ca06d58cb2b3762278a91d9c9fea9caa4216",
        "v2.8.3": "f53e50b3af66ace1a961bbfc24f78c916d00c3efe642ce47078bfe58e10b8306",
    }
    for version, digest in before.items():
        scenarios = [random_scenario(seed, version) for seed in seeds]
        drawn = [
            {"config": s.config, "pods": [p for p in s.pods if not p["metadata"]["name"].startswith("w-")]}
            for s in scenarios
        ]
        assert hashlib.sha256(json.dumps(drawn, sort_keys=True).encode()).hexdigest() == digest, version
