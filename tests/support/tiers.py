"""The unit tier starts no process; a test that does is marked `integration` and runs in `make test-integration`.

`make test` is the unit tier: the model, the program under Pulumi mocks, the policies, the placement engine, HAMi's
semantics, all in the test's own process. A test that runs make, a lab script, a Python entry point or pytest is an
integration test: each such start costs 2 ms (a fake) to 2 CPU-s (a pytest), they took half the suite's CPU, and
they belong with the other tests that drive gpulab's programs against fakes of Docker, kind and kubectl.

These hooks keep that line true for tests/ (hami/tests, HAMi's semantics, are pure functions). A worker records every
process start through subprocess (and with it asyncio's subprocesses), os.fork, os.system and os.posix_spawn(p); a
test outside the integration, real and acceptance tiers that started one, in its own body or in any fixture it set
up, whatever the fixture's scope, fails at teardown, naming the first program. The process still runs, so the check
never changes what the test itself saw."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Generator

import pytest

# Tiers whose tests start programs on purpose: their own targets run them (make test-integration, test-real, verify).
PROCESS_TIERS = ("integration", "real", "acceptance")

_started: list[str] = []
_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
_fork = os.fork
_system = os.system
_posix_spawn = os.posix_spawn
_posix_spawnp = os.posix_spawnp


def _recording_execute_child(self, args, *rest, **kwargs):
    _started.append(args if isinstance(args, str | bytes) else " ".join(map(str, args)))
    return _execute_child(self, args, *rest, **kwargs)


def _recording_fork() -> int:
    _started.append("os.fork()")
    return _fork()


def _recording_system(command: str) -> int:
    _started.append(command)
    return _system(command)


def _recording_spawn(spawn):
    def recording(path, argv, *rest, **kwargs):
        _started.append(" ".join(map(str, argv)))
        return spawn(path, argv, *rest, **kwargs)

    return recording


subprocess.Popen._execute_child = _recording_execute_child  # type: ignore[attr-defined]
os.fork = _recording_fork
os.system = _recording_system
os.posix_spawn = _recording_spawn(_posix_spawn)
os.posix_spawnp = _recording_spawn(_posix_spawnp)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    _started.clear()  # what an earlier test's teardown started was that test's
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    if _started and not any(item.get_closest_marker(tier) for tier in PROCESS_TIERS):
        count, first = len(_started), str(_started[0])[:200]
        _started.clear()
        pytest.fail(
            f"this unit test started {count} process(es), the first `{first}`: the unit tier (make test) runs in "
            "its own process; mark the test `@pytest.mark.integration` (make test-integration)",
            pytrace=False,
        )
    return result
