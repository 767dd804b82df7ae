"""Turns what the program registers under mocks into what CrossGuard hands the policies."""

from __future__ import annotations

from pulumi_policy import (
    PolicyProviderResource,
    PolicyResource,
    ResourceValidationArgs,
    StackValidationArgs,
)

from policies.rules import ALL_POLICIES
from preview.pack import options, program_resources  # noqa: F401 (re-exported for the tests)


def policy(name: str):
    """A policy of the pack by name: a test that uses it fails if the rule leaves the pack."""
    for candidate in ALL_POLICIES:
        if candidate.name == name:
            return candidate
    raise AssertionError(f"policy {name} is not in the pack")


def resource(resource_type: str, props: dict, name: str = "r", provider: str | None = None) -> PolicyResource:
    provider_resource = (
        PolicyProviderResource(
            "pulumi:providers:kubernetes",
            {},
            f"urn:pulumi:dev::gpulab::pulumi:providers:kubernetes::{provider}",
            provider,
        )
        if provider
        else None
    )
    return PolicyResource(
        resource_type,
        props,
        f"urn:pulumi:dev::gpulab::{resource_type}::{name}",
        name,
        options(),
        provider_resource,
        None,
        [],
        {},
    )


def stack_args(resources: list[PolicyResource], config: dict | None = None) -> StackValidationArgs:
    return StackValidationArgs(resources, config or {})


def resource_args(resource_type: str, props: dict, config: dict | None = None) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        resource_type, props, f"urn:pulumi:dev::gpulab::{resource_type}::r", "r", options(), None, config or {}
    )


def run_stack_policy(name: str, args: StackValidationArgs) -> list[tuple[str, str | None]]:
    violations: list[tuple[str, str | None]] = []
    result = policy(name).validate(args, lambda message, urn=None: violations.append((message, urn)))
    assert result is None or not hasattr(result, "__await__"), "policies are synchronous"
    return violations


def run_resource_policy(name: str, args: ResourceValidationArgs) -> list[str]:
    violations: list[str] = []
    policy(name).validate(args, lambda message, urn=None: violations.append(message))
    return violations
