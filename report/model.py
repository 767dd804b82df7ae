"""Who uses which card: built from node objects (register annotation) and pod objects (allocations).

Both annotations are read by hami/annotations.py, and a pod's cards counted as the tenant's HAMi release counts them
(hami/usage.py `pod_use`, as the checker's live usage does: under v2.10.0 a running pod's init containers at their
peak, not added to its app containers). An annotation HAMi did not write is not guessed at: the report says which
(`TenantReport.unreadable`) and counts the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hami.annotations import ALLOCATED, REGISTER, AnnotationError, annotations_of, parse_register
from hami.releases import rules_for
from hami.usage import pod_use, read_allocation
from model.hami_releases import DEFAULT_VERSION

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class RegisteredCard:
    id: str
    type: str
    memory_mb: int
    cores: int
    split_count: int


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
    unreadable: list[str] = field(default_factory=list)  # annotations HAMi did not write: not counted, and why


def registered_cards(value: str) -> list[RegisteredCard]:
    """The cards of a node's register annotation; AnnotationError for one HAMi did not write."""
    return [
        RegisteredCard(device.id, device.type, device.devmem, device.devcore, device.count)
        for device in parse_register(value)
    ]


def tenant_report(
    tenant: str,
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    hami_version: str = DEFAULT_VERSION,
) -> TenantReport:
    """The tenant's cards and their use, as its HAMi release (`hami_version`, the tenant's hamiVersion) counts it."""
    rules = rules_for(hami_version)
    cards: dict[str, CardUsage] = {}
    unreadable = []
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "?")
        value = annotations_of(node).get(REGISTER)
        if not value:
            continue
        try:
            found = registered_cards(str(value))
        except AnnotationError as error:
            unreadable.append(f"node {name}: {error} (its cards are not shown)")
            continue
        for card in found:
            cards[card.id] = CardUsage(card, name)
    pending = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        value = annotations_of(pod).get(ALLOCATED)
        if not value:
            if _asks_for_gpu(pod):
                pending.append(name)
            continue
        try:
            allocation = read_allocation(pod, str(value), rules)
        except AnnotationError as error:
            unreadable.append(f"pod {name}: {error} (not counted)")
            continue
        for card, (_, memory, cores) in pod_use(pod, allocation).cards.items():
            usage = cards.get(card)
            if usage is None:
                continue  # a card this node no longer registers
            usage.memory_mb += memory
            usage.cores += cores
            if name not in usage.pods:
                usage.pods.append(name)
    return TenantReport(tenant, list(cards.values()), pending, unreadable=unreadable)


def _asks_for_gpu(pod: Mapping[str, Any]) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = ((container.get("resources") or {}).get("limits")) or {}
        if any(key.startswith("nvidia.com/") for key in limits):
            return True
    return False
