"""How the placement engine's verdicts (placement/verdicts.py) read: the one place that words them, for the
policy pack, `make check` and `make plan` alike (`evaluate_tenant`: the engine's judgement, worded).

A tenant of one GPU node reads of cards (HAMi's reason on its one node, and the namespace quota when it
refused); a tenant of several reads of nodes, with HAMi's own events, which count the nodes per reason. What differs
between HAMi releases is said of the tenant's own (`Audience.hami_version`): a 0 % memory request, init containers,
and the namespace quota, which from v2.9.0 HAMi's webhook enforces at create (hami/webhook.py) before the scheduler
ever sees the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hami.cards import PodRequest
from hami.cluster import MAX_TIE_RUNS, NodeFailure, QuotaInUse
from hami.nodes import ContainerFailure
from hami.reasons import EXCEEDING_RESOURCE_QUOTA, RESOURCE_QUOTA_NOT_FIT
from hami.webhook import quota_request
from placement.evaluate import judge_tenant
from placement.findings import NO_PLACEMENT, ORDER_DEPENDENT, UNDECIDED, Finding
from placement.inventory import TenantInventory
from placement.orders import MAX_ORDER_STATES
from placement.search import SEARCH_BUDGET
from placement.verdicts import (
    BadScoringWeights,
    CardTooSmall,
    CoresAbove100,
    GpumemNotRead,
    GpuQuotaExceeded,
    InitContainerAsks,
    NoCardMatches,
    OverPodLimit,
    PlacementVerdict,
    PodAdvisory,
    PodRefusal,
    Question,
    Refused,
    RefusedAtCreate,
    RefusedByWebhook,
    Stranded,
    TooManyCards,
    Undecided,
    Unplaceable,
    ZeroMemory,
)
from placement.workloads import Workload, workload_of

EVERY_WORKLOAD = "(all GPU workloads)"  # the finding's workload when a verdict is about the whole set


@dataclass(frozen=True)
class Audience:
    """What of the tenant the wording depends on."""

    tenant: str
    several_nodes: bool  # its inventory lists GPU nodes: read of nodes, else of cards
    nodes: int
    cards: int
    busy: bool  # its cards already hold something
    listed_nodes: int = 0  # the GPU nodes its inventory lists
    hami_version: str = "v2.8.3"  # the HAMi release it runs

    @staticmethod
    def of(inventory: TenantInventory) -> Audience:
        return Audience(
            inventory.name,
            bool(inventory.nodes),
            len(inventory.node_cards()),
            len(inventory.cards),
            bool(inventory.card_usage),
            len(inventory.nodes),
            inventory.hami_version,
        )


def evaluate_tenant(inventory: TenantInventory, workloads: Sequence[Workload]) -> list[Finding]:
    """Every finding for a tenant's workloads, certain ones first: the engine's judgement, worded."""
    judgement = judge_tenant(inventory, workloads)
    audience = Audience.of(inventory)
    worded = []
    for verdicts in judgement.per_pod:
        for refusal in verdicts.refusals:
            cards = ", ".join(card.id for card in refusal.cards) if isinstance(refusal, CardTooSmall) else None
            worded.append(
                Finding("error", audience.tenant, verdicts.workload, refusal.reason, said(audience, refusal), cards)
            )
        for advisory in verdicts.advisories:
            worded.append(
                Finding("warning", audience.tenant, verdicts.workload, advisory.reason, said(audience, advisory))
            )
    worded += [_refused_at_create(audience, refused) for refused in judgement.admission]
    worded += [_over_quota(audience, refused) for refused in judgement.quota]
    return worded + [finding(audience, verdict) for verdict in judgement.placement]


UNITS = {"gpus": " GPUs", "gpumem": " MB", "gpucores": "% cores"}


def said(audience: Audience, verdict: PodRefusal | PodAdvisory) -> str:
    """A per-pod verdict's message: the admission policy says the same (model/kube_objects/admission_policy.py)."""
    match verdict:
        case RefusedByWebhook():
            return (
                f"HAMi {audience.hami_version}'s admission webhook refuses the pod (each of a workload's pods) when it "
                f"is created: {verdict.message}"
            )
        case GpumemNotRead():
            return (
                f"container {verdict.container} asks nvidia.com/gpumem {verdict.gpumem}, beyond int32: HAMi "
                f"{audience.hami_version} reads no GPU request from that container at all (no card allocated or "
                "accounted), and what its node then does is not HAMi's placement: gpulab cannot predict it; ask for "
                "the MB as a plain number a card has"
            )
        case TooManyCards():
            nodes = (
                f"the largest of its {audience.listed_nodes} GPU nodes has"
                if audience.several_nodes
                else "the node has"
            )
            init = "init " if verdict.init else ""
            return f"{init}container {verdict.container} asks {verdict.asks} cards, {nodes} {verdict.most}"
        case NoCardMatches():
            selector = "GPU type" if verdict.selector == "type" else "card UUID"
            return f"no card of the tenant matches the pod's {selector} selector"
        case CardTooSmall():
            listed = ", ".join(f"{card.id} ({card.type}, {card.memory_mb} MB)" for card in verdict.cards)
            return (
                f"{'init ' if verdict.init else ''}container {verdict.container} asks {verdict.asks_mb} MB per card; "
                f"the largest card has {verdict.largest_mb} MB: {listed}"
            )
        case InitContainerAsks():
            return (
                f"init container {verdict.container.name} asks {verdict.container.describe()}, but HAMi assigns "
                "cards to app containers only; move the GPU work into an app container"
            )
        case OverPodLimit():
            unit = UNITS[verdict.resource]
            return (
                f"each pod asks {verdict.asked}{unit} in total; tenant {audience.tenant} allows {verdict.limit}{unit} "
                "per pod"
            )
        case CoresAbove100():
            return f"container {verdict.container} asks {verdict.cores}% cores; HAMi clamps it to 100, write 100"
        case BadScoringWeights():
            return (
                f"HAMi {audience.hami_version}'s scheduler cannot read the pod's scoring weights ({verdict.error}) and "
                "fails its filter on every node: the pod stays Pending; fix or remove the annotation"
            )
        case ZeroMemory() if verdict.whole_card:
            return (
                f"container {verdict.container} asks 0% of the card's memory: HAMi {audience.hami_version} reads 0% "
                "as not given and gives it all of each card's memory; write the share it needs"
            )
        case ZeroMemory():
            return f"container {verdict.container} asks 0% of the card's memory: HAMi gives it 0 MB"


