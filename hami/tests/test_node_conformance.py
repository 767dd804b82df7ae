"""Conformance of the node selection (hami/cluster.py) with HAMi v2.8.3: its own unit-test
vectors, each citing its test (Project-HAMi/HAMi tag v2.8.3; file, test, case), written as data.
The harness and tables are gpulab's; no HAMi code is used. Cases the model cannot express are in
NOT_MODELLED with the reason; the pattern is hami/tests/test_conformance.py's."""

from __future__ import annotations

import pytest

from hami.cards import CARD_INSUFFICIENT_MEMORY, CardUse, PodRequest
from hami.cluster import Cluster, best, less, node_score
from hami.nodes import Node
from hami.tests.test_conformance import Dev, req

NODE_POLICY_TEST = "pkg/scheduler/policy/node_policy_test.go"
SCORE_TEST = "pkg/scheduler/score_test.go"
SCHEDULER_TEST = "pkg/scheduler/scheduler_test.go"


def cluster(nodes: dict[str, list[Dev]]) -> Cluster:
    return Cluster(list(nodes), [Node([d.spec() for d in devs], [d.use() for d in devs]) for devs in nodes.values()])


def pod(*containers, gpu_policy: str | None = None, node_policy: str | None = None) -> PodRequest:
    return PodRequest("Pod/default/test1", "default", tuple(containers), gpu_policy=gpu_policy, node_policy=node_policy)


# --- node_policy_test.go ---------------------------------------------------------------------------

# TestLess: (case, policy, score i, score j, Less(i, j))
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


def test_any_other_policy_string_sorts_as_binpack() -> None:
    """NodeScoreList.Less: only "spread" is descending ("default policy is Binpack")."""
    assert less(10.0, 20.0, "custom") and not less(20.0, 10.0, "")


# TestComputeDefaultScore: device1 Used 50/Count 100, mem 100/100, cores 100/100; device2 (unhealthy,
# another type) Used 75/150, mem 200/200, cores 200/200: every device counts. Both cases want 25.
COMPUTE_DEFAULT = [
    ("Test with no devices", 25.0),
    ("Test with devices", 25.0),
]


@pytest.mark.parametrize(
    "case, want", COMPUTE_DEFAULT, ids=[f"{NODE_POLICY_TEST}::TestComputeDefaultScore::{v[0]}" for v in COMPUTE_DEFAULT]
)
def test_compute_default_score(case, want) -> None:
    devices = [
        Dev("device1", totalmem=100, count=100, used=50, usedmem=100, totalcore=100, usedcores=100),
        Dev("device2", totalmem=200, count=150, used=75, usedmem=200, totalcore=200, usedcores=200, health=False),
    ]
    assert node_score(Node([d.spec() for d in devices], [d.use() for d in devices])) == want


# --- score_test.go Test_calcScore: per node, the default score and the cards, or the node fails ---------

FRESH = {"totalmem": 8000}
HALF = {"totalmem": 8000, "used": 5, "usedmem": 4000, "usedcores": 50}
SMALL = {"totalmem": 50}  # "not enough mem"

# (case, nodes, containers, {node: (score, card ids per container)}, nodes that fail)
CALC_SCORE = [
    (
        "one node one device one pod one container use one device.",
        {"node1": [Dev("uuid1", **FRESH)]},
        [req(1, 1000, cores=30)],
        {"node1": (0.0, [["uuid1"]])},
        set(),
    ),
    (
        "one node one device one pod one container use one device,but this device before having use.",
        {"node1": [Dev("uuid1", **HALF)]},
        [req(1, 1000, cores=30)],
        {"node1": (15.0, [["uuid1"]])},
        set(),
    ),
    (
        "one node two device one pod one container use one device",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [req(1, 1000, cores=30)],
        {"node1": (0.0, [["uuid2"]])},
        set(),
    ),
    (
        "one node two device one pod one container use one device,but having use 50%",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **HALF)]},
        [req(1, 1000, cores=30)],
        {"node1": (7.5, [["uuid1"]])},
        set(),
    ),
    (
        "one node two device one pod one container use two device",
        {"node1": [Dev("uuid1", **FRESH), Dev("uuid2", **FRESH)]},
        [req(2, 1000, cores=30)],
        {"node1": (0.0, [["uuid2", "uuid1"]])},
        set(),
    ),
    (
        "one node two device one pod one container use two device,but this two device before having use.",
        {"node1": [Dev("uuid1", **HALF), Dev("uuid2", **HALF)]},
        [req(2, 1000, cores=30)],
        {"node1": (15.0, [["uuid2", "uuid1"]])},
        set(),
    ),
    (
        "two node per node having one device one pod one container use one device",
        {"node1": [Dev("uuid1", **FRESH)], "node2": [Dev("uuid2", **FRESH)]},
        [req(1, 1000, cores=30)],
        {"node1": (0.0, [["uuid1"]]), "node2": (0.0, [["uuid2"]])},
        set(),
    ),
    (
        "two node per node having one device one pod one container use one device,one device having use 50%",
        {"node1": [Dev("uuid1", **HALF)], "node2": [Dev("uuid2", **FRESH)]},
        [req(1, 1000, cores=30)],
        {"node1": (15.0, [["uuid1"]]), "node2": (0.0, [["uuid2"]])},
        set(),
    ),
    (
        "one node one device one pod one container use one device and not enough resource,node should be failed.",
        {"node1": [Dev("uuid1", **SMALL)]},
        [req(1, 1000, cores=30)],
        {},
        {"node1"},
    ),
    (
        "race condition test for failedNodes map with two nodes failing",
        {"node1": [Dev("uuid1", **SMALL)], "node2": [Dev("uuid2", **SMALL)]},
        [req(1, 1000, cores=30)],
        {},
        {"node1", "node2"},
    ),
    (
        "two node per node having one device one pod two container use one device",
        {"node1": [Dev("uuid1", **FRESH)], "node2": [Dev("uuid2", **FRESH)]},
        [req(1, 1000, cores=30), req(1, 1000, cores=40)],
        {"node1": (0.0, [["uuid1"], ["uuid1"]]), "node2": (0.0, [["uuid2"], ["uuid2"]])},
        set(),
    ),
]


