"""Generated objects and project files checked against the upstream schemas in ../shared/upstream."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from lab_harness import reference_program
from shared_data import ROOT, upstream_path, validate_crd


@pytest.fixture(scope="module")
def program():
    return reference_program()


def test_metallb_pool_validates_against_its_crd(program) -> None:
    pool = program.named("management-metallb-pool").inputs
    assert pool["apiVersion"] == "metallb.io/v1beta1" and pool["kind"] == "IPAddressPool"
    validate_crd(pool, "metallb/ipaddresspools.crd.yaml", "v1beta1")


def test_l2_advertisement_validates_against_its_crd(program) -> None:
    l2 = program.named("management-metallb-l2").inputs
    validate_crd(l2, "metallb/l2advertisements.crd.yaml", "v1beta1")
    assert l2["spec"]["ipAddressPools"] == [program.named("management-metallb-pool").inputs["metadata"]["name"]]


def test_metallb_schema_check_is_not_vacuous() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_crd(
            {"spec": {"addresses": "172.30.255.239-172.30.255.254"}}, "metallb/ipaddresspools.crd.yaml", "v1beta1"
        )


def project_schema() -> dict:
    return json.loads(upstream_path("pulumi/project.schema.json").read_text())


def test_pulumi_yaml_validates_against_the_project_schema() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    jsonschema.validate(project, project_schema())
    assert project["name"] == "gpulab"
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == "venv"


def test_project_schema_check_is_not_vacuous() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "gpulab", "runtime": {"name": "python", "venv": "x"}}, project_schema())


def test_stack_file_keys_are_project_namespaced() -> None:
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    assert set(stack) == {"config"}
    assert all(key.startswith("gpulab:") for key in stack["config"])


def test_policy_pack_project_file() -> None:
    policy = yaml.safe_load((ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert policy["runtime"]["name"] == "python"
    assert policy["runtime"]["options"]["virtualenv"] == "venv"
    assert policy["version"]