def _refused_at_create(audience: Audience, refused: RefusedAtCreate) -> Finding:
    """HAMi's webhook refuses the pod at create, next to what already counts against the quota (every order)."""
    return Finding(
        "error",
        audience.tenant,
        workload_of(refused.pod),
        refused.reason,
        f"HAMi {audience.hami_version}'s admission webhook refuses the pod when it is created, next to what already "
        f"counts against its namespace's quota: {refused.message}{_webhook_note(refused.pod, refused.quota)}",
    )


def _webhook_note(pod: PodRequest, quota: QuotaInUse | None) -> str:
    """The quota the webhook judged and what it counts for the pod (hami/webhook.py `quota_request`: gpumem x
    cards, a gpumem-percentage as 0 MB, cores as asked)."""
    memory, cores = quota_request(pod)
    keys = f" quota {', '.join(_quota_keys(quota))}" if quota is not None else ""
    namespace = quota.namespace if quota is not None else pod.namespace
    return f" [namespace {namespace}{keys}; the webhook counts {memory} MB, {cores}% cores for the pod]"


def _over_quota(audience: Audience, refused: GpuQuotaExceeded) -> Finding:
    pod = refused.pod
    return Finding(
        "error",
        audience.tenant,
        pod.workload,
        refused.reason,
        f"namespace {pod.namespace} quota requests.nvidia.com/gpu={refused.limit}: asks {refused.asks} GPU(s), "
        f"{refused.limit - refused.used} GPU(s) left",
    )


def findings(inventory: TenantInventory, verdicts: Iterable[PlacementVerdict]) -> list[Finding]:
    """Each verdict as the finding users read, in the engine's order."""
    audience = Audience.of(inventory)
    return [finding(audience, verdict) for verdict in verdicts]


def finding(audience: Audience, verdict: PlacementVerdict) -> Finding:
    match verdict:
        case Refused():
            return _refused(audience, verdict)
        case Unplaceable():
            return _unplaceable(audience, verdict)
        case Stranded():
            return _stranded_every_order(audience, verdict) if verdict.every_order else _stranded(audience, verdict)
        case Undecided():
            return _undecided(audience, verdict)


def _severity(verdict: PlacementVerdict) -> str:
    return "error" if verdict.certain else "warning"


