"""Parsers for HAMi's node and pod annotations (HAMi v2.8.3 pkg/device/devices.go, pkg/util/types.go).

- node `hami.io/node-nvidia-register`: JSON list of devices (chart >= 2.8), e.g.
  `[{"id":"GPU-MOCK-tenant-a-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB",...}]`
- pod `hami.io/vgpu-devices-allocated`: `UUID,VENDOR,MEM,CORES:` per device, `;` per container, e.g.
  `GPU-MOCK-0,NVIDIA,20000,30:;` (one container, one card) or `A,NVIDIA,100,10:B,NVIDIA,100,10:;` (one
  container on two cards) or `A,NVIDIA,100,10:;A,NVIDIA,200,20:;` (two containers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from model.catalog import REGISTER_ANNOTATION as REGISTER

ALLOCATED = "hami.io/vgpu-devices-allocated"
ASSIGNED_NODE = "hami.io/vgpu-node"


class AnnotationError(ValueError):
    """An annotation that does not have HAMi's format."""


@dataclass(frozen=True)
class RegisteredCard:
    id: str
    type: str
    memory_mb: int
    cores: int
    split_count: int


@dataclass(frozen=True)
class DeviceAllocation:
    container: int  # index of the container in the pod
    card_id: str
    vendor: str
    memory_mb: int
    cores: int


def parse_register(value: str) -> list[RegisteredCard]:
    try:
        devices = json.loads(value)
    except json.JSONDecodeError as error:
        raise AnnotationError(f"{REGISTER} is not JSON: {error}") from None
    if not isinstance(devices, list):
        raise AnnotationError(f"{REGISTER} must be a JSON list of devices")
    cards = []
    for device in devices:
        try:
            cards.append(
                RegisteredCard(
                    id=str(device["id"]),
                    type=str(device.get("type", "")),
                    memory_mb=int(device.get("devmem", 0)),
                    cores=int(device.get("devcore", 0)),
                    split_count=int(device.get("count", 0)),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise AnnotationError(f"{REGISTER}: bad device entry {device!r}: {error}") from None
    return cards


def parse_allocation(value: str) -> list[DeviceAllocation]:
    allocations = []
    for container, part in enumerate(value.split(";")):
        for device in part.split(":"):
            if not device.strip():
                continue
            fields = device.split(",")
            if len(fields) != 4:
                raise AnnotationError(f"{ALLOCATED}: {device!r} is not UUID,VENDOR,MEM,CORES")
            card_id, vendor, memory, cores = fields
            try:
                allocations.append(DeviceAllocation(container, card_id, vendor, int(memory), int(cores)))
            except ValueError:
                raise AnnotationError(f"{ALLOCATED}: {device!r} has a non-numeric memory or cores field") from None
    return allocations
