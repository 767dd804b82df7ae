"""What a tenant's cards already hold, read from HAMi's allocation annotation on the tenant's pods.

HAMi records each placed pod's cards in `hami.io/vgpu-devices-allocated` (`hami.io/vgpu-devices-to-allocate`
while it is being bound): `UUID,NVIDIA,<MB>,<cores>:` per card and `;` per container
(HAMi v2.8.3 pkg/device/devices.go `EncodePodSingleDevice`). A finished pod (Succeeded or
Failed) no longer counts. The native `requests.nvidia.com/gpu` quota counts every non-terminal pod's
nvidia.com/gpu request, placed or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hami.cards import CardUse
from placement.inventory import NamespaceUsage, TenantInventory
from placement.workloads import GPU, WorkloadError, whole_quantity

ALLOCATED = "hami.io/vgpu-devices-allocated"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
FINISHED = ("Succeeded", "Failed")
REQUEST_TIMEOUT = 20  # seconds per API call: a hung API server cannot hang the checker


class LiveError(ValueError):
    """The live data cannot be read; the message says what and where."""


@dataclass(frozen=True)
class Allocation:
    pod: str  # namespace/name
    card: str
    memory_mb: int
    cores: int


def parse_allocation(text: str, pod: str) -> list[Allocation]:
    """HAMi's device annotation as one Allocation per (container, card)."""
    found = []
    for container in text.split(";"):
        for device in container.split(":"):
            if not device.strip():
                continue
            fields = device.split(",")
            if len(fields) < 4:
                raise LiveError(f"pod {pod}: {ALLOCATED} entry {device!r} is not UUID,TYPE,MB,CORES")
            try:
                memory, cores = int(fields[2]), int(fields[3])
            except ValueError:
                raise LiveError(f"pod {pod}: {ALLOCATED} entry {device!r} has non-numeric MB or cores") from None
            found.append(Allocation(pod, fields[0], memory, cores))
    return found


def _gpu_request(pod: Mapping[str, Any], where: str) -> int:
    """The pod's nvidia.com/gpu as the API server's quota counts it: the larger of its app containers' sum and its
    largest init container (Kubernetes' PodRequests; a GPU init container runs only where HAMi places it, v2.10.0)."""
    spec = pod.get("spec") or {}
    app = [_container_gpus(container, where) for container in spec.get("containers") or []]
    init = [_container_gpus(container, where) for container in spec.get("initContainers") or []]
    return max(sum(app), max(init, default=0))


def _container_gpus(container: Mapping[str, Any], where: str) -> int:
    resources = container.get("resources") or {}
    value = (resources.get("requests") or {}).get(GPU, (resources.get("limits") or {}).get(GPU))
    if value is None:
        return 0
    try:
        return whole_quantity(value, f"{where} {GPU}")
    except WorkloadError as error:
        raise LiveError(str(error)) from None


def current_usage(inventory: TenantInventory, pod_list: Mapping[str, Any]) -> TenantInventory:
    """The inventory with `card_usage` and `namespace_usage` taken from a PodList (`kubectl get pods -A -o json`)."""
    if not isinstance(pod_list, Mapping) or not isinstance(pod_list.get("items"), list):
        raise LiveError("expected a PodList (`kubectl get pods -A -o json`): an object with `items`")
    index = {card.id: i for i, card in enumerate(inventory.cards)}
    cards = [CardUse() for _ in inventory.cards]
    namespaces: dict[str, NamespaceUsage] = {}
    for pod in pod_list["items"]:
        if not isinstance(pod, Mapping):
            raise LiveError("a PodList item is not an object")
        metadata = pod.get("metadata") or {}
        name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
        if (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        namespace = str(metadata.get("namespace", "default"))
        held = NamespaceUsage(gpus=_gpu_request(pod, f"pod {name}"))
        annotations = metadata.get("annotations") or {}
        text = annotations.get(ALLOCATED) or annotations.get(TO_ALLOCATE)
        for allocation in parse_allocation(str(text), name) if text else ():
            if allocation.card not in index:
                known = ", ".join(index) or "none"
                raise LiveError(
                    f"pod {name} holds card {allocation.card}, which tenant {inventory.name} does not declare "
                    f"(declared: {known}); is this the right tenant and stack?"
                )
            use = cards[index[allocation.card]]
            use.slots += 1
            use.memory_mb += allocation.memory_mb
            use.cores += allocation.cores
            held += NamespaceUsage(allocation.memory_mb, allocation.cores)
        namespaces[namespace] = namespaces.get(namespace, NamespaceUsage()) + held
    usage = {ns: held for ns, held in namespaces.items() if held != NamespaceUsage()}
    return replace(inventory, card_usage=tuple(cards), namespace_usage=usage)


def fetch_pod_list(kubeconfig: Mapping[str, Any]) -> dict[str, Any]:
    """Every pod of the tenant, through its admin kubeconfig (kept in memory, never written to disk)."""
    from kubernetes import client

    from model.kube_client import api_client

    try:
        api = client.CoreV1Api(api_client(dict(kubeconfig)))
        pods = api.list_pod_for_all_namespaces(_request_timeout=REQUEST_TIMEOUT)
    except Exception as error:
        raise LiveError(f"cannot list the tenant's pods ({type(error).__name__}: {str(error)[:200]})") from None
    return client.ApiClient().sanitize_for_serialization(pods)


def fetch_claim_list(kubeconfig: Mapping[str, Any]) -> dict[str, Any]:
    """Every ResourceClaim of the tenant (resource.k8s.io/v1), through its admin kubeconfig (kept in memory)."""
    from kubernetes import client

    from model.kube_client import api_client

    try:
        custom = client.CustomObjectsApi(api_client(dict(kubeconfig)))
        return custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceclaims", _request_timeout=REQUEST_TIMEOUT
        )
    except Exception as error:
        raise LiveError(f"cannot list the tenant's claims ({type(error).__name__}: {str(error)[:200]})") from None
