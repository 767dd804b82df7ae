"""gpulab's CrossGuard policies. Importable: the pack itself is built in policies/__main__.py.

- gpu-request-limits (mandatory): per-pod GPU limits, card fit with HAMi's reason names, quota;
  workloads whose tenant cannot be told apart are reported.
- gpu-placement-order (advisory): sets that fit only in some arrival orders or card policies.
- mock-gpu-node-not-labelled-gpu-on, worker-version-matches-control-plane,
  tenant-version-supported-by-kamaji, metallb-pool-ipv4 (mandatory): lab safety.
Every enforcement level can be changed in the policy config (`{"<policy>": "advisory"}`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.names import KAMAJI_MAX_ANNOTATION, NODE_IMAGE_LABEL, TENANT_LABEL
from components.network import address_problem
from components.versions import Versions, image_tag, parse_kubernetes_version
from policies.evaluate import Finding, evaluate_tenant
from policies.inventory import (
    TenantInventory,
    from_policy_config,
    from_stack_resources,
    is_inventory_configmap,
    parse_policy_config,
)
from policies.workloads import RESOURCE_TYPES, Workload, WorkloadError, read_workload

TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
CONTAINER_TYPE = "docker:index/container:Container"
IP_POOL_TYPE = "kubernetes:metallb.io/v1beta1:IPAddressPool"
NODE_TYPES = ("kubernetes:core/v1:Node", "kubernetes:core/v1:NodePatch")

GPU_CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "tenants": {
            "type": "object",
            "description": "Cards and limits per tenant, for stacks that are not the lab itself "
            "(see policies/inventory.py GpuPolicyConfig).",
            "additionalProperties": {"type": "object"},
        },
        "defaultTenant": {"type": "string", "description": "Tenant of workloads without a gpulab.io/tenant label."},
    }
)


TENANT_LABEL_MISMATCH = "TenantLabelMismatch"


def _provider_tenant(provider_name: str | None, known: set[str]) -> str | None:
    """The tenant whose API a resource is sent to: the lab names each tenant's provider `<tenant>-provider`."""
    if provider_name and provider_name.endswith("-provider") and provider_name.removesuffix("-provider") in known:
        return provider_name.removesuffix("-provider")
    return None


def _gpu_findings(
    args: StackValidationArgs, report_violation: ReportViolation
) -> tuple[list[tuple[Finding, str]], bool]:
    """Findings with the URN to attach them to; False if the config itself was reported as invalid.

    The tenant of a workload is where it goes: its provider, when that is a tenant's provider. Only
    without one does the `gpulab.io/tenant` label (then `defaultTenant`) decide, and a label that
    names another tenant than the provider is itself a violation (it would dodge that tenant's limits)."""
    try:
        config = parse_policy_config(args.get_config() or {})
    except ValueError as error:
        report_violation(str(error), None)
        return [], False
    try:
        inventories: dict[str, TenantInventory] = from_policy_config(config) or from_stack_resources(
            (resource.resource_type, resource.props) for resource in args.resources
        )
    except ValueError as error:
        report_violation(f"the lab's GPU inventory cannot be read: {error}", None)
        return [], False
    by_tenant: dict[str, list[tuple[Workload, str]]] = defaultdict(list)
    problems: list[tuple[Finding, str]] = []
    for resource in args.resources:
        kind = RESOURCE_TYPES.get(resource.resource_type)
        if kind is None:
            continue
        try:
            workload = read_workload(kind, resource.props)
        except WorkloadError as error:
            problems.append((Finding("error", "?", resource.name, "InvalidGpuRequest", str(error)), resource.urn))
            continue
        if workload is None or not workload.pods:
            continue
        provider = resource.provider.name if resource.provider is not None else None
        by_provider = _provider_tenant(provider, set(inventories))
        labelled = workload.labels.get(TENANT_LABEL)
        if by_provider is not None and labelled and labelled != by_provider:
            message = (
                f"is labelled {TENANT_LABEL}={labelled} but is deployed through {provider}, into tenant "
                f"{by_provider}; it is checked as {by_provider}. Fix the label (or the provider)"
            )
            problems.append(
                (Finding("error", by_provider, workload.label, TENANT_LABEL_MISMATCH, message), resource.urn)
            )
        tenant = by_provider or labelled or config.default_tenant
        if tenant is None:
            message = (
                "asks for GPUs but its tenant cannot be determined: deploy it through a tenant's provider, "
                "label it gpulab.io/tenant=<tenant>, or set defaultTenant in the policy config"
            )
            problems.append((Finding("error", "?", workload.label, "TenantUnknown", message), resource.urn))
        elif tenant not in inventories:
            known = ", ".join(sorted(inventories)) or "none"
            message = (
                f"tenant {tenant} has no declared GPU cards (known: {known}); declare it in the lab stack or in the "
                "policy config `tenants`"
            )
            problems.append((Finding("error", tenant, workload.label, "TenantUnknown", message), resource.urn))
        else:
            by_tenant[tenant].append((workload, resource.urn))
    for tenant, entries in sorted(by_tenant.items()):
        urns = {workload.label: urn for workload, urn in entries}
        for finding in evaluate_tenant(inventories[tenant], [workload for workload, _ in entries]):
            workload_label = finding.workload.split("#", 1)[0]
            problems.append((finding, urns.get(workload_label, "")))
    return problems, True


