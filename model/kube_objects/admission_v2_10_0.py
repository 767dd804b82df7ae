"""The admission policy's rules that only HAMi v2.10.0 has, written where a tenant runs it
(model/kube_objects/admission_policy.py `PolicyRules`): InvalidDeviceScoringWeights (`weights_parse`), and what
v2.10.0's own webhook refuses, or cannot read, in a GPU pod (`webhook_validations`;
model/kube_objects/admission_policy.py puts them first, right after GpuQuantityOutOfRange; placement/per_pod.py asks the
same questions, hami/webhook.py `webhook_denial` words HAMi's answers); and the one refusal v2.8.3's webhook shares with
it, PodHasNodeAssigned, written here for both.

HAMi's mutating webhook runs before any validating admission policy, so a Pod it refuses never reaches these rules
while it is up; they refuse what it would refuse when it is down (`failurePolicy: Ignore`), and, above all, the
workload itself: the webhook sees only Pods, so without them a Deployment is created and each of its pods refused in
a ReplicaSet event. Read at Project-HAMi/HAMi tag v2.10.0 (commit 4707fb02c91c), in the webhook's order, which gives
one refusal (so each rule passes when an earlier one of these fails):

- InvalidGpumemPercentage: a nvidia.com/gpumem-percentage above 100 in any container, init containers first
  (pkg/device/nvidia/device.go `MutateAdmission` 349-351, `validateMemoryPercentage` 389-396; pkg/scheduler/webhook.go
  `Handle` 74-98; #1997). A negative one never reaches a validating policy (the API server's validation, which runs
  between mutating and validating admission, refuses it);
- PrivilegedContainer: a privileged container, init or app, in a pod where the webhook finds a GPU resource
  (webhook.go `Handle` 71, 99-102, `privilegedContainerName` 125-137; `hasResource`: device.go
  `mutateContainerResource` 398-415, `defaultExclusiveCoreIfNeeded` 417-450; #2139);
- PodHasNodeAssigned: such a pod with spec.nodeName set (webhook.go `Handle` 104-112). v2.8.3's webhook refuses it
  too, in the same words (tag v2.8.3, webhook.go `Handle` 89-98), but finds the GPU resource in spec.containers only,
  skipping privileged ones (70-87), and handles only a pod whose schedulerName is empty or default-scheduler (63-68:
  one naming hami-scheduler passes untouched);
- GpumemNotReadByHami: a nvidia.com/gpumem above int32 (math.MaxInt32 MB, memoryFactor 1), which HAMi's
  `GenerateResourceRequests` (531-543; #2285) turns into no request at all: no card allocated or accounted, and what
  the node does then gpulab cannot predict.

Only GPU pods (as the other rules count them, `no_gpu`) are judged, as the pack judges only those: a pod whose only
HAMi resource is `nvidia.com/gpu: 0` is refused by HAMi's webhook for the first three too, and not by these rules.
"""

from __future__ import annotations

import json
from typing import Protocol

from hami.annotations import DEVICE_SCORING_WEIGHTS
from hami.reasons import GPUMEM_NOT_READ_BY_HAMI, INVALID_GPUMEM_PERCENTAGE, POD_HAS_NODE_ASSIGNED, PRIVILEGED_CONTAINER
from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE

HAMI_KEYS = (GPU_RESOURCE, GPUMEM_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUCORES_RESOURCE)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
WEIGHTS = DEVICE_SCORING_WEIGHTS  # v2.10.0: pkg/util/types.go DeviceScoringWeightsAnnotationKey
WEIGHT_KEYS = ("slot", "core", "memory")
PERCENT_SHOWN_CAP = 2**53  # a percentage shown as its integer below this, else as the API server holds it
APP = "(has(variables.template.spec.containers) ? variables.template.spec.containers : [])"
# Init containers first, as the webhook walks them.
CONTAINERS = f"(has(variables.template.spec.initContainers) ? variables.template.spec.initContainers : []) + {APP}"
PRIVILEGED = "has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged"


def _q(text: str) -> str:
    return json.dumps(text)


def _section(c: str, name: str) -> str:
    return f"(has({c}.resources) && has({c}.resources.{name}) ? {c}.resources.{name} : {{}})"


def _shown(where: str, key: str) -> str:
    """The quantity `where[key]` as HAMi prints it (`Quantity.Value()`, `%d`), for what reaches a validating policy:
    its integer, or the API server's text of one CEL cannot hold as an integer."""
    q = f"quantity({where}[{_q(key)}])"
    return f"({q}.isInteger() && {q}.asInteger() < {PERCENT_SHOWN_CAP} ? string({q}.asInteger()) : {where}[{_q(key)}])"


def _above_100(where: str, key: str) -> str:
    q = f"quantity({where}[{_q(key)}])"
    return f"{q}.isGreaterThan(quantity('100'))"


def webhook_variables(rules: WebhookRules) -> list[dict]:
    """The variables the release's rules read (added after the policy's own, so its other variables stay as they
    are): `webhookResource` is `hasResource`, found in every container (v2.10.0) or in the app containers that are not
    privileged (v2.8.3 `Handle` 70-87)."""
    pct = GPUMEM_PERCENTAGE_RESOURCE
    limits, requests = _section("c", "limits"), _section("c", "requests")
    # device.go `resourceValue`: the limit, else the request.
    over = (
        f"({_q(pct)} in {limits} ? {_above_100(limits, pct)} : "
        f"({_q(pct)} in {requests} && {_above_100(requests, pct)}))"
    )
    value = f"({_q(pct)} in {limits} ? {_shown(limits, pct)} : {_shown(requests, pct)})"
    message = f"'invalid {pct} value ' + {value} + ' in container ' + c.name + ': must be an integer between 0 and 100'"
    in_limits = f"{json.dumps(list(HAMI_KEYS))}.exists(k, k in {limits})"
    exclusive = (
        f"({_q(GPU_RESOURCE)} in {requests} && !({_q(GPUCORES_RESOURCE)} in {requests}) && "
        f"({_q(pct)} in {requests} ? !{_above_100(requests, pct)} && "
        f"!quantity('100').isGreaterThan(quantity({requests}[{_q(pct)}])) : "
        f"!({_q(GPUMEM_RESOURCE)} in {requests})))"
    )
    found = f"({CONTAINERS}).exists(c, {in_limits} || {exclusive})"
    if not rules.webhook_resource_in_every_container:
        found = f"{APP}.exists(c, !({PRIVILEGED}) && ({in_limits} || {exclusive}))"
    variables = []
    if rules.memory_percentage_range_checked:
        variables.append({"name": "badPercentage", "expression": f"({CONTAINERS}).filter(c, {over}).map(c, {message})"})
    if rules.privileged_refused:
        variables.append({"name": "privileged", "expression": f"({CONTAINERS}).filter(c, {PRIVILEGED}).map(c, c.name)"})
    return [*variables, {"name": "webhookResource", "expression": found}]


class WebhookRules(Protocol):
    """The fields of model/kube_objects/admission_policy.py `PolicyRules` these rules read (hami/releases.py `Rules`
    cites them)."""

    version: str
    memory_percentage_range_checked: bool
    privileged_refused: bool
    webhook_resource_in_every_container: bool
    webhook_scheduler_names: tuple[str, ...] | None
    gpumem_beyond_int32_dropped: bool


