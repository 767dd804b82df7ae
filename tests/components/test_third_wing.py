"""A wing is its folder, one line of components/wings.py and one row of model/wings.py: a throwaway third wing,
registered here and nowhere else, is built by the program and read by the tools that ask a lab's traits."""

from __future__ import annotations

import pulumi
import pytest
from lab_harness import lab_config, run_program

from components.docker import lab as docker
from components.parts import TenantBuilder
from components.wings import BUILDERS
from model.config import LabConfig
from model.wings import WINGS, Wing

# A lab of the Docker wing's parts on a cluster and host of someone else's: a mix no shipped wing has.
THIRD = Wing(
    "third",
    management_cluster=True,
    kind_management=False,
    docker_host=False,
    downloads=False,
    programs_from_bin=False,
    local_processes=False,
    hami_in_cluster=True,
)


def third_tenant_builder(lab: LabConfig) -> TenantBuilder:
    """Its lab.py's entry: the Docker wing's parts, and a mark that this builder, not that one, ran."""
    pulumi.export("built_by", lab.wing.name)
    return docker.tenant_builder(lab)


@pytest.fixture
def third_wing(monkeypatch: pytest.MonkeyPatch) -> Wing:
    monkeypatch.setitem(WINGS, THIRD.name, THIRD)  # its traits row
    monkeypatch.setitem(BUILDERS, THIRD.name, third_tenant_builder)  # its registry line
    return THIRD


def test_the_program_builds_the_stack_s_wing_from_its_registry_line(third_wing: Wing) -> None:
    program = run_program(lab_config(runtime=third_wing.name))
    assert program.exports["built_by"] == "third"
    reference = run_program(lab_config())
    assert "built_by" not in reference.exports
    assert set(program.registrations) == set(reference.registrations)  # the Docker wing's parts, as it built them
