"""Conformance with HAMi v2.10.0, continued (test_conformance_v2_10_0.py has the harness and the pattern): the vectors
of pkg/scheduler/policy/gpu_policy_test.go (the card order `Less`, `ComputeScore`, the scoring weights) and
pkg/util/device_scoring_weights_test.go, Project-HAMi/HAMi tag v2.10.0, commit 4707fb02c91c; each by file, test and
case name.
"""

from __future__ import annotations

import re

import pytest

from hami.cards import (
    _f32,
    card_score,
    parse_scoring_weights,
)
from hami.nodes import CardKey, card_less, rank_cards
from hami.tests.test_conformance_v2_10_0 import (
    POLICY_TEST,
    WEIGHTS_TEST,
    Dev,
    R,
    req,
)

# --- gpu_policy_test.go TestDeviceUsageList_Less ----------------------------------------------------------------

K = CardKey  # (score, numa, used, index)
LESS = [
    # (case, policy, numa_bind, device i, device j, Less(i, j))
    ("Binpack policy with same Numa", "binpack", False, K(10, 0, 10), K(20, 0, 20), True),
    ("Binpack: score primary, lower score sorts first across NUMA", "binpack", False, K(10, 1, 10), K(20, 0, 20), True),
    (
        "Binpack: score primary, higher score sorts last even on lower NUMA",
        "binpack",
        False,
        K(10, 0, 10),
        K(20, 1, 20),
        True,
    ),
    ("Binpack: NUMA tiebreaker when scores equal", "binpack", False, K(15, 0), K(15, 1), True),
    ("Binpack: score primary over NUMA, high-NUMA high-score sorts last", "binpack", False, K(20, 1), K(10, 0), False),
    ("Spread: score primary, higher score sorts first", "spread", False, K(10, 0, 10), K(20, 0, 20), False),
    ("Spread: score primary, lower score sorts last across NUMA", "spread", False, K(10, 1, 10), K(20, 0, 20), False),
    ("Spread: score primary over NUMA, high-NUMA high-score sorts first", "spread", False, K(20, 1), K(10, 0), True),
    ("Spread: NUMA tiebreaker when scores equal", "spread", False, K(15, 0), K(15, 1), True),
    (
        "Binpack+NumaBind: NUMA primary, higher NUMA sorts first regardless of Score",
        "binpack",
        True,
        K(5, 1),
        K(99, 0),
        True,
    ),
    ("Binpack+NumaBind: same NUMA falls back to lower Score first", "binpack", True, K(10, 0), K(20, 0), True),
    (
        "Spread+NumaBind: NUMA primary, lower NUMA sorts first regardless of Score",
        "spread",
        True,
        K(5, 0),
        K(99, 1),
        True,
    ),
    ("Spread+NumaBind: same NUMA falls back to higher Score first", "spread", True, K(20, 0), K(10, 0), True),
    ("Mutex: busy GPU sorts before idle GPU", "mutex", False, K(0, 0, 2), K(0, 0, 0), True),
    ("Mutex: idle GPU sorts after busy GPU", "mutex", False, K(0, 0, 0), K(0, 0, 1), False),
    ("Mutex: NUMA tiebreaker when both idle", "mutex", False, K(0, 0, 0), K(0, 1, 0), True),
    ("Bare numa: NUMA is the sort key regardless of score", "numa", False, K(99, 0), K(5, 1), True),
    (
        "Bare numa: same NUMA falls to deterministic Index tiebreak",
        "numa",
        False,
        K(10, 0, 0, 3),
        K(20, 0, 0, 1),
        False,
    ),
    (
        "Chain binpack,numa: score primary, numa tiebreak when scores equal",
        "binpack,numa",
        False,
        K(15, 0),
        K(15, 1),
        True,
    ),
    (
        "Chain spread,numa: score primary, numa tiebreak when scores equal",
        "spread,numa",
        False,
        K(15, 0),
        K(15, 1),
        True,
    ),
    ("Chain numa,spread: numa primary regardless of score", "numa,spread", False, K(5, 1), K(99, 0), False),
    (
        "Chain numa,spread: same NUMA falls back to spread (higher score first)",
        "numa,spread",
        False,
        K(20, 0),
        K(10, 0),
        True,
    ),
    (
        "Chain mutex,spread: mutex is a Fit() filter, not a sort key; spread decides order",
        "mutex,spread",
        False,
        K(10, 0, 5),
        K(20, 0, 0),
        False,
    ),
    (
        "Chain with only filter tokens (mutex,topology-aware) falls back to spread",
        "mutex,topology-aware",
        False,
        K(10, 0),
        K(20, 0),
        False,
    ),
    (
        "Chain binpack,numa: deterministic Index tiebreak when score and numa both tie",
        "binpack,numa",
        False,
        K(10, 0, 0, 5),
        K(10, 0, 0, 2),
        False,
    ),
    (
        "Chain binpack,spread + NumaBind: numa forced primary to keep groups contiguous",
        "binpack,spread",
        True,
        K(99, 0),
        K(5, 1),
        True,
    ),
    (
        "Chain spread,numa + NumaBind: numa moved to front, spread breaks same-NUMA ties",
        "spread,numa",
        True,
        K(20, 0),
        K(10, 0),
        True,
    ),
]


