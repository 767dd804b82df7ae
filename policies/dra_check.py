"""`make check` for a DRA tenant (gpuSharing: dra): the manifests' pods with their ResourceClaimTemplates, after the
stack's declared workloads (or, with --live, after the claims the tenant's API server holds allocated now), through
the allocator model (placement/dra_fit.py). A pod whose claim no card can hold now is an error with the allocator's
own reason (`cannot allocate all claims`), what it asks and what each card has free; one that fits is placed. A
template naming another class, or asking memory in another unit than MB, is bad input: the tenant's kube-scheduler
would leave such a pod Pending, or place it on what the user did not mean."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from model import dra
from model.config import Tenant
from model.kube_objects.workload_manifests import workload_claim_template
from placement.dra_fit import Allocation, Card, ClaimAsk, Used, allocate, free_now
from placement.findings import Finding
from placement.workloads import WorkloadError, whole_quantity

UNALLOCATABLE = "cannot allocate all claims"  # kube-scheduler v1.36.4's words (dynamicresources.go)
BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


class DraInputError(ValueError):
    """A manifest the checker cannot judge as the user means it: one line naming the object and the fix."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _amount(text: Any, key: str, where: str) -> int:
    value = str(text)
    if key == dra.MEMORY and value.endswith(BINARY):
        raise DraInputError(
            f"{where}: memory {value} is a binary quantity of bytes; gpulab's cards count memory in MB, as HAMi "
            "does: write it in MB (20000 for 20000 MB)"
        )
    try:
        return whole_quantity(text, f"{where}: {key} ({'MB' if key == dra.MEMORY else '%'})")
    except WorkloadError as error:
        raise DraInputError(str(error)) from None


def template_ask(tenant: str, template: Mapping[str, Any], label: str) -> ClaimAsk:
    """What a ResourceClaimTemplate's one request asks of the tenant's class."""
    metadata = _mapping(template.get("metadata"))
    where = f"ResourceClaimTemplate/{metadata.get('name', '<unnamed>')}"
    requests = _mapping(_mapping(_mapping(template.get("spec")).get("spec")).get("devices")).get("requests") or []
    # Any sequence: the analyzer protocol hands the pack protobuf lists, not Python lists.
    if not isinstance(requests, Sequence) or isinstance(requests, str):
        requests = []
    if len(requests) != 1 or "exactly" not in _mapping(requests[0]):
        raise DraInputError(f"{where}: make check judges one `exactly` request per claim (the lab's claim templates)")
    exactly = _mapping(_mapping(requests[0]).get("exactly"))
    wanted = dra.device_class_name(tenant)
    if exactly.get("deviceClassName") != wanted:
        raise DraInputError(
            f"{where}: asks device class {exactly.get('deviceClassName')!r}, which is not {tenant}'s: its cards "
            f"are class {wanted} (another tenant's class is not in its API server, so the pod would stay Pending)"
        )
    if exactly.get("allocationMode", "ExactCount") != "ExactCount":
        raise DraInputError(f"{where}: allocationMode {exactly.get('allocationMode')}: make check judges ExactCount")
    asked = _mapping(_mapping(exactly.get("capacity")).get("requests"))
    unknown = sorted(set(asked) - {dra.MEMORY, dra.CORES})
    if unknown:
        raise DraInputError(f"{where}: capacity {unknown}: gpulab's cards have {dra.MEMORY} (MB) and {dra.CORES} (%)")
    count = exactly.get("count", 1)
    if isinstance(count, float) and count.is_integer():
        count = int(count)  # the engine hands a pack every number as a double
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise DraInputError(f"{where}: count {count!r} must be a whole number of cards, at least 1")
    amounts = {key: _amount(value, key, where) for key, value in asked.items()}
    return ClaimAsk(label, count, amounts.get(dra.MEMORY), amounts.get(dra.CORES))


def manifest_asks(tenant: str, objects: Iterable[Mapping[str, Any]]) -> list[ClaimAsk]:
    """The claims of the manifests' pods (in order), each from the template it names."""
    objects = list(objects)
    templates = {
        (_mapping(o.get("metadata")).get("namespace"), _mapping(o.get("metadata")).get("name")): o
        for o in objects
        if o.get("kind") == "ResourceClaimTemplate"
    }
    asks = []
    for pod in (o for o in objects if o.get("kind") == "Pod"):
        metadata = _mapping(pod.get("metadata"))
        label = f"Pod/{metadata.get('namespace') or 'default'}/{metadata.get('name', '<unnamed>')}"
        for claim in _mapping(pod.get("spec")).get("resourceClaims") or []:
            name = _mapping(claim).get("resourceClaimTemplateName")
            if name is None:
                continue  # a claim made by hand (resourceClaimName): not judged here
            template = templates.get((metadata.get("namespace"), name))
            if template is None:
                raise DraInputError(f"{label}: names ResourceClaimTemplate {name!r}, which no manifest given holds")
            asks.append(template_ask(tenant, template, label))
    return asks


