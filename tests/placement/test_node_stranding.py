"""Stranding across several GPU nodes: a set that HAMi's walk strands in every creation order, on
every choice among tied nodes, is a certain failure (an error, exit 1); a set stranded only in some
orders, or only on some tie branch, stays advice. Checked against brute force: every order, every tie."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from lab_harness import LAB_PROJECT

from hami.cards import CARD_INSUFFICIENT_MEMORY, CardSpec, CardUse, ContainerRequest, NamespaceQuota, PodRequest
from hami.cluster import Cluster, NodeFailure
from hami.nodes import Node
from model.config import PodLimits
from placement.findings import ORDER_DEPENDENT
from placement.inventory import TenantInventory
from placement.orders import every_order_strands, simulate
from placement.search import Budget, search_placement
from placement.wording import evaluate_tenant
from placement.workloads import Workload
from tests.policies.test_checker import run_module

NS = "gpu-workloads"
L4 = ("NVIDIA-L4", 24576)
L40S = ("NVIDIA-L40S", 49152)
A100 = ("NVIDIA-A100-SXM4-80GB", 81920)
T4 = ("NVIDIA-Tesla-T4", 16384)


def pod(name: str, memory: int, cores: int, nums: int = 1, containers: int = 1) -> PodRequest:
    """`memory` 0: HAMi's 100 % of each card (a GPU asked without a memory size)."""
    request = ContainerRequest("c", nums, memory, 100 if memory == 0 else 101, cores)
    return PodRequest(f"Pod/{NS}/{name}", NS, tuple(request for _ in range(containers)))


def tenant(nodes: dict[str, list[tuple[str, int]]], gpu_policy: str, node_policy: str) -> TenantInventory:
    cards = tuple(
        CardSpec(f"GPU-{name}-{i}", *model) for name, models in nodes.items() for i, model in enumerate(models)
    )
    return TenantInventory(
        name="t",
        cards=cards,
        limits=PodLimits(),
        quota=None,
        namespaces=(NS,),
        gpu_policy=gpu_policy,
        nodes=tuple((name, len(models)) for name, models in nodes.items()),
        node_policy=node_policy,
    )


def workloads(pods: Sequence[PodRequest]) -> list[Workload]:
    return [Workload("Pod", p.workload.rsplit("/", 1)[1], NS, {}, 1, (p,)) for p in pods]


def cluster_of(inventory: TenantInventory) -> Cluster:
    nodes, start = [], 0
    for _, count in inventory.nodes:
        nodes.append(Node(inventory.cards[start : start + count]))
        start += count
    return Cluster([name for name, _ in inventory.nodes], nodes)


# --- brute force: every creation order, every tied node, no shortcuts ----------------------------------------


def runs(cluster: Cluster, order: Sequence[PodRequest], gpu_policy: str, node_policy: str) -> Iterator[bool]:
    """Every run of HAMi's walk over `order`, one per choice among tied nodes at each step: True when it
    places every pod, False when it strands one."""

    def walk(state: Cluster, position: int) -> Iterator[bool]:
        if position == len(order):
            yield True
            return
        outcome = state.candidates(order[position], gpu_policy, node_policy)
        if isinstance(outcome, NodeFailure):
            yield False
            return
        for choice in outcome[0]:
            branch = state.copy()
            branch.commit(order[position], choice)
            yield from walk(branch, position + 1)

    yield from walk(cluster.copy(), 0)


def strands_in_every_run(cluster: Cluster, pods: Sequence[PodRequest], gpu_policy: str, node_policy: str) -> bool:
    return not any(
        placed for order in itertools.permutations(pods) for placed in runs(cluster, order, gpu_policy, node_policy)
    )


# --- a two-node set stranded in every order ------------------------------------------------------------------

# Node a: an L40S and an A100; node b: an L4. Some placement holds the four pods (a whole card on the
# L40S and one on the L4, 30000 + 20000 MB on the A100), but card binpack puts an MB-sized pod on the
# fuller-looking L40S, and the whole cards then take the A100 and the L4, whatever the order and
# whichever node HAMi picks on a tie.
EVERY_ORDER_NODES = {"a": [L40S, A100], "b": [L4]}
EVERY_ORDER_PODS = [pod("mid", 30000, 60), pod("whole-1", 0, 100), pod("whole-2", 0, 100), pod("small", 20000, 30)]


def test_a_two_node_set_stranded_in_every_order_is_an_error() -> None:
    inventory = tenant(EVERY_ORDER_NODES, "binpack", "binpack")
    cluster = cluster_of(inventory)
    assert search_placement(cluster, EVERY_ORDER_PODS, Budget()).fits is True
    assert strands_in_every_run(cluster, EVERY_ORDER_PODS, "binpack", "binpack"), "brute force agrees"
    (finding,) = evaluate_tenant(inventory, workloads(EVERY_ORDER_PODS))
    assert (finding.severity, finding.workload, finding.reason) == (
        "error",
        f"Pod/{NS}/small",
        CARD_INSUFFICIENT_MEMORY,
    )
    assert "strands one in every creation order, whichever tied node it picks" in finding.message
    assert f"it puts Pod/{NS}/mid on a, Pod/{NS}/whole-1 on a, Pod/{NS}/whole-2 on b" in finding.message
    assert "[HAMi: 2 nodes CardInsufficientMemory(a,b)]" in finding.message, "HAMi's event, as on a refusal"
    assert "GPU-a-0 (NVIDIA-L40S): CardInsufficientMemory (asks 20000 MB, 19152 MB free of 49152)" in finding.message


