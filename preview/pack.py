"""The policy pack over what the program registers under mocks: the closest thing to
`pulumi preview --policy-pack policies` without the CLI (same inputs, no provider normalisation)."""

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

from policies.rules import ALL_POLICIES
from preview.harness import Program


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def program_resources(program: Program) -> list[PolicyResource]:
    """Every custom resource the program registered, with its inputs as props and its provider, by URN (the
    order they registered in changes from run to run, and with it the order of the policies' messages)."""
    found = []
    for registration in sorted(program.registrations.values(), key=lambda r: r.urn):
        if not registration.custom or registration.type.startswith("pulumi:"):
            continue
        provider = program.provider_of(registration)
        provider_resource = (
            PolicyProviderResource(provider.type, provider.inputs, provider.urn, provider.name) if provider else None
        )
        found.append(
            PolicyResource(
                registration.type,
                registration.inputs,
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
    """Every policy of the pack over the program's resources: policy name -> violation messages."""
    resources = program_resources(program)
    found: dict[str, list[str]] = {}
    for policy in ALL_POLICIES:
        messages: list[str] = []
        report = lambda message, urn=None, messages=messages: messages.append(message)  # noqa: E731
        if isinstance(policy, StackValidationPolicy):
            policy.validate(StackValidationArgs(resources, {}), report)
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
    return found


def is_mandatory(policy_name: str) -> bool:
    return any(p.name == policy_name and p.enforcement_level == EnforcementLevel.MANDATORY for p in ALL_POLICIES)
