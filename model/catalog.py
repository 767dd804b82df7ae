"""GPU catalog: what HAMi registers for a card model, and the node register annotation built from it.

The annotation format is HAMi's `[]*DeviceInfo` JSON (`pkg/device/devices.go`, read by chart >= 2.8.0):
numbers as JSON numbers, `health: true`, `mode: hami-core`, a unique `id`, and a `type` that contains
`NVIDIA` (HAMi keeps a card only if its type contains the request type: v2.8.3 pkg/scheduler/score.go
`getNodeResources`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hami.annotations import REGISTER, RegisteredDevice, format_register

# HAMi's default deviceSplitCount (chart values.yaml): at most this many containers share one card (v2.8.3
# pkg/device/nvidia/device.go `Fit`, CardTimeSlicingExhausted).
DEFAULT_SPLIT_COUNT = 10
CORES_PER_CARD = 100
# Upper bounds, far above any lab or real node, so that a typo cannot make gpulab (or the policy
# pack) build millions of objects: cards per node, containers sharing a card, replicas of a workload.
MAX_CARDS = 64
MAX_SPLIT_COUNT = 100
MAX_REPLICAS = 10_000
MAX_TENANTS = 100

REGISTER_ANNOTATION = REGISTER  # hami/annotations.py: its key, reader and writer
GPU_RESOURCE = "nvidia.com/gpu"
GPUMEM_RESOURCE = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE_RESOURCE = "nvidia.com/gpumem-percentage"
GPUCORES_RESOURCE = "nvidia.com/gpucores"


@dataclass(frozen=True)
class GpuModel:
    """A card model as HAMi's NVIDIA plugin reports it: memory in MB, the NVML name prefixed `NVIDIA-`."""

    type: str
    memory_mb: int


GPU_CATALOG: dict[str, GpuModel] = {
    "A100-80GB": GpuModel(type="NVIDIA-A100-SXM4-80GB", memory_mb=81920),
    "A100-40GB": GpuModel(type="NVIDIA-A100-SXM4-40GB", memory_mb=40960),
    "H100-80GB": GpuModel(type="NVIDIA-H100-80GB-HBM3", memory_mb=81920),
    "L40S": GpuModel(type="NVIDIA-L40S", memory_mb=49152),
    "L4": GpuModel(type="NVIDIA-L4", memory_mb=24576),
    "A10": GpuModel(type="NVIDIA-A10", memory_mb=24576),
    "T4": GpuModel(type="NVIDIA-Tesla-T4", memory_mb=16384),
}


@dataclass(frozen=True)
class Card:
    """One simulated card on one node."""

    id: str
    index: int
    type: str
    memory_mb: int
    cores: int = CORES_PER_CARD
    split_count: int = DEFAULT_SPLIT_COUNT


def expand_cards(tenant: str, models: list[tuple[str, int]], split_count: int = DEFAULT_SPLIT_COUNT) -> list[Card]:
    """Cards for (model, count) pairs, ids unique per tenant and stable across runs."""
    cards: list[Card] = []
    for model, count in models:
        entry = GPU_CATALOG[model]
        for _ in range(count):
            index = len(cards)
            cards.append(
                Card(
                    id=f"GPU-MOCK-{tenant}-{index}",
                    index=index,
                    type=entry.type,
                    memory_mb=entry.memory_mb,
                    split_count=split_count,
                )
            )
    return cards


def register_annotation(cards: list[Card]) -> str:
    """The value of `hami.io/node-nvidia-register`: compact JSON, fixed key order, so it is byte-stable
    (hami/annotations.py `format_register`)."""
    return format_register(
        [
            RegisteredDevice(card.id, card.index, card.split_count, card.memory_mb, card.cores, card.type, 0,
                             "hami-core", True)
            for card in cards
        ]
    )  # fmt: skip


def gpu_capacity(cards: list[Card]) -> int:
    """Node capacity `nvidia.com/gpu`: the sum of split counts, as HAMi's real plugin advertises it."""
    return sum(card.split_count for card in cards)


def totals(cards: list[Card]) -> dict[str, int]:
    """What the mock device plugin advertises from the annotation (mock-device-plugin v1.0.1
    internal/pkg/api/device/nvidia/device.go)."""
    return {
        GPU_RESOURCE: gpu_capacity(cards),
        GPUMEM_RESOURCE: sum(card.memory_mb for card in cards),
        GPUCORES_RESOURCE: sum(card.cores for card in cards),
        GPUMEM_PERCENTAGE_RESOURCE: 100 * len(cards),
    }
