"""Conformance of the node selection (hami/cluster.py) with HAMi v2.10.0: its own unit-test vectors, each citing its
test (Project-HAMi/HAMi tag v2.10.0, commit 4707fb02c91c; file, test, case), written as data and run with
v2.10.0's rules. The harness and tables are gpulab's; no HAMi code is used. Cases the engine cannot express are
in NOT_MODELLED with the reason; the pattern is test_node_conformance.py's (v2.8.3)."""

from __future__ import annotations

import pytest

from hami.cards import NO_PERCENTAGE, CardUse, NamespaceQuota, PodRequest, parse_scoring_weights
from hami.cluster import Cluster, less, node_score
from hami.nodes import ContainerFailure, Node
from hami.releases import V2_10_0
from hami.tests.test_conformance_v2_10_0 import Dev, reasons, req

R = V2_10_0
NODE_POLICY_TEST = "pkg/scheduler/policy/node_policy_test.go"
SCORE_TEST = "pkg/scheduler/score_test.go"
SCHEDULER_TEST = "pkg/scheduler/scheduler_test.go"


def cluster(nodes: dict[str, list[Dev]], quotas: dict | None = None) -> Cluster:
    built = [Node([d.spec() for d in devs], [d.use() for d in devs], quotas) for devs in nodes.values()]
    return Cluster(list(nodes), built, rules=R)


def pod(*containers, init=(), gpu_policy=None, node_policy=None, weights=None, namespace="default") -> PodRequest:
    return PodRequest(
        "Pod/default/test1",
        namespace,
        tuple(containers),
        init_containers=tuple(init),
        gpu_policy=gpu_policy,
        node_policy=node_policy,
        scoring_weights=weights,
    )


# --- node_policy_test.go -----------------------------------------------------------------------------------------

LESS = [
    ("Spread strategy, i score higher", "spread", 20.0, 10.0, True),
    ("Spread strategy,j score higher", "spread", 10.0, 20.0, False),
    ("Default strategy (Binpack), i score lower", "binpack", 10.0, 20.0, True),
    ("Default strategy (Binpack), j score lower", "binpack", 20.0, 10.0, False),
]


@pytest.mark.parametrize(
    "case, policy, score_i, score_j, want", LESS, ids=[f"{NODE_POLICY_TEST}::TestLess::{v[0]}" for v in LESS]
)
def test_less(case, policy, score_i, score_j, want) -> None:
    assert less(score_i, score_j, policy) is want


BOTH = [
    Dev("device1", totalmem=100, count=100, used=50, usedmem=100, totalcore=100, usedcores=100),
    Dev("device2", totalmem=200, count=150, used=75, usedmem=200, totalcore=200, usedcores=200, health=False),
]
COMPUTE_DEFAULT = [
    ("Zero capacity devices returns score 0 without panic", [Dev("zero", 0, count=0, totalcore=0)], 0.0),
    ("Empty device list returns score 0 without panic", [], 0.0),
    ("Test with no devices", BOTH, 25.0),
    ("Test with devices", BOTH, 25.0),
]


@pytest.mark.parametrize(
    "case, devs, want",
    COMPUTE_DEFAULT,
    ids=[f"{NODE_POLICY_TEST}::TestComputeDefaultScore::{v[0]}" for v in COMPUTE_DEFAULT],
)
def test_compute_default_score(case, devs, want) -> None:
    assert node_score(Node([d.spec() for d in devs], [d.use() for d in devs], rules=R)) == want


# --- score_test.go Test_calcScore: per node, the default score and the cards, or the node's reasons -------------------

FRESH = {"totalmem": 8000}
HALF = {"totalmem": 8000, "used": 5, "usedmem": 4000, "usedcores": 50}
SMALL = {"totalmem": 50}  # "not enough mem"
ONE_K = req(1, 1000, cores=30)
APP_101 = req(1, 1000, NO_PERCENTAGE, 30)  # MemPercentagereq: 101

