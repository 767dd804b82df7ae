"""A DRA tenant's cards and who uses them (gpuSharing: dra): the devices of gpulab's driver in its ResourceSlices,
and the capacity each allocated ResourceClaim consumes of them (resource.k8s.io/v1, k8s.io/api v0.36.4:
AllocationResult.Devices.Results[].consumedCapacity, ResourceClaimStatus.ReservedFor). Quantities are read as the
API server writes them (20000 MB arrives as "20k")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from model import dra
from model.quantity import QuantityError, parse_quantity
from report.model import CardUsage, RegisteredCard, TenantReport


def _whole(value: Any) -> int:
    try:
        return int(parse_quantity(str(value)))
    except (QuantityError, ValueError):
        return 0


def _unschedulable(pod: Mapping[str, Any]) -> str:
    """kube-scheduler's verdict on a pod it found no node for (its PodScheduled condition), else ""."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message", ""))
    return ""


def dra_report(
    tenant: str,
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
) -> TenantReport | None:
    """None when the tenant has no slice of gpulab's driver (its cards are HAMi's). A claim not allocated is listed
    with kube-scheduler's verdict on the pod it was made for (the claim's owner, from its template)."""
    verdicts = {((pod.get("metadata") or {}).get("uid")): _unschedulable(pod) for pod in pods if _unschedulable(pod)}
    cards: dict[tuple[str, str], CardUsage] = {}
    for found in slices:
        spec = found.get("spec") or {}
        if spec.get("driver") != dra.DRIVER:
            continue
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            attributes, capacity = device.get("attributes") or {}, device.get("capacity") or {}
            card = RegisteredCard(
                id=str((attributes.get("uuid") or {}).get("string", device.get("name", "?"))),
                type=str((attributes.get("type") or {}).get("string", "")),
                memory_mb=_whole((capacity.get(dra.MEMORY) or {}).get("value", 0)),
                cores=_whole((capacity.get(dra.CORES) or {}).get("value", 0)),
                split_count=0,  # DRA has no slot limit
            )
            cards[(pool, str(device.get("name", "")))] = CardUsage(card, str(spec.get("nodeName", pool)))
    if not cards:
        return None
    pending = []
    for claim in claims:
        metadata, status = claim.get("metadata") or {}, claim.get("status") or {}
        name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
        ours = dra.driver_results(claim)
        if not ours:
            owners = [ref.get("uid") for ref in metadata.get("ownerReferences") or [] if ref.get("kind") == "Pod"]
            said = next((verdicts[uid] for uid in owners if uid in verdicts), "")
            pending.append(f"claim {name}" + (f" ({said})" if said else ""))
            continue
        users = [f"{metadata.get('namespace', 'default')}/{r.get('name')}" for r in status.get("reservedFor") or []]
        for result in ours:
            usage = cards.get((str(result.get("pool", "")), str(result.get("device", ""))))
            if usage is None:
                continue
            consumed = result.get("consumedCapacity") or {}
            usage.memory_mb += _whole(consumed.get(dra.MEMORY, 0))
            usage.cores += _whole(consumed.get(dra.CORES, 0))
            usage.pods.extend(user for user in users or [f"claim {name}"] if user not in usage.pods)
    return TenantReport(tenant, list(cards.values()), pending, placed_by="kube-scheduler's DRA allocator")
