"""The lab's configuration: one typed model, validated before any resource is declared.

Stack config keys (all under the `gpulab:` namespace, camelCase in YAML):

- `management`  the kind management cluster (name, Docker network, MetalLB pool size)
- `tenants`     the tenants: version, CIDRs, GPU cards by catalog model, per-pod limits, quota, workloads
- `scheduling`  HAMi placement policy and the mock-mode node-lock timeout
- `versions`    overrides of the pins in model/versions.py

Bad input raises one `pulumi.RunError` (printed without a traceback by the language host) that names
each key, the value it had and how to fix it; nothing is created because no resource was declared yet.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from model import redact, safe_yaml
from model.catalog import (
    DEFAULT_SPLIT_COUNT,
    GPU_CATALOG,
    MAX_CARDS,
    MAX_REPLICAS,
    MAX_SPLIT_COUNT,
    MAX_TENANTS,
    Card,
    expand_cards,
)
from model.image_ref import image_problem
from model.network import canonical_host, host_problem, metallb_addresses, ranges_overlap
from model.versions import Versions, image_tag, parse_kubernetes_version

PROJECT = "gpulab"
# Kamaji requires TenantControlPlane names to be DNS-1035 labels (internal/webhook/handlers/tcp_name.go);
# 40 characters leaves room for the suffixes gpulab adds (container, namespace and secret names).
# Every pattern is matched whole (fullmatch) and ASCII only: `$` would accept a trailing newline and
# `\d` other scripts' digits, and both would reach container names, flags and manifests.
TENANT_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", re.ASCII)
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
DURATION = re.compile(r"[0-9]{1,6}(ms|s|m)", re.ASCII)
# Docker's network names ([a-zA-Z0-9][a-zA-Z0-9_.-]*); kept short for interface names.
DOCKER_NETWORK = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}", re.ASCII)
UNIX_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}", re.ASCII)  # POSIX portable names (first.last too)
MAX_CARDS_PER_TENANT = MAX_CARDS
# Per-pod limits and quotas become integer literals in the tenant's admission CEL (int64) and numbers in the
# policy pack (a double in the engine's protobuf Struct, exact up to 2^53). 10^15 (about 2^50) is exact in
# both, and 8,000 of them still sum below 2^63, so no CEL sum over a pod's containers can overflow on them.
MAX_POD_LIMIT = 10**15
# List lengths, far above any lab, so a typo (or a generated file gone wrong) cannot multiply work.
MAX_WORKLOADS = 1000
MAX_NAMESPACES = 100
MAX_WORKERS = 500
MAX_METALLB_ADDRESSES = 64
# Docker's predefined networks: kind cannot put nodes on them, and destroy must never remove them.
RESERVED_DOCKER_NETWORKS = ("bridge", "host", "none")
# A node's pod range: kube-controller-manager's default --node-cidr-mask-size for IPv4 (Kamaji sets
# --allocate-node-cidrs and --cluster-cidr but no mask size: internal/builders/controlplane/deployment.go).
NODE_POD_PREFIX = 24
# gpulab puts cluster DNS at the 10th address of the service range (tenant_control_plane.py), so the range
# must hold it below its broadcast address: at least a /28.
MAX_SERVICE_PREFIX = 28
MAX_GPU_NODES = 16  # GPU nodes per tenant: far above a lab, keeps a typo from creating dozens of containers
# A GPU node's own name; the node is `<tenant>-<name>`, so 40 + 1 + 16 stays a DNS label (<= 63).
GPU_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?", re.ASCII)


class ConfigError(ValueError):
    """Invalid lab configuration; `str()` is the full user-facing message."""


_NO_VALUE = object()


class KeyedError(ValueError):
    """A cross-field problem raised by a model validator, with the key(s) it is about, relative to the
    model (`podCidr`, `tenants[1].kubernetesVersion`), so the message names the exact key, not the model."""

    def __init__(self, problems: list[tuple[str, object, str]]) -> None:
        super().__init__("; ".join(message for _, _, message in problems))
        self.problems = problems


def at(key: str, message: str, value: object = _NO_VALUE) -> KeyedError:
    """The problem `message` with the key it is about (and the offending value, when there is one)."""
    return KeyedError([(key, value, message)])


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_counts(cls, value: object, info: ValidationInfo) -> object:
        """pydantic reads `true` as 1 for an int field; a boolean where a number belongs is a mistake (often a
        YAML 1.1 `yes`/`on` that the Pulumi CLI, reading YAML 1.2, passes on as a string)."""
        annotation = cls.model_fields[info.field_name].annotation if info.field_name else None
        if isinstance(value, bool) and int in (typing.get_args(annotation) or (annotation,)):
            raise ValueError("is a boolean, not a number; write the number, e.g. 1")
        return value


class GpuCards(_Model):
    model: str
    count: int = Field(gt=0, le=MAX_CARDS)

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in GPU_CATALOG:
            raise ValueError(f"unknown GPU model; use one of: {', '.join(GPU_CATALOG)}")
        return value


class GpuNode(_Model):
    """One of a tenant's GPU nodes (`tenants[].nodes[]`): its own kindest/node container and cards."""

    gpus: list[GpuCards] = Field(min_length=1)
    # The node is `<tenant>-<name>`; default `<tenant>-worker-<index>`.
    name: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not GPU_NODE_NAME.fullmatch(value):
            raise ValueError("must be a lowercase DNS label of at most 16 characters, e.g. gpu-1")
        return value


