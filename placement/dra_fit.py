"""Where kube-scheduler's DRA allocator puts a DRA tenant's claims on its cards (gpuSharing: dra, model/dra.py):
each claim in turn, on the first node, then the first devices of it, whose free capacity holds what the claim
consumes of each (kubernetes v1.36.4, DRAConsumableCapacity: a request's capacity, else the device's
`requestPolicy.default`: a whole card's memory, no cores). Nothing here is HAMi's: no slot limit, no exclusive use
(model/dra.py names the differences). With several GPU nodes kube-scheduler may pick another node than the first
one that fits (its score ties are broken at random), so a placement is a prediction there; whether a claim fits
anywhere is not. tests/real/test_dra_allocation.py holds the model against the real allocator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class Card(Protocol):
    """A card as the catalog (model/catalog.py Card) and an inventory (hami/cards.py CardSpec) both give it."""

    @property
    def id(self) -> str: ...
    @property
    def memory_mb(self) -> int: ...
    @property
    def cores(self) -> int: ...


@dataclass
class Device:
    node: str
    card: Card
    used_memory_mb: int = 0
    used_cores: int = 0

    @property
    def free(self) -> tuple[int, int]:
        return self.card.memory_mb - self.used_memory_mb, self.card.cores - self.used_cores


@dataclass(frozen=True)
class ClaimAsk:
    """What one claim asks: `count` devices, each with `memory_mb` MB (None: the whole card) and `cores` %."""

    label: str
    count: int = 1
    memory_mb: int | None = None
    cores: int | None = None

    def consumes(self, card: Card) -> tuple[int, int]:
        return (card.memory_mb if self.memory_mb is None else self.memory_mb), self.cores or 0


@dataclass
class Allocation:
    ask: ClaimAsk
    devices: list[Device] = field(default_factory=list)  # empty: not allocated (the pod stays Pending)


Used = dict[str, tuple[int, int]]  # card id -> (MB, %) the claims allocated now consume of it


def allocate(nodes: list[tuple[str, list[Card]]], asks: list[ClaimAsk], used: Used | None = None) -> list[Allocation]:
    """Each ask in order on the devices of `nodes` (in order), the capacity it consumes committed before the next;
    `used`: what claims allocated before them (a live cluster's) already consume of each card."""
    used = used or {}
    devices = {name: [Device(name, card, *used.get(card.id, (0, 0))) for card in cards] for name, cards in nodes}
    found = []
    for ask in asks:
        allocation = Allocation(ask)
        for on_node in devices.values():
            chosen = []
            for device in on_node:
                memory, cores = ask.consumes(device.card)
                free_memory, free_cores = device.free
                if memory <= free_memory and cores <= free_cores:
                    chosen.append(device)
                    if len(chosen) == ask.count:
                        break
            if len(chosen) == ask.count:
                for device in chosen:
                    memory, cores = ask.consumes(device.card)
                    device.used_memory_mb += memory
                    device.used_cores += cores
                allocation.devices = chosen
                break
        found.append(allocation)
    return found


def free_now(
    nodes: list[tuple[str, list[Card]]], allocations: list[Allocation], before: Used | None = None
) -> list[tuple[Card, int, int]]:
    """Each card with the memory (MB) and cores (%) the allocations (and what `before` holds) leave free."""
    used: dict[str, list[int]] = {card_id: list(held) for card_id, held in (before or {}).items()}
    for allocation in allocations:
        for device in allocation.devices:
            memory, cores = allocation.ask.consumes(device.card)
            entry = used.setdefault(device.card.id, [0, 0])
            entry[0] += memory
            entry[1] += cores
    return [
        (card, card.memory_mb - used.get(card.id, [0, 0])[0], card.cores - used.get(card.id, [0, 0])[1])
        for _, cards in nodes
        for card in cards
    ]