@pytest.mark.parametrize(
    "case, policy, numa_bind, a, b, want", LESS, ids=[f"{POLICY_TEST}::TestDeviceUsageList_Less::{v[0]}" for v in LESS]
)
def test_less(case, policy, numa_bind, a, b, want) -> None:
    assert card_less(a, b, policy, R, numa_bind) is want


# --- gpu_policy_test.go TestComputeScore, TestComputeScoreWithResourceWeights ------------------------------------

SCORE_DEV = Dev("test-device", 8192, count=10, used=2, usedmem=2048, totalcore=4, usedcores=1, type="type1")
TEN = Dev("test-device", 10000, totalcore=10, type="type1")
SCORE = [
    (
        "Zero capacity device returns score 0 without panic",
        Dev("test-device", 0, count=0, totalcore=0, type="type1"),
        [],
        0,
    ),
    (
        "Partial zero capacity (Count=0) returns score 0 without panic",
        Dev("test-device", 4096, count=0, totalcore=8, type="type1"),
        [],
        0,
    ),
    ("ContainerDeviceRequests has no data", SCORE_DEV, [], 7.0),
    (
        "Filter other device types and ignore Nums for slots",
        SCORE_DEV,
        [req(4, 1024, 0, 1, "type1"), req(2, 4096, 50, 2, "type2")],
        11.75,
    ),
    ("MemPercentagereq calculation evaluates correctly", TEN, [req(1, 0, 50, 2, "type1")], 8.0),
    (
        "Filter other device types and aggregate same device types",
        TEN,
        [req(1, 0, 10, 1, "type1"), req(1, 0, 20, 2, "type1"), req(1, 1000, 50, 5, "type2")],
        8.0,
    ),
]


@pytest.mark.parametrize(
    "case, dev, requests, want", SCORE, ids=[f"{POLICY_TEST}::TestComputeScore::{v[0]}" for v in SCORE]
)
def test_compute_score(case, dev, requests, want) -> None:
    assert card_score(dev.spec(), dev.use(), requests, R) == _f32(want)


GPU_A = Dev("gpu-a", 100, used=1, usedcores=90, usedmem=10, type="type1")
GPU_B = Dev("gpu-b", 100, used=7, usedcores=10, usedmem=20, type="type1", numa=1)
WEIGHTED = [
    # (subtest, weights, score a, score b, policy, numa_bind, the card Fit takes first (the sorted list's last))
    ("default weights preserve current score", None, 16, 15, None, False, None),
    ("memory weight changes the device preference", (1, 1, 3), 26, 27, "binpack", False, "gpu-b"),
    ("memory weight changes the device preference (spread)", (1, 1, 3), 26, 27, "spread", False, "gpu-a"),
    ("core weight can independently change the device preference", (1, 3, 1), 34, 17, "binpack", False, "gpu-a"),
    ("NUMA ordering remains independent from weighted score", (1, 1, 3), 26, 27, "binpack", True, "gpu-a"),
]


