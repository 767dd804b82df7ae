"""What the real engine hands a policy pack, recorded, and compared with what `make plan`'s double hands it.

Boundary: the engine as the pack's caller, value by value: a second pack (a recorder, written here) runs
beside gpulab's in one real `pulumi preview` of the reference process-mode stack and writes down every
resource's properties as its policies receive them: resource policies (Analyze, the inputs) and stack
policies (AnalyzeStack, the outputs), with each number's type, each unknown and each provider's own
properties. The same recorder is then driven by tests/support/policy_harness.analyze_first_preview over the
program's registrations under the mocks. Every difference is a fact about the engine the double must
copy (or one it does not need, said here with the reason).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from lab_harness import LAB_PROJECT, LabMocks, run_program

from tests.real.engine import pulumi

RECORDER = '''
import json, os
from collections.abc import Mapping, Sequence
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import UnknownValueError

def plain(value):
    """JSON of what a policy reads: numbers keep their Python type (a float stays 5.0), unknowns say so."""
    if isinstance(value, Mapping):
        found = {}
        for key in value:
            try:
                found[key] = plain(value[key])
            except UnknownValueError:
                found[key] = "<unknown>"
        return found
    if isinstance(value, Sequence) and not isinstance(value, str):
        found = []
        for index in range(len(value)):
            try:
                found.append(plain(value[index]))
            except UnknownValueError:
                found.append("<unknown>")
        return found
    return value

RECORD = {"analyze": {}, "stack": {}}

def analyze(args, report):
    RECORD["analyze"][args.urn] = {
        "props": plain(args.props),
        "provider": plain(args.provider.props) if args.provider else None,
    }

def analyze_stack(args, report):
    RECORD["stack"] = {r.urn: plain(r.props) for r in args.resources}
    if "GPULAB_RECORD" in os.environ:  # under the real engine; the double reads RECORD itself
        with open(os.environ["GPULAB_RECORD"], "w") as out:
            json.dump(RECORD, out, sort_keys=True)

PACK = [
    ResourceValidationPolicy(name="record-inputs", description="records", validate=analyze),
    StackValidationPolicy(name="record-outputs", description="records", validate=analyze_stack),
]
if __name__ == "__main__":
    PolicyPack(name="recorder", policies=PACK, enforcement_level=EnforcementLevel.ADVISORY)
'''


COMPONENT_TYPES = ("gpulab:index:", "pulumi:pulumi:Stack")


def urn_tail(urn: str) -> str:
    """Type chain and name, without stack, project and the mocks' `pulumi:pulumi:Stack$` (test_engine.py)."""
    return urn.split("::", 2)[2].removeprefix("pulumi:pulumi:Stack$")


