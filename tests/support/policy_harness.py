"""Turns what the program registers under mocks into what CrossGuard hands the policies."""

from __future__ import annotations

from pulumi_policy import (
    PolicyProviderResource,
    PolicyResource,
    ResourceValidationArgs,
    StackValidationArgs,
)

from policies.analyzed_inputs import forget_inputs
from policies.rules import ALL_POLICIES
from preview.pack import options, program_resources  # noqa: F401 (re-exported for the tests)


def policy(name: str):
    """A policy of the pack by name: a test that uses it fails if the rule leaves the pack."""
    for candidate in ALL_POLICIES:
        if candidate.name == name:
            return candidate
    raise AssertionError(f"policy {name} is not in the pack")


def provider_urn(name: str, parents: str = "") -> str:
    """A provider's URN; `parents` is the type chain of its parents (`gpulab:index:Tenant$...$`)."""
    return f"urn:pulumi:dev::gpulab::{parents}pulumi:providers:kubernetes::{name}"


def resource(
    resource_type: str, props: dict, name: str = "r", provider: str | None = None, provider_urn_: str | None = None
) -> PolicyResource:
    """A resource as CrossGuard hands it over; `provider` names its provider, `provider_urn_` gives the
    provider's URN when it is not a top-level one of that name."""
    provider_resource = (
        PolicyProviderResource("pulumi:providers:kubernetes", {}, provider_urn_ or provider_urn(provider), provider)
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


def _servicer(policy_config: dict | None, policies=None):
    from google.protobuf import struct_pb2
    from pulumi.runtime import proto
    from pulumi_policy import EnforcementLevel
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    forget_inputs()  # a new analyzer process: it has analysed nothing yet
    servicer = _PolicyAnalyzerServicer(
        "gpulab-gpu-policies", "0.1.0", policies or ALL_POLICIES, EnforcementLevel.MANDATORY
    )
    if policy_config:
        request = proto.ConfigureAnalyzerRequest()
        for name, config in policy_config.items():
            value = struct_pb2.Struct()
            value.update(config)
            request.policyConfig[name].CopyFrom(proto.PolicyConfig(properties=value))
        servicer.Configure(request, None)
    return servicer


def _struct(props: dict):
    from google.protobuf import struct_pb2

    properties = struct_pb2.Struct()
    properties.update(_plain(props))
    return properties


def _wire(resource, props: dict, message):
    """One resource as the engine encodes it: a protobuf Struct, where every number is a double (an unknown
    is the engine's sentinel string), with its provider's own inputs. The engine hands a dynamic resource's
    inputs without the serialized provider (`__provider`; seen with v3.274.0)."""
    from pulumi.runtime import proto

    properties = _struct({key: value for key, value in props.items() if key != "__provider"})
    provider = None
    if resource.provider is not None:
        provider = proto.AnalyzerProviderResource(
            type=resource.provider.resource_type,
            urn=resource.provider.urn,
            name=resource.provider.name,
            properties=_struct(dict(resource.provider.props)),
        )
    return message(
        type=resource.resource_type, properties=properties, urn=resource.urn, name=resource.name, provider=provider
    )


def analyze_stack(resources, policy_config: dict | None = None):
    """Drive the real CrossGuard analyzer servicer (what the CLI talks to over gRPC) as an update does: every
    resource's outputs known (here its props), sent to the stack policies at once."""
    from pulumi.runtime import proto

    servicer = _servicer(policy_config)
    items = [_wire(resource, resource.props, proto.AnalyzerResource) for resource in resources]
    return servicer.AnalyzeStack(proto.AnalyzeStackRequest(resources=items), None)


def analyze_first_preview(resources, policy_config: dict | None = None, policies=None):
    """The servicer driven as a first `pulumi preview` drives it (pulumi/pulumi v3.274.0,
    pkg/resource/deploy/step_generator.go and pkg/resource/plugin/provider_plugin.go): Analyze with each
    resource's inputs, then one AnalyzeStack in which every resource sent through a provider (here, all
    of them are a tenant's or the management cluster's, whose kubeconfig the same run makes) has no outputs.
    Returns the Analyze responses and the AnalyzeStack response."""
    from pulumi.runtime import proto

    servicer = _servicer(policy_config, policies)
    analyzed = [servicer.Analyze(_wire(resource, resource.props, proto.AnalyzeRequest), None) for resource in resources]
    items = [
        _wire(resource, {} if resource.provider is not None else resource.props, proto.AnalyzerResource)
        for resource in reversed(resources)  # in no fixed order
    ]
    return analyzed, servicer.AnalyzeStack(proto.AnalyzeStackRequest(resources=items), None)


def _plain(value):
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    if isinstance(value, Unknown):
        return rpc.UNKNOWN  # the engine's sentinel string, which the analyzer reads as unknown
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if hasattr(value, "path"):  # a FileAsset in Helm value files
        return value.path
    return value
