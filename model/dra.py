"""A tenant's simulated cards as Dynamic Resource Allocation devices (resource.k8s.io/v1, Kubernetes v1.36.4), from
the same catalog entries as HAMi's register annotation (model/catalog.py), so a card's capacity means the same both
ways: its memory in MB as HAMi counts it, its cores in percent. Three of HAMi's card rules have no DRA counterpart
here: its slot limit (`split_count`, CardTimeSlicingExhausted), a 100 % cores request wanting the card alone
(ExclusiveDeviceAllocateConflict), and a 0 % request refused on a card whose cores are all taken
(CardComputeUnitsExhausted); DRA's allocator places such claims where HAMi would not.

Each card is one device that many claims may share (`allowMultipleAllocations`) and whose `memory` and `cores`
capacities a claim consumes (consumable capacity, KEP-5075: feature gate DRAConsumableCapacity, beta and on by
default from v1.36, kubernetes v1.36.4 pkg/features/kube_features.go). Field names and rules are those of
k8s.io/api v0.36.4 resource/v1/types.go: Device.AllowMultipleAllocations, Device.Capacity (DeviceCapacity: value,
requestPolicy), ExactDeviceRequest.Capacity.Requests.

A claim that names no memory takes the whole card's, and no cores, as HAMi gives a container that asks for neither
(HAMi v2.8.3: gpumem-percentage 100 by default, cores 0). The kube-scheduler of the tenant's own control plane is
the allocator: tests/real/test_dra_allocation.py lets it judge these objects.

A tenant with `gpuSharing: dra` gets these objects in process mode (components/process/dra.py): on KWOK nodes gpulab
creates the slices, on real nodes gpulab's DRA kubelet plugin publishes them and prepares the claims, its declared
workloads as pods with a claim each (model/kube_objects/workload_manifests.py) and `quota.gpus` as a cap on the devices
its claims ask of its class (the one thing a ResourceQuota counts of a claim).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.catalog import Card
from model.names import TENANT_LABEL
from model.quantity import canonical_whole

DRIVER = "gpu.gpulab.io"  # under gpulab's label prefix (model/names.py gpulab.io/...): no vendor's driver name
MEMORY = "memory"  # MB, as HAMi counts a card's memory
CORES = "cores"  # percent of one card's cores


def q(value: int) -> str:
    """A quantity as the API server writes it back (20000 as `20k`): a manifest that says it so is what a later
    read returns, so the engine sees no change where there is none (pulumi-kubernetes compares them as text)."""
    return canonical_whole(value)


def device_class_name(tenant: str) -> str:
    return f"gpulab-{tenant}-gpu"


def device_class(tenant: str) -> dict:
    """The tenant's class: the devices of gpulab's driver in the tenant's own pool only."""
    expression = f"device.driver == {DRIVER!r} && device.attributes[{DRIVER!r}].tenant == {tenant!r}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": device_class_name(tenant), "labels": {TENANT_LABEL: tenant}},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_name(card: Card) -> str:
    """A card's device name in its node's pool (the pool is the node)."""
    return f"gpu-{card.index}"


def _device(tenant: str, card: Card) -> dict:
    return {
        "name": device_name(card),
        "attributes": {
            "tenant": {"string": tenant},
            "uuid": {"string": card.id},
            "type": {"string": card.type},
        },
        "allowMultipleAllocations": True,
        "capacity": {
            MEMORY: {"value": q(card.memory_mb), "requestPolicy": {"default": q(card.memory_mb)}},
            CORES: {
                "value": q(card.cores),
                "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": q(card.cores)}},
            },
        },
    }


def resource_slice(tenant: str, node: str, cards: list[Card]) -> dict:
    """One node's cards, as the one slice of the node's pool."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}", "labels": {TENANT_LABEL: tenant}},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [_device(tenant, card) for card in cards],
        },
    }


def node_devices(tenant: str, node: str, cards: list[Card]) -> dict:
    """What a real node's DRA kubelet plugin publishes (tools/gpulab-dra-plugin: its devices file): the same devices
    as `resource_slice`, in the node's one pool. On a real node the driver publishes its slices itself: the kubelet
    removes a node's slices of any driver not registered with it (kubernetes v1.36.4
    pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, wipeResourceSlices)."""
    return {"driver": DRIVER, "node": node, "devices": [_device(tenant, card) for card in cards]}


def driver_results(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A claim's allocation results of gpulab's driver (status.allocation.devices.results, k8s.io/api v0.36.4
    resource/v1), as the API server returns them: none when the claim is not allocated (yet)."""
    status = claim.get("status") if isinstance(claim.get("status"), Mapping) else {}
    allocation = status.get("allocation") if isinstance(status.get("allocation"), Mapping) else {}
    devices = allocation.get("devices") if isinstance(allocation.get("devices"), Mapping) else {}
    results = devices.get("results") or []
    return [r for r in results if isinstance(r, Mapping) and r.get("driver") == DRIVER]


def devices_quota_key(tenant: str) -> str:
    """The ResourceQuota key counting the devices a namespace's claims ask of the tenant's class (kubernetes v1.36.4
    pkg/quota/v1/evaluator/core/resource_claims.go, V1ResourceByDeviceClass: one per device a request counts)."""
    return f"{device_class_name(tenant)}.deviceclass.resource.k8s.io/devices"


def claim_template(
    tenant: str, name: str, namespace: str, memory_mb: int | None, cores: int | None, count: int = 1
) -> dict:
    """A ResourceClaimTemplate asking `count` shared cards with `memory_mb` MB and `cores` percent of each: what a
    pod's `nvidia.com/gpu`, `nvidia.com/gpumem` and `nvidia.com/gpucores` limits ask of HAMi."""
    requests = {key: q(value) for key, value in ((MEMORY, memory_mb), (CORES, cores)) if value is not None}
    exactly: dict = {"deviceClassName": device_class_name(tenant), "allocationMode": "ExactCount", "count": count}
    if requests:
        exactly["capacity"] = {"requests": requests}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": {TENANT_LABEL: tenant}},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }
