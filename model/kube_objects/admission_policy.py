"""In-tenant admission (plain Kubernetes objects; components/gpu_admission.py creates them, process_lab applies
them): the pack's per-pod GPU refusals as a ValidatingAdmissionPolicy in every tenant.

Kubernetes evaluates the CEL below inside the tenant's API server at `kubectl apply` time: no webhook,
no pod, nothing to fail open (HAMi's own webhook is `failurePolicy: Ignore`). The questions are
exactly placement/per_pod.py's, in the same order, generated from the same tenant config (cards,
per-pod limits), and tests/placement/test_gpu_admission.py evaluates this CEL offline against that module on
shared and generated pods, fed as the API server feeds it (tests/support/cel_harness.py).

- `gpulab-gpu-requests` (Deny), in this order because the API server shows only the first failing
  validation (apiserver dispatcher.go, deniedDecisions[0]) and it should be HAMi's reason: quantities
  beyond int64 (GpuQuantityOutOfRange), what the release's webhook refuses (v2.8.3: spec.nodeName) or cannot read
  (model/kube_objects/admission_v2_10_0.py), more cards than the node has (NodeInsufficientDevice), type and
  UUID selectors that leave no card (CardTypeMismatch, CardUuidMismatch), more memory than the largest
  card (CardInsufficientMemory); then gpulab's own rules: init containers with GPU resources, per-pod
  limits, and a GPU Pod whose schedulerName is not hami-scheduler (HAMi's mutating webhook runs before
  validating policies, so this refuses only the pods it did not handle: the fail-open case).
- `gpulab-gpu-requests-advice` (Warn): what HAMi accepts but quietly changes (cores above 100 are
  clamped; a 0 % memory request gets 0 MB, under v2.10.0 the whole card). Refusing those would refuse pods HAMi
  runs.

Each tenant's policy follows its HAMi release (`Tenant.hami_version`), as placement/per_pod.py does (`PolicyRules`
below: the fields of hami/releases.py `Rules` these questions read). Under v2.10.0 (Project-HAMi/HAMi tag v2.10.0):
init containers are placed, each fitted alone before the app containers, a native sidecar (restartPolicy: Always)
too, as HAMi reads no restartPolicy: their card counts and memory are judged as the app containers' are,
InitContainerGpuRequest is not asked and a pod of GPU init containers only is a GPU pod (pkg/device/devices.go
`Resourcereqs` 639-692, pkg/scheduler/score.go `scoreNode` 309-318, `allocateInitContainers` 226-254);
selectors are trimmed, empty entries and blank annotations ignored, use and nouse both apply (devices.go
`CheckUUID` 693-713, `CheckType` 719-738); a gpumem-percentage of 0 is not given, so the whole card, and one above
100 counts as 100 (device.go `GenerateResourceRequests` 556-577); a hami.io/device-scoring-weights the scheduler
cannot parse fails the pod's filter (pkg/util/device_scoring_weights.go `ParseDeviceScoringWeights` 57-102, score.go
`calcScoreWithOptions` 361-364): InvalidDeviceScoringWeights. What v2.10.0's own webhook refuses (a gpumem-percentage
above 100, a privileged container, spec.nodeName) or cannot read (a gpumem beyond int32) is refused first, with HAMi's
words: model/kube_objects/admission_v2_10_0.py; so is what v2.8.3's refuses (spec.nodeName, in the pods it handles). Its
`failurePolicy: Ignore` covers a failed call, not a refusal.

An UPDATE is judged only when it changes what HAMi reads from the pod template (`match_conditions`), so
scaling down, removing a finalizer, orphaning or relabelling a workload admitted under older limits
always works. No expression can fail at run time on user input: quantities are read with
`isInteger()` first and clamped, and sums are clamped per container (no int64 overflow).

No namespace is exempt: HAMi's components ask for no GPU resources, and a pod without GPU requests
passes every rule. Cost: each expression iterates a pod's containers once (bounded by the API's
object size); the tenant's card types and ids are constants in the expression (at most 64 cards);
selector annotations are split once per card, never inside another user-sized loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hami.annotations import GPU_SCHEDULER_POLICY
from hami.reasons import (
    CARD_INSUFFICIENT_MEMORY,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    CORES_ABOVE_100,
    GPU_QUANTITY_OUT_OF_RANGE,
    INIT_CONTAINER_GPU_REQUEST,
    INVALID_DEVICE_SCORING_WEIGHTS,
    NODE_INSUFFICIENT_DEVICE,
    POD_GPU_LIMIT_EXCEEDED,
    ZERO_MEMORY_PERCENTAGE,
)
from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE
from model.config import Tenant
from model.kube_objects.admission_v2_10_0 import (
    WEIGHTS,
    webhook_signature,
    webhook_validations,
    webhook_variables,
    weights_parse,
)
from model.names import DENY_POLICY, WARN_POLICY

HAMI_SCHEDULER = "hami-scheduler"
USE_TYPE, NOUSE_TYPE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"


# Integer bounds that keep every expression inside CEL's int64 (an overflow is an evaluation error,
# which `failurePolicy: Fail` turns into "expression ... resulted in error", not a GPU message).
VALUE_CAP = 2**53  # a quantity above is read as this: more than any card, node or limit holds
PERCENT_CAP = 2**31  # gpumem-percentage above is read as this, so largest card x percentage fits int64
# A container's share of a per-pod sum is clamped here, so sums over any number of containers fit int64.
# Exact below; a clamped share is more than any card (or limit) holds, so the verdict stays the same.
SUM_CAP = 2**40
INT64_MAX = 2**63 - 1
# No VAP may refuse what HAMi admits: HAMi upper-cases card type selectors with Go's Unicode rules,
# CEL's upperAscii() only ASCII, so selectors with other letters are left to HAMi.
ASCII = r"^[\x00-\x7f]*$"
HAMI_KEYS = (GPU_RESOURCE, GPUMEM_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUCORES_RESOURCE)


@dataclass(frozen=True)
class PolicyRules:
    """What the policy asks differently per HAMi release: the fields of hami/releases.py `Rules` (cited there) that
    placement/per_pod.py's questions read; model/ takes only names of hami/ (tests/test_layout.py), so the values
    are repeated here and tests/model/test_admission_policy_releases.py holds them to that table."""

    version: str
    init_containers_counted: bool  # no InitContainerGpuRequest; GPU init containers make a GPU pod
    trimmed_selectors: bool  # CheckUUID/CheckType: trimmed entries, empty ones and blank annotations ignored
    # A gpumem-percentage of 0 is not given: the whole card; above 100 it counts as 100 (the webhook refuses it
    # first: InvalidGpumemPercentage).
    clamp_memory_percentage: bool
    scoring_weights: bool  # InvalidDeviceScoringWeights
    # The release's webhook rules (model/kube_objects/admission_v2_10_0.py), written together: InvalidGpumemPercentage,
    # PrivilegedContainer, PodHasNodeAssigned (both releases, each finding the GPU resource and handling the pod its
    # own way); and GpumemNotReadByHami.
    memory_percentage_range_checked: bool
    privileged_refused: bool
    webhook_resource_in_every_container: bool
    webhook_scheduler_names: tuple[str, ...] | None
    gpumem_beyond_int32_dropped: bool


POLICY_RULES = {
    "v2.10.0": PolicyRules("v2.10.0", True, True, True, True, True, True, True, None, True),
    "v2.8.3": PolicyRules("v2.8.3", False, False, False, False, False, False, False, ("", "default-scheduler"), False),
}


def policy_rules(tenant: Tenant) -> PolicyRules:
    return POLICY_RULES[tenant.hami_version]


def _q(text: str) -> str:
    """A CEL string literal."""
    return json.dumps(text)


def _value(map_expr: str, key: str, cap: int = VALUE_CAP) -> str:
    """A quantity as an int, -1 when absent. `isInteger()` first: `asInteger()` errors for values the API server
    holds as an inf.Dec (beyond int64, and from about 1.1e14 written with a large binary suffix or 19 digits);
    those, and values above `cap`, read as `cap`: more than any card, node or limit holds either way."""
    q = f"quantity({map_expr}[{_q(key)}])"
    return f"({_q(key)} in {map_expr} ? ({q}.isInteger() && {q}.asInteger() < {cap} ? {q}.asInteger() : {cap}) : -1)"


def _beyond_int64(container: str) -> str:
    """True if one of the container's HAMi quantities is beyond int64. Compared by value: `isInteger()` is also
    false for values the API server holds as an inf.Dec though int64 holds them ("1Pi", 19 digits such as
    9223372036854775807: apimachinery ParseQuantity's fast path takes at most 18), which are no more than
    large (_value reads them as its cap)."""
    checks = []
    for section in ("limits", "requests"):
        where = f"{container}.resources.{section}"
        beyond = f"quantity({where}[k]).isGreaterThan(quantity({_q(str(INT64_MAX))}))"
        checks.append(
            f"(has({container}.resources) && has({where}) && "
            f"{json.dumps(list(HAMI_KEYS))}.exists(k, k in {where} && {beyond}))"
        )
    return " || ".join(checks)


def _requests(containers: str) -> str:
    """A list of HAMi's normalised requests (nums, memreq, pct, cores; ints) of `containers`, as the
    webhook and scheduler derive them (placement/workloads.py container_request)."""
    pairs = (
        f"{containers}.map(c, {{"
        "'l': has(c.resources) && has(c.resources.limits) ? c.resources.limits : {}, "
        "'r': has(c.resources) && has(c.resources.requests) ? c.resources.requests : {}})"
    )
    keys = (GPUMEM_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUCORES_RESOURCE)
    other = " || ".join(f"{_q(key)} in p.l" for key in keys)

    def either(key: str, cap: int = VALUE_CAP) -> str:
        return f"({_q(key)} in p.l ? {_value('p.l', key, cap)} : {_value('p.r', key, cap)})"

    raw = (
        f"{pairs}.map(p, {{"
        f"'gpuL': {_value('p.l', GPU_RESOURCE)}, 'gpuR': {_value('p.r', GPU_RESOURCE)}, "
        f"'other': ({other}) ? 1 : 0, "
        f"'mem': {either(GPUMEM_RESOURCE)}, 'pct': {either(GPUMEM_PERCENTAGE_RESOURCE, PERCENT_CAP)}, "
        f"'cores': {either(GPUCORES_RESOURCE)}}})"
    )
    return (
        f"{raw}.map(v, {{"
        "'nums': v.gpuL >= 0 ? v.gpuL : (v.gpuR >= 0 ? v.gpuR : (v.other == 1 ? 1 : 0)), "
        "'memreq': v.mem >= 0 ? v.mem : 0, "
        "'pct': (v.pct >= 0 ? v.pct : 101) == 101 && v.mem <= 0 ? 100 : (v.pct >= 0 ? v.pct : 101), "
        "'cores': v.cores >= 0 ? v.cores : ((v.pct >= 0 ? v.pct == 100 : v.mem < 0) ? 100 : 0)})"
    )


def _memory(r: str, largest: int, zero_is_whole_card: bool = False) -> str:
    """MB per card a request may take: a percentage counted on the largest card (placement/per_pod.py); with
    `zero_is_whole_card` (v2.10.0, hami/cards.py `resolve_request`) 0 % without gpumem is all of it, and above 100 %
    is 100 % (which its webhook refuses first)."""
    if zero_is_whole_card:
        pct = f"({r}.pct == 0 || {r}.pct > 100 ? 100 : {r}.pct)"
        return f"({r}.memreq == 0 && {r}.pct != 101 ? {largest} * {pct} / 100 : {r}.memreq)"
    return f"({r}.memreq == 0 && {r}.pct != 101 ? {largest} * {r}.pct / 100 : {r}.memreq)"


def _share(count: str, each: str, bound: int) -> str:
    """count x each, clamped to `bound` without overflowing (count > 0, each >= 0)."""
    return f"({_clamped(count, each, bound)} ? {bound} : {count} * {each})"


def _clamped(count: str, each: str, bound: int) -> str:
    """count x each > bound, decided without computing the product."""
    return f"({each} != 0 && {count} > {bound} / {each})"


def _selector_leaves_a_card(values: list[str], use: str, nouse: str, exact: bool, trimmed: bool = False) -> str:
    """Some card passes the use/nouse selectors (HAMi checkGPUtype: upper-cased substring; checkUUID: exact).
    `trimmed` (v2.10.0 devices.go `CheckUUID` 693-713, `CheckType` 719-738): entries trimmed (CEL's trim() is Go's
    strings.TrimSpace, as HAMi's), empty entries and a blank annotation constrain nothing, use and nouse both apply."""
    ann = "variables.annotations"
    if trimmed:
        entry = "u.trim() == v" if exact else "u.trim() != '' && v.contains(u.trim().upperAscii())"

        def passes(key: str, wanted: bool) -> str:
            hit = f"{ann}[{_q(key)}].split(',').exists(u, {entry})"
            return f"(!({_q(key)} in {ann} && {ann}[{_q(key)}].trim() != '') || {'' if wanted else '!'}{hit})"

        test = f"{passes(use, True)} && {passes(nouse, False)}"
        if exact:
            return f"{json.dumps(values)}.exists(v, {test})"
        unicode = " || ".join(f"({_q(k)} in {ann} && !{ann}[{_q(k)}].matches({_q(ASCII)}))" for k in (use, nouse))
        return f"{unicode} || {json.dumps(values)}.exists(v, {test})"
    if exact:  # use-gpuuuid wins over nouse-gpuuuid
        test = (
            f"({_q(use)} in {ann} ? v in {ann}[{_q(use)}].split(',') : "
            f"({_q(nouse)} in {ann} ? !(v in {ann}[{_q(nouse)}].split(',')) : true))"
        )
        return f"{json.dumps(values)}.exists(v, {test})"
    test = (
        f"(!({_q(use)} in {ann}) || {ann}[{_q(use)}].split(',').exists(u, v.contains(u.upperAscii()))) && "
        f"(!({_q(nouse)} in {ann}) || !{ann}[{_q(nouse)}].split(',').exists(u, v.contains(u.upperAscii())))"
    )
    unicode = " || ".join(f"({_q(key)} in {ann} && !{ann}[{_q(key)}].matches({_q(ASCII)}))" for key in (use, nouse))
    return f"{unicode} || {json.dumps(values)}.exists(v, {test})"


TEMPLATE = "{o}.kind == 'Pod' ? {o} : ({o}.kind == 'CronJob' ? {o}.spec.jobTemplate.spec.template : {o}.spec.template)"
# What HAMi reads from a pod template: its selector and policy annotations, and each container's requests.
READ_ANNOTATIONS = (USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID, GPU_SCHEDULER_POLICY)


def _gpu_signature(obj: str, read: tuple[str, ...], rules: PolicyRules) -> str:
    """A list of strings that changes exactly when what HAMi reads from `obj`'s pod template changes.
    Built in a fixed order (container order, then a fixed key order), never by iterating a map."""
    t = f"({TEMPLATE.format(o=obj)})"
    ann = f"{t}.metadata.annotations"
    annotations = (
        f"{json.dumps(list(read))}.map(k, has({t}.metadata) && has({ann}) && k in {ann} ? k + '=' + {ann}[k] : '')"
    )

    def containers(field: str) -> str:
        def get(section: str) -> str:
            # By value: 20000 is stored as "20k", 2e4 as "20e3"; they are one request.
            where = f"c.resources.{section}"
            q = f"quantity({where}[k])"
            value = f"({q}.isInteger() ? string({q}.asInteger()) : {where}[k])"
            return f"(has(c.resources) && has({where}) && k in {where} ? {value} : '-')"

        return (
            f"(has({t}.spec.{field}) ? {t}.spec.{field} : []).map(c, "
            f"{json.dumps(list(HAMI_KEYS))}.map(k, {get('limits')} + '/' + {get('requests')}).join(','))"
        )

    signature = f"{annotations} + {containers('containers')} + ['init'] + {containers('initContainers')}"
    return f"{signature} + {webhook_signature(t, rules)}"


def match_conditions(rules: PolicyRules) -> list[dict]:
    """Where the release reads hami.io/device-scoring-weights (v2.10.0), a change of it is judged too; and a change of
    what its webhook reads (spec.nodeName, privileged containers; model/kube_objects/admission_v2_10_0.py)."""
    read = (*READ_ANNOTATIONS, WEIGHTS) if rules.scoring_weights else READ_ANNOTATIONS
    return [
        {
            # An update is judged only when it changes what HAMi reads. Scaling down, removing a finalizer,
            # orphaning, relabelling: a workload admitted earlier (under other limits) can always be retired.
            "name": "gpu-request-changed",
            "expression": f"request.operation != 'UPDATE' || {_gpu_signature('object', read, rules)} != "
            f"{_gpu_signature('oldObject', read, rules)}",
        }
    ]


def _variables(tenant: Tenant) -> list[dict]:
    every = "(has(variables.template.spec.containers) ? variables.template.spec.containers : [])"
    init = "(has(variables.template.spec.initContainers) ? variables.template.spec.initContainers : [])"
    rules = policy_rules(tenant)
    zero, counted = rules.clamp_memory_percentage, rules.init_containers_counted
    memory = _memory("r", _largest(tenant), zero)
    per_card = f"{{'nums': r.nums, 'mem': {memory}, 'cores': r.cores > 100 ? 100 : r.cores}}"
    return [
        {"name": "template", "expression": TEMPLATE.format(o="object")},
        {
            "name": "annotations",
            "expression": "has(variables.template.metadata) && has(variables.template.metadata.annotations) ? "
            "variables.template.metadata.annotations : {}",
        },
        {"name": "beyondInt64", "expression": f"({every} + {init}).filter(c, {_beyond_int64('c')}).map(c, c.name)"},
        {"name": "gpu", "expression": _requests(every) + ".filter(r, r.nums > 0)"},
        {"name": "initGpu", "expression": _requests(init) + ".filter(r, r.nums > 0)"},
        # Per GPU container: cards, MB per card (a percentage counted on the largest card), cores per card.
        {"name": "perCard", "expression": f"variables.gpu.map(r, {per_card})"},
        # Where init containers are placed (v2.10.0), the per-pod limits count the largest too (deny_validations).
        *([{"name": "perCardInit", "expression": f"variables.initGpu.map(r, {per_card})"}] if counted else []),
        *webhook_variables(rules),
    ]


def _largest(tenant: Tenant) -> int:
    return max(card.memory_mb for card in tenant.cards())


def deny_validations(tenant: Tenant, hami: bool = True) -> list[dict]:
    """Only the first failing validation reaches the user (the API server shows deniedDecisions[0]), so
    they come in the order HAMi itself would judge: per container, more cards than the node has
    (fitInDevices), then per card type, UUID and memory (device.go Fit). gpulab's own rules follow."""
    cards = tenant.cards()
    largest = _largest(tenant)
    rules = policy_rules(tenant)
    # The containers HAMi fits, whose requests make a GPU pod (placement/per_pod.py): where init containers are placed
    # (v2.10.0), theirs first, a native sidecar among them (HAMi reads no restartPolicy), then the app containers'.
    gpu, per_card = "variables.gpu", "variables.perCard"
    if rules.init_containers_counted:
        gpu, per_card = "(variables.initGpu + variables.gpu)", "(variables.perCardInit + variables.perCard)"
    no_gpu = f"size({gpu}) == 0"
    trimmed = rules.trimmed_selectors
    # With several GPU nodes, card-count rules are judged against the node with the most cards.
    gpu_nodes = tenant.gpu_nodes()
    most = max(len(node.cards) for node in gpu_nodes)
    has = f"'s node has ({most})" if len(gpu_nodes) == 1 else f"'s largest GPU node has ({most})"
    limits = tenant.limits
    validations = [
        {
            "expression": "size(variables.beyondInt64) == 0",
            "reason": "Forbidden",
            "messageExpression": f"'{GPU_QUANTITY_OUT_OF_RANGE}: container ' + variables.beyondInt64[0] + ' asks a "
            f"{GPU_RESOURCE}, gpumem, gpumem-percentage or gpucores quantity above {INT64_MAX}, which neither HAMi "
            "nor a ResourceQuota can count; ask for at most what a card has'",
        },
        *webhook_validations(rules, no_gpu),
        {
            "expression": f"{gpu}.all(r, r.nums <= {most})",
            "reason": "Forbidden",
            "message": f"{NODE_INSUFFICIENT_DEVICE}: a container asks for more cards than tenant {tenant.name}{has}",
        },
        {
            "expression": f"{no_gpu} || "
            + _selector_leaves_a_card(sorted({c.type.upper() for c in cards}), USE_TYPE, NOUSE_TYPE, False, trimmed),
            "reason": "Forbidden",
            "message": f"{CARD_TYPE_MISMATCH}: no card of tenant {tenant.name} matches the pod's {USE_TYPE} / "
            f"{NOUSE_TYPE} (its cards: {', '.join(sorted({c.type for c in cards}))})",
        },
        {
            "expression": f"{no_gpu} || "
            + _selector_leaves_a_card([c.id for c in cards], USE_UUID, NOUSE_UUID, True, trimmed),
            "reason": "Forbidden",
            "message": f"{CARD_UUID_MISMATCH}: no card of tenant {tenant.name} matches the pod's {USE_UUID} / "
            f"{NOUSE_UUID} (its cards: {', '.join(c.id for c in cards)})",
        },
        {
            "expression": f"{per_card}.all(p, p.mem <= {largest})",
            "reason": "Forbidden",
            "messageExpression": f"'{CARD_INSUFFICIENT_MEMORY}: a container asks ' + "
            f"string({per_card}.map(p, p.mem).max()) + ' MB per card; the largest card of tenant "
            f"{tenant.name} has {largest} MB'",
        },
    ]
    if not rules.init_containers_counted:
        validations.append(
            {
                "expression": "size(variables.initGpu) == 0",
                "reason": "Forbidden",
                "message": f"{INIT_CONTAINER_GPU_REQUEST}: an init container asks for GPU resources, but HAMi assigns "
                "cards to app containers only; move the GPU work into an app container",
            }
        )
    if rules.scoring_weights:
        validations.append(
            {
                "expression": f"!({_q(WEIGHTS)} in variables.annotations) || {no_gpu} || {weights_parse()}",
                "reason": "Forbidden",
                "message": f"{INVALID_DEVICE_SCORING_WEIGHTS}: HAMi {rules.version}'s scheduler cannot read the pod's "
                f"{WEIGHTS} (it takes slot=N,core=N,memory=N: each once, integers from 0, one above 0) and fails "
                "its filter on every node: the pod would stay Pending; fix or remove the annotation",
            }
        )
    for key, each, unit in (("gpus", "1", " GPUs"), ("gpumem", "p.mem", " MB"), ("gpucores", "p.cores", "% cores")):
        limit = getattr(limits, key)
        if limit is None:
            continue
        share, over = _share("p.nums", each, SUM_CAP), _clamped("p.nums", each, SUM_CAP)
        total, clamped = f"variables.perCard.map(p, {share}).sum()", f"variables.perCard.exists(p, {over})"
        if rules.init_containers_counted:  # the pod's effective request (placement/per_pod.py `pod_asks`)
            total = f"([{total}] + variables.perCardInit.map(p, {share})).max()"
            clamped = f"{clamped} || variables.perCardInit.exists(p, {over})"
        validations.append(
            {
                "expression": f"{total} <= {limit}",
                "reason": "Forbidden",
                "messageExpression": f"'{POD_GPU_LIMIT_EXCEEDED}: each pod asks ' + ({clamped} ? "
                f"'more than {SUM_CAP}' : string({total})) + '{unit} in total; tenant {tenant.name} allows "
                f"{limit}{unit} per pod'",
            }
        )
    if not hami:  # kube-scheduler alone places GPU pods (scheduling.scheduler): no HAMi to bypass
        return validations
    validations.append(
        {
            # Read through variables.template (the Pod itself): the API server type-checks each validation
            # against every matched kind, and `object.spec.schedulerName` is no field of a Deployment's spec
            # (a warning in the policy's status.typeChecking; tests/real judge that).
            "expression": f"object.kind != 'Pod' || {no_gpu} || "
            "(has(variables.template.spec.schedulerName) && "
            f"variables.template.spec.schedulerName == {_q(HAMI_SCHEDULER)})",
            "reason": "Forbidden",
            "message": f"a GPU pod must be scheduled by {HAMI_SCHEDULER}: HAMi's webhook did not handle this one "
            "(it was unavailable, or the pod opted out), so HAMi's card accounting and quota would be bypassed; "
            f"retry, or set schedulerName: {HAMI_SCHEDULER}",
        }
    )
    return validations


def warn_validations(rules: PolicyRules = POLICY_RULES["v2.8.3"]) -> list[dict]:
    zero = (
        f"HAMi {rules.version} reads 0% as not given and gives it all of each card's memory; write the share it needs"
        if rules.clamp_memory_percentage
        else "HAMi gives it 0 MB"
    )
    return [
        {
            "expression": "variables.gpu.all(r, r.cores <= 100)",
            "message": f"{CORES_ABOVE_100}: a container asks more than 100% of a card's cores; HAMi clamps it to 100",
        },
        {
            "expression": "variables.gpu.all(r, !(r.memreq == 0 && r.pct == 0))",
            "message": f"{ZERO_MEMORY_PERCENTAGE}: a container asks 0% of the card's memory; {zero}",
        },
    ]


MATCH = {
    "resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]},
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["replicationcontrollers"],
            "operations": ["CREATE", "UPDATE"],
        },
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


def policy_objects(tenant: Tenant, hami: bool = True) -> list[dict]:
    """The two policies and their bindings for one tenant, as Kubernetes objects; without HAMi
    (scheduling.scheduler: kube-scheduler) no rule asks for its schedulerName. The rules are the tenant's HAMi
    release's (`policy_rules`)."""
    objects = []
    rules = policy_rules(tenant)
    for name, validations, actions in (
        (DENY_POLICY, deny_validations(tenant, hami), ["Deny"]),
        (WARN_POLICY, warn_validations(rules), ["Warn"]),
    ):
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpulab"}},
                "spec": {
                    "failurePolicy": "Fail",  # an expression that errors refuses, it does not wave through
                    "matchConstraints": MATCH,
                    "matchConditions": match_conditions(rules),
                    "variables": _variables(tenant),
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
