"""The line between the unit tier (make test) and the integration tier (make test-integration): a test outside the
process tiers that starts a process fails at teardown, naming the program; one marked integration does not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiers
from shared_data import ROOT

# This test starts processes itself, so it belongs to the tier it checks the line of.
pytestmark = pytest.mark.integration


class Item:
    """What the hooks read of a pytest item: its markers."""

    def __init__(self, *markers: str) -> None:
        self.markers = markers

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def teardown(item: Item) -> None:
    """Drive the teardown hook as pluggy does: up to its yield, then resume it with the inner hooks' result."""
    hook = tiers.pytest_runtest_teardown(item)
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(None)


def setup(item: Item) -> None:
    hook = tiers.pytest_runtest_setup(item)
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(None)


def test_a_unit_test_that_starts_a_process_fails_naming_it() -> None:
    setup(Item())
    subprocess.run(["true", "gpulab-tier-check"], check=True)
    with pytest.raises(pytest.fail.Exception, match=r"started 1 process\(es\), the first `true gpulab-tier-check`"):
        teardown(Item())
    teardown(Item())  # said once: the next test starts from nothing


def test_a_fork_counts_as_a_process() -> None:
    setup(Item())
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    with pytest.raises(pytest.fail.Exception, match=r"os\.fork\(\)"):
        teardown(Item())


@pytest.mark.parametrize("tier", tiers.PROCESS_TIERS)
def test_the_process_tiers_may_start_processes(tier: str) -> None:
    setup(Item(tier))
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    teardown(Item(tier))


def test_a_unit_test_that_starts_nothing_passes() -> None:
    setup(Item())
    teardown(Item())


def test_what_an_earlier_test_started_is_not_the_next_ones() -> None:
    subprocess.run(["true"], check=True)  # as if the previous test's teardown had started it
    setup(Item())
    teardown(Item())


def test_the_suites_conftest_puts_the_line_in_force(tmp_path: Path) -> None:
    """End to end, as pytest loads it: tests/conftest.py (here as a plugin, -p tests.conftest) registers the hooks,
    so an unmarked test that starts a process errors at teardown and a marked one passes. The run has no ini file:
    -o gives it the helpers' folder that pyproject.toml's `pythonpath` gives the suite."""
    (tmp_path / "test_two.py").write_text(
        "import subprocess\nimport pytest\n\n\n"
        "def test_unmarked():\n    subprocess.run(['true', 'unmarked-start'], check=True)\n\n\n"
        "@pytest.mark.integration\ndef test_marked():\n    subprocess.run(['true'], check=True)\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "GPULAB_"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
         "-o", "markers=integration", "-o", f"pythonpath={ROOT / 'tests' / 'support'}", "--rootdir", str(tmp_path),
         str(tmp_path / "test_two.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "2 passed, 1 error" in result.stdout, result.stdout + result.stderr
    assert "ERROR at teardown of test_unmarked" in result.stdout and "`true unmarked-start`" in result.stdout