@pytest.mark.parametrize(
    "case, weights, score_a, score_b, policy, numa_bind, last",
    WEIGHTED,
    ids=[f"{POLICY_TEST}::TestComputeScoreWithResourceWeights::{v[0]}" for v in WEIGHTED],
)
def test_compute_score_with_weights(case, weights, score_a, score_b, policy, numa_bind, last) -> None:
    ask = [req(1, 0, 40, 0, "type1")]
    a = card_score(GPU_A.spec(), GPU_A.use(), ask, R, weights)
    b = card_score(GPU_B.spec(), GPU_B.use(), ask, R, weights)
    assert (a, b) == (_f32(score_a), _f32(score_b))
    if policy is not None:
        # In the NUMA subtest gpu-a is on NUMA 0 and gpu-b on NUMA 1; in the others NUMA does not decide.
        keys = [CardKey(a, 0, GPU_A.used, 0), CardKey(b, 1 if numa_bind else 0, GPU_B.used, 1)]
        order = rank_cards([0, 1], keys, policy, R, numa_bind)
        assert ["gpu-a", "gpu-b"][order[-1]] == last


# --- device_scoring_weights_test.go TestParseDeviceScoringWeights, TestGetDeviceScoringWeightsByPod ----------------

PARSE = [
    ("TestParseDeviceScoringWeights", "valid ordered weights", "slot=1,core=2,memory=3", (1, 2, 3)),
    (
        "TestParseDeviceScoringWeights",
        "valid reordered weights and whitespace",
        " memory = 3, slot = 1, core = 0 ",
        (1, 0, 3),
    ),
    ("TestParseDeviceScoringWeights", "empty annotation", "", "expected slot, core, and memory weights"),
    (
        "TestParseDeviceScoringWeights",
        "missing dimension",
        "slot=1,memory=3",
        "expected slot, core, and memory weights",
    ),
    ("TestParseDeviceScoringWeights", "malformed entry", "slot=1,core,memory=3", "expected key=value entries"),
    ("TestParseDeviceScoringWeights", "non-integer", "slot=1,core=high,memory=3", '"core" weight must be an integer'),
    ("TestParseDeviceScoringWeights", "negative", "slot=1,core=-1,memory=3", '"core" weight must not be negative'),
    ("TestParseDeviceScoringWeights", "unknown key", "slot=1,bandwidth=2,memory=3", 'unknown weight "bandwidth"'),
    ("TestParseDeviceScoringWeights", "duplicate key", "slot=1,slot=2,memory=3", 'duplicate "slot" weight'),
    ("TestParseDeviceScoringWeights", "all zero", "slot=0,core=0,memory=0", "at least one weight must be positive"),
    ("TestGetDeviceScoringWeightsByPod", "valid annotation", "slot=1,core=2,memory=3", (1, 2, 3)),
    ("TestGetDeviceScoringWeightsByPod", "invalid annotation", "slot=1,core=-1,memory=3", ""),  # any error
]


@pytest.mark.parametrize("test, case, value, want", PARSE, ids=[f"{WEIGHTS_TEST}::{v[0]}::{v[1]}" for v in PARSE])
def test_parse_scoring_weights(test, case, value, want) -> None:
    if isinstance(want, str):
        with pytest.raises(ValueError, match=re.escape(want) if want else None):
            parse_scoring_weights(value)
    else:
        assert parse_scoring_weights(value) == want


def test_no_weights_annotation_uses_the_defaults() -> None:
    """device_scoring_weights_test.go TestGetDeviceScoringWeightsByPod "nil Pod uses defaults", "missing annotation
    uses defaults": a pod without the annotation scores as with slot=1,core=1,memory=1."""
    card, use = GPU_A.spec(), GPU_A.use()
    ask = [req(1, 0, 40, 0, "type1")]
    assert card_score(card, use, ask, R) == card_score(card, use, ask, R, (1, 1, 1))


# --- What the engine does not express ---------------------------------------------------------------------------

NOT_MODELLED = {
    f"{POLICY_TEST}::TestDeviceUsageListLen, TestSwap, TestDeviceUsageListDeepCopy, TestDeviceListsScoreDeepCopy": (
        "the list's plumbing: no placement behaviour"
    ),
    "Go sort.Sort above 12 cards": "pdqsort is not stable: ties among >12 cards may be ordered otherwise",
}


def test_not_modelled_list_has_reasons() -> None:
    assert all(reason.strip() for reason in NOT_MODELLED.values())
