"""What a tenant's cards already hold, read from HAMi's allocation annotation on the tenant's pods.

HAMi records each placed pod's cards in `hami.io/vgpu-devices-allocated` (`hami.io/vgpu-devices-to-allocate`
while it is being bound): `UUID,NVIDIA,<MB>,<cores>:` per card and `;` per container
(HAMi v2.8.3 pkg/device/devices.go `EncodePodSingleDevice`). A finished pod (Succeeded or
Failed) no longer counts. The native `requests.nvidia.com/gpu` quota counts every non-terminal pod's
nvidia.com/gpu request, placed or not.

How the release counts one pod's entries (`pod_use`):
- v2.8.3 allocates app containers only, one entry each: every entry counts, a slot each.
- v2.10.0 (tag v2.10.0, commit 4707fb02c91c) allocates init containers too and lists them first, one entry per
  container, empty ones kept (pkg/device/devices.go `Resourcereqs` 639-692, `DecodePodDevices` 529-556): the first
  len(spec.initContainers) entries are init containers'. When it rebuilds its usage from the annotation
  (pkg/scheduler/scheduler.go `onAddPod` 137-171) it counts per card the larger of the init containers' peak and the
  app containers' sum, for memory, cores and slots each (pkg/device/initContainer.go `CollapseInitContainerUsage`
  36-113; `getNodesUsage` 776-785 adds the slots), and so does its namespace quota (pkg/device/quota.go `AddUsage`
  119-134, `countPodDevices` 97-117). Once every init container has succeeded it counts the app containers only
  (`onUpdatePod` 204-222, `AppContainersOnlyDeviceUsage` 116-157; pkg/util/util.go `AllInitContainersSucceeded`
  162-172), but only from the pod's next change after it saw them: a scheduler restarted since reads the peak again
  (`onAddPod`), up to the pod's next update or the informer's hourly resync (scheduler.go `defaultResync`). gpulab
  counts the app containers then, and says so where the two differ (`LiveUsage.notes`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hami.cards import CardUse
from hami.nodes import collapsed_use
from hami.releases import rules_for
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
    container: int = 0  # the entry's position in the annotation (v2.10.0: init containers first)


def parse_allocation(text: str, pod: str) -> list[Allocation]:
    """HAMi's device annotation as one Allocation per (container, card)."""
    found = []
    for position, container in enumerate(text.split(";")):
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
            found.append(Allocation(pod, fields[0], memory, cores, position))
    return found


def init_containers_succeeded(pod: Mapping[str, Any]) -> bool:
    """v2.10.0 pkg/util/util.go `AllInitContainersSucceeded` (162-172): some init container status, and every one
    terminated with exit code 0."""
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or []
    return bool(statuses) and all(
        isinstance(s, Mapping)
        and isinstance((terminated := (s.get("state") or {}).get("terminated")), Mapping)
        and terminated.get("exitCode") == 0
        for s in statuses
    )


def pod_use(
    pod: Mapping[str, Any], allocations: Sequence[Allocation], init_counted: bool
) -> tuple[dict[Hashable, tuple[int, int, int]], str | None]:
    """What the release counts of one pod, per card (slots, MB, cores), and a note when a restarted HAMi scheduler
    would count otherwise (the module's docstring). `init_counted`: the release allocates init containers (v2.10.0's
    `Rules.init_containers_counted`); else every entry is an app container's, as v2.8.3 writes them."""
    init = len((pod.get("spec") or {}).get("initContainers") or []) if init_counted else 0
    entries = [(a.container < init, a.card, a.memory_mb, a.cores) for a in allocations]
    peak = collapsed_use(entries)
    if not init or not init_containers_succeeded(pod):
        return peak, None
    apps = collapsed_use([entry for entry in entries if not entry[0]])
    if apps == peak:
        return apps, None
    metadata = pod.get("metadata") or {}
    name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
    return apps, (
        f"note: pod {name}: its init containers have finished, so HAMi counts its app containers' cards only "
        "(scheduler.go onUpdatePod); a HAMi scheduler restarted since counts their peak again until the pod next "
        "changes (at most its hourly resync): counted here as app containers only"
    )


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


@dataclass(frozen=True)
class LiveUsage:
    inventory: TenantInventory  # with `card_usage` and `namespace_usage` as HAMi counts them now
    notes: tuple[str, ...] = ()  # where a restarted HAMi scheduler would count otherwise (`pod_use`)


def current_usage(inventory: TenantInventory, pod_list: Mapping[str, Any]) -> TenantInventory:
    """The inventory with `card_usage` and `namespace_usage` taken from a PodList (`kubectl get pods -A -o json`)."""
    return live_usage(inventory, pod_list).inventory


def live_usage(inventory: TenantInventory, pod_list: Mapping[str, Any]) -> LiveUsage:
    """`current_usage`, with the notes on what it could not know (`pod_use`)."""
    init_counted = rules_for(inventory.hami_version).init_containers_counted
    notes: list[str] = []
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
        allocations = parse_allocation(str(text), name) if text else []
        for allocation in allocations:
            if allocation.card not in index:
                known = ", ".join(index) or "none"
                raise LiveError(
                    f"pod {name} holds card {allocation.card}, which tenant {inventory.name} does not declare "
                    f"(declared: {known}); is this the right tenant and stack?"
                )
        per_card, note = pod_use(pod, allocations, init_counted)
        notes += [note] if note else []
        for card, (slots, memory, cores) in per_card.items():
            use = cards[index[str(card)]]
            use.slots += slots
            use.memory_mb += memory
            use.cores += cores
            held += NamespaceUsage(memory, cores)
        namespaces[namespace] = namespaces.get(namespace, NamespaceUsage()) + held
    usage = {ns: held for ns, held in namespaces.items() if held != NamespaceUsage()}
    return LiveUsage(replace(inventory, card_usage=tuple(cards), namespace_usage=usage), tuple(notes))


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