def webhook_validations(rules: WebhookRules, no_gpu: str) -> list[dict]:
    """The release's rules, in the webhook's order; HAMi gives one refusal, so each passes when an earlier webhook
    refusal fails (v2.8.3: PodHasNodeAssigned alone)."""
    refuses = f"HAMi {rules.version}'s webhook refuses the pod (each of a workload's pods, at create)"
    earlier: list[str] = []  # the webhook refusals before this one
    validations = []
    if rules.memory_percentage_range_checked:
        validations.append(
            {
                "expression": f"{no_gpu} || size(variables.badPercentage) == 0",
                "reason": "Forbidden",
                "messageExpression": f"{_q(f'{INVALID_GPUMEM_PERCENTAGE}: {refuses}: ')} + variables.badPercentage[0]",
            }
        )
        earlier.append("size(variables.badPercentage) > 0")
    if rules.privileged_refused:
        validations.append(
            {
                "expression": " || ".join(
                    [no_gpu, *earlier, "!variables.webhookResource", "size(variables.privileged) == 0"]
                ),
                "reason": "Forbidden",
                "messageExpression": f"{_q(f'{PRIVILEGED_CONTAINER}: {refuses}: container ')} + "
                "variables.privileged[0] + ' is privileged'",
            }
        )
        earlier.append("size(variables.privileged) > 0")
    node_name, handled = "variables.template.spec.nodeName", []
    if rules.webhook_scheduler_names is not None:  # v2.8.3 lets a pod naming another scheduler through untouched
        name = "variables.template.spec.schedulerName"
        handled.append(f"(has({name}) && !({name} in {json.dumps(list(rules.webhook_scheduler_names))}))")
    validations.append(
        {
            "expression": " || ".join(
                [no_gpu, *earlier, *handled, "!variables.webhookResource", f"!has({node_name})", f"{node_name} == ''"]
            ),
            "reason": "Forbidden",
            "message": f"{POD_HAS_NODE_ASSIGNED}: {refuses}: pod has node assigned",
        }
    )
    if rules.gpumem_beyond_int32_dropped:
        validations.append(
            {
                "expression": f"(variables.gpu + variables.initGpu).all(r, r.memreq <= {INT32_MAX})",
                "reason": "Forbidden",
                "message": f"{GPUMEM_NOT_READ_BY_HAMI}: a container asks {GPUMEM_RESOURCE} above {INT32_MAX} (MB): "
                f"HAMi {rules.version} then reads no GPU request from it at all (no card allocated or accounted), and "
                "what its node does is not HAMi's placement, which gpulab cannot predict; ask for the MB as a plain "
                "number a card has",
            }
        )
    return validations


def weights_parse() -> str:
    """The pod's hami.io/device-scoring-weights parses as v2.10.0's `ParseDeviceScoringWeights` (57-102) parses it
    (hami/cards.py `parse_scoring_weights`): three comma-separated entries, each trimmed key=value split at the
    first "=" (a value holding another "=" is no integer), keys slot, core and memory each once, values what Go's
    strconv.ParseInt(value, 10, 64) reads (an optional sign, ASCII digits, within int64) and not negative, one
    above 0. Values are compared as quantities, which a sign and digits always are: `int()` could fail."""
    parts = f"variables.annotations[{_q(WEIGHTS)}].split(',')"
    value = "quantity(p.split('=')[1].trim())"
    entry = (
        f"size(p.split('=')) == 2 && p.split('=')[0].trim() in {json.dumps(list(WEIGHT_KEYS))} && "
        f"p.split('=')[1].trim().matches('^[+-]?[0-9]+$') && !quantity('0').isGreaterThan({value}) && "
        f"!{value}.isGreaterThan(quantity({_q(str(INT64_MAX))}))"
    )
    return (
        f"(size({parts}) == 3 && {parts}.all(p, {entry}) && "
        f"{json.dumps(list(WEIGHT_KEYS))}.all(k, {parts}.exists(p, p.split('=')[0].trim() == k)) && "
        f"{parts}.exists(p, {value}.isGreaterThan(quantity('0'))))"
    )


def webhook_signature(t: str, rules: WebhookRules) -> str:
    """What else of a pod template the release's webhook reads (an UPDATE changing it is judged): spec.nodeName,
    (v2.8.3) spec.schedulerName, and the securityContext.privileged of each container it walks, in container order."""

    def privileged(field: str) -> str:
        return (
            f"(has({t}.spec.{field}) ? {t}.spec.{field} : []).map(c, has(c.securityContext) && "
            "has(c.securityContext.privileged) && c.securityContext.privileged ? 'privileged' : '-')"
        )

    read = [f"'nodeName=' + (has({t}.spec.nodeName) ? {t}.spec.nodeName : '')"]
    if rules.webhook_scheduler_names is not None:
        read.append(f"'schedulerName=' + (has({t}.spec.schedulerName) ? {t}.spec.schedulerName : '')")
    signature = f"[{', '.join(read)}] + {privileged('containers')}"
    if rules.webhook_resource_in_every_container:
        signature += f" + ['init'] + {privileged('initContainers')}"
    return signature
