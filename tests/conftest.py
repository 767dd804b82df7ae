"""Test setup: hypothesis's profiles, the tiers' hooks, a short basetemp and the garbage collector. The project root,
tests/ and tests/support are on sys.path by pytest's own `pythonpath` (pyproject.toml), so tests import gpulab as the
program does."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# The garbage collector took 11 of a worker run's ~100 CPU-seconds (measured with gc.callbacks): each
# worker holds pulumi, kubernetes, hypothesis and CEL's parser, and the default thresholds (700, 10, 10)
# scanned them some 2,500 times. Collect less often, and never scan what collection imported again
# (gc.freeze, below). Reference counting still frees everything acyclic at once; cycles are still collected.
gc.set_threshold(10_000, 10, 10)

ROOT = Path(__file__).resolve().parent.parent

# Property tests explore new examples on every developer run; CI replays a fixed set so a landing
# never depends on luck (a failure found locally becomes a named regression test).
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Property tests: every example in CI, a sixteenth of them in a developer's run (tests/support/property_budget.py).
from property_budget import pytest_collection_modifyitems  # noqa: E402, F401

# The unit tier starts no process: a test that does is marked integration (tests/support/tiers.py).
from tiers import pytest_runtest_setup, pytest_runtest_teardown  # noqa: E402, F401

# A plain `pytest -n 2` (no --basetemp, as `make test` gives) would put tmp_path under
# /tmp/pytest-of-USER/pytest-N/popen-gwN/<test name>N/: too long for the unix sockets some tests bind
# (108 bytes, sun_path). Give such a run a short folder of its own, removed at the end. Workers inherit
# theirs from the controller (xdist passes --basetemp), so only the controller creates one. tryfirst:
# pytest's tmpdir plugin reads the option in its own pytest_configure.
_SHORT_BASETEMP = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = config.stash[_SHORT_BASETEMP] = tempfile.mkdtemp(prefix="gpulab-test.")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SHORT_BASETEMP in config.stash:
        shutil.rmtree(config.stash[_SHORT_BASETEMP], ignore_errors=True)


@pytest.fixture
def project_stack_file() -> Iterator[tuple[str, Path]]:
    """A uniquely named Pulumi.<stack>.yaml in the project root (where make and preflight read STACK), for
    tests that drive make; removed afterwards."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    path = ROOT / f"Pulumi.{name}.yaml"
    try:
        yield name, path
    finally:
        path.unlink(missing_ok=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported lives as long as the worker: out of the collector's sight from here on."""
    gc.collect()
    gc.freeze()
