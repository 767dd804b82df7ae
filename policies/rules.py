"""gpulab's CrossGuard policies. Importable: the pack itself is built in policies/__main__.py.

- gpu-request-limits (mandatory): per-pod GPU limits, card fit with HAMi's reason names, quota, sets
  HAMi strands in every arrival order; workloads whose tenant cannot be told apart (the tenant is its
  provider, recognised by URN), and GPU requests in resources the pack cannot read (Patches, Helm
  charts), are reported.
- gpu-placement-order (advisory): sets that fit only in some arrival orders or card policies.
- gpu-request-inputs (advisory, never reports): records the inputs the engine analyses, which the stack
  policies judge where a first preview hands them no outputs (policies/analyzed_inputs.py).
- mock-gpu-node-not-labelled-gpu-on, worker-version-matches-control-plane,
  tenant-version-supported-by-kamaji, metallb-pool-ipv4 (mandatory): lab safety.
Every enforcement level can be changed in the policy config (`{"<policy>": "advisory"}`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from model.dra import device_class_name
from model.names import KAMAJI_MAX_ANNOTATION, NODE_IMAGE_LABEL, TENANT_LABEL
from model.network import address_problem
from model.versions import Versions, image_tag, parse_kubernetes_version
from placement.dra_fit import allocate
from placement.findings import NOT_SHARED_BY_HAMI, Finding
from placement.inventory import (
    TenantInventory,
    from_policy_config,
    from_stack_resources,
    is_inventory_configmap,
    parse_policy_config,
)
from placement.wording import evaluate_tenant
from placement.workloads import (
    HAMI_RESOURCES,
    NOUSE_GPUTYPE,
    NOUSE_GPUUUID,
    RESOURCE_TYPES,
    USE_GPUTYPE,
    USE_GPUUUID,
    Workload,
    WorkloadError,
    read_workload,
)
from policies import dra_check
from policies.analyzed_inputs import GPU_REQUEST_INPUTS, judged_resources

TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
CONTAINER_TYPE = "docker:index/container:Container"
IP_POOL_TYPE = "kubernetes:metallb.io/v1beta1:IPAddressPool"
NODE_TYPES = ("kubernetes:core/v1:Node", "kubernetes:core/v1:NodePatch")

GPU_CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "tenants": {
            "type": "object",
            "description": "Cards and limits per tenant, for stacks that are not the lab itself "
            "(see placement/inventory.py GpuPolicyConfig).",
            "additionalProperties": {"type": "object"},
        },
        "defaultTenant": {"type": "string", "description": "Tenant of workloads without a gpulab.io/tenant label."},
    }
)


TENANT_LABEL_MISMATCH = "TenantLabelMismatch"
TENANT_UNKNOWN = "TenantUnknown"
TENANT_UNVERIFIED = "TenantUnverified"
NOT_CHECKED = "GpuWorkloadNotChecked"

# Kinds that create GPU pods but whose pods the pack cannot read from the resource alone: a Patch
# changes an object the stack does not hold; a Helm chart renders its pods at install time.
_POD_KINDS = "Pod|Deployment|StatefulSet|DaemonSet|ReplicaSet|ReplicationController|Job|CronJob"
PATCH_TYPES = re.compile(rf"kubernetes:(core|apps|batch)/v1:({_POD_KINDS})Patch")
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
# Keys that only a GPU pod (its resources or its HAMi selector annotations) holds. HAMi's own chart
# names its resources as values (`resourceMem: nvidia.com/gpumem`), never as keys.
GPU_KEYS = frozenset((*HAMI_RESOURCES, USE_GPUTYPE, NOUSE_GPUTYPE, USE_GPUUUID, NOUSE_GPUUUID))


# A DRA tenant's claim templates, as pulumi-kubernetes registers them (a CustomResource of a built-in kind).
CLAIM_TEMPLATE_TYPE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"


def _gpu_keys(value: Any, depth: int = 0) -> bool:
    """True if a mapping anywhere in `value` has a GPU request key (bounded depth: props are user data)."""
    if depth > 64:
        return False
    if isinstance(value, Mapping):
        if any(key in GPU_KEYS for key in value):
            return True
        items = (_known(value, key) for key in value)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = (_known(value, index) for index in range(len(value)))
    else:
        return False
    return any(_gpu_keys(item, depth + 1) for item in items)


def _known(container: Any, key: Any) -> Any:
    """An element, or None when absent or still unknown (preview: reading an unknown through the analyzer's
    proxy raises, and so does `in`)."""
    try:
        return container[key]
    except (KeyError, UnknownValueError):
        return None


def tenant_providers(resources: Iterable[PolicyResource]) -> dict[str, str]:
    """Provider URN -> tenant, for the providers gpulab creates: each tenant's inventory ConfigMap is sent
    through that tenant's provider (components/tenant_namespaces.py), so the URN identifies it, whatever the
    provider is called."""
    found = {}
    for resource in resources:
        if resource.provider is None or not is_inventory_configmap(resource.resource_type, resource.props):
            continue
        tenant = _labels(resource.props).get(TENANT_LABEL)
        if isinstance(tenant, str):
            found[resource.provider.urn] = tenant
    return found


def _raw_label(props: Any) -> str | None:
    """The tenant label of a workload that may not even be readable (for its error's `tenant`)."""
    metadata = props.get("metadata") if isinstance(props, Mapping) else None
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    label = labels.get(TENANT_LABEL) if isinstance(labels, Mapping) else None
    return label if isinstance(label, str) else None


def _unchecked_kind(resource: PolicyResource, tenant: str | None) -> Finding | None:
    """A resource that may create GPU pods the pack cannot read: reported, never passed silently."""
    if PATCH_TYPES.fullmatch(resource.resource_type) and _gpu_keys(resource.props):
        what = (
            f"{resource.resource_type.rsplit(':', 1)[1]} {resource.name} sets GPU requests on an object the stack "
            "does not declare whole, so the pack cannot judge the pods it results in; declare the workload "
            "itself (not a Patch), or check its full manifest with `python -m policies check`"
        )
    elif resource.resource_type in HELM_TYPES and _gpu_keys(_known(resource.props, "values")):
        what = (
            f"Helm chart {resource.name} is given GPU requests in its values; the pack cannot render the chart's "
            "pods. Check them with `helm template ... | python -m policies check --tenant NAME -`"
        )
    else:
        return None
    return Finding("error", tenant or _raw_label(resource.props) or "?", resource.name, NOT_CHECKED, what)


def _gpu_findings(
    args: StackValidationArgs, report_violation: ReportViolation
) -> tuple[list[tuple[Finding, str]], bool]:
    """Findings with the URN to attach them to; False if the config itself was reported as invalid.

    The tenant of a workload is where it goes. In the lab stack that is its provider, recognised by
    identity (tenant_providers); a label naming another tenant is itself a violation (it would dodge
    that tenant's limits), and a GPU workload sent through any other provider cannot be attributed.
    In a stack without gpulab's tenant providers (a team's own stack, cards from the policy config),
    the `gpulab.io/tenant` label decides, then `defaultTenant`."""
    resources = judged_resources(args)
    try:
        config = parse_policy_config(args.get_config() or {})
    except ValueError as error:
        report_violation(str(error), None)
        return [], False
    try:
        inventories: dict[str, TenantInventory] = from_policy_config(config) or from_stack_resources(
            (resource.resource_type, resource.props) for resource in resources
        )
    except ValueError as error:
        report_violation(f"the lab's GPU inventory cannot be read: {error}", None)
        return [], False
    providers = tenant_providers(resources)
    by_tenant: dict[str, list[tuple[Workload, str]]] = defaultdict(list)
    problems: list[tuple[Finding, str]] = []
    claimed: dict[str, list[PolicyResource]] = defaultdict(list)  # a DRA tenant's pods and claim templates
    for resource in resources:
        kind = RESOURCE_TYPES.get(resource.resource_type)
        provider = resource.provider
        by_provider = providers.get(provider.urn) if provider is not None else None
        if (
            by_provider in inventories
            and inventories[by_provider].sharing == "dra"
            and resource.resource_type
            in (
                CLAIM_TEMPLATE_TYPE,
                "kubernetes:core/v1:Pod",
            )
        ):
            claimed[by_provider].append(resource)
        if kind is None:
            unchecked = _unchecked_kind(resource, by_provider)
            if unchecked is not None:
                problems.append((unchecked, resource.urn))
            continue
        if isinstance(resource.props, Mapping) and len(resource.props) == 0:
            # No outputs and no analysed inputs (judged_resources): gpu-request-inputs did not run.
            tenant = by_provider or config.default_tenant or "?"
            message = (
                f"{resource.resource_type.rsplit(':', 1)[1]} {resource.name}: the engine handed no properties (at a "
                "preview its provider is not configured yet) and gpu-request-inputs, which records its inputs, did "
                "not run; enable gpu-request-inputs in the policy config"
            )
            problems.append((Finding("error", tenant, resource.name, NOT_CHECKED, message), resource.urn))
            continue
        try:
            workload = read_workload(kind, resource.props)
        except WorkloadError as error:
            tenant = by_provider or _raw_label(resource.props) or config.default_tenant or "?"
            problems.append((Finding("error", tenant, resource.name, "InvalidGpuRequest", str(error)), resource.urn))
            continue
        if workload is None or not workload.pods:
            continue
        labelled = workload.labels.get(TENANT_LABEL)
        if by_provider is not None and labelled and labelled != by_provider:
            message = (
                f"is labelled {TENANT_LABEL}={labelled} but is deployed through {provider.name}, into tenant "
                f"{by_provider}; it is checked as {by_provider}. Fix the label (or the provider)"
            )
            problems.append(
                (Finding("error", by_provider, workload.label, TENANT_LABEL_MISMATCH, message), resource.urn)
            )
        if by_provider is None and providers:
            through = f"provider {provider.name} ({provider.urn})" if provider is not None else "the default provider"
            own = ", ".join(f"{tenant}: {urn}" for urn, tenant in sorted(providers.items(), key=lambda kv: kv[1]))
            message = (
                f"asks for GPUs but is deployed through {through}, which is not one of the tenant providers "
                f"gpulab creates ({own}); the pack cannot tell whose cards it would use. Deploy it through its "
                "tenant's provider"
            )
            tenant = labelled or "?"
            problems.append((Finding("error", tenant, workload.label, TENANT_UNVERIFIED, message), resource.urn))
            continue
        tenant = by_provider or labelled or config.default_tenant
        if tenant is None:
            message = (
                "asks for GPUs but its tenant cannot be determined: deploy it through a tenant's provider, "
                "label it gpulab.io/tenant=<tenant>, or set defaultTenant in the policy config"
            )
            problems.append((Finding("error", "?", workload.label, TENANT_UNKNOWN, message), resource.urn))
        elif tenant not in inventories:
            known = ", ".join(sorted(inventories)) or "none"
            message = (
                f"tenant {tenant} has no declared GPU cards (known: {known}); declare it in the lab stack or in the "
                "policy config `tenants`"
            )
            problems.append((Finding("error", tenant, workload.label, TENANT_UNKNOWN, message), resource.urn))
        else:
            by_tenant[tenant].append((workload, resource.urn))
    for tenant, found in sorted(claimed.items()):
        problems += _claim_findings(inventories[tenant], found)
    for tenant, entries in sorted(by_tenant.items()):
        if inventories[tenant].sharing == "dra":
            message = (
                f"asks for nvidia.com/* resources, but tenant {tenant} shares its cards through DRA (gpuSharing: dra): "
                "no node there advertises them, so its pods would stay Pending; ask for the cards through a "
                f"ResourceClaim of class {device_class_name(tenant)}"
            )
            problems += [(Finding("error", tenant, w.label, NOT_SHARED_BY_HAMI, message), urn) for w, urn in entries]
            continue
        urns = {workload.label: urn for workload, urn in entries}
        for finding in evaluate_tenant(inventories[tenant], [workload for workload, _ in entries]):
            workload_label = finding.workload.split("#", 1)[0]
            problems.append((finding, urns.get(workload_label, "")))
    return problems, True


def _claim_findings(inventory: TenantInventory, found: list[PolicyResource]) -> list[tuple[Finding, str]]:
    """A DRA tenant's pods, each claim from the template it names, through the allocator model (placement/dra_fit.py,
    policies/dra_check.py): a claim no card can hold is refused with kube-scheduler's own reason."""
    objects = [dict(resource.props) for resource in found if isinstance(resource.props, Mapping)]
    urns = {}
    for resource in found:
        metadata = (resource.props.get("metadata") or {}) if isinstance(resource.props, Mapping) else {}
        urns[f"Pod/{metadata.get('namespace') or 'default'}/{metadata.get('name')}"] = resource.urn
    try:
        asks = dra_check.manifest_asks(inventory.name, objects)
    except dra_check.DraInputError as error:
        return [(Finding("error", inventory.name, "?", "InvalidGpuRequest", str(error)), "")]
    nodes = inventory.node_cards()
    return [
        (finding, urns.get(finding.workload, ""))
        for finding in dra_check.refusals(inventory.name, nodes, allocate(nodes, asks))
    ]


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
    resources = judged_resources(args)
    for resource in resources:
        if is_inventory_configmap(resource.resource_type, resource.props):
            document = json.loads((resource.props.get("data") or {}).get("inventory.json", "{}"))
            if document.get("mode") == "mock":
                mock_nodes.add(document.get("node"))
    for resource in resources:
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
    resources = judged_resources(args)
    for resource in resources:
        if resource.resource_type == TCP_TYPE and _labels(resource.props).get(TENANT_LABEL):
            versions[_labels(resource.props)[TENANT_LABEL]] = (
                (resource.props.get("spec") or {}).get("kubernetes", {}).get("version")
            )
    for resource in resources:
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
    # A new lab's pool comes from the kind network, which is read once kind has made it: at its first preview the
    # addresses are unknown, and the pack judges them at the update, when the engine analyses the real inputs.
    addresses = _known(_known(args.props, "spec") or {}, "addresses") or []
    for index in range(len(addresses)):
        address = _known(addresses, index)
        problem = address_problem(str(address)) if address is not None else None
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

# What the policies that judge one kind of resource judge: a stack without any (process mode has no Kamaji,
# MetalLB or worker containers) passes them with nothing judged, and `make plan` says so.
SUBJECT_TYPES = {
    WORKER_VERSION.name: CONTAINER_TYPE,
    KAMAJI_VERSION.name: TCP_TYPE,
    METALLB_IPV4.name: IP_POOL_TYPE,
}

# gpu-request-inputs first: the engine runs resource policies before stack policies, and so do the harnesses.
ALL_POLICIES = [
    GPU_REQUEST_INPUTS,
    GPU_REQUEST_LIMITS,
    GPU_PLACEMENT_ORDER,
    NO_GPU_ON_LABEL,
    WORKER_VERSION,
    KAMAJI_VERSION,
    METALLB_IPV4,
]
