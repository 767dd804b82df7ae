"""The policy pack over what the program registers under mocks: the closest thing to a first
`pulumi preview --policy-pack policies` without the CLI (same inputs, no provider normalisation).

As the real engine does (pulumi/pulumi pkg/resource/deploy/step_generator.go, v3.274.0): every resource
policy runs on each resource's inputs first (Analyze), then every stack policy once on the resources'
outputs (AnalyzeStack). At a first preview a resource has no outputs when its provider's config is not
known yet (pkg/resource/plugin/provider_plugin.go, Create: an empty property map): here, a provider whose
inputs take an output of another resource of the program. Otherwise the outputs are the inputs (the
providers' previews pass known inputs through)."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies.analyzed_inputs import forget_inputs
from policies.rules import ALL_POLICIES
from preview.harness import Program, unconfigured_at_preview


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def program_resources(program: Program, *, outputs: bool = False) -> list[PolicyResource]:
    """Every custom resource the program registered, with its provider, by URN (the order they registered in
    changes from run to run, and with it the order of the policies' messages). Props are the inputs, or with
    `outputs` what a first preview hands AnalyzeStack: `{}` behind a provider that is not configured yet."""
    found = []
    for registration in sorted(program.registrations.values(), key=lambda r: r.urn):
        if not registration.custom or registration.type.startswith("pulumi:"):
            continue
        provider = program.provider_of(registration)
        provider_resource = (
            PolicyProviderResource(provider.type, provider.inputs, provider.urn, provider.name) if provider else None
        )
        props = {} if outputs and unconfigured_at_preview(provider) else registration.inputs
        found.append(
            PolicyResource(
                registration.type,
                props,
                registration.urn,
                registration.name,
                options(),
                provider_resource,
                None,
                sorted(registration.dependencies),
                {},
            )
        )
    return found


def run_pack(program: Program) -> dict[str, list[str]]:
    """Every policy of the pack over the program's resources, resource policies first as the engine runs
    them: policy name -> violation messages."""
    forget_inputs()
    resources = program_resources(program)
    stack_resources = program_resources(program, outputs=True)
    found: dict[str, list[str]] = {}
    by_stage = sorted(ALL_POLICIES, key=lambda policy: isinstance(policy, StackValidationPolicy))
    for policy in by_stage:
        messages: list[str] = []
        report = lambda message, urn=None, messages=messages: messages.append(message)  # noqa: E731
        if isinstance(policy, StackValidationPolicy):
            policy.validate(StackValidationArgs(stack_resources, {}), report)
        elif isinstance(policy, ResourceValidationPolicy):
            for resource in resources:
                args = ResourceValidationArgs(
                    resource.resource_type,
                    resource.props,
                    resource.urn,
                    resource.name,
                    options(),
                    resource.provider,
                    {},
                )
                for validate in policy.validate if isinstance(policy.validate, list) else [policy.validate]:
                    validate(args, report)
        found[policy.name] = messages
    return {policy.name: found[policy.name] for policy in ALL_POLICIES}


def is_mandatory(policy_name: str) -> bool:
    return any(p.name == policy_name and p.enforcement_level == EnforcementLevel.MANDATORY for p in ALL_POLICIES)