# (case, card policy (the test's DeviceLists.Policy), nodes, app containers, init containers,
#  {node: (score, init cards, app cards)}, {node: reason})
# Containers without a device request are left out, as placement/workloads.py leaves them out.
CALC_SCORE = [
    (
        "one node one device one pod one container use one device.",
        "spread",
        {"node1": [Dev("uuid1", **FRESH)]},
        [ONE_K],
        [],
        {"node1": (0.0, [], [["uuid1"]])},
        {},
    ),
    (
        "one node one device one pod one container use one device,but this device before having use.",
        "spread",
        {"node1": [Dev("uuid1", **HALF)]},
        [ONE_K],
        [],
        {"node1": (15.0, [], [["uuid1"]])},
        {},
    ),
    (
        "one node two device one pod one container use one device",
        "spread",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [ONE_K],
        [],
        {"node1": (0.0, [], [["uuid2"]])},
        {},
    ),
    (
        "init container requests more memory than any single device has (should filter node)",
        "binpack",
        {"node1": [Dev("uuid1", 8000, usedmem=7500), Dev("uuid2", 8000, usedmem=7500)]},
        [req(1, 100, cores=30)],
        [req(1, 4000, cores=30)],
        {},
        {"node1": "2/2 CardInsufficientMemory"},
    ),
    (
        "one node two device one pod one container use one device,but having use 50%",
        "spread",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **HALF)]},
        [ONE_K],
        [],
        {"node1": (7.5, [], [["uuid1"]])},
        {},
    ),
    (
        "one node two device one pod one container use two device",
        "spread",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [req(2, 1000, cores=30)],
        [],
        {"node1": (0.0, [], [["uuid2", "uuid1"]])},
        {},
    ),
    (
        "one node two device one pod one container use two device,but this two device before having use.",
        "spread",
        {"node1": [Dev("uuid1", **HALF), Dev("uuid2", **HALF)]},
        [req(2, 1000, cores=30)],
        [],
        {"node1": (15.0, [], [["uuid2", "uuid1"]])},
        {},
    ),
    (
        "two node per node having one device one pod one container use one device",
        "spread",
        {"node1": [Dev("uuid1", **FRESH)], "node2": [Dev("uuid2", **FRESH)]},
        [ONE_K],
        [],
        {"node1": (0.0, [], [["uuid1"]]), "node2": (0.0, [], [["uuid2"]])},
        {},
    ),
    (
        "two node per node having one device one pod one container use one device,one device having use 50%",
        "spread",
        {"node1": [Dev("uuid1", **HALF)], "node2": [Dev("uuid2", **FRESH)]},
        [ONE_K],
        [],
        {"node1": (15.0, [], [["uuid1"]]), "node2": (0.0, [], [["uuid2"]])},
        {},
    ),
    (
        "one node two device one pod two container use two device",
        "binpack",
        {"node1": [Dev("uuid1", **FRESH)]},
        [APP_101],
        [],
        {"node1": (0.0, [], [["uuid1"]])},
        {},
    ),
    (
        "one node one device one pod two container, the second container use device",
        "binpack",
        {"node1": [Dev("uuid1", **FRESH)]},
        [APP_101],
        [],
        {"node1": (0.0, [], [["uuid1"]])},
        {},
    ),
    (
        "one node one device one pod with three containers, middle container uses one device.",
        "spread",
        {"node1": [Dev("uuid1", **FRESH)]},
        [APP_101],
        [],
        {"node1": (0.0, [], [["uuid1"]])},
        {},
    ),
    (
        "one node two device one pod two containers use two device with spread,should not in same device.",
        "spread",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [req(1, 8000, cores=30), ONE_K],
        [],
        {"node1": (0.0, [], [["uuid2"], ["uuid1"]])},
        {},
    ),
    (
        "one node one device one pod one container use one device and not enough resource,node should be failed.",
        "spread",
        {"node1": [Dev("uuid1", **SMALL)]},
        [ONE_K],
        [],
        {},
        {"node1": "1/1 CardInsufficientMemory"},
    ),
    (
        "race condition test for failedNodes map with two nodes failing",
        "spread",
        {"node1": [Dev("uuid1", **SMALL)], "node2": [Dev("uuid2", **SMALL)]},
        [ONE_K],
        [],
        {},
        {"node1": "1/1 CardInsufficientMemory", "node2": "1/1 CardInsufficientMemory"},
    ),
    (
        "two init containers, first has no device request, second does - tests slot alignment (issue #1667)",
        "binpack",
        {"node1": [Dev("uuid1", **FRESH)]},
        [ONE_K],
        [ONE_K],
        {"node1": (0.0, [["uuid1"]], [["uuid1"]])},
        {},
    ),
    (
        "one node two devices, pod has one init container (uses 1 device) and one regular container (uses 1 device) "
        "- tests InitContainer capacity reset",
        "binpack",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [ONE_K],
        [ONE_K],
        {"node1": (0.0, [["uuid2"]], [["uuid2"]])},
        {},
    ),
    (
        "init container requests MORE than app container - needsInitClone=true path",
        "binpack",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [ONE_K],
        [req(2, 1000, cores=30)],
        {"node1": (0.0, [["uuid2", "uuid1"]], [["uuid2"]])},
        {},
    ),
    (
        "init container requests more cores than any single device has (should filter node)",
        "binpack",
        {"node1": [Dev("uuid1", 8000, usedcores=80), Dev("uuid2", 8000, usedcores=80)]},
        [req(1, 1000, cores=10)],
        [req(1, 1000, cores=30)],
        {},
        {"node1": "2/2 CardInsufficientCore"},
    ),
    (
        "two node per node having one device one pod two container use one device",
        "spread",
        {"node1": [Dev("uuid1", **FRESH)], "node2": [Dev("uuid2", **FRESH)]},
        [ONE_K, req(1, 1000, cores=40)],
        [],
        {"node1": (0.0, [], [["uuid1"], ["uuid1"]]), "node2": (0.0, [], [["uuid2"], ["uuid2"]])},
        {},
    ),
]