class NodeCards(NamedTuple):
    """A GPU node of a tenant: its Kubernetes node name and its cards (ids unique within the tenant)."""

    name: str
    cards: list[Card]


class PodLimits(_Model):
    """Per-pod caps enforced by the policy pack (sums over a pod's containers)."""

    gpus: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpumem: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT, description="MB")
    gpucores: int | None = Field(default=None, gt=0, le=800, description="percent of one card, summed")


class GpuQuota(_Model):
    """A ResourceQuota in each workload namespace, with the keys HAMi actually tracks (notes/hami.md section 5)."""

    gpumem: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpucores: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpus: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)


class Workload(_Model):
    """A GPU workload gpulab deploys into the tenant after its GPU node is ready."""

    name: str
    kind: Literal["Pod", "Deployment"] = "Pod"
    namespace: str | None = None
    replicas: int = Field(default=1, gt=0, le=MAX_REPLICAS)
    gpus: int = Field(default=1, gt=0, le=MAX_CARDS)
    gpumem: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpumem_percentage: int | None = Field(default=None, gt=0, le=100)
    gpucores: int | None = Field(default=None, ge=0, le=100)

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if not DNS1123_LABEL.fullmatch(value):
            raise ValueError("must be a lowercase DNS label (a-z, 0-9, '-'), e.g. trainer-1")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.kind == "Pod" and self.replicas != 1:
            raise at("replicas", "a Pod has exactly one replica; use kind: Deployment", self.replicas)
        if self.gpumem is not None and self.gpumem_percentage is not None:
            raise at("gpumemPercentage", "set either gpumem (MB) or gpumemPercentage, not both", self.gpumem_percentage)
        return self


SECRET_KEY = re.compile(r"[a-zA-Z][a-zA-Z0-9]{0,63}", re.ASCII)


def _secret_key_name(value: str) -> str:
    if not SECRET_KEY.fullmatch(value):
        raise ValueError("must name a config key of this project (letters and digits), e.g. sshPrivateKey")
    return value


# The name of a secret config key of this project (its value is read with pulumi.Config.require_secret).
SecretKeyName = Annotated[str, AfterValidator(_secret_key_name)]


