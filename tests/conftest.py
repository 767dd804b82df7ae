"""Test setup: the project root and tests/ on sys.path, so tests import gpulab as the program does."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

# Property tests explore new examples on every developer run; CI replays a fixed set so a landing
# never depends on luck (a failure found locally becomes a named regression test).
import os  # noqa: E402

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Property tests: every example in CI, a quarter of them in a developer's run (tests/property_budget.py).
from property_budget import pytest_collection_modifyitems  # noqa: E402, F401