@pytest.mark.parametrize(
    "case, card_policy, nodes, containers, init, want, want_failed",
    CALC_SCORE,
    ids=[f"{SCORE_TEST}::Test_calcScore::{v[0]}" for v in CALC_SCORE],
)
def test_calc_score(case, card_policy, nodes, containers, init, want, want_failed) -> None:
    state = cluster(nodes)
    choices, failures = state.filter(pod(*containers, init=init), card_policy)
    got = {}
    for choice in choices:
        cards = state.nodes[choice.node].cards
        inits = [[cards[i].id for i in c] for c in choice.init_cards]
        got[state.names[choice.node]] = (choice.score, inits, state.card_ids(choice))
    assert got == want
    assert {name: failure.reasons for name, failure in failures.items()} == {
        name: reasons(text) for name, text in want_failed.items()
    }


def test_calc_score_leaves_the_nodes_as_they_were() -> None:
    """Each node is judged from the usage before the pod, init containers included; nothing is committed."""
    state = cluster({"node1": [Dev("uuid1", **HALF)], "node2": [Dev("uuid2", **FRESH)]})
    state.filter(pod(ONE_K, init=[ONE_K]), "spread")
    assert [n.use for n in state.nodes] == [[CardUse(5, 4000, 50)], [CardUse()]]


# --- score_test.go Test_fitInDevices and the device-scoring-weights tests -------------------------------------------

T = {"totalmem": 8192, "count": 4, "used": 1, "usedmem": 2048, "totalcore": 4, "usedcores": 1, "numa": 1}
FIT_IN_DEVICES = [
    ("all device score for one node", [Dev("test-1", **T), Dev("test-2", **T)], req(1, 1024, 100, 1), None),
    (
        "request devices nums cannot exceed the total number of devices on the node",
        [Dev("test-1", **T)],
        req(2, 1024, 100, 1),
        "NodeInsufficientDevice",
    ),
]


@pytest.mark.parametrize(
    "case, devs, ask, want_reason",
    FIT_IN_DEVICES,
    ids=[f"{SCORE_TEST}::Test_fitInDevices::{v[0]}" for v in FIT_IN_DEVICES],
)
def test_fit_in_devices(case, devs, ask, want_reason) -> None:
    placed = Node([d.spec() for d in devs], [d.use() for d in devs], rules=R).place_hami(pod(ask), "spread")
    if want_reason is None:
        assert not isinstance(placed, ContainerFailure)
    else:
        assert isinstance(placed, ContainerFailure) and placed.reason == want_reason


