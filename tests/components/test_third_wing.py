"""A wing is its folder, one line of components/wings.py and one row of model/wings.py: a throwaway third wing,
registered here and nowhere else, is built by the program and read by the tools that ask a lab's traits."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
import yaml
from lab_harness import LAB_PROJECT, lab_config, run_program

from components.docker import lab as docker
from components.parts import TenantBuilder
from components.wings import BUILDERS
from model.config import LabConfig, parse_config
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
    system_workloads=True,
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


def third_stack(project: Path) -> str:
    """The reference stack on the third wing, as a stack file of a project folder of its own."""
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpulab:runtime"] = THIRD.name
    (project / "Pulumi.third.yaml").write_text(yaml.safe_dump(document))
    return "third"


def test_preview_and_the_sources_ask_the_third_wing_s_traits(
    third_wing: Wing, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from model.docker_lab.sources import needed
    from preview.__main__ import main, plan

    assert needed(parse_config(lab_config(runtime="third"))) == []  # downloads nothing
    assert needed(parse_config(lab_config()))  # the Docker wing's parts, which its own row says it downloads
    stack = third_stack(tmp_path)
    assert main(["--stack", stack, "--validate", "--project-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "\n"  # no CLI to download
    code, lines = plan(stack, tmp_path)
    assert code == 0, lines
    assert "management cluster" in lines  # it has one, and the tree shows it
    assert not [line for line in lines if line.startswith("kind network")]  # but not kind's: no assumed network
    assert not [line for line in lines if line.startswith("make up STACK=third will need")]  # nothing from ./bin
    [endpoint] = [line.split(maxsplit=1) for line in lines if line.lstrip().startswith("tenant_a_endpoint")]
    assert endpoint == ["tenant_a_endpoint", "(an address of the MetalLB pool, assigned at pulumi up)"]


def test_diagnose_asks_the_third_wing_s_traits(
    third_wing: Wing, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from diagnose import cluster_findings
    from diagnose.collect import Collector, tenant_expectations
    from diagnose.runner import Runner

    lab = parse_config(lab_config(runtime="third"))
    expectations = tenant_expectations(lab, "tenant-a")
    assert expectations["wing"] is third_wing
    # Its system parts are workloads in the tenant: its cards come from a device plugin there, as in the Docker lab.
    assert expectations["cards_from"] == tenant_expectations(parse_config(lab_config()), "tenant-a")["cards_from"]
    # Its control plane is no local process: an unfinished tenant is looked for where the Docker lab's is.
    assert "TenantControlPlane" in cluster_findings.unfinished_tenant_fix("third", "tenant-a", third_wing)
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker, kind, kubectl or pulumi here
    collector = Collector(Runner(5, 1, 30), "third", lab, tmp_path, request_timeout=3)
    assert collector.tools() is None  # no Docker host: neither docker nor kind is asked, and no finding says so
    assert collector.out.files["tools/runtime.txt"].startswith("third: its nodes are on no Docker host here; ")
    assert collector.out.findings == []