def test_the_same_set_stranded_only_in_some_orders_stays_a_warning() -> None:
    """With card policy spread, some order and tie choice places all four: advice, not an error."""
    inventory = tenant(EVERY_ORDER_NODES, "spread", "binpack")
    assert not strands_in_every_run(cluster_of(inventory), EVERY_ORDER_PODS, "spread", "binpack")
    assert every_order_strands(cluster_of(inventory), EVERY_ORDER_PODS, "spread", "binpack") is False
    (finding,) = evaluate_tenant(inventory, workloads(EVERY_ORDER_PODS))
    assert (finding.severity, finding.reason) == ("warning", ORDER_DEPENDENT)


# Node a: an A100; node b: a T4. Every creation order strands a pod on some tie branch (the whole-card
# pod, first on two empty nodes, may take the A100), but on the other branch (it takes the T4) every pod
# is placed: HAMi's choice on a tie is not determined, so the failure is not certain.
TIE_NODES = {"a": [A100], "b": [T4]}
TIE_PODS = [pod("whole", 0, 10), pod("p16", 16000, 0), pod("p13", 13000, 40)]


def test_a_stranding_only_on_a_tie_branch_is_not_certain() -> None:
    inventory = tenant(TIE_NODES, "binpack", "binpack")
    cluster = cluster_of(inventory)
    for order in itertools.permutations(TIE_PODS):
        assert simulate(cluster, order, "binpack", "binpack") is not None, "every order strands on a branch"
    assert not strands_in_every_run(cluster, TIE_PODS, "binpack", "binpack"), "some run places all three"
    assert every_order_strands(cluster, TIE_PODS, "binpack", "binpack") is False
    findings = evaluate_tenant(inventory, workloads(TIE_PODS))
    assert [(f.severity, f.reason) for f in findings] == [("warning", ORDER_DEPENDENT)], findings


def test_a_cut_walk_is_never_certain() -> None:
    cluster = cluster_of(tenant(EVERY_ORDER_NODES, "binpack", "binpack"))
    assert every_order_strands(cluster, EVERY_ORDER_PODS, "binpack", "binpack") is True
    assert every_order_strands(cluster, EVERY_ORDER_PODS, "binpack", "binpack", limit=3) is None


def test_more_orders_than_the_one_node_limit_are_never_certain(monkeypatch) -> None:
    """The order limit (orders.MAX_ORDERS): above it, advice only."""
    import placement.orders

    monkeypatch.setattr(placement.orders, "MAX_ORDERS", 11)  # the set has 4!/2! = 12 distinct orders
    (finding,) = evaluate_tenant(tenant(EVERY_ORDER_NODES, "binpack", "binpack"), workloads(EVERY_ORDER_PODS))
    assert (finding.severity, finding.reason) == ("warning", ORDER_DEPENDENT)


# --- `python -m policies check` ------------------------------------------------------------------------------

MANIFEST = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: gpu-workloads}}
spec:
  containers:
    - {{name: cuda, image: busybox, resources: {{limits: {{{limits}}}}}}}
