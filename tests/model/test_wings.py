"""model/wings.py: one frozen row per wing, named as the stack's `gpulab:runtime` names it."""

from __future__ import annotations

import dataclasses

import pytest
from lab_harness import lab_config

from model.config import ConfigError, parse_config
from model.wings import DEFAULT_WING, WINGS, Wing


def test_each_row_is_frozen_and_named_by_its_key() -> None:
    assert DEFAULT_WING in WINGS
    for name, wing in WINGS.items():
        assert wing.name == name
        with pytest.raises(dataclasses.FrozenInstanceError):
            wing.docker_host = not wing.docker_host  # type: ignore[misc]


def test_a_stack_s_wing_is_the_row_its_runtime_key_names() -> None:
    assert parse_config(lab_config()).wing is WINGS[DEFAULT_WING]
    lab = parse_config(lab_config(runtime="process", management={"name": "gpulab"}))
    assert lab.wing is WINGS["process"] and not lab.wing.system_workloads


def test_the_runtime_key_takes_the_table_s_names_and_says_them_when_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"gpulab:runtime = 'podman': must be one of: docker, process$"):
        parse_config(lab_config(runtime="podman"))
    third = Wing("third", **{field.name: False for field in dataclasses.fields(Wing) if field.name != "name"})
    monkeypatch.setitem(WINGS, "third", third)
    with pytest.raises(ConfigError, match=r"must be one of: docker, process, third$"):
        parse_config(lab_config(runtime="podman"))
    assert parse_config(lab_config(runtime="third")).wing is third
