"""The rules between a tenant's own keys: one function per rule, named for what it refuses, each giving the
problems it finds as Checks (the keys it reads, the key and value it is about, the message naming the fix).
Tenant.checks() runs TENANT_RULES in order; a key's messages appear in that order. The rules read a tenant
through TenantKeys, what they need of it, so this module does not import the Tenant model that runs them."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Literal, NamedTuple, Protocol

from model.config.errors import NO_VALUE
from model.config.fields import (
    MAX_CARDS_PER_TENANT,
    NODE_POD_PREFIX,
    GpuCards,
    GpuNode,
    GpuQuota,
    NodeCards,
    PodLimits,
    SshWorker,
    Workload,
)
from model.config.nodes import TenantNode


class TenantKeys(Protocol):
    """What the rules read of a tenant (model/config/tenant.py's Tenant has it)."""

    @property
    def pod_cidr(self) -> str: ...
    @property
    def service_cidr(self) -> str: ...
    @property
    def gpus(self) -> list[GpuCards] | None: ...
    @property
    def nodes(self) -> list[GpuNode] | None: ...
    @property
    def worker_image(self) -> str | None: ...
    @property
    def namespaces(self) -> list[str]: ...
    @property
    def workloads(self) -> list[Workload]: ...
    @property
    def worker_mode(self) -> Literal["container", "ssh"]: ...
    @property
    def workers(self) -> list[SshWorker]: ...
    @property
    def gpu_mode(self) -> Literal["mock", "real"]: ...
    @property
    def gpu_sharing(self) -> Literal["hami", "dra"]: ...
    @property
    def quota(self) -> GpuQuota | None: ...
    @property
    def split_count(self) -> int: ...
    @property
    def limits(self) -> PodLimits: ...
    @property
    def model_fields_set(self) -> set[str]: ...
    @property
    def declared_nodes(self) -> list[TenantNode]: ...
    def worker_node_names(self) -> list[str]: ...
    def gpu_nodes(self) -> list[NodeCards]: ...


class Check(NamedTuple):
    """One problem of a tenant: the keys its rule reads (parse_config reports it even when another key of the
    tenant failed, unless it reads that one), the key it is about, its value, the message."""

    needs: frozenset[str]
    key: str
    value: object
    message: str


Rule = Callable[[TenantKeys], list[Check]]


def check(needs: str, key: str, value: object, message: str) -> Check:
    return Check(frozenset(needs.split()), key, value, message)


# --- ranges ------------------------------------------------------------------------------------------------


def pod_range_overlapping_service_range(t: TenantKeys) -> list[Check]:
    if not ipaddress.ip_network(t.pod_cidr).overlaps(ipaddress.ip_network(t.service_cidr)):
        return []
    message = (
        f"overlaps serviceCidr {t.service_cidr}; pick disjoint ranges, "
        "e.g. podCidr 10.244.0.0/16 and serviceCidr 10.96.0.0/16"
    )
    return [check("podCidr serviceCidr", "podCidr", t.pod_cidr, message)]


def worker_address_inside_a_range(t: TenantKeys) -> list[Check]:
    # The node's own address would be routed to pods (or taken by kube-proxy for services).
    found = []
    for j, worker in enumerate(t.workers if t.worker_mode == "ssh" else []):
        for key, cidr in (("podCidr", t.pod_cidr), ("serviceCidr", t.service_cidr)):
            network = ipaddress.ip_network(cidr)
            if worker.address is not None and worker.address in network:
                message = (
                    f"is inside the tenant's {key} {network}, so the tenant would route the node's own address "
                    f"into the cluster; pick a {key} that does not hold any worker's address"
                )
                found.append(check(f"{key} workers", f"workers[{j}].host", worker.host, message))
    return found


def pod_range_too_small_for_the_nodes(t: TenantKeys) -> list[Check]:
    ranges = 2 ** (NODE_POD_PREFIX - ipaddress.ip_network(t.pod_cidr).prefixlen)
    nodes = len(t.declared_nodes)
    if nodes <= ranges:
        return []
    message = f"holds {ranges} node pod ranges (/{NODE_POD_PREFIX} each) for {nodes} nodes; use a larger range"
    return [check("podCidr workers workerMode", "podCidr", t.pod_cidr, message)]


def workload_names_repeated(t: TenantKeys) -> list[Check]:
    names = [workload.name for workload in t.workloads]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if not duplicates:
        return []
    return [check("workloads", "workloads", NO_VALUE, f"duplicate names {duplicates}; give each workload its own name")]


# --- workers -----------------------------------------------------------------------------------------------


def ssh_without_workers(t: TenantKeys) -> list[Check]:
    if t.worker_mode != "ssh" or t.workers:
        return []
    message = "workerMode ssh needs workers: [{host: 10.0.0.21, user: ubuntu}] (the machines to join)"
    return [check("workerMode workers", "workers", NO_VALUE, message)]


def several_gpu_node_marks(t: TenantKeys) -> list[Check]:
    if t.worker_mode != "ssh" or sum(1 for worker in t.workers if worker.gpu_node) <= 1:
        return []
    message = "mark at most one worker gpuNode: true (it carries the declared gpus)"
    return [check("workers", "workers", NO_VALUE, message)]


def worker_image_for_ssh_workers(t: TenantKeys) -> list[Check]:
    if t.worker_mode != "ssh" or t.worker_image is None:
        return []
    message = "is for workerMode container; ssh workers bring their kubelet"
    return [check("workerMode workerImage", "workerImage", t.worker_image, message)]


def ssh_node_names_repeated(t: TenantKeys) -> list[Check]:
    names = t.worker_node_names()
    if t.worker_mode != "ssh" or len(set(names)) == len(names):
        return []
    return [check("workers", "workers", NO_VALUE, f"node names {names} are not unique; set `name` on each")]


def workers_without_ssh(t: TenantKeys) -> list[Check]:
    if t.worker_mode == "ssh" or not t.workers:
        return []
    message = "are only for workerMode: ssh; remove them or set workerMode: ssh"
    return [check("workerMode workers", "workers", NO_VALUE, message)]


# --- where the cards are: which spellings the stack file may combine (model/config/nodes.py) ---------------

PLACEMENT = "gpus nodes workers workerMode"


def _workers_with_gpus(t: TenantKeys) -> bool:
    return any(worker.gpus is not None for worker in t.workers)


def gpus_beside_nodes(t: TenantKeys) -> list[Check]:
    if t.gpus is None or t.nodes is None:
        return []
    message = "give either gpus (one GPU node) or nodes (several), not both; move gpus into nodes"
    return [check(PLACEMENT, "nodes", NO_VALUE, message)]


def nodes_with_ssh_workers(t: TenantKeys) -> list[Check]:
    if t.nodes is None or t.worker_mode != "ssh":
        return []
    message = "are kindest/node containers; with workerMode ssh give each GPU worker its own gpus"
    return [check(PLACEMENT, "nodes", NO_VALUE, message)]


def gpus_beside_worker_gpus(t: TenantKeys) -> list[Check]:
    if t.gpus is None or not _workers_with_gpus(t):
        return []
    message = "is the one GPU worker's cards; with workers[].gpus set, give every GPU worker its own gpus instead"
    return [check(PLACEMENT, "gpus", NO_VALUE, message)]


def gpu_node_mark_beside_worker_gpus(t: TenantKeys) -> list[Check]:
    if not _workers_with_gpus(t) or not any(worker.gpu_node for worker in t.workers):
        return []
    message = "gpuNode marks the worker that carries the tenant's gpus; with workers[].gpus drop it"
    return [check(PLACEMENT, "workers", NO_VALUE, message)]


def no_cards_declared(t: TenantKeys) -> list[Check]:
    if t.gpus is not None or t.nodes is not None or _workers_with_gpus(t):
        return []
    message = (
        "is required: the tenant's cards, e.g. [{model: L4, count: 1}] (or nodes: [{gpus: [...]}, ...] "
        "for several GPU nodes)"
    )
    return [check(PLACEMENT, "gpus", NO_VALUE, message)]


SPELLING_RULES: tuple[Rule, ...] = (
    gpus_beside_nodes,
    nodes_with_ssh_workers,
    gpus_beside_worker_gpus,
    gpu_node_mark_beside_worker_gpus,
    no_cards_declared,
)


def _spelled_once(t: TenantKeys) -> bool:
    """Whether the cards are declared one way only, so that the tenant's GPU nodes are the ones meant."""
    return not any(rule(t) for rule in SPELLING_RULES)


# --- the GPU nodes, once the cards are declared one way --------------------------------------------------


def gpu_node_names_repeated(t: TenantKeys) -> list[Check]:
    names = [node.name for node in t.gpu_nodes()] if _spelled_once(t) else []
    if len(set(names)) == len(names):
        return []
    return [check(PLACEMENT, "nodes", NO_VALUE, f"node names {names} are not unique; give each node its own name")]


def too_many_cards(t: TenantKeys) -> list[Check]:
    if not _spelled_once(t):
        return []
    gpu_nodes = [node for node in t.declared_nodes if node.gpus]
    cards = sum(len(node.cards) for node in t.gpu_nodes())
    if cards <= MAX_CARDS_PER_TENANT:
        return []
    message = f"declares {cards} cards; a tenant holds at most {MAX_CARDS_PER_TENANT} across its GPU nodes"
    return [check(PLACEMENT, gpu_nodes[0].declared_in, NO_VALUE, message)]


PLACEMENT_RULES: tuple[Rule, ...] = (*SPELLING_RULES, gpu_node_names_repeated, too_many_cards)


def largest_gpu_node(t: TenantKeys) -> int | None:
    """How many cards the tenant's largest GPU node has; None while where they are is refused, or when its one
    container has none (its cards are only on workers, which workers_without_ssh refuses)."""
    if any(rule(t) for rule in PLACEMENT_RULES):
        return None
    gpu_nodes = t.gpu_nodes()
    if not gpu_nodes and t.worker_mode == "container":
        return None
    return max((len(node.cards) for node in gpu_nodes), default=0)


# --- modes and workloads -----------------------------------------------------------------------------------


def real_gpus_in_containers(t: TenantKeys) -> list[Check]:
    if t.gpu_mode != "real" or t.worker_mode == "ssh":
        return []
    message = "gpuMode real needs real GPUs, so workerMode ssh; a kindest/node container has none (use gpuMode mock)"
    return [check("gpuMode workerMode", "gpuMode", t.gpu_mode, message)]


def workload_namespace_not_declared(t: TenantKeys) -> list[Check]:
    return [
        check(
            "workloads namespaces",
            f"workloads[{i}].namespace",
            workload.namespace,
            f"is not in namespaces {t.namespaces}; add it there so gpulab creates it with its quota",
        )
        for i, workload in enumerate(t.workloads)
        if workload.namespace is not None and workload.namespace not in t.namespaces
    ]


def workload_larger_than_every_gpu_node(t: TenantKeys) -> list[Check]:
    # HAMi never places a container that asks more cards than one node has (NodeInsufficientDevice).
    largest = largest_gpu_node(t)
    return [
        check(
            "workloads gpus nodes",
            f"workloads[{i}].gpus",
            workload.gpus,
            f"asks more cards than the tenant's largest GPU node has ({largest}); at most {largest}",
        )
        for i, workload in enumerate(t.workloads)
        if largest is not None and workload.gpus > largest
    ]


# --- DRA tenants: what DRA does not express ----------------------------------------------------------------

_HAMI_ONLY = "; remove it, or share the cards through HAMi (gpuSharing: hami)"


def dra_without_hamis_keys(t: TenantKeys) -> list[Check]:
    """A DRA tenant's keys that only HAMi gives meaning to (model/dra.py says what DRA does not express)."""
    if t.gpu_sharing != "dra":
        return []
    found = []
    quota = t.quota
    for key in ("gpumem", "gpucores"):
        if quota is not None and getattr(quota, key) is not None:
            found.append(
                check(
                    "gpuSharing quota",
                    f"quota.{key}",
                    getattr(quota, key),
                    "no ResourceQuota counts the capacity a DRA claim consumes, only its devices per class (the "
                    "ResourceClaim quota evaluator of kubernetes v1.36.4): quota.gpus is what a DRA tenant can cap"
                    + _HAMI_ONLY,
                )
            )
    if "split_count" in t.model_fields_set:
        message = "is HAMi's slot limit per card" + _HAMI_ONLY
        found.append(check("gpuSharing splitCount", "splitCount", t.split_count, message))
    if "limits" in t.model_fields_set:
        message = (
            "are gpulab's admission rules on pods' nvidia.com limits, which a DRA tenant's pods carry none of; remove "
            "them, or share the cards through HAMi (gpuSharing: hami)"
        )
        given = t.limits.model_dump(by_alias=True, exclude_unset=True)
        found.append(check("gpuSharing limits", "limits", given, message))
    found += [
        check(
            "gpuSharing workloads",
            f"workloads[{i}].gpumemPercentage",
            workload.gpumem_percentage,
            "is HAMi's; a DRA claim asks a card's memory in MB: use gpumem, or share the cards through HAMi "
            "(gpuSharing: hami)",
        )
        for i, workload in enumerate(t.workloads)
        if workload.gpumem_percentage is not None
    ]
    return found


TENANT_RULES: tuple[Rule, ...] = (
    pod_range_overlapping_service_range,
    worker_address_inside_a_range,
    pod_range_too_small_for_the_nodes,
    workload_names_repeated,
    ssh_without_workers,
    several_gpu_node_marks,
    worker_image_for_ssh_workers,
    ssh_node_names_repeated,
    workers_without_ssh,
    *PLACEMENT_RULES,
    real_gpus_in_containers,
    workload_namespace_not_declared,
    workload_larger_than_every_gpu_node,
    dra_without_hamis_keys,
)
