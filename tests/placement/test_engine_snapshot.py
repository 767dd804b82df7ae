"""The placement engine says, word for word, what the stored snapshot says (tests/support/engine_cases.py): the
same findings, the same usage once the workloads run, the same placements, on 500 generated tenants of
one to three GPU nodes. First written by the one- and multi-node engines before they became one; it
guards every change to the engine against changing what users read by accident."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_cases import CASES, said

STORED = Path(__file__).resolve().parents[1] / "snapshots" / "engine-findings.json"


# Ten slices of 50 cases: the 500 take 3 CPU-s, and as one test they were the unit tier's longest, often its last.
SLICE = 50


def test_the_snapshot_holds_every_case() -> None:
    assert sorted(json.loads(STORED.read_text()), key=int) == [str(seed) for seed in range(CASES)]


@pytest.mark.parametrize("first", range(0, CASES, SLICE))
def test_the_engine_says_what_the_snapshot_says(first: int) -> None:
    stored = json.loads(STORED.read_text())
    changed = [seed for seed in range(first, min(first + SLICE, CASES)) if said(seed) != stored[str(seed)]]
    assert not changed, (
        f"{len(changed)} of cases {first}-{first + SLICE - 1} differ, first {changed[:10]}; case {changed[0]} now says "
        f"{json.dumps(said(changed[0]), indent=1)}\nstored: {json.dumps(stored[str(changed[0])], indent=1)}\n"
        "If the change is meant, regenerate with "
        "`venv/bin/python -m tests.support.engine_cases tests/snapshots/engine-findings.json`"
    )