class SshWorker(_Model):
    """A real machine joined to the tenant over SSH (workerMode: ssh)."""

    host: str = Field(min_length=1)
    user: str = "root"
    port: int = Field(default=22, gt=0, le=65535)
    # Node name in the tenant (kubeadm join --node-name); defaults to <tenant>-worker-<index>.
    name: str | None = None
    # Which secret config key holds this machine's SSH private key (`pulumi config set --secret`).
    private_key_secret: SecretKeyName = "sshPrivateKey"
    # The one worker whose cards are the tenant's declared `gpus` (default: the first worker).
    gpu_node: bool | None = None
    # This machine's own cards, for tenants with several GPU workers (instead of the tenant's `gpus`).
    gpus: list[GpuCards] | None = Field(default=None, min_length=1)

    @field_validator("name")
    @classmethod
    def _node_name(cls, value: str | None) -> str | None:
        if value is not None and not DNS1123_LABEL.fullmatch(value):
            raise ValueError("must be a lowercase DNS label, e.g. gpu-box-1")
        return value

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if problem := host_problem(value):
            raise ValueError(problem)
        return value

    @property
    def machine(self) -> tuple[str, int]:
        """The machine's identity: its canonical address (one spelling per address) and SSH port."""
        return canonical_host(self.host), self.port

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not UNIX_USER.fullmatch(value):
            raise ValueError(
                "must be a Unix user name (letters, digits, '_', '.', '-'; at most 32), e.g. root or ubuntu"
            )
        return value


class Tenant(_Model):
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
            problems.append(("", _NO_VALUE, f"lists {duplicates} more than once"))
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
            add("workloads", "workloads", _NO_VALUE, f"duplicate names {duplicates}; give each workload its own name")
        if self.worker_mode == "ssh":
            if not self.workers:
                add(
                    "workerMode workers",
                    "workers",
                    _NO_VALUE,
                    "workerMode ssh needs workers: [{host: 10.0.0.21, user: ubuntu}] (the machines to join)",
                )
            if sum(1 for worker in self.workers if worker.gpu_node) > 1:
                add(
                    "workers",
                    "workers",
                    _NO_VALUE,
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
                add("workers", "workers", _NO_VALUE, f"node names {node_names} are not unique; set `name` on each")
        elif self.workers:
            add(
                "workerMode workers",
                "workers",
                _NO_VALUE,
                "are only for workerMode: ssh; remove them or set workerMode: ssh",
            )
        placement = self._gpu_nodes_problems()
        for key, message in placement:
            add("gpus nodes workers workerMode", key, _NO_VALUE, message)
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


class Install(_Model):
    """What gpulab installs into an existing management cluster (all three in kind mode)."""

    cert_manager: bool = False
    metallb: bool = False
    kamaji: bool = False


class Management(_Model):
    # kind: gpulab creates a kind cluster; existing: use the cluster of a given kubeconfig.
    mode: Literal["kind", "existing"] = "kind"
    name: str = "gpulab"
    # kind puts its nodes on this Docker network (KIND_EXPERIMENTAL_DOCKER_NETWORK); a network of gpulab's own,
    # rather than the shared `kind` one, is what lets destroy remove it.
    network: str | None = None
    metallb_pool_size: int = Field(default=16, ge=1, le=1024)
    # existing mode: the secret config key with the cluster's kubeconfig, what to install, MetalLB's addresses.
    kubeconfig_secret: SecretKeyName = "managementKubeconfig"
    install: Install | None = None
    metallb_addresses: list[str] = Field(default=[], max_length=MAX_METALLB_ADDRESSES)

    @field_validator("metallb_addresses")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        problems: list[tuple[str, object, str]] = []
        for i, address in enumerate(value):
            try:
                metallb_addresses(address)
            except ValueError as error:
                problems.append((f"[{i}]", address, str(error)))
        if problems:
            raise KeyedError(problems)
        return value

    def metallb_ranges(self) -> list[tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]]:
        return [metallb_addresses(address) for address in self.metallb_addresses]

    @model_validator(mode="after")
    def _mode(self) -> Management:
        if self.network_name in RESERVED_DOCKER_NETWORKS:
            key = "network" if self.network is not None else "name"
            raise at(
                key,
                f"names Docker's predefined network {self.network_name!r}, which kind cannot use and destroy must "
                "not remove; pick another name, e.g. gpulab",
                self.network_name,
            )
        if self.mode == "kind":
            if self.install is not None or self.metallb_addresses:
                raise at(
                    "install" if self.install is not None else "metallbAddresses",
                    "install and metallbAddresses are for mode: existing; in kind mode gpulab installs everything and "
                    "takes MetalLB's pool from the kind network",
                )
        elif self.installs("metallb") and not self.metallb_addresses:
            raise at(
                "metallbAddresses",
                "install.metallb needs metallbAddresses: the IPv4 range MetalLB may hand out on your network, "
                "e.g. [192.168.10.240-192.168.10.250]",
            )
        return self

    def installs(self, component: Literal["cert_manager", "metallb", "kamaji"]) -> bool:
        """Whether gpulab installs `component`: always in kind mode, where asked in existing mode."""
        if self.mode == "kind":
            return True
        return bool(self.install and getattr(self.install, component))

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TENANT_NAME.fullmatch(value):
            raise ValueError("must be a lowercase DNS label of at most 40 characters, e.g. gpulab")
        return value

    @field_validator("network")
    @classmethod
    def _network(cls, value: str | None) -> str | None:
        if value is not None and not DOCKER_NETWORK.fullmatch(value):
            raise ValueError("must be a Docker network name (letters, digits, '_', '.', '-'; at most 63), e.g. gpulab")
        return value

    @property
    def network_name(self) -> str:
        return self.network or self.name