@pytest.mark.parametrize(
    "case, nodes, containers, want, want_failed",
    CALC_SCORE,
    ids=[f"{SCORE_TEST}::Test_calcScore::{v[0]}" for v in CALC_SCORE],
)
def test_calc_score(case, nodes, containers, want, want_failed) -> None:
    # The test's DeviceUsageList policy is spread (the card order); the node policy is binpack.
    state = cluster(nodes)
    choices, failures = state.filter(pod(*containers), "spread")
    got = {state.names[c.node]: (c.score, state.card_ids(c)) for c in choices}
    assert got == want
    assert set(failures) == want_failed
    for failure in failures.values():
        assert failure.reason == CARD_INSUFFICIENT_MEMORY


def test_calc_score_leaves_the_nodes_as_they_were() -> None:
    """Each node is judged from the usage before the pod; nothing is committed by the filter."""
    state = cluster({"node1": [Dev("uuid1", **HALF)], "node2": [Dev("uuid2", **FRESH)]})
    state.filter(pod(req(1, 1000, cores=30)), "spread")
    assert [n.use for n in state.nodes] == [[CardUse(5, 4000, 50)], [CardUse()]]


# --- scheduler_test.go Test_Filter: node policy x card policy, the node and card Filter returns ----------

# node1: device1 (pod1: 2000 MB, 25 %), device2; node2: device3, device4 (pod2: 6000 MB, 75 %); 8000 MB cards.
FILTER = [
    ("node use binpack gpu use binpack policy", "binpack", "binpack", "node2", "device4"),
    ("node use binpack gpu use spread policy", "binpack", "spread", "node2", "device3"),
    ("node use spread gpu use binpack policy", "spread", "binpack", "node1", "device1"),
    ("node use spread gpu use spread policy", "spread", "spread", "node1", "device2"),
]


@pytest.mark.parametrize(
    "case, node_policy, gpu_policy, want_node, want_card",
    FILTER,
    ids=[f"{SCHEDULER_TEST}::Test_Filter::{v[0]}" for v in FILTER],
)
def test_filter(case, node_policy, gpu_policy, want_node, want_card) -> None:
    state = cluster(
        {
            "node1": [Dev("device1", 8000, used=1, usedmem=2000, usedcores=25), Dev("device2", 8000)],
            "node2": [Dev("device3", 8000), Dev("device4", 8000, used=1, usedmem=6000, usedcores=75)],
        }
    )
    # The policies come from the pod's annotations; the configured ones must not matter.
    other = "spread" if node_policy == "binpack" else "binpack"
    asked = pod(req(1, 1000, cores=20), gpu_policy=gpu_policy, node_policy=node_policy)
    outcome = state.candidates(asked, "spread" if gpu_policy == "binpack" else "binpack", other)
    choices, _ = outcome
    assert [state.names[c.node] for c in choices] == [want_node]
    assert state.card_ids(choices[0]) == [[want_card]]


# --- Filter's choice (scheduler.go: sort.Sort, then the last node) ----------------------------------------


def test_binpack_takes_the_most_used_node_and_spread_the_least() -> None:
    scores = [15.0, 0.0, 7.5]
    assert best(scores, "binpack") == [0]
    assert best(scores, "spread") == [1]


def test_a_tie_leaves_every_tied_node_possible() -> None:
    """The list is built over a Go map by goroutines and sort.Sort is not stable: any tied node."""
    assert best([0.0, 0.0], "binpack") == [0, 1]
    assert best([3.0, 8.0, 8.0], "binpack") == [1, 2]
    assert best([3.0, 3.0, 8.0], "spread") == [0, 1]


NOT_MODELLED = {
    f"{NODE_POLICY_TEST}::TestOverrideScore": "its devices are DCU and Metax GPUs with topology annotations; "
    "for NVIDIA, ScoreNode returns 0 (pkg/device/nvidia/device.go), so the override adds nothing",
    f"{NODE_POLICY_TEST}::TestNodeScoreListLen": "the list's length: no placement behaviour",
    f"{NODE_POLICY_TEST}::TestNodeSwap": "the list's swap: no placement behaviour",
    f"{SCORE_TEST}::Test_calcScore::kunlun cases": "vendors other than NVIDIA are not modelled",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