def test_calc_score_rejects_invalid_device_scoring_weights() -> None:
    """score_test.go TestCalcScoreRejectsInvalidDeviceScoringWeights: calcScore fails with the parse error (the
    engine's reader refuses the annotation with `parse_scoring_weights`)."""
    with pytest.raises(ValueError, match='"core" weight must not be negative'):
        parse_scoring_weights("slot=1,core=-1,memory=3")


WEIGHT_NODE = {
    "node1": [
        Dev("gpu-a", 100, used=1, usedcores=90, usedmem=10),
        Dev("gpu-b", 100, used=7, usedcores=10, usedmem=20),
    ]
}
FORTY = req(1, 0, 40, 0)  # Nums 1, MemPercentagereq 40
WEIGHTS = [
    # (test, policy, weights, the request on an init container (the app container asks none), want card)
    ("TestCalcScoreUsesPodDeviceScoringWeights", "binpack", None, False, "gpu-a"),
    ("TestCalcScoreUsesPodDeviceScoringWeights", "binpack", "slot=1,core=1,memory=3", False, "gpu-b"),
    ("TestCalcScoreUsesPodDeviceScoringWeightsForInitContainers", "binpack", None, True, "gpu-a"),
    ("TestCalcScoreUsesPodDeviceScoringWeightsForInitContainers", "binpack", "slot=1,core=1,memory=3", True, "gpu-b"),
    # Both cards have the same pair score: the topology choice falls to the first card the walk finds, which is
    # what the engine assumes for nodes without pair scores (hami/nodes.py).
    ("TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker", "topology-aware", None, False, "gpu-b"),
    (
        "TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker",
        "topology-aware",
        "slot=1,core=1,memory=3",
        False,
        "gpu-a",
    ),
]


@pytest.mark.parametrize(
    "test, policy, weights, on_init, want", WEIGHTS, ids=[f"{SCORE_TEST}::{v[0]}::{v[2] or 'default'}" for v in WEIGHTS]
)
def test_device_scoring_weights(test, policy, weights, on_init, want) -> None:
    state = cluster(WEIGHT_NODE)
    parsed = parse_scoring_weights(weights) if weights else None
    asked = (
        pod(init=[FORTY], gpu_policy=policy, weights=parsed)
        if on_init
        else pod(FORTY, gpu_policy=policy, weights=parsed)
    )
    choices, failures = state.filter(asked, policy)
    assert not failures and len(choices) == 1
    cards = choices[0].init_cards if on_init else choices[0].cards
    assert [[state.nodes[0].cards[i].id for i in c] for c in cards] == [[want]]


# --- scheduler_test.go Test_Filter, Test_ResourceQuota ------------------------------------------------------------

FILTER_NODES = {
    "node1": [Dev("device1", 8000, used=1, usedmem=2000, usedcores=25), Dev("device2", 8000)],
    "node2": [Dev("device3", 8000), Dev("device4", 8000, used=1, usedmem=6000, usedcores=75)],
}
FILTER = [
    # (case, node policy, gpu policy, app containers, init containers, want node, the pod's first device may be)
    (
        "node use binpack gpu use binpack policy",
        "binpack",
        "binpack",
        [req(1, 1000, NO_PERCENTAGE, 20)],
        [],
        "node2",
        {"device4"},
    ),
    (
        "pod with init containers fits correctly using max resource logic (Binpack)",
        "binpack",
        "binpack",
        [req(1, 4000, NO_PERCENTAGE, 20)],
        [req(1, 5000, NO_PERCENTAGE, 20)],
        "node2",
        {"device3"},
    ),
    (
        "node use binpack gpu use spread policy",
        "binpack",
        "spread",
        [req(1, 1000, NO_PERCENTAGE, 20)],
        [],
        "node2",
        {"device3", "device4"},  # "Both are acceptable due to tie"
    ),
    (
        "node use spread gpu use binpack policy",
        "spread",
        "binpack",
        [req(1, 1000, NO_PERCENTAGE, 20)],
        [],
        "node1",
        {"device1"},
    ),
    (
        "node use spread gpu use spread policy",
        "spread",
        "spread",
        [req(1, 1000, NO_PERCENTAGE, 20)],
        [],
        "node1",
        {"device2"},
    ),
]