def _refused(audience: Audience, verdict: Refused) -> Finding:
    """A pod no node holds even alone; under v2.10.0, one the webhook refuses at create against what already counts
    (placement/per_pod.py says those before the search; `judge_placement` alone finds them here)."""
    now = " next to what already runs" if audience.busy else " even alone"
    if audience.several_nodes:
        what = f"fits on none of the tenant's {audience.nodes} GPU nodes{now}"
    else:
        what = f"cannot fit on any of the tenant's {audience.cards} card(s){now}"
    if verdict.webhook is not None and verdict.quota is not None:  # what counts only grows: refused at any create
        return _refused_at_create(audience, RefusedAtCreate(verdict.pod, verdict.quota, verdict.webhook))
    return _refusal(audience, verdict.failure, verdict.quota, what, workload_of(verdict.pod))


def _unplaceable(audience: Audience, verdict: Unplaceable) -> Finding:
    if verdict.pod is None:  # pragma: no cover - only if the searches ever disagreed
        return Finding(
            "error", audience.tenant, EVERY_WORKLOAD, NO_PLACEMENT, f"no placement holds all {len(verdict.before)} pods"
        )
    names = ", ".join(sorted({workload_of(other) for other in verdict.before}))
    if audience.several_nodes:
        what = f"no placement across the nodes fits it next to {names or 'what runs'}"
    else:
        what = f"no placement fits it next to {names or 'what already runs'}"
    return _refusal(audience, verdict.failure, verdict.quota, what, verdict.pod.workload, verdict.webhook)


def _refusal(
    audience: Audience,
    failure: NodeFailure | None,
    quota: QuotaInUse | None,
    what: str,
    workload: str,
    webhook: str | None = None,
) -> Finding:
    """`what`, and why HAMi's walk refuses the pod; where the release's webhook refuses it at create once the pods
    before it are placed (`webhook`), that first, with the walk's reason for a pod created before they are."""
    if failure is None:  # only if HAMi's walk and the search ever disagreed
        return Finding("error", audience.tenant, workload, NO_PLACEMENT, f"{what}: no placement exists")
    reason, why, cards = _why(audience, failure, quota)
    if webhook is not None:
        return Finding(
            "error",
            audience.tenant,
            workload,
            EXCEEDING_RESOURCE_QUOTA,
            f"{what}: {_at_create(audience, failure.pod, quota, webhook)}; created before they are placed, HAMi's "
            f"scheduler refuses it ({reason}): {why}",
        )  # refused at create: no card is at fault
    return Finding("error", audience.tenant, workload, reason, f"{what}: {why}", cards)


def _at_create(audience: Audience, pod: PodRequest, quota: QuotaInUse | None, webhook: str) -> str:
    return (
        f"created once the pods before it are placed, HAMi {audience.hami_version}'s admission webhook refuses it: "
        f"{webhook}{_webhook_note(pod, quota)}"
    )


def _why(audience: Audience, failure: NodeFailure, quota: QuotaInUse | None) -> tuple[str, str, str | None]:
    """HAMi's reason, its explanation and the cards it names: on one node the node's own walk (and the
    namespace quota when it refused), on several each node's walk and HAMi's events."""
    if audience.several_nodes:
        events = "; ".join(failure.events())
        return failure.reason, f"{failure.explain()} [HAMi: {events}]", ", ".join(failure.cards) or None
    (only,) = failure.failures.values()
    return only.reason, f"{only.explain()}{_quota_note(only, quota)}", ", ".join(only.cards) or None


def _quota_note(failure: ContainerFailure, quota: QuotaInUse | None) -> str:
    if RESOURCE_QUOTA_NOT_FIT not in failure.reasons:
        return ""
    assert quota is not None, "HAMi refuses on a quota only where the namespace has one"
    return f" [namespace {quota.namespace} quota {', '.join(_quota_keys(quota))}]"


def _quota_keys(quota: QuotaInUse) -> list[str]:
    keys = []
    if quota.quota.memory_mb is not None:
        keys.append(f"limits.nvidia.com/gpumem={quota.quota.memory_mb} ({quota.used_mb} MB in use)")
    if quota.quota.cores is not None:
        keys.append(f"limits.nvidia.com/gpucores={quota.quota.cores} ({quota.used_cores}% in use)")
    return keys


