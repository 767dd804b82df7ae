"""What a tenant's cards already hold, read from HAMi's allocation annotation on the tenant's pods.

HAMi's scheduler counts each placed pod's cards from `hami.io/vgpu-devices-allocated` (read by
hami/annotations.py, the one reader of it; scheduler.go `onAddPod` decodes that annotation only, not
`-to-allocate`), per release as hami/usage.py `pod_use` counts them: v2.10.0 a running pod's init containers at
their peak. A finished pod (Succeeded or Failed) no longer counts. The native `requests.nvidia.com/gpu` quota counts
every non-terminal pod's nvidia.com/gpu request, placed or not. Where a restarted HAMi scheduler would count a pod
otherwise (v2.10.0, its init containers finished), gpulab counts the app containers, as the running one does, and
says so (`LiveUsage.notes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hami.annotations import ALLOCATED, AnnotationError, annotations_of
from hami.cards import CardUse
from hami.releases import rules_for
from hami.usage import pod_use, read_allocation
from placement.inventory import NamespaceUsage, TenantInventory
from placement.workloads import GPU, WorkloadError, is_sidecar, pod_gpus, whole_quantity

FINISHED = ("Succeeded", "Failed")
REQUEST_TIMEOUT = 20  # seconds per API call: a hung API server cannot hang the checker


class LiveError(ValueError):
    """The live data cannot be read; the message says what and where."""


def restarted_note(name: str) -> str:
    return (
        f"note: pod {name}: its init containers have finished, so HAMi counts its app containers' cards only "
        "(scheduler.go onUpdatePod); a HAMi scheduler restarted since counts their peak again until the pod next "
        "changes (at most its hourly resync): counted here as app containers only"
    )


def _gpu_request(pod: Mapping[str, Any], where: str) -> int:
    """The pod's nvidia.com/gpu as the API server's quota counts it: the larger of its app containers' sum and its
    largest init container, a native sidecar beside the app containers and the init containers after it (Kubernetes'
    PodRequests: placement/workloads.py `pod_gpus`; a GPU init container runs only where HAMi places it, v2.10.0)."""
    spec = pod.get("spec") or {}
    app = [_container_gpus(container, where) for container in spec.get("containers") or []]
    init = [(_container_gpus(c, where), is_sidecar(c)) for c in spec.get("initContainers") or []]
    return pod_gpus(app, init)


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
    notes: tuple[str, ...] = ()  # where a restarted HAMi scheduler would count otherwise (`restarted_note`)


def current_usage(inventory: TenantInventory, pod_list: Mapping[str, Any]) -> TenantInventory:
    """The inventory with `card_usage` and `namespace_usage` taken from a PodList (`kubectl get pods -A -o json`)."""
    return live_usage(inventory, pod_list).inventory


def live_usage(inventory: TenantInventory, pod_list: Mapping[str, Any]) -> LiveUsage:
    """`current_usage`, with the notes on what it could not know (hami/usage.py `PodUse.after_restart`)."""
    rules = rules_for(inventory.hami_version)
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
        text = annotations_of(pod).get(ALLOCATED)
        if text:
            try:
                allocation = read_allocation(pod, str(text), rules)
            except AnnotationError as error:
                raise LiveError(f"pod {name}: {error}") from None
            for card in allocation.cards():
                if card not in index:
                    known = ", ".join(index) or "none"
                    raise LiveError(
                        f"pod {name} holds card {card}, which tenant {inventory.name} does not declare "
                        f"(declared: {known}); is this the right tenant and stack?"
                    )
            use = pod_use(pod, allocation)
            notes += [restarted_note(name)] if use.after_restart is not None else []
            for card, (slots, memory, cores) in use.cards.items():
                on_card = cards[index[card]]
                on_card.slots += slots
                on_card.memory_mb += memory
                on_card.cores += cores
                held += NamespaceUsage(memory, cores)
        namespaces[namespace] = namespaces.get(namespace, NamespaceUsage()) + held
    usage = {ns: held for ns, held in namespaces.items() if held != NamespaceUsage()}
    return LiveUsage(replace(inventory, card_usage=tuple(cards), namespace_usage=usage), tuple(notes))


def fetch_pod_list(kubeconfig: Mapping[str, Any]) -> dict[str, Any]:
    """Every pod of the tenant, through its admin kubeconfig (kept in memory, never written to disk)."""
    from kubernetes import client

    from boundary.kube_client import api_client

    try:
        api = client.CoreV1Api(api_client(dict(kubeconfig)))
        pods = api.list_pod_for_all_namespaces(_request_timeout=REQUEST_TIMEOUT)
    except Exception as error:
        raise LiveError(f"cannot list the tenant's pods ({type(error).__name__}: {str(error)[:200]})") from None
    return client.ApiClient().sanitize_for_serialization(pods)


def fetch_claim_list(kubeconfig: Mapping[str, Any]) -> dict[str, Any]:
    """Every ResourceClaim of the tenant (resource.k8s.io/v1), through its admin kubeconfig (kept in memory)."""
    from kubernetes import client

    from boundary.kube_client import api_client

    try:
        custom = client.CustomObjectsApi(api_client(dict(kubeconfig)))
        return custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceclaims", _request_timeout=REQUEST_TIMEOUT
        )
    except Exception as error:
        raise LiveError(f"cannot list the tenant's claims ({type(error).__name__}: {str(error)[:200]})") from None
