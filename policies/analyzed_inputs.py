"""What the stack policies judge: each resource's outputs, or its inputs where the engine hands no outputs.

The Pulumi engine gives resource policies a resource's inputs (Analyze) and stack policies its outputs
(AnalyzeStack, "the final outputs of each resource": pulumi/pulumi pkg/resource/deploy/step_generator.go).
At a preview, a resource sent through a provider whose own config is not known yet has no outputs at all:
the engine answers its Create with an empty property map (pkg/resource/plugin/provider_plugin.go,
Create: `if !pcfg.known { return CreateResponse{}, nil }`). Every tenant provider of the lab is such a
provider at the first preview (its kubeconfig is made in the same run), and so is the management
cluster's. Seen with the real engine (v3.274.0, docs/process-lab.md): every Pod, quota and inventory
ConfigMap reached the stack policies as `{}`, and four 30 % pods on one card passed the preview.

So the pack records, per URN, the inputs the engine analysed in this run (the resource policy
`gpu-request-inputs`, which never reports), and the stack policies judge those inputs for any resource
whose outputs are empty. The engine calls Analyze for every resource it registers before it calls
AnalyzeStack once at the end, in the same analyzer process (step_generator.go).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
)

# URN -> the inputs the engine handed Analyze for it in this run (the analyzer serves one stack at a time).
_ANALYZED: dict[str, Any] = {}


def record_inputs(args: ResourceValidationArgs, _report_violation: ReportViolation) -> None:
    _ANALYZED[args.urn] = args.props


def forget_inputs() -> None:
    """For a harness that runs the pack on several programs in one process."""
    _ANALYZED.clear()


def judged_resources(args: StackValidationArgs) -> list[PolicyResource]:
    """The stack's resources by URN, each with its outputs, or with its analysed inputs where the engine
    handed none (an empty map: its provider was not configured yet at this preview). The engine sends them
    in no fixed order (it ranges over a concurrent map); by URN, the pack blames the same workload each run."""
    judged = []
    for resource in sorted(args.resources, key=lambda resource: resource.urn):
        inputs = _ANALYZED.get(resource.urn)
        if inputs is None or (isinstance(resource.props, Mapping) and len(resource.props) > 0):
            judged.append(resource)
            continue
        substitute = copy.copy(resource)
        substitute.props = inputs
        judged.append(substitute)
    return judged


GPU_REQUEST_INPUTS = ResourceValidationPolicy(
    name="gpu-request-inputs",
    description=(
        "Reads each resource's inputs for the stack policies: at a preview the engine hands them no outputs for "
        "resources whose provider is not configured yet (a tenant's kubeconfig made in the same run). Never reports."
    ),
    validate=record_inputs,
    enforcement_level=EnforcementLevel.ADVISORY,
)