def _stranded(audience: Audience, verdict: Stranded) -> Finding:
    """Advice: HAMi's walk strands a pod in this order with these policies."""
    configured = " (the configured card policy)" if verdict.configured else ""
    fitting = "fits in some placement, but " if verdict.placement_exists else ""  # unproven when the search ran out
    failure = verdict.failure
    if audience.several_nodes:
        went = ", ".join(f"{pod} on {node}" for pod, node in verdict.placed) or "nothing before it"
        how = (
            f"with node policy {verdict.node_policy} and card policy {verdict.gpu_policy}{configured}, "
            f"HAMi can put {went} and then strands it"
        )
        shown: NodeFailure | ContainerFailure = failure
    else:
        how = f"with card policy {verdict.gpu_policy}{configured}, HAMi strands it"
        (shown,) = failure.failures.values()  # the one node's own walk
    at_create = ""
    if verdict.webhook is not None:
        at_create = f"; {_at_create(audience, failure.pod, verdict.quota, verdict.webhook)}"
    return Finding(
        _severity(verdict),
        audience.tenant,
        failure.pod.workload,
        ORDER_DEPENDENT,
        f"{fitting}created in the order {_order_text(verdict.order)} {how}: {shown.explain()} ({shown.reason})"
        f"{at_create}",
        ", ".join(shown.cards) or None,
    )


def _stranded_every_order(audience: Audience, verdict: Stranded) -> Finding:
    """Certain: every order strands one; the failure shown is the declared order's."""
    failure = verdict.failure
    if audience.several_nodes:
        went = ", ".join(f"{pod} on {node}" for pod, node in verdict.placed)
        went = f"it puts {went} and then strands {failure.pod.workload}" if went else "it strands the first pod"
        some = "some placement across the nodes would hold every pod, but " if verdict.placement_exists else ""
        how = (
            f"with node policy {verdict.node_policy} and card policy {verdict.gpu_policy}, strands one in every "
            f"creation order, whichever tied node it picks; created as declared, {went}"
        )
    else:
        some = "some placement would hold every pod, but " if verdict.placement_exists else ""
        how = f"with card policy {verdict.gpu_policy}, strands one in every creation order; created as declared"
    reason, why, cards = _why(audience, failure, verdict.quota)
    if verdict.webhook is not None:
        return Finding(
            _severity(verdict),
            audience.tenant,
            failure.pod.workload,
            EXCEEDING_RESOURCE_QUOTA,
            f"{some}HAMi places one pod at a time and, {how}: "
            f"{_at_create(audience, failure.pod, verdict.quota, verdict.webhook)}; "
            f"created before they are placed, HAMi's scheduler refuses it ({reason}): {why}",
        )  # refused at create: no card is at fault
    return Finding(
        _severity(verdict),
        audience.tenant,
        failure.pod.workload,
        reason,
        f"{some}HAMi places one pod at a time and, {how}: {why}",
        cards,
    )


def _order_text(order: Sequence[PodRequest], shown: int = 8) -> str:
    """A creation order as the message gives it: every pod of a short one, the ends of a long one."""
    names = [pod.workload for pod in order]
    if len(names) > 2 * shown + 1:
        names = [*names[:shown], f"... ({len(names) - 2 * shown} more)", *names[-shown:]]
    return " -> ".join(names)


def _undecided(audience: Audience, verdict: Undecided) -> Finding:
    match verdict.question:
        case Question.POD_FITS | Question.SET_FITS:
            workload = workload_of(verdict.pods[0]) if verdict.question is Question.POD_FITS else EVERY_WORKLOAD
            message = (
                f"the placement search ran out of its budget ({SEARCH_BUDGET} steps per tenant) without an answer; "
                "treated as fitting, and only HAMi's greedy order was checked"
            )
        case Question.FIRST_UNPLACEABLE:
            workload = EVERY_WORKLOAD
            message = (
                f"no placement holds all {len(verdict.pods)} pods, but the search ran out of its budget "
                f"({SEARCH_BUDGET} steps per tenant) before finding the first one that does not fit"
            )
        case Question.ORDERS:
            workload = EVERY_WORKLOAD
            message = (
                f"the creation-order simulation stopped (after {MAX_ORDER_STATES} states, or {MAX_TIE_RUNS} runs "
                "of one order's score ties) without finding a stranded pod; not every order or tie was checked"
            )
    return Finding(_severity(verdict), audience.tenant, workload, UNDECIDED, message)
