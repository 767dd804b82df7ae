"""In-tenant admission: the pack's per-pod GPU refusals as a ValidatingAdmissionPolicy in every tenant.

Kubernetes evaluates the CEL below inside the tenant's API server at `kubectl apply` time: no webhook,
no pod, nothing to fail open (HAMi's own webhook is `failurePolicy: Ignore`). The questions are
exactly policies/per_pod.py's, generated from the same tenant config (cards, per-pod limits), and
tests/test_gpu_admission.py evaluates this CEL offline against that module on shared and generated
pods.

- `gpulab-gpu-requests` (Deny): init containers with GPU resources, per-pod limits, more cards than
  the node has (NodeInsufficientDevice), more memory than the largest card (CardInsufficientMemory),
  type/UUID selectors that leave no card (CardTypeMismatch, CardUuidMismatch), and a GPU Pod whose
  schedulerName is not hami-scheduler (HAMi's mutating webhook runs before validating policies, so
  this refuses only the pods it did not handle: the fail-open case).
- `gpulab-gpu-requests-advice` (Warn): what HAMi accepts but quietly changes (cores above 100 are
  clamped; a 0 % memory request gets 0 MB). Refusing those would refuse pods HAMi runs.

No namespace is exempt: HAMi's components ask for no GPU resources, and a pod without GPU requests
passes every rule. Cost: each expression iterates a pod's containers once (bounded by the API's
object size); the tenant's card types and ids are constants in the expression (at most 64 cards);
selector annotations are split once per card, never inside another user-sized loop.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import (
    GPU_RESOURCE,
    GPUCORES_RESOURCE,
    GPUMEM_PERCENTAGE_RESOURCE,
    GPUMEM_RESOURCE,
)
from components.config import Tenant

DENY_POLICY = "gpulab-gpu-requests"
WARN_POLICY = "gpulab-gpu-requests-advice"
HAMI_SCHEDULER = "hami-scheduler"
USE_TYPE, NOUSE_TYPE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"


def _q(text: str) -> str:
    """A CEL string literal."""
    return json.dumps(text)


def _value(map_expr: str, key: str) -> str:
    return f"({_q(key)} in {map_expr} ? quantity({map_expr}[{_q(key)}]).asInteger() : -1)"


def _requests(containers: str) -> str:
    """A list of HAMi's normalised requests (nums, memreq, pct, cores; ints) of `containers`, as the
    webhook and scheduler derive them (policies/workloads.py container_request)."""
    pairs = (
        f"{containers}.map(c, {{"
        "'l': has(c.resources) && has(c.resources.limits) ? c.resources.limits : {}, "
        "'r': has(c.resources) && has(c.resources.requests) ? c.resources.requests : {}})"
    )
    keys = (GPUMEM_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUCORES_RESOURCE)
    other = " || ".join(f"{_q(key)} in p.l" for key in keys)

    def either(key: str) -> str:
        return f"({_q(key)} in p.l ? quantity(p.l[{_q(key)}]).asInteger() : {_value('p.r', key)})"

    raw = (
        f"{pairs}.map(p, {{"
        f"'gpuL': {_value('p.l', GPU_RESOURCE)}, 'gpuR': {_value('p.r', GPU_RESOURCE)}, "
        f"'other': ({other}) ? 1 : 0, "
        f"'mem': {either(GPUMEM_RESOURCE)}, 'pct': {either(GPUMEM_PERCENTAGE_RESOURCE)}, "
        f"'cores': {either(GPUCORES_RESOURCE)}}})"
    )
    return (
        f"{raw}.map(v, {{"
        "'nums': v.gpuL >= 0 ? v.gpuL : (v.gpuR >= 0 ? v.gpuR : (v.other == 1 ? 1 : 0)), "
        "'memreq': v.mem >= 0 ? v.mem : 0, "
        "'pct': (v.pct >= 0 ? v.pct : 101) == 101 && v.mem <= 0 ? 100 : (v.pct >= 0 ? v.pct : 101), "
        "'cores': v.cores >= 0 ? v.cores : ((v.pct >= 0 ? v.pct == 100 : v.mem < 0) ? 100 : 0)})"
    )


def _memory(r: str, largest: int) -> str:
    """MB per card a request may take: a percentage counted on the largest card (policies/per_pod.py)."""
    return f"({r}.memreq == 0 && {r}.pct != 101 ? {largest} * {r}.pct / 100 : {r}.memreq)"


def _selector_leaves_a_card(values: list[str], use: str, nouse: str, exact: bool) -> str:
    """Some card passes the use/nouse selectors (HAMi checkGPUtype: upper-cased substring; checkUUID: exact)."""
    ann = "variables.annotations"
    if exact:  # use-gpuuuid wins over nouse-gpuuuid
        test = (
            f"({_q(use)} in {ann} ? v in {ann}[{_q(use)}].split(',') : "
            f"({_q(nouse)} in {ann} ? !(v in {ann}[{_q(nouse)}].split(',')) : true))"
        )
    else:
        test = (
            f"(!({_q(use)} in {ann}) || {ann}[{_q(use)}].split(',').exists(u, v.contains(u.upperAscii()))) && "
            f"(!({_q(nouse)} in {ann}) || !{ann}[{_q(nouse)}].split(',').exists(u, v.contains(u.upperAscii())))"
        )
    return f"{json.dumps(values)}.exists(v, {test})"


def _variables() -> list[dict]:
    template = (
        "object.kind == 'Pod' ? object : "
        "(object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template : object.spec.template)"
    )
    return [
        {"name": "template", "expression": template},
        {
            "name": "annotations",
            "expression": "has(variables.template.metadata) && has(variables.template.metadata.annotations) ? "
            "variables.template.metadata.annotations : {}",
        },
        {
            "name": "gpu",
            "expression": _requests(
                "(has(variables.template.spec.containers) ? variables.template.spec.containers : [])"
            )
            + ".filter(r, r.nums > 0)",
        },
        {
            "name": "initGpu",
            "expression": _requests(
                "(has(variables.template.spec.initContainers) ? variables.template.spec.initContainers : [])"
            )
            + ".filter(r, r.nums > 0)",
        },
    ]


def deny_validations(tenant: Tenant) -> list[dict]:
    cards = tenant.cards()
    largest = max(card.memory_mb for card in cards)
    # With several GPU nodes, card-count rules are judged against the node with the most cards.
    gpu_nodes = tenant.gpu_nodes()
    most = max(len(node.cards) for node in gpu_nodes)
    has = f"'s node has ({most})" if len(gpu_nodes) == 1 else f"'s largest GPU node has ({most})"
    limits = tenant.limits
    validations = [
        {
            "expression": "size(variables.initGpu) == 0",
            "reason": "Forbidden",
            "message": "InitContainerGpuRequest: an init container asks for GPU resources, but HAMi assigns cards "
            "to app containers only; move the GPU work into an app container",
        },
    ]
    sums = {
        "gpus": ("variables.gpu.map(r, r.nums).sum()", " GPUs"),
        "gpumem": (f"variables.gpu.map(r, r.nums * {_memory('r', largest)}).sum()", " MB"),
        "gpucores": ("variables.gpu.map(r, r.nums * (r.cores > 100 ? 100 : r.cores)).sum()", "% cores"),
    }
    for key, (total, unit) in sums.items():
        limit = getattr(limits, key)
        if limit is None:
            continue
        validations.append(
            {
                "expression": f"{total} <= {limit}",
                "reason": "Forbidden",
                "messageExpression": f"'PodGpuLimitExceeded: each pod asks ' + string({total}) + '{unit} in total; "
                f"tenant {tenant.name} allows {limit}{unit} per pod'",
            }
        )
    validations += [
        {
            "expression": f"variables.gpu.all(r, r.nums <= {most})",
            "reason": "Forbidden",
            "message": f"NodeInsufficientDevice: a container asks for more cards than tenant {tenant.name}{has}",
        },
        {
            "expression": f"variables.gpu.all(r, {_memory('r', largest)} <= {largest})",
            "reason": "Forbidden",
            "messageExpression": "'CardInsufficientMemory: a container asks ' + string(variables.gpu.map(r, "
            f"{_memory('r', largest)}).max()) + ' MB per card; the largest card of tenant {tenant.name} has "
            f"{largest} MB'",
        },
        {
            "expression": "size(variables.gpu) == 0 || "
            + _selector_leaves_a_card(sorted({c.type.upper() for c in cards}), USE_TYPE, NOUSE_TYPE, exact=False),
            "reason": "Forbidden",
            "message": f"CardTypeMismatch: no card of tenant {tenant.name} matches the pod's {USE_TYPE} / "
            f"{NOUSE_TYPE} (its cards: {', '.join(sorted({c.type for c in cards}))})",
        },
        {
            "expression": "size(variables.gpu) == 0 || "
            + _selector_leaves_a_card([c.id for c in cards], USE_UUID, NOUSE_UUID, exact=True),
            "reason": "Forbidden",
            "message": f"CardUuidMismatch: no card of tenant {tenant.name} matches the pod's {USE_UUID} / "
            f"{NOUSE_UUID} (its cards: {', '.join(c.id for c in cards)})",
        },
        {
            "expression": "object.kind != 'Pod' || size(variables.gpu) == 0 || "
            f"(has(object.spec.schedulerName) && object.spec.schedulerName == {_q(HAMI_SCHEDULER)})",
            "reason": "Forbidden",
            "message": f"a GPU pod must be scheduled by {HAMI_SCHEDULER}: HAMi's webhook did not handle this one "
            "(it was unavailable, or the pod opted out), so HAMi's card accounting and quota would be bypassed; "
            f"retry, or set schedulerName: {HAMI_SCHEDULER}",
        },
    ]
    return validations


def warn_validations() -> list[dict]:
    return [
        {
            "expression": "variables.gpu.all(r, r.cores <= 100)",
            "message": "CoresAbove100: a container asks more than 100% of a card's cores; HAMi clamps it to 100",
        },
        {
            "expression": "variables.gpu.all(r, !(r.memreq == 0 && r.pct == 0))",
            "message": "ZeroMemoryPercentage: a container asks 0% of the card's memory; HAMi gives it 0 MB",
        },
    ]


MATCH = {
    "resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]},
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"],
            "operations": ["CREATE", "UPDATE"],
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs", "cronjobs"],
            "operations": ["CREATE", "UPDATE"],
        },
    ]
}


def policy_objects(tenant: Tenant) -> list[dict]:
    """The two policies and their bindings for one tenant, as Kubernetes objects."""
    objects = []
    for name, validations, actions in (
        (DENY_POLICY, deny_validations(tenant), ["Deny"]),
        (WARN_POLICY, warn_validations(), ["Warn"]),
    ):
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpulab"}},
                "spec": {
                    "failurePolicy": "Fail",  # an expression that errors refuses, it does not wave through
                    "matchConstraints": MATCH,
                    "variables": _variables(),
                    "validations": validations,
                },
            }
        )
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpulab"}},
                "spec": {"policyName": name, "validationActions": actions},
            }
        )
    return objects


class GpuAdmissionPolicy(pulumi.ComponentResource):
    """A tenant's GPU admission policies and bindings, in the tenant's own API server."""

    def __init__(
        self, name: str, tenant: Tenant, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpulab:index:GpuAdmissionPolicy", name, None, opts)
        created: dict[str, pulumi.Resource] = {}
        for document in policy_objects(tenant):
            kind, object_name = document["kind"], document["metadata"]["name"]
            resource_class = (
                k8s.admissionregistration.v1.ValidatingAdmissionPolicy
                if kind == "ValidatingAdmissionPolicy"
                else k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding
            )
            depends = [created[object_name]] if kind.endswith("Binding") else []
            created[object_name if kind == "ValidatingAdmissionPolicy" else f"{object_name}-binding"] = resource_class(
                f"{name}-{object_name}{'-binding' if kind.endswith('Binding') else ''}",
                metadata=document["metadata"],
                spec=document["spec"],
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends),
            )
        self.register_outputs({})
