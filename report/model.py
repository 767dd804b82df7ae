"""Who uses which card: built from node objects (register annotation) and pod objects (allocations)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from report.annotations import ALLOCATED, REGISTER, RegisteredCard, parse_allocation, parse_register

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class CardUsage:
    card: RegisteredCard
    node: str
    memory_mb: int = 0
    cores: int = 0
    pods: list[str] = field(default_factory=list)


@dataclass
class TenantReport:
    tenant: str
    cards: list[CardUsage]
    pending: list[str]  # GPU pods HAMi has not placed (a DRA tenant: claims not allocated)
    placed_by: str = "HAMi"


def tenant_report(tenant: str, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> TenantReport:
    cards: dict[str, CardUsage] = {}
    for node in nodes:
        metadata = node.get("metadata") or {}
        value = (metadata.get("annotations") or {}).get(REGISTER)
        if value:
            for card in parse_register(value):
                cards[card.id] = CardUsage(card, metadata.get("name", "?"))
    pending = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        value = (metadata.get("annotations") or {}).get(ALLOCATED)
        if not value:
            if _asks_for_gpu(pod):
                pending.append(name)
            continue
        for allocation in parse_allocation(value):
            usage = cards.get(allocation.card_id)
            if usage is None:
                continue  # a card this node no longer registers
            usage.memory_mb += allocation.memory_mb
            usage.cores += allocation.cores
            if name not in usage.pods:
                usage.pods.append(name)
    return TenantReport(tenant, list(cards.values()), pending)


def _asks_for_gpu(pod: Mapping[str, Any]) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = ((container.get("resources") or {}).get("limits")) or {}
        if any(key.startswith("nvidia.com/") for key in limits):
            return True
    return False
