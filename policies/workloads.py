"""GPU requests read from Kubernetes workload objects, normalised the way HAMi's webhook does.

Works on the API (camelCase) form that CrossGuard passes as `props` and that YAML manifests hold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE
from policies.gpu_fit import ContainerRequest, PodRequest

GPU, GPUMEM, GPUMEM_PERCENTAGE, GPUCORES = GPU_RESOURCE, GPUMEM_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUCORES_RESOURCE
HAMI_RESOURCES = (GPU, GPUMEM, GPUMEM_PERCENTAGE, GPUCORES)
USE_GPUTYPE = "nvidia.com/use-gputype"
NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"

# kind -> path from the object to its pod spec and pod metadata (the pod template for controllers).
POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# Pulumi type tokens of those kinds.
RESOURCE_TYPES = {
    "kubernetes:core/v1:Pod": "Pod",
    "kubernetes:apps/v1:Deployment": "Deployment",
    "kubernetes:apps/v1:StatefulSet": "StatefulSet",
    "kubernetes:apps/v1:DaemonSet": "DaemonSet",
    "kubernetes:apps/v1:ReplicaSet": "ReplicaSet",
    "kubernetes:batch/v1:Job": "Job",
    "kubernetes:batch/v1:CronJob": "CronJob",
}

_QUANTITY = re.compile(r"^([0-9.]+)(k|M|G|Ki|Mi|Gi)?$")
_SUFFIX = {None: 1, "k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


class WorkloadError(ValueError):
    """A workload whose GPU request cannot be read."""


def quantity(value: Any, where: str) -> int:
    """A whole-number Kubernetes quantity ('20000', 20000, 20000.0, '1k')."""
    if isinstance(value, bool):
        raise WorkloadError(f"{where}: {value!r} is not a quantity")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _QUANTITY.match(str(value).strip())
        if not match:
            raise WorkloadError(f"{where}: {value!r} is not a whole-number quantity")
        number = float(match.group(1)) * _SUFFIX[match.group(2)]
    if number < 0 or not math.isfinite(number) or number != int(number):
        raise WorkloadError(f"{where}: {value!r} is not a whole, non-negative number")
    return int(number)


@dataclass(frozen=True)
class Workload:
    kind: str
    name: str
    namespace: str | None
    labels: Mapping[str, str]
    replicas: int
    pods: tuple[PodRequest, ...]  # one per replica; empty when it asks for no GPU

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.namespace or 'default'}/{self.name}"


def _dig(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def container_request(container: Mapping[str, Any], where: str) -> ContainerRequest | None:
    """HAMi's view of one container's request (pkg/device/nvidia/device.go, webhook.go), or None."""
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    asked = {name: limits.get(name, requests.get(name)) for name in HAMI_RESOURCES}
    asked = {name: value for name, value in asked.items() if value is not None}
    if not asked:
        return None
    name = container.get("name", "?")
    read = {key: quantity(value, f"{where} container {name} {key}") for key, value in asked.items()}
    # Only gpumem/gpucores/percentage: the webhook adds nvidia.com/gpu: 1 (defaultGPUNum).
    nums = read.get(GPU, 1)
    if nums < 1:
        raise WorkloadError(f"{where} container {name}: {GPU} = {nums}, but it asks for GPU memory or cores")
    memory = read.get(GPUMEM)
    percentage = read.get(GPUMEM_PERCENTAGE)
    if percentage is not None and not 0 < percentage <= 100:
        raise WorkloadError(f"{where} container {name}: {GPUMEM_PERCENTAGE} = {percentage}, must be 1..100")
    if memory is None and percentage is None:
        percentage = 100  # defaultMemory 0: the whole card's memory
    cores = read.get(GPUCORES)
    if cores is None:
        # HAMi >= 2.7: a GPU asked without cores, with no memory or 100 %, takes a card exclusively.
        cores = 100 if memory is None and (percentage or 100) == 100 else 0
    cores = min(cores, 100)
    return ContainerRequest(
        name=name,
        nums=nums,
        memory_mb=memory,
        memory_percentage=percentage or 100,
        cores=cores,
    )


def _types(annotations: Mapping[str, str], key: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(annotations.get(key, "")).split(",") if part.strip())


def read_workload(kind: str, obj: Mapping[str, Any], default_namespace: str | None = None) -> Workload | None:
    """A workload of a known kind, with one PodRequest per replica; None for other kinds."""
    if kind not in POD_TEMPLATE_PATHS:
        return None
    metadata = obj.get("metadata") or {}
    name = metadata.get("name") or "<unnamed>"
    namespace = metadata.get("namespace") or default_namespace
    template = _dig(obj, POD_TEMPLATE_PATHS[kind]) if POD_TEMPLATE_PATHS[kind] else obj
    pod_spec = (template or {}).get("spec") or {}
    pod_metadata = (template or {}).get("metadata") or {}
    annotations = {**(metadata.get("annotations") or {}), **(pod_metadata.get("annotations") or {})}
    where = f"{kind}/{name}"
    containers = tuple(
        request
        for container in pod_spec.get("containers") or []
        if (request := container_request(container, where)) is not None
    )
    init_containers = tuple(
        request
        for container in pod_spec.get("initContainers") or []
        if (request := container_request(container, where)) is not None
    )
    replicas = replica_count(kind, obj)
    labels = {**(pod_metadata.get("labels") or {}), **(metadata.get("labels") or {})}
    if not containers and not init_containers:
        return Workload(kind, name, namespace, labels, replicas, ())
    pods = tuple(
        PodRequest(
            workload=f"{kind}/{namespace or 'default'}/{name}" + (f"#{i + 1}" if replicas > 1 else ""),
            namespace=namespace or "default",
            containers=containers,
            init_containers=init_containers,
            use_types=_types(annotations, USE_GPUTYPE),
            nouse_types=_types(annotations, NOUSE_GPUTYPE),
        )
        for i in range(replicas)
    )
    return Workload(kind, name, namespace, labels, replicas, pods)


def replica_count(kind: str, obj: Mapping[str, Any]) -> int:
    """Pods that run at once: replicas for Deployment/StatefulSet/ReplicaSet, parallelism for Jobs."""
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        value = spec.get("replicas", 1)
    elif kind == "Job":
        value = spec.get("parallelism", 1)
    elif kind == "CronJob":
        value = _dig(spec, ("jobTemplate", "spec", "parallelism")) or 1
    else:  # Pod; a DaemonSet runs one pod on each node, and each tenant has one GPU node
        value = 1
    return quantity(value if value is not None else 1, f"{kind} replicas")


# HAMi reads these as plain counts (Quantity.Value(): pkg/device/nvidia/device.go), not as bytes or units.
_COUNT_MEANING = {
    GPUMEM: "a count of MB",
    GPUMEM_PERCENTAGE: "a percentage of each card's memory",
    GPUCORES: "a percentage of each card's cores",
    GPU: "a count of cards",
}


def unit_suffix_notes(obj: Any) -> list[str]:
    """Notes for HAMi resources written with a unit suffix (`nvidia.com/gpumem: 20Gi`), which Kubernetes
    accepts but HAMi reads as a plain number: 20Gi of gpumem asks for 21474836480 MB."""
    if not isinstance(obj, Mapping) or str(obj.get("kind")) not in POD_TEMPLATE_PATHS:
        return []
    path = POD_TEMPLATE_PATHS[str(obj.get("kind"))]
    template = _dig(obj, path) if path else obj
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return []
    notes = []
    for field_name in ("containers", "initContainers"):
        containers = spec.get(field_name)
        for container in containers if isinstance(containers, list) else []:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            for section in ("limits", "requests") if isinstance(resources, Mapping) else ():
                values = resources.get(section)
                for key, meaning in _COUNT_MEANING.items():
                    value = values.get(key) if isinstance(values, Mapping) else None
                    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
                    if not match or match.group(2) is None:
                        continue
                    plain = float(match.group(1)) * _SUFFIX[match.group(2)]
                    advice = f"; for {value} write {round(plain / 2**20)}" if key == GPUMEM and plain >= 2**20 else ""
                    notes.append(
                        f"container {container.get('name', '?')} {section} {key} = {value!r}: {key} is {meaning}, "
                        f"and HAMi reads {value!r} as the plain number {plain:.0f}{advice}"
                    )
    return notes