def declared_asks(tenant: Tenant) -> list[ClaimAsk]:
    asks = []
    for workload in tenant.workloads:
        template = workload_claim_template(tenant, workload)
        label = f"Pod/{tenant.workload_namespace(workload)}/{workload.name}"
        asks.extend(template_ask(tenant.name, template, label) for _ in range(workload.replicas))
    return asks


def live_use(tenant: Tenant, claims: Iterable[Mapping[str, Any]]) -> tuple[Used, list[str]]:
    """What the claims allocated now consume of each of the tenant's cards (their allocation's consumedCapacity, as
    kube-scheduler recorded it; "20k" read as 20000), and a `now:` line per card. A claim on a device the stack does
    not declare means another tenant's or stack's cluster: refused as bad input."""
    devices = {
        (node.name, dra.device_name(card)): card for node in tenant.gpu_nodes() for card in node.cards
    }  # the pool is the node (model/dra.py)
    used: dict[str, list[int]] = {}
    holders: dict[str, set[str]] = {}  # the claims holding a share of each card
    for claim in claims:
        if not isinstance(claim, Mapping):
            raise DraInputError(f"the claims list holds {claim!r}, which is not a ResourceClaim")
        metadata = _mapping(claim.get("metadata"))
        name = f"ResourceClaim/{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
        for result in dra.driver_results(claim):
            card = devices.get((str(result.get("pool")), str(result.get("device"))))
            if card is None:
                raise DraInputError(
                    f"{name} holds device {result.get('device')} of pool {result.get('pool')}, which tenant "
                    f"{tenant.name} does not declare: is this the right tenant and stack?"
                )
            consumed = _mapping(result.get("consumedCapacity"))
            memory, cores = ClaimAsk(name).consumes(card)  # no consumedCapacity: the device's defaults
            if dra.MEMORY in consumed:
                memory = _amount(consumed[dra.MEMORY], dra.MEMORY, name)
            if dra.CORES in consumed:
                cores = _amount(consumed[dra.CORES], dra.CORES, name)
            entry = used.setdefault(card.id, [0, 0])
            entry[0] += memory
            entry[1] += cores
            holders.setdefault(card.id, set()).add(name)
    lines = [
        f"now: {card.id} ({card.type}): {used.get(card.id, [0, 0])[0]} of {card.memory_mb} MB, "
        f"{used.get(card.id, [0, 0])[1]} of {card.cores}% cores in use ({len(holders.get(card.id, ()))} claims)"
        for card in devices.values()
    ]
    return {card_id: (held[0], held[1]) for card_id, held in used.items()}, lines


def judge(
    tenant: Tenant, objects: list[Mapping[str, Any]], live_claims: Iterable[Mapping[str, Any]] | None = None
) -> tuple[list[str], list[Finding]]:
    """(lines, findings): the declared workloads' claims first, as the stack runs them (or, given `live_claims`,
    what the claims allocated now consume), then the manifests'."""
    nodes = [(node.name, node.cards) for node in tenant.gpu_nodes()]
    used, lines = live_use(tenant, live_claims) if live_claims is not None else ({}, [])
    declared = declared_asks(tenant) if live_claims is None else []
    submitted = manifest_asks(tenant.name, objects)
    allocations = allocate(nodes, declared + submitted, used)
    running, judged = allocations[: len(declared)], allocations[len(declared) :]
    lines += [
        f"running: {a.ask.label} on {', '.join(d.card.id for d in a.devices) or 'no card (Pending)'}" for a in running
    ]
    placed = [f"place: {a.ask.label}: {', '.join(d.card.id for d in a.devices)}" for a in judged if a.devices]
    findings = refusals(tenant.name, nodes, allocations, start=len(declared), before=used)
    return lines + placed, findings


def refusals(
    tenant: str,
    nodes: list[tuple[str, list[Card]]],
    allocations: list[Allocation],
    start: int = 0,
    before: Used | None = None,
) -> list[Finding]:
    """An error for each allocation from `start` on that found no card: what it asks and what the claims before
    it (and `before`, what is allocated now) leave free (make check and the pack word it the same)."""
    found = []
    for index, allocation in enumerate(allocations[start:], start=start):
        if allocation.devices:
            continue
        free = "; ".join(
            f"{card.id}: {memory} MB, {cores} %" for card, memory, cores in free_now(nodes, allocations[:index], before)
        )
        ask = allocation.ask
        memory = "a whole card's memory" if ask.memory_mb is None else f"{ask.memory_mb} MB"
        message = (
            f"asks {ask.count} card(s) with {memory} and {ask.cores or 0} % of each; free beside the claims before it: "
            f"{free} (kube-scheduler's DRA allocator would leave the pod Pending)"
        )
        found.append(Finding("error", tenant, ask.label, UNALLOCATABLE, message))
    return found
