"""Property tests at full strength in CI, a sixteenth of their examples in a developer's `make test`.

Each hypothesis test sets its own `max_examples` (150 to 400 here), and those tests take about a third
of the suite's CPU (the CEL interpreter alone: 20 s for 300 generated workloads). CI (`CI=true`), and
anyone with `GPULAB_FULL_PROPERTIES=1`, runs every example; elsewhere each runs a sixteenth of them
(never fewer than 12; a quarter cost about 9 CPU-seconds of a 2-core run, an eighth still 5). The tests
are `derandomize=True`, so a shorter run draws from the same fixed sequence of examples CI runs: a local run
finds a subset of what CI would, never something CI cannot.

Hypothesis reads a test's settings from `_hypothesis_internal_use_settings` each time it runs it (as
`@settings` leaves them; hypothesis/core.py, pinned 6.170.17): that attribute is what is replaced.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from upstream_data import in_ci

SHARE = 16
MINIMUM = 12


def full_strength() -> bool:
    return in_ci() or os.environ.get("GPULAB_FULL_PROPERTIES", "") not in ("", "0")


def reduced(current: settings) -> settings:
    return settings(current, max_examples=min(current.max_examples, max(MINIMUM, current.max_examples // SHARE)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full_strength():
        return
    done: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        if getattr(test, "is_hypothesis_test", False) and id(test) not in done:
            done.add(id(test))
            test._hypothesis_internal_use_settings = reduced(test._hypothesis_internal_use_settings)