class Scheduling(_Model):
    gpu_scheduler_policy: Literal["spread", "binpack"] = "spread"
    node_scheduler_policy: Literal["spread", "binpack"] = "binpack"
    # Mock mode only: HAMi's node lock is released by the real device plugin, never by the mock one.
    node_lock_timeout: str = "2s"

    @field_validator("node_lock_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not DURATION.fullmatch(value):
            raise ValueError("must be a Go duration such as 2s or 500ms")
        return value


class LabConfig(_Model):
    management: Management = Management()
    tenants: list[Tenant] = Field(min_length=1, max_length=MAX_TENANTS)
    scheduling: Scheduling = Scheduling()
    versions: Versions = Versions()

    @model_validator(mode="after")
    def _across_tenants(self, info: ValidationInfo) -> LabConfig:
        kind_subnet = info.context.get("kind_subnet") if info.context else None
        problems = across_tenants(self.management, list(enumerate(self.tenants)), self.versions, kind_subnet)
        if problems:
            raise KeyedError(problems)
        return self

    def worker_image(self, tenant: Tenant) -> str | None:
        return tenant.worker_image or self.versions.worker_node_images.get(tenant.kubernetes_version)


def across_tenants(
    management: Management | None,
    tenants: list[tuple[int, Tenant]],
    versions: Versions | None,
    kind_subnet: str | None = None,
) -> list[tuple[str, object, str]]:
    """Every problem between tenants, and between tenants and the rest of the config, keyed from the root.

    Takes the parts that validated (with their index in `tenants`), so that parse_config can report these
    problems together with field errors elsewhere; a part that is None is not checked against."""
    problems: list[tuple[str, object, str]] = []
    names = [tenant.name for _, tenant in tenants]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        problems.append(("tenants", _NO_VALUE, f"duplicate names {duplicates}; every tenant needs its own name"))
    stems = [tenant.output_stem for _, tenant in tenants]
    clashing = sorted({stem for stem in stems if stems.count(stem) > 1})
    if clashing and not duplicates:
        problems.append(
            ("tenants", _NO_VALUE, f"names {names} give clashing stack outputs {clashing}_*; rename one of them")
        )
    # One machine, one tenant, by identity (canonical address and port): a second join would find kubelet.conf
    # and report success on the first tenant's node, and destroying either tenant would reset it.
    seen: dict[tuple[str, int], str] = {}
    for i, tenant in tenants:
        for j, worker in enumerate(tenant.workers):
            if worker.machine in seen and seen[worker.machine] != tenant.name:
                problems.append(
                    (
                        f"tenants[{i}].workers[{j}].host",
                        worker.host,
                        f"is already a worker of tenant {seen[worker.machine]}; a machine can join one tenant only",
                    )
                )
            seen.setdefault(worker.machine, tenant.name)
    # Container workers share the Docker host: their names (and hostnames) must differ across tenants and from
    # the kind node.
    if management is not None:
        owner: dict[str, str] = {f"{management.name}-control-plane": "the management cluster"}
        for i, tenant in tenants:
            if tenant.worker_mode != "container":
                continue
            for node in tenant.worker_node_names():
                if node in owner:
                    key = f"tenants[{i}].nodes" if tenant.nodes is not None else f"tenants[{i}].name"
                    problems.append(
                        (
                            key,
                            _NO_VALUE,
                            f"gives the container {node}, which {owner[node]} already uses; rename the tenant or node",
                        )
                    )
                owner.setdefault(node, f"tenant {tenant.name}")
    if management is not None:
        problems += _against_management(management, tenants, kind_subnet)
    if versions is not None:
        problems += _against_versions(versions, tenants)
    return problems


def _against_management(
    management: Management, tenants: list[tuple[int, Tenant]], kind_subnet: str | None
) -> list[tuple[str, object, str]]:
    problems: list[tuple[str, object, str]] = []
    if management.mode == "existing":
        problems += [
            (
                f"tenants[{i}].workerMode",
                "container",
                "container workers live on the kind management cluster's Docker network; with management.mode "
                "existing use workerMode: ssh",
            )
            for i, tenant in tenants
            if tenant.worker_mode == "container"
        ]
    pools = list(zip(management.metallb_addresses, management.metallb_ranges(), strict=True))
    kind_network = ipaddress.ip_network(kind_subnet) if kind_subnet and management.mode == "kind" else None
    for i, tenant in tenants:
        for key, cidr in (("podCidr", tenant.pod_cidr), ("serviceCidr", tenant.service_cidr)):
            network = ipaddress.ip_network(cidr)
            for j, (address, (first, last)) in enumerate(pools):
                if ranges_overlap(first, last, network):
                    problems.append(
                        (
                            f"management.metallbAddresses[{j}]",
                            address,
                            f"overlaps tenants[{i}].{key} {cidr}: the tenant would route these addresses to its pods "
                            "or services; use addresses outside every tenant's ranges",
                        )
                    )
            if kind_network is not None and network.overlaps(kind_network):
                # The same check the program makes on the real network (network.metallb_range), made here
                # too so that `make plan` reports it with every other problem.
                problems.append(
                    (
                        f"tenants[{i}].{key}",
                        cidr,
                        f"overlaps the kind network {kind_network} (it would shadow the node addresses); pick a "
                        "range outside it, e.g. 10.244.0.0/16",
                    )
                )
    return problems


def _against_versions(versions: Versions, tenants: list[tuple[int, Tenant]]) -> list[tuple[str, object, str]]:
    problems: list[tuple[str, object, str]] = []
    max_major, max_minor = versions.kamaji_max_minor()
    for i, tenant in tenants:
        major, minor, _ = parse_kubernetes_version(tenant.kubernetes_version)
        if (major, minor) > (max_major, max_minor):
            problems.append(
                (
                    f"tenants[{i}].kubernetesVersion",
                    tenant.kubernetes_version,
                    f"the pinned Kamaji supports up to {versions.kamaji_max_kubernetes}.x; pick "
                    f"{versions.kamaji_max_kubernetes}.x or lower (or pin a newer Kamaji in versions)",
                )
            )
            continue
        if tenant.worker_mode != "container":
            continue  # ssh workers bring their own kubelet; the remote check compares its version
        image = tenant.worker_image or versions.worker_node_images.get(tenant.kubernetes_version)
        if image is None:
            problems.append(
                (
                    f"tenants[{i}].kubernetesVersion",
                    tenant.kubernetes_version,
                    f"no kindest/node image is pinned for it; add versions.workerNodeImages."
                    f"{tenant.kubernetes_version} (with its digest) or set tenants[{i}].workerImage",
                )
            )
        elif image_tag(image) != tenant.kubernetes_version:
            problems.append(
                (
                    f"tenants[{i}].workerImage",
                    image,
                    f"its tag does not match kubernetesVersion {tenant.kubernetes_version}; use "
                    f"kindest/node:{tenant.kubernetes_version}@sha256:...",
                )
            )
    return problems


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            text = redact.key_part(part)
            path += f".{text}" if path else text
    return path


def shown(key: str, value: object) -> str:
    """How a config value may be echoed in an error: hidden if it looks secret (or sits under a key named
    like a secret), else truncated. Values are echoed so a user sees what was wrong, but never a secret: a
    key pasted under the wrong name would otherwise be printed whole."""
    return redact.shown(value, secret_name=bool(redact.SECRET_NAME.search(key.rsplit(".", 1)[-1])))


def problem_line(key: str, message: str, value: object = _NO_VALUE) -> str:
    """The one format of every line of a config error: `  gpulab:KEY[ = VALUE]: MESSAGE`."""
    message = redact.scrub(message)
    if value is _NO_VALUE:
        return f"  {PROJECT}:{key}: {message}"
    return f"  {PROJECT}:{key} = {shown(key, value)}: {message}"


def error_message(lines: list[str]) -> str:
    return "invalid gpulab configuration (nothing was created):\n" + "\n".join(lines)


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that the key path `loc` (pydantic's, with aliases) points into, if any."""
    model: Any = LabConfig
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        fields = {field.alias or name: field for name, field in model.model_fields.items()}
        field = fields.get(part) or model.model_fields.get(part)
        if field is None:
            return None
        model = _model_of(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _model_of(annotation: Any) -> Any:
    """The model inside `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if (found := _model_of(arg)) is not None:
                return found
    return None


def _suggestion(loc: tuple[int | str, ...]) -> str:
    """`; did you mean `gpus`?` for an unknown key close to a known one (difflib), else a list of the keys."""
    model = _model_at(loc[:-1])
    if model is None or not isinstance(loc[-1], str):
        return ""
    known = [field.alias or name for name, field in model.model_fields.items()]
    lower = {key.lower(): key for key in known}  # `podCIDR` meant `podCidr`
    close = difflib.get_close_matches(loc[-1].lower(), list(lower), n=1, cutoff=0.6)
    if close and not redact.looks_secret(loc[-1]):
        return f"; did you mean `{lower[close[0]]}`?"
    return f"; the keys here are: {', '.join(known)}"


def _field_problem(item: Any, source: str) -> str:
    loc = tuple(item["loc"])
    key = _key_path(loc) or "<root>"
    message = item["msg"].removeprefix("Value error, ")
    if loc == ("tenants",) and item["type"] in ("missing", "too_short", "list_type"):
        return problem_line(
            key,
            "declare at least one tenant, e.g. [{name: tenant-a, gpus: [{model: A100-80GB, count: 1}]}] "
            f"in {source} (see Pulumi.dev.yaml)",
            item.get("input", _NO_VALUE),
        )
    if item["type"] == "missing":
        return problem_line(key, f"is required but missing; set it in {source}")
    if item["type"] == "extra_forbidden":
        return problem_line(key, f"is not a key of gpulab{_suggestion(loc)}")
    if item["type"] in ("value_error", "assertion_error") and not isinstance(item.get("input"), str | int):
        return problem_line(key, message)
    return problem_line(key, message, item.get("input"))


def format_errors(error: ValidationError, source: str = "the stack file") -> list[str]:
    """One line per problem in a ValidationError: field errors, and the keyed cross-field problems."""
    lines = []
    for item in error.errors():
        keyed = (item.get("ctx") or {}).get("error")
        if isinstance(keyed, KeyedError):
            base = _key_path(item["loc"])
            for relative, value, message in keyed.problems:
                key = f"{base}.{relative}" if base and relative and not relative.startswith("[") else base + relative
                lines.append(problem_line(key, message, value))
            continue
        lines.append(_field_problem(item, source))
    return lines


def _part(model: type[BaseModel], raw: object, context: dict | None = None) -> Any:
    try:
        return model.model_validate(raw, context=context)
    except ValidationError:
        return None


# The tenant keys the checks across tenants read: a tenant with a bad one of these is left out of them.
_ACROSS_KEYS = frozenset(
    {"name", "workers", "workerMode", "podCidr", "serviceCidr", "kubernetesVersion", "workerImage"}
)


def _cross_field_lines(raw: dict[str, Any], error: ValidationError, kind_subnet: str | None) -> list[str]:
    """Cross-field problems that pydantic did not check because a field failed (it runs a model's own checks
    only when all its fields are valid): a tenant's own checks that do not read a failed key, and the checks
    across tenants, on the parts that are valid. Without this they would wait for the next run."""
    if any(not item["loc"] for item in error.errors()):
        return []  # LabConfig's own check ran (every part was valid): its problems are in `error`
    lines: list[str] = []
    management = _part(Management, raw.get("management", {}))
    versions = _part(Versions, raw.get("versions", {}))
    tenants = raw.get("tenants")
    valid = []
    for i, tenant in enumerate(tenants if isinstance(tenants, list) else []):
        if not isinstance(tenant, dict):
            continue
        failed = {
            item["loc"][2] for item in error.errors() if item["loc"][:2] == ("tenants", i) and len(item["loc"]) > 2
        }
        # The tenant without its failed keys (their defaults stand in), read without its own checks.
        found = _part(Tenant, {key: value for key, value in tenant.items() if key not in failed}, {"fields_only": True})
        if found is None:
            continue  # a required key failed: nothing to check against
        if failed:
            lines += [
                problem_line(f"tenants[{i}].{key}", message, value)
                for needs, key, value, message in found.checks()
                if not needs & failed
            ]
        if not failed & _ACROSS_KEYS:
            valid.append((i, found))
    return lines + [
        problem_line(key, message, value)
        for key, value, message in across_tenants(management, valid, versions, kind_subnet)
    ]


def parse_config(raw: dict[str, Any], source: str = "the stack file", kind_subnet: str | None = None) -> LabConfig:
    """Validate the `gpulab:*` config keys (without the prefix); raises ConfigError with every problem.

    `source` names the stack file in messages; `kind_subnet` (make plan's assumed kind network) adds the check
    that tenants' ranges stay outside it, which `pulumi up` makes once the network exists."""
    context = {"kind_subnet": kind_subnet} if kind_subnet else None
    try:
        return LabConfig.model_validate(raw, context=context)
    except ValidationError as error:
        lines = format_errors(error, source) + _cross_field_lines(raw, error, kind_subnet)
        raise ConfigError(error_message(sorted(dict.fromkeys(lines), key=_by_key))) from None


def _by_key(line: str) -> list[object]:
    """Lines in key order (`tenants[2]` before `tenants[10]`), a key's lines in the order they were found."""
    key = line.split(" = ", 1)[0].split(": ", 1)[0]
    return [int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", key)]


CONFIG_KEYS = ("management", "tenants", "scheduling", "versions")


def required_secrets(lab: LabConfig) -> dict[str, str]:
    """Secret config keys the lab needs -> what they hold."""
    needed = {}
    if lab.management.mode == "existing":
        needed[lab.management.kubeconfig_secret] = "the existing management cluster's kubeconfig"
    for tenant in lab.tenants:
        for worker in tenant.workers:
            needed.setdefault(worker.private_key_secret, f"the SSH private key for {worker.user}@{worker.host}")
    return needed


def check_secrets(lab: LabConfig, is_set, is_secret) -> None:
    """Every secret the config refers to is set, and set as a secret; raises ConfigError."""
    problems = []
    for key, holds in required_secrets(lab).items():
        if not is_set(key):
            problems.append(
                problem_line(
                    key, f"is not set; it must hold {holds}: pulumi config set --secret {PROJECT}:{key} < FILE"
                )
            )
        elif not is_secret(key):
            problems.append(
                problem_line(
                    key,
                    f"holds {holds} in plain text; set it again with pulumi config set --secret {PROJECT}:{key} < FILE",
                )
            )
    if problems:
        raise ConfigError(error_message(problems))


def load_config() -> LabConfig:
    """Read and validate the stack config inside a Pulumi program."""
    import pulumi

    config = pulumi.Config(PROJECT)
    raw = {key: config.get_object(key) for key in CONFIG_KEYS}
    try:
        lab = parse_config(
            {key: value for key, value in raw.items() if value is not None}, source=f"Pulumi.{pulumi.get_stack()}.yaml"
        )
        check_secrets(
            lab,
            is_set=lambda key: config.get(key) is not None,
            is_secret=lambda key: pulumi.runtime.is_config_secret(f"{PROJECT}:{key}"),
        )
        return lab
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None


def secret(key: str):
    """A secret config value (validated present and secret by load_config) as a secret Output."""
    import pulumi

    return pulumi.Config(PROJECT).require_secret(key)


def stack_file_config(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(`gpulab:*` values without the prefix, secret keys -> placeholder) of a stack file, read as the Pulumi CLI
    reads it: YAML 1.2 with duplicate keys refused (safe_yaml.load_stack), and a key without a namespace taken
    as the project's (sdk/go/common/workspace/loaders.go, stackConfigNamespacedWithProject). Raises ConfigError
    with one line, which the caller prefixes with the file's name."""
    try:
        document = safe_yaml.load_stack(safe_yaml.read_text(path), path.name)
    except safe_yaml.YamlError as error:
        raise ConfigError(str(error).removeprefix(f"{path.name}: ").removeprefix(f"{path}: ")) from None
    document = {} if document is None else document
    if not isinstance(document, dict):
        raise ConfigError(f"must be a mapping with a `config:` key, not a {type(document).__name__}")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"`config` must be a mapping of `{PROJECT}:<key>: value`")
    plain: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigError(f"config keys must be strings like `{PROJECT}:tenants`, not {redact.shown(key)}")
        namespace, _, name = key.rpartition(":")
        if namespace not in ("", PROJECT):
            continue  # another namespace's key (e.g. kubernetes:...)
        if name in plain or name in secrets:
            raise ConfigError(
                f"{PROJECT}:{redact.key_part(name)} is set twice (with and without `{PROJECT}:`); keep one"
            )
        if isinstance(value, dict) and set(value) == {"secure"}:
            secrets[name] = "<secret>"  # encrypted in the file; the program only passes it on
        else:
            plain[name] = value
    return plain, secrets


def load_stack_file(path: Path) -> LabConfig:
    """Validate the `gpulab:*` keys of a `Pulumi.<stack>.yaml` (used by the offline checker and the report)."""
    plain, _ = stack_file_config(path)
    return parse_config({key: value for key, value in plain.items() if key in CONFIG_KEYS}, source=path.name)