@pytest.mark.parametrize(
    "case, node_policy, gpu_policy, containers, init, want_node, want_cards",
    FILTER,
    ids=[f"{SCHEDULER_TEST}::Test_Filter::{v[0]}" for v in FILTER],
)
def test_filter(case, node_policy, gpu_policy, containers, init, want_node, want_cards) -> None:
    state = cluster(FILTER_NODES)
    # The policies come from the pod's annotations; the configured ones must not matter.
    other_gpu = "spread" if gpu_policy == "binpack" else "binpack"
    other_node = "spread" if node_policy == "binpack" else "binpack"
    asked = pod(*containers, init=init, gpu_policy=gpu_policy, node_policy=node_policy)
    choices, _ = state.candidates(asked, other_gpu, other_node)
    assert [state.names[c.node] for c in choices] == [want_node]
    first = choices[0].init_cards[0] if init else choices[0].cards[0]  # the pod's first container's devices
    assert state.nodes[choices[0].node].cards[first[0]].id in want_cards


QUOTA_DEVICES = [Dev("device1", 2000), Dev("device2", 8000), Dev("device3", 4000), Dev("device4", 6000)]
RESOURCE_QUOTA = [
    # (case, request as Filter sees it (no webhook), quota (MB, cores), failed node's reason or None)
    ("multi device Resourcequota pass", req(2, 2000, NO_PERCENTAGE, 100), (4000, 200), None),
    (
        "multi device Resourcequota deny",
        req(2, 3000, NO_PERCENTAGE, 60),
        (4000, 200),
        "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit",
    ),
    ("unspecified device Resourcequota pass", req(1, 0, 100, 0), (2000, 100), None),
    ("unspecified device Resourcequota deny", req(1, 0, 100, 0), (1500, 100), "4/4 ResourceQuotaNotFit"),
]


@pytest.mark.parametrize(
    "case, ask, quota, want_reason",
    RESOURCE_QUOTA,
    ids=[f"{SCHEDULER_TEST}::Test_ResourceQuota::{v[0]}" for v in RESOURCE_QUOTA],
)
def test_resource_quota(case, ask, quota, want_reason) -> None:
    state = cluster({"node1": QUOTA_DEVICES}, {"default": NamespaceQuota(*quota)})
    choices, failures = state.filter(pod(ask), "spread")
    if want_reason is None:
        assert choices and not failures
    else:
        assert not choices and failures["node1"].reasons == reasons(want_reason)


NOT_MODELLED = {
    f"{NODE_POLICY_TEST}::TestOverrideScore": "its devices are DCU and Metax GPUs (policy-neutral scorers); NVIDIA's "
    "ScoreNode returns 0 and is not policy-neutral, so the override adds nothing",
    f"{NODE_POLICY_TEST}::TestNodeScoreListLen, TestNodeSwap, TestSnapshotDevice": "the list's plumbing: no placement "
    "behaviour",
    f"{SCORE_TEST}::Test_calcScore::*kunlun*": "vendors other than NVIDIA are not modelled",
    f"{SCORE_TEST}::Test_fitInDevices::device type the different from request type": "a request of an unregistered "
    "device type ('Device type not found'): one vendor only",
    f"{SCORE_TEST}::Test_fitInDevices_MultiTypePartition": "two mock vendors on one node",
    f"{SCORE_TEST}::Test_fitInCertainDevice": "MIG and other vendors' paths",
    f"{SCORE_TEST}::Test_Nvidia_GPU_Topology": "pair scores (hami.io/node-nvidia-score): gpulab writes none",
    f"{SCHEDULER_TEST}::Test_getNodesUsage*, Test_RegisterFromNodeAnnotations*, Test_Bind_*, ...": "registration, "
    "usage bookkeeping and binding: not placement",
    "app containers' quota with init containers": "device.go `fitQuota` hands the app containers' allocations to "
    "CollapseInitContainerUsage indexed from 0, so it takes the first len(initContainers) app entries as init "
    "containers (per card the larger, not the sum); the engine sums them, which is stricter only when two of "
    "those app containers share a card under a quota",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