"""
MANIFEST_PODS = [
    ("mid", 'nvidia.com/gpumem: "30000", nvidia.com/gpucores: "60"'),
    ("whole-1", 'nvidia.com/gpu: "1", nvidia.com/gpucores: "100"'),
    ("whole-2", 'nvidia.com/gpu: "1", nvidia.com/gpucores: "100"'),
    ("small", 'nvidia.com/gpumem: "20000", nvidia.com/gpucores: "30"'),
]


@pytest.mark.integration
def test_the_checker_exits_1_on_a_set_stranded_in_every_order(tmp_path: Path) -> None:
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config["gpulab:scheduling"].update(gpuSchedulerPolicy="binpack", nodeSchedulerPolicy="binpack")
    team = config["gpulab:tenants"][1]
    del team["gpus"]
    team.pop("quota", None)
    team.pop("workloads", None)
    team["limits"] = {}
    team["nodes"] = [
        {"name": "gpu-1", "gpus": [{"model": "L40S", "count": 1}, {"model": "A100-80GB", "count": 1}]},
        {"name": "gpu-2", "gpus": [{"model": "L4", "count": 1}]},
    ]
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    manifest = "---".join(MANIFEST.format(name=name, limits=limits) for name, limits in MANIFEST_PODS)
    result = run_module("check", "--tenant", "tenant-b", "-", stdin=manifest, project_dir=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stdout
    assert "Pod/gpu-workloads/small" in errors[0] and ": CardInsufficientMemory: " in errors[0]
    assert "strands one in every creation order" in errors[0]
    assert "2 nodes CardInsufficientMemory(tenant-b-gpu-1,tenant-b-gpu-2)" in errors[0]
    assert "OrderDependentPlacement" not in result.stdout and "ok:" not in result.stdout


def test_the_pack_refuses_a_set_stranded_in_every_order() -> None:
    """Through the CrossGuard analyzer as the engine feeds it (properties as a protobuf Struct, numbers as
    doubles), a team's stack with the two nodes in its policy config: a mandatory violation, no advice."""
    from policy_harness import analyze_stack, resource

    team = {
        "nodes": [
            {"name": "a", "cards": [{"model": "L40S"}, {"model": "A100-80GB"}]},
            {"name": "b", "cards": [{"model": "L4"}]},
        ],
        "gpuSchedulerPolicy": "binpack",
        "nodeSchedulerPolicy": "binpack",
    }
    config = {"tenants": {"team": team}, "defaultTenant": "team"}
    limits = {
        "mid": {"nvidia.com/gpumem": 30000, "nvidia.com/gpucores": 60},
        "whole-1": {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100},
        "whole-2": {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100},
        "small": {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"},
    }
    pods = [
        resource(
            "kubernetes:core/v1:Pod",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"containers": [{"name": "cuda", "image": "busybox", "resources": {"limits": asks}}]},
            },
            name=name,
        )
        for name, asks in limits.items()
    ]
    response = analyze_stack(pods, {"gpu-request-limits": config, "gpu-placement-order": config})
    (diagnostic,) = response.diagnostics
    # The mandatory policy (the harness's Configure sends no enforcement level, so the level is not checked here).
    assert diagnostic.policyName == "gpu-request-limits"
    # By URN ("as declared"): the engine hands a stack's resources in no fixed order, so the pack sorts them.
    assert f"tenant team: Pod/{NS}/whole-2" in diagnostic.message and "CardInsufficientMemory" in diagnostic.message
    assert "strands one in every creation order" in diagnostic.message


# --- against brute force on small random clusters ------------------------------------------------------------

MODELS = [L4, L40S, A100, T4]
memory = st.one_of(st.just(0), st.integers(1, 50).map(lambda thousands: 1000 * thousands))
ask = st.tuples(memory, st.sampled_from([0, 10, 20, 40, 60, 100]), st.integers(1, 2))
EMPTY = [None] * 6


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    nodes=st.lists(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2), min_size=2, max_size=3),
    used=st.lists(st.sampled_from([None, CardUse(1, 4000, 30)]), min_size=6, max_size=6),
    asks=st.lists(ask, min_size=2, max_size=4),
    quota=st.sampled_from([None, NamespaceQuota(memory_mb=60000), NamespaceQuota(cores=150)]),
    gpu_policy=st.sampled_from(["binpack", "binpack", "spread"]),
    node_policy=st.sampled_from(["binpack", "spread"]),
)
# Sets that strand in every order on every tie branch are rare among random ones: some found by a
# random search (brute force decides them again here), and the tie-branch case above.
@example(
    [[L40S, A100], [L4]], EMPTY, [(30000, 60, 1), (0, 100, 1), (0, 100, 1), (20000, 30, 1)], None, "binpack", "binpack"
)
@example([[L4, A100], [L4]], EMPTY, [(19000, 0, 1), (0, 50, 1), (18000, 40, 1), (0, 10, 1)], None, "binpack", "spread")
@example(
    [[L4, L40S], [L4, L4]], EMPTY, [(21000, 10, 1), (19000, 20, 1), (0, 60, 1), (0, 10, 2)], None, "binpack", "binpack"
)
@example([[T4], [T4, L4]], EMPTY, [(13000, 50, 1), (0, 100, 1), (0, 40, 1), (9000, 20, 1)], None, "binpack", "spread")
@example([[A100], [T4]], EMPTY, [(0, 10, 1), (16000, 0, 1), (13000, 40, 1)], None, "binpack", "binpack")
def test_every_order_strands_agrees_with_brute_force(nodes, used, asks, quota, gpu_policy, node_policy) -> None:
    cards = [[CardSpec(f"GPU-n{n}-{i}", *model) for i, model in enumerate(models)] for n, models in enumerate(nodes)]
    uses = [[used[(2 * n + i) % 6] or CardUse() for i in range(len(models))] for n, models in enumerate(nodes)]
    quotas = {NS: quota} if quota else None
    cluster = Cluster(
        [f"n{n}" for n in range(len(cards))], [Node(c, u, quotas) for c, u in zip(cards, uses, strict=True)]
    )
    pods = [pod(f"p{i}", memory, cores, nums) for i, (memory, cores, nums) in enumerate(asks)]
    assume(search_placement(cluster, pods, Budget()).fits is True)  # else a refusal, decided before any walk
    # Up to 3 nodes and 4 pods: brute force follows at most 4! orders x 3^4 tie branches.
    assert every_order_strands(cluster, pods, gpu_policy, node_policy) is strands_in_every_run(
        cluster, pods, gpu_policy, node_policy
    )
