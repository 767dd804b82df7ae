"""A tenant: its Kubernetes version and ranges, GPU nodes and cards, limits, quota, namespaces, workloads
and workers, with the checks between its own keys."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from model.catalog import (
    DEFAULT_SPLIT_COUNT,
    MAX_CARDS,
    MAX_SPLIT_COUNT,
    Card,
    expand_cards,
)
from model.config.errors import NO_VALUE, KeyedError
from model.config.fields import (
    DNS1123_LABEL,
    MAX_CARDS_PER_TENANT,
    MAX_GPU_NODES,
    MAX_NAMESPACES,
    MAX_SERVICE_PREFIX,
    MAX_WORKERS,
    MAX_WORKLOADS,
    NODE_POD_PREFIX,
    TENANT_NAME,
    ConfigModel,
    GpuCards,
    GpuNode,
    GpuQuota,
    NodeCards,
    PodLimits,
    SshWorker,
    Workload,
)
from model.image_ref import image_problem
from model.versions import parse_kubernetes_version


class Tenant(ConfigModel):
    name: str
    kubernetes_version: str = "v1.36.4"
    pod_cidr: str = "10.244.0.0/16"
    service_cidr: str = "10.96.0.0/16"
    # The cards of the tenant's one GPU node; `nodes` instead for several (giving both is an error).
    gpus: list[GpuCards] | None = Field(default=None, min_length=1, max_length=MAX_CARDS)
    nodes: list[GpuNode] | None = Field(default=None, min_length=1, max_length=MAX_GPU_NODES)
    split_count: int = Field(default=DEFAULT_SPLIT_COUNT, gt=0, le=MAX_SPLIT_COUNT)
    worker_image: str | None = None
    limits: PodLimits = PodLimits()
    quota: GpuQuota | None = None
    namespaces: list[str] = Field(default=["gpu-workloads"], min_length=1, max_length=MAX_NAMESPACES)
    workloads: list[Workload] = Field(default=[], max_length=MAX_WORKLOADS)
    # container: a kindest/node container on the Docker host; ssh: real machines over SSH.
    worker_mode: Literal["container", "ssh"] = "container"
    workers: list[SshWorker] = Field(default=[], max_length=MAX_WORKERS)
    # mock: simulated cards (HAMi's mock device plugin); real: HAMi's NVIDIA device plugin on real GPUs,
    # with the declared cards checked against what the node registers.
    gpu_mode: Literal["mock", "real"] = "mock"

    @field_validator("name")
    @classmethod
    def _tenant_name(cls, value: str) -> str:
        if not TENANT_NAME.fullmatch(value):
            raise ValueError(
                "must be a DNS-1035 label of at most 40 characters (lowercase letter first, then a-z, 0-9, '-'), "
                "e.g. tenant-a"
            )
        return value

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        parse_kubernetes_version(value)
        return value

    @field_validator("worker_image")
    @classmethod
    def _worker_image(cls, value: str | None) -> str | None:
        if value is not None and (problem := image_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("workers")
    @classmethod
    def _distinct_hosts(cls, value: list[SshWorker]) -> list[SshWorker]:
        # By identity: `10.0.0.21` and `::ffff:10.0.0.21`, or two spellings of one IPv6 address, are one machine.
        machines = [worker.machine for worker in value]
        repeated = sorted({f"{host}:{port}" for host, port in machines if machines.count((host, port)) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed more than once; each machine joins one tenant once")
        return value

    @field_validator("pod_cidr", "service_cidr")
    @classmethod
    def _cidr(cls, value: str, info: ValidationInfo) -> str:
        example = "10.244.0.0/16" if info.field_name == "pod_cidr" else "10.96.0.0/16"
        # `/255.255.0.0` (netmask form) is read by Python but not by Kamaji, Calico or kube-apiserver.
        if not re.fullmatch(r"[0-9.]{7,15}/[0-9]{1,2}", value, re.ASCII):
            raise ValueError(f"is not an IPv4 network in CIDR notation (address/prefix length), e.g. {example}")
        try:
            network = ipaddress.IPv4Network(value, strict=True)
        except ValueError:
            raise ValueError(f"is not a network in CIDR notation with host bits zero, e.g. {example}") from None
        if network.is_loopback or network.is_multicast or network.is_link_local or network.network_address.is_reserved:
            raise ValueError(
                f"is a loopback, link-local, multicast or reserved range; use a private one like {example}"
            )
        if int(network.network_address) == 0:
            raise ValueError(
                f"starts at 0.0.0.0, which no pod or service can have; use a private range, e.g. {example}"
            )
        if info.field_name == "pod_cidr" and network.prefixlen > NODE_POD_PREFIX:
            raise ValueError(
                f"is smaller than one node's pod range (/{NODE_POD_PREFIX}, kube-controller-manager's default); "
                f"use a /{NODE_POD_PREFIX} or larger, e.g. {example}"
            )
        if info.field_name == "service_cidr" and network.prefixlen > MAX_SERVICE_PREFIX:
            raise ValueError(
                f"is too small: gpulab puts cluster DNS at its 10th address; use a /{MAX_SERVICE_PREFIX} or larger, "
                f"e.g. {example}"
            )
        return value

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        problems = []
        for i, namespace in enumerate(value):
            if not DNS1123_LABEL.fullmatch(namespace):
                problems.append((f"[{i}]", namespace, "is not a valid namespace name (lowercase DNS label)"))
            elif namespace == "default" or namespace.startswith("kube-"):
                problems.append(
                    (
                        f"[{i}]",
                        namespace,
                        "is a system namespace; gpulab owns its workload namespaces (it sets their quota and "
                        "deletes them on destroy): pick your own, e.g. gpu-workloads",
                    )
                )
        duplicates = sorted({namespace for namespace in value if value.count(namespace) > 1})
        if duplicates:
            problems.append(("", NO_VALUE, f"lists {duplicates} more than once"))
        if problems:
            raise KeyedError(problems)
        return value

    @model_validator(mode="after")
    def _coherent(self, info: ValidationInfo) -> Tenant:
        if info.context and info.context.get("fields_only"):
            return self  # a tenant read only for the checks across tenants (see parse_config)
        problems = self.problems()
        if problems:
            raise KeyedError(problems)
        return self

    def problems(self) -> list[tuple[str, object, str]]:
        """Every cross-field problem of the tenant, keyed relative to it."""
        return [(key, value, message) for _, key, value, message in self.checks()]

    def checks(self) -> list[tuple[frozenset[str], str, object, str]]:
        """Every cross-field problem, with the keys it reads (so that parse_config can also report the problems
        of a tenant with a bad field, among the checks that do not read that field)."""
        problems: list[tuple[frozenset[str], str, object, str]] = []

        def add(needs: str, key: str, value: object, message: str) -> None:
            problems.append((frozenset(needs.split()), key, value, message))

        pod = ipaddress.ip_network(self.pod_cidr)
        service = ipaddress.ip_network(self.service_cidr)
        if pod.overlaps(service):
            add(
                "podCidr serviceCidr",
                "podCidr",
                self.pod_cidr,
                f"overlaps serviceCidr {self.service_cidr}; pick disjoint ranges, "
                "e.g. podCidr 10.244.0.0/16 and serviceCidr 10.96.0.0/16",
            )
        for j, worker in enumerate(self.workers if self.worker_mode == "ssh" else []):
            for key, network in (("podCidr", pod), ("serviceCidr", service)):
                if worker.address is not None and worker.address in network:
                    # The node's own address would be routed to pods (or taken by kube-proxy for services).
                    add(
                        f"{key} workers",
                        f"workers[{j}].host",
                        worker.host,
                        f"is inside the tenant's {key} {network}, so the tenant would route the node's own address "
                        f"into the cluster; pick a {key} that does not hold any worker's address",
                    )
        nodes = len(self.worker_node_names())
        if nodes > 2 ** (NODE_POD_PREFIX - pod.prefixlen):
            add(
                "podCidr workers workerMode",
                "podCidr",
                self.pod_cidr,
                f"holds {2 ** (NODE_POD_PREFIX - pod.prefixlen)} node pod ranges (/{NODE_POD_PREFIX} each) for "
                f"{nodes} nodes; use a larger range",
            )
        names = [workload.name for workload in self.workloads]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            add("workloads", "workloads", NO_VALUE, f"duplicate names {duplicates}; give each workload its own name")
        if self.worker_mode == "ssh":
            if not self.workers:
                add(
                    "workerMode workers",
                    "workers",
                    NO_VALUE,
                    "workerMode ssh needs workers: [{host: 10.0.0.21, user: ubuntu}] (the machines to join)",
                )
            if sum(1 for worker in self.workers if worker.gpu_node) > 1:
                add(
                    "workers",
                    "workers",
                    NO_VALUE,
                    "mark at most one worker gpuNode: true (it carries the declared gpus)",
                )
            if self.worker_image is not None:
                add(
                    "workerMode workerImage",
                    "workerImage",
                    self.worker_image,
                    "is for workerMode container; ssh workers bring their kubelet",
                )
            node_names = self.worker_node_names()
            if len(set(node_names)) != len(node_names):
                add("workers", "workers", NO_VALUE, f"node names {node_names} are not unique; set `name` on each")
        elif self.workers:
            add(
                "workerMode workers",
                "workers",
                NO_VALUE,
                "are only for workerMode: ssh; remove them or set workerMode: ssh",
            )
        placement = self._gpu_nodes_problems()
        for key, message in placement:
            add("gpus nodes workers workerMode", key, NO_VALUE, message)
        largest = max((len(node.cards) for node in self.gpu_nodes()), default=0) if not placement else None
        if self.gpu_mode == "real" and self.worker_mode != "ssh":
            add(
                "gpuMode workerMode",
                "gpuMode",
                self.gpu_mode,
                "gpuMode real needs real GPUs, so workerMode ssh; a kindest/node container has none (use gpuMode mock)",
            )
        for i, workload in enumerate(self.workloads):
            if workload.namespace is not None and workload.namespace not in self.namespaces:
                add(
                    "workloads namespaces",
                    f"workloads[{i}].namespace",
                    workload.namespace,
                    f"is not in namespaces {self.namespaces}; add it there so gpulab creates it with its quota",
                )
            if largest is not None and workload.gpus > largest:
                # HAMi never places a container that asks more cards than one node has (NodeInsufficientDevice).
                add(
                    "workloads gpus nodes",
                    f"workloads[{i}].gpus",
                    workload.gpus,
                    f"asks more cards than the tenant's largest GPU node has ({largest}); at most {largest}",
                )
        return problems

    def _gpu_nodes_problems(self) -> list[tuple[str, str]]:
        """Where the cards are declared: tenant `gpus` (one GPU node), `nodes` (several containers) or
        `workers[].gpus` (several SSH machines), exactly one of them; node names unique; card bounds.
        Returns (key, message) pairs; none means gpu_nodes() is well defined."""
        worker_gpus = [i for i, worker in enumerate(self.workers) if worker.gpus is not None]
        problems: list[tuple[str, str]] = []
        if self.gpus is not None and self.nodes is not None:
            problems.append(
                ("nodes", "give either gpus (one GPU node) or nodes (several), not both; move gpus into nodes")
            )
        if self.nodes is not None and self.worker_mode == "ssh":
            problems.append(
                ("nodes", "are kindest/node containers; with workerMode ssh give each GPU worker its own gpus")
            )
        if worker_gpus and self.gpus is not None:
            problems.append(
                (
                    "gpus",
                    "is the one GPU worker's cards; with workers[].gpus set, give every GPU worker its own gpus "
                    "instead",
                )
            )
        if worker_gpus and any(worker.gpu_node for worker in self.workers):
            problems.append(
                ("workers", "gpuNode marks the worker that carries the tenant's gpus; with workers[].gpus drop it")
            )
        if self.gpus is None and self.nodes is None and not worker_gpus:
            problems.append(
                (
                    "gpus",
                    "is required: the tenant's cards, e.g. [{model: L4, count: 1}] (or nodes: [{gpus: [...]}, ...] "
                    "for several GPU nodes)",
                )
            )
        if problems:
            return problems
        names = [node.name for node in self.gpu_nodes()]
        if len(set(names)) != len(names):
            problems.append(("nodes", f"node names {names} are not unique; give each node its own name"))
        cards = sum(len(node.cards) for node in self.gpu_nodes())
        if cards > MAX_CARDS_PER_TENANT:
            key = "gpus" if self.gpus is not None else "nodes" if self.nodes is not None else "workers"
            problems.append(
                (key, f"declares {cards} cards; a tenant holds at most {MAX_CARDS_PER_TENANT} across its GPU nodes")
            )
        return problems

    def worker_node_names(self) -> list[str]:
        """Node names of the tenant's workers, in order."""
        if self.worker_mode == "container":
            if self.nodes is not None:
                return [f"{self.name}-{node.name or f'worker-{i}'}" for i, node in enumerate(self.nodes)]
            return [f"{self.name}-worker"]
        return [worker.name or f"{self.name}-worker-{i}" for i, worker in enumerate(self.workers)]

    def gpu_node_name(self) -> str:
        """The (first) node that carries the tenant's cards."""
        return self.gpu_nodes()[0].name

    def gpu_nodes(self) -> list[NodeCards]:
        """Every GPU node with its cards, in declaration order. One node keeps the card ids it always
        had (`GPU-MOCK-<tenant>-<i>`); with several, ids carry the node (`GPU-MOCK-<node>-<i>`), unique
        within the tenant because node names are (card indexes are digits only)."""
        names = self.worker_node_names()
        if not names:
            return []  # workerMode ssh without workers: reported by checks(), no node to hold cards
        split = self.split_count
        if self.nodes is not None:
            return [
                NodeCards(name, expand_cards(name, [(e.model, e.count) for e in node.gpus], split))
                for name, node in zip(names, self.nodes, strict=True)
            ]
        if self.gpus is None:  # ssh workers with their own gpus
            return [
                NodeCards(name, expand_cards(name, [(e.model, e.count) for e in worker.gpus], split))
                for name, worker in zip(names, self.workers, strict=True)
                if worker.gpus is not None
            ]
        node = names[0]
        if self.worker_mode == "ssh":
            node = next((n for n, w in zip(names, self.workers, strict=True) if w.gpu_node), node)
        return [NodeCards(node, expand_cards(self.name, [(e.model, e.count) for e in self.gpus], split))]

    def workload_namespace(self, workload: Workload) -> str:
        return workload.namespace or self.namespaces[0]

    def cards(self) -> list[Card]:
        """Every card of the tenant, node after node."""
        return [card for node in self.gpu_nodes() for card in node.cards]

    @property
    def output_stem(self) -> str:
        """Stem of the tenant's stack outputs: `tenant-a` -> `tenant_a`, `ml` -> `tenant_ml`."""
        return "tenant_" + self.name.removeprefix("tenant-").replace("-", "_")
