"""The placement engine says, word for word, what the stored snapshot says (tests/support/engine_cases.py): the
same findings, the same usage once the workloads run, the same placements, on 500 generated tenants of
one to three GPU nodes. First written by the one- and multi-node engines before they became one; it
guards every change to the engine against changing what users read by accident."""

from __future__ import annotations

import json
from pathlib import Path

from engine_cases import CASES, said

STORED = Path(__file__).resolve().parents[1] / "snapshots" / "engine-findings.json"


def test_the_engine_says_what_the_snapshot_says() -> None:
    stored = json.loads(STORED.read_text())
    assert len(stored) == CASES
    changed = [seed for seed in range(CASES) if said(seed) != stored[str(seed)]]
    assert not changed, (
        f"{len(changed)} of {CASES} cases differ, first {changed[:10]}; case {changed[0]} now says "
        f"{json.dumps(said(changed[0]), indent=1)}\nstored: {json.dumps(stored[str(changed[0])], indent=1)}\n"
        "If the change is meant, regenerate with "
        "`python tests/support/engine_cases.py tests/snapshots/engine-findings.json`"
    )
