"""Property tests run every example in CI and a sixteenth of them in a developer's `make test`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import pytest_collection_modifyitems


class Item:
    def __init__(self, obj) -> None:
        self.obj = obj


def examples_run(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], max_examples: int = 200) -> int:
    for name in ("CI", "GPULAB_FULL_PROPERTIES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen: list[int] = []

    @settings(max_examples=max_examples, derandomize=True, database=None)
    @given(st.integers())
    def prop(number: int) -> None:
        seen.append(number)

    pytest_collection_modifyitems(None, [Item(prop), Item(prop)])  # a parametrized test: one function, twice
    prop()
    return len(seen)


def test_a_developer_run_takes_a_sixteenth_of_the_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    assert examples_run(monkeypatch, {}, max_examples=400) == 25, "a sixteenth, once, however many items share it"
    assert examples_run(monkeypatch, {}, max_examples=60) == 12, "never fewer than 12"
    assert examples_run(monkeypatch, {}, max_examples=10) == 10, "and never more than the test asks"


@pytest.mark.parametrize("env", [{"CI": "true"}, {"GPULAB_FULL_PROPERTIES": "1"}])
def test_ci_runs_every_example(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    assert examples_run(monkeypatch, env) == 200
