"""A tenant: its Kubernetes version and ranges, GPU nodes and cards, limits, quota, namespaces, workloads
and workers. Where its cards are is read into one list of nodes (nodes.py); the rules between its own keys
are rules.py's."""

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
from model.config.nodes import TenantNode, read_nodes
from model.config.rules import TENANT_RULES, Check
from model.hami_releases import DEFAULT_VERSION as DEFAULT_HAMI_VERSION
from model.hami_releases import hami_release
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
    # How the tenant's pods share its cards: hami (HAMi's extender, webhook and device plugin: nvidia.com/gpumem and
    # gpucores limits) or dra (Dynamic Resource Allocation: the cards as devices of gpulab's driver with consumable
    # memory and cores, claimed through ResourceClaims and allocated by the tenant's own kube-scheduler; model/dra.py).
    gpu_sharing: Literal["hami", "dra"] = "hami"
    # The HAMi release the tenant runs (model/hami_releases.py): its chart, scheduler, device plugin behaviour and
    # the placement rules the policy pack judges with. v2.10.0 is what the seed's `helm install` took.
    hami_version: str = DEFAULT_HAMI_VERSION
    # The Docker lab's device plugin of a mock tenant: mock (HAMi's chart's mock-device-plugin,
    # versions.mockDevicePluginImage; what unset means) or gpulab (gpulab-hami-plugin as a DaemonSet,
    # versions.hamiDevicePluginImage, which `make lab-images` builds). Process mode picks its own: model/config/hami.py.
    device_plugin: Literal["gpulab", "mock"] | None = None

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

    @field_validator("hami_version")
    @classmethod
    def _hami_version(cls, value: str) -> str:
        hami_release(value)
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

    def checks(self) -> list[Check]:
        """Every cross-field problem, with the keys it reads (so that parse_config can also report the problems
        of a tenant with a bad field, among the checks that do not read that field): the rules of
        model/config/rules.py, in order."""
        return [found for rule in TENANT_RULES for found in rule(self)]

    @property
    def declared_nodes(self) -> list[TenantNode]:
        """The tenant's worker nodes with their cards, however the stack file says where the cards are (`gpus`,
        `nodes` or `workers[].gpus`: model/config/nodes.py). Read from the fields each time, not kept, so that a
        copy with another name (`model_copy(update=...)`) has its own nodes."""
        return read_nodes(self.name, self.worker_mode, self.gpus, self.nodes, self.workers)

    def worker_node_names(self) -> list[str]:
        """Node names of the tenant's workers, in order."""
        return [node.name for node in self.declared_nodes]

    def gpu_node_name(self) -> str:
        """The (first) node that carries the tenant's cards."""
        return self.gpu_nodes()[0].name

    def gpu_nodes(self) -> list[NodeCards]:
        """Every GPU node with its cards, in declaration order. One node keeps the card ids it always
        had (`GPU-MOCK-<tenant>-<i>`); with several, ids carry the node (`GPU-MOCK-<node>-<i>`), unique
        within the tenant because node names are (card indexes are digits only)."""
        split = self.split_count
        return [
            NodeCards(node.name, expand_cards(node.card_stem, [(e.model, e.count) for e in node.gpus], split))
            for node in self.declared_nodes
            if node.gpus
        ]

    def workload_namespace(self, workload: Workload) -> str:
        return workload.namespace or self.namespaces[0]

    def cards(self) -> list[Card]:
        """Every card of the tenant, node after node."""
        return [card for node in self.gpu_nodes() for card in node.cards]

    @property
    def output_stem(self) -> str:
        """Stem of the tenant's stack outputs: `tenant-a` -> `tenant_a`, `ml` -> `tenant_ml`."""
        return "tenant_" + self.name.removeprefix("tenant-").replace("-", "_")