@pytest.fixture(scope="module")
def recorded(project: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    pack = project / "recorder"
    pack.mkdir()
    (pack / "PulumiPolicy.yaml").write_text("runtime: python\ndescription: records what the engine hands a pack\n")
    (pack / "__main__.py").write_text(RECORDER)
    (pack / "analyzer").write_text(
        f'#!/bin/sh\ncd "$(dirname "$0")" && exec {sys.executable} -u -m pulumi.policy "$1" .\n'
    )
    (pack / "analyzer").chmod(0o755)
    record = tmp_path_factory.mktemp("record") / "engine.json"
    created = pulumi(project, "stack", "init", "values")
    assert created.returncode == 0, created.stderr
    (project / "Pulumi.values.yaml").write_text((LAB_PROJECT / "Pulumi.sim.yaml").read_text())
    result = pulumi(
        project,
        "preview",
        "--stack",
        "values",
        "--policy-pack",
        "recorder/analyzer",
        env={"GPULAB_RECORD": str(record)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(record.read_text())


def differences(real: object, ours: object, path: str) -> list[str]:
    """`path: real != ours` for each leaf where the engine and the double hand the pack different values
    (a float and an int of one value differ: the pack sees the type)."""
    if isinstance(real, dict) and isinstance(ours, dict):
        return [
            line
            for key in sorted(set(real) | set(ours))
            for line in differences(real.get(key, "<absent>"), ours.get(key, "<absent>"), f"{path}.{key}")
        ]
    if isinstance(real, list) and isinstance(ours, list) and len(real) == len(ours):
        pairs = enumerate(zip(real, ours, strict=True))
        return [line for i, (a, b) in pairs for line in differences(a, b, f"{path}[{i}]")]
    if real == ours and type(real) is type(ours):
        return []
    shown = [f"{json.dumps(value)[:80]} ({type(value).__name__})" for value in (real, ours)]
    return [f"{path}: engine {shown[0]} != double {shown[1]}"]


def same_folders(value: object) -> object:
    """The process lab's folder names the checkout and the stack (`<dir>/.state/process/<stack>/`): the
    engine ran in a copy as stack `values`, the mocks in the checkout as `dev`."""
    text = re.sub(r'"[^"]*/\.state/process/[^/"]+/', '"<state>/', json.dumps(value))
    return json.loads(text)


def by_tail(section: dict) -> dict:
    return {urn_tail(urn): value for urn, value in section.items()}


def doubled() -> dict:
    """The recorder driven by the double: analyze_first_preview over the program under the mocks."""
    from policy_harness import analyze_first_preview, program_resources

    namespace: dict = {"__name__": "recorder"}
    exec(compile(RECORDER, "recorder", "exec"), namespace)
    config = __import__("yaml").safe_load((LAB_PROJECT / "Pulumi.sim.yaml").read_text())["config"]
    program = run_program(
        {key.split(":", 1)[1]: value for key, value in config.items()},
        preview=True,
        mocks=LabMocks(first_preview=True),
    )
    analyze_first_preview(program_resources(program), policies=namespace["PACK"])
    return namespace["RECORD"]


def test_the_engine_hands_stack_policies_nothing_behind_a_tenant_provider(recorded: dict) -> None:
    """At a first preview: `{}` for every Kubernetes object of a tenant (policies/analyzed_inputs.py)."""
    tenant_objects = {t: v for t, v in by_tail(recorded["stack"]).items() if "kubernetes:core/v1:" in t}
    assert tenant_objects and all(value == {} for value in tenant_objects.values()), tenant_objects


def test_the_engine_hands_numbers_as_doubles_and_unknowns_as_unknown(recorded: dict) -> None:
    analyzed = by_tail(recorded["analyze"])
    pod = next(v for t, v in analyzed.items() if t.endswith("Pod::tenant-a-workloads-trainer-1"))
    assert pod["props"]["spec"]["terminationGracePeriodSeconds"] == 5.0
    assert isinstance(pod["props"]["spec"]["terminationGracePeriodSeconds"], float)
    limits = pod["props"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpumem"] == "20000", "a quantity the program writes as a string stays one"
    assert pod["provider"]["kubeconfig"] == "<unknown>", "a tenant's kubeconfig is made in the same run"


def test_the_double_hands_the_pack_what_the_engine_hands_it(recorded: dict) -> None:
    double = doubled()
    for section in ("analyze", "stack"):
        real, ours = by_tail(recorded[section]), by_tail(double[section])
        real = {tail: value for tail, value in real.items() if "pulumi:providers:" not in tail}
        # The engine also hands the pack the program's components and its root stack (custom=False); the
        # double hands custom resources only, and the pack reads no component type.
        components = {
            tail for tail in set(real) - set(ours) if tail.split("::")[0].rsplit("$", 1)[-1].startswith(COMPONENT_TYPES)
        }
        assert not set(ours) - set(real) and set(real) - set(ours) == components, sorted(set(real) ^ set(ours))
        # Their properties are their registered outputs (the root stack's: the exports); no rule reads them.
        assert all(section == "stack" or real[tail] in ({}, {"props": {}, "provider": None}) for tail in components), {
            tail: real[tail] for tail in components
        }
        real = {tail: value for tail, value in real.items() if tail not in components}
        for tail in [tail for tail in real if "pulumi-python:dynamic:Resource" in tail]:
            # A dynamic resource's provider is the engine's default pulumi-python provider, configured with
            # the whole stack config; the mocks register no default provider, and the pack reads none.
            real[tail] = {**real[tail], "provider": ours[tail].get("provider")} if section == "analyze" else real[tail]
        differing = [
            line
            for tail in sorted(real)
            for line in differences(same_folders(real[tail]), same_folders(ours[tail]), tail)
        ]
        assert not differing, f"{section}: {len(differing)} differences\n" + "\n".join(differing[:200])
