"""The parts of a tenant and what each gives the next, whatever wing builds it (components/wings.py picks the
stack's, once, for __main__.py; each wing's one entry is components/<wing>/lab.py).

    control plane  Kamaji's TenantControlPlane (docker/tenant_control_plane.py)
                   | local processes (process/control_plane.py)
    workers        kindest/node containers or SSH machines (docker/tenant_worker.py)
                   | KWOK nodes (process/kwok_workers.py) or node containers (process/node_container_workers.py)
    GPU node       HAMi's chart with the mock plugin (docker/mock_gpu_node.py) or real GPUs (docker/real_gpu_node.py)
                   | HAMi as a local process with the bind-time role (process/gpu_node.py)

Within one wing a part may ask more of the one before it (process mode's workers need the control plane's
folder); across wings, only what these protocols say. The tenant's own objects (admission, namespaces,
workloads) take the bundle, `TenantParts`, and never know the wing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pulumi
import pulumi_kubernetes as k8s

from model.catalog import Card
from model.config import NodeCards, Tenant


class TenantApi(Protocol):
    """A tenant's API server: its admin kubeconfig (secret), the address users reach, a provider on it, and
    the resource after which it answers."""

    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    provider: k8s.Provider
    api_ready: pulumi.Resource


class Workers(Protocol):
    """A tenant's nodes, registered and Ready; `node_name` carries the GPUs (the first GPU node)."""

    node_names: list[str]
    node_name: str
    node_ip: pulumi.Output[str]
    ready: pulumi.Resource


class TenantGpus(Protocol):
    """A tenant's cards as HAMi schedules them, each GPU node ready once HAMi has taken its cards in.
    `resource_name` and `former_type` name the component the tenant's namespaces were children of (aliases)."""

    resource_name: str
    former_type: str | None
    cards: list[Card]
    advertised: dict[str, int]
    readies: list[pulumi.Resource]


@dataclass(frozen=True)
class TenantParts:
    """One tenant's parts, built in order: what the tenant's own objects are created in and after."""

    tenant: Tenant
    control_plane: TenantApi
    workers: Workers
    gpus: TenantGpus


# What a wing's entry (components/<wing>/lab.py) returns once it has declared what its tenants share: how it builds
# one tenant's parts.
TenantBuilder = Callable[[Tenant], TenantParts]


def gpu_node_prefixes(resource_name: str, tenant: Tenant) -> list[tuple[str, NodeCards]]:
    """(resource name prefix, GPU node) per GPU node of a GPU node component: one node keeps the names it always
    had; with several, each name carries the node."""
    nodes = tenant.gpu_nodes()
    return [(f"{resource_name}-{node.name}" if len(nodes) > 1 else resource_name, node) for node in nodes]


def tenant_provider(
    name: str,
    parent: pulumi.Resource,
    kubeconfig: pulumi.Output[str],
    api_ready: pulumi.Resource,
    version: str | None = None,
) -> k8s.Provider:
    """The tenant's Kubernetes provider, once its API answers (every runtime's control plane). If the tenant API
    is gone (its control plane or the whole kind cluster deleted by hand, its processes killed), its objects are
    gone with it: destroy drops them from the state instead of failing on them. `version`: the provider plugin
    asked for, where it is not the SDK's own (None: the SDK's)."""
    return k8s.Provider(
        f"{name}-provider",
        kubeconfig=kubeconfig,
        delete_unreachable=True,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[api_ready], version=version),
    )