def validate_gpu_requests(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    findings, _ = _gpu_findings(args, report_violation)
    for finding, urn in findings:
        if finding.severity == "error":
            report_violation(finding.line(), urn or None)


def validate_gpu_placement_order(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    findings, _ = _gpu_findings(args, lambda message, urn=None: None)  # config errors belong to the other policy
    for finding, urn in findings:
        if finding.severity == "warning":
            report_violation(finding.line(), urn or None)


def _labels(props: Mapping[str, Any]) -> Mapping[str, str]:
    return (props.get("metadata") or {}).get("labels") or {}


def validate_no_gpu_on_label(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """`gpu=on` selects HAMi's real NVIDIA device plugin, which crash-loops on a node without a driver."""
    mock_nodes = set()
    for resource in args.resources:
        if is_inventory_configmap(resource.resource_type, resource.props):
            document = json.loads((resource.props.get("data") or {}).get("inventory.json", "{}"))
            if document.get("mode") == "mock":
                mock_nodes.add(document.get("node"))
    for resource in args.resources:
        if resource.resource_type not in NODE_TYPES:
            continue
        node = (resource.props.get("metadata") or {}).get("name")
        if _labels(resource.props).get("gpu") == "on" and node in mock_nodes:
            report_violation(
                f"node {node} is a mock GPU node: labelling it gpu=on starts HAMi's real NVIDIA device plugin, "
                "which fails without a driver; remove the label",
                resource.urn,
            )


def _container_labels(props: Mapping[str, Any]) -> dict[str, str]:
    return {entry.get("label"): entry.get("value") for entry in props.get("labels") or [] if isinstance(entry, Mapping)}


def validate_worker_version(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """A worker's kubelet must run its control plane's version (never newer; kubeadm join reads it)."""
    versions = {}
    for resource in args.resources:
        if resource.resource_type == TCP_TYPE and _labels(resource.props).get(TENANT_LABEL):
            versions[_labels(resource.props)[TENANT_LABEL]] = (
                (resource.props.get("spec") or {}).get("kubernetes", {}).get("version")
            )
    for resource in args.resources:
        if resource.resource_type != CONTAINER_TYPE:
            continue
        tenant = _container_labels(resource.props).get(TENANT_LABEL)
        if tenant not in versions:
            continue
        reference = _container_labels(resource.props).get(NODE_IMAGE_LABEL) or str(resource.props.get("image", ""))
        tag = image_tag(reference)
        if tag != versions[tenant]:
            report_violation(
                f"worker of tenant {tenant} runs image tag {tag}, but its control plane runs {versions[tenant]}; "
                f"use kindest/node:{versions[tenant]} (pinned with its digest)",
                resource.urn,
            )


def validate_kamaji_version(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != TCP_TYPE:
        return
    metadata = args.props.get("metadata") or {}
    maximum = (metadata.get("annotations") or {}).get(KAMAJI_MAX_ANNOTATION) or Versions().kamaji_max_kubernetes
    version = (args.props.get("spec") or {}).get("kubernetes", {}).get("version", "")
    try:
        major, minor, _ = parse_kubernetes_version(version)
    except ValueError as error:
        report_violation(f"TenantControlPlane {metadata.get('name')}: {error}", None)
        return
    max_major, max_minor = (int(part) for part in maximum.lstrip("v").split(".")[:2])
    if (major, minor) > (max_major, max_minor):
        report_violation(
            f"TenantControlPlane {metadata.get('name')} asks Kubernetes {version}; the pinned Kamaji accepts up to "
            f"{maximum}.x and its webhook would reject it",
            None,
        )


def validate_metallb_pool_ipv4(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != IP_POOL_TYPE:
        return
    for address in (args.props.get("spec") or {}).get("addresses") or []:
        problem = address_problem(str(address))
        if problem:
            report_violation(f"MetalLB pool address {problem}", None)


GPU_REQUEST_LIMITS = StackValidationPolicy(
    name="gpu-request-limits",
    description="GPU workloads must fit their tenant's cards, per-pod limits and quota, as HAMi would judge them.",
    validate=validate_gpu_requests,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=GPU_CONFIG_SCHEMA,
)
GPU_PLACEMENT_ORDER = StackValidationPolicy(
    name="gpu-placement-order",
    description="GPU workloads that fit only in some creation orders or card policies.",
    validate=validate_gpu_placement_order,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=GPU_CONFIG_SCHEMA,
)
NO_GPU_ON_LABEL = StackValidationPolicy(
    name="mock-gpu-node-not-labelled-gpu-on",
    description="Mock GPU nodes must not carry gpu=on (it starts the real NVIDIA device plugin).",
    validate=validate_no_gpu_on_label,
    enforcement_level=EnforcementLevel.MANDATORY,
)
WORKER_VERSION = StackValidationPolicy(
    name="worker-version-matches-control-plane",
    description="Each tenant worker's kindest/node image runs its control plane's Kubernetes version.",
    validate=validate_worker_version,
    enforcement_level=EnforcementLevel.MANDATORY,
)
KAMAJI_VERSION = ResourceValidationPolicy(
    name="tenant-version-supported-by-kamaji",
    description="Tenant Kubernetes versions stay within what the pinned Kamaji accepts.",
    validate=validate_kamaji_version,
    enforcement_level=EnforcementLevel.MANDATORY,
)
METALLB_IPV4 = ResourceValidationPolicy(
    name="metallb-pool-ipv4",
    description="The MetalLB pool holds IPv4 addresses only.",
    validate=validate_metallb_pool_ipv4,
    enforcement_level=EnforcementLevel.MANDATORY,
)

ALL_POLICIES = [GPU_REQUEST_LIMITS, GPU_PLACEMENT_ORDER, NO_GPU_ON_LABEL, WORKER_VERSION, KAMAJI_VERSION, METALLB_IPV4]
