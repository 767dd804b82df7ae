"""The lab's configuration: one typed model, validated before any resource is declared.

Stack config keys (all under the `gpulab:` namespace, camelCase in YAML):

- `management`  the kind management cluster (name, Docker network, MetalLB pool size)
- `tenants`     the tenants: version, CIDRs, GPU cards by catalog model, per-pod limits, quota, workloads
- `scheduling`  HAMi placement policy and the mock-mode node-lock timeout
- `versions`    overrides of the pins in components/versions.py

Bad input raises one `pulumi.RunError` (printed without a traceback by the language host) that names
each key, the value it had and how to fix it; nothing is created because no resource was declared yet.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import safe_yaml
from components.catalog import (
    DEFAULT_SPLIT_COUNT,
    GPU_CATALOG,
    MAX_CARDS,
    MAX_REPLICAS,
    MAX_SPLIT_COUNT,
    MAX_TENANTS,
    Card,
    expand_cards,
)
from components.image_ref import image_problem
from components.network import address_problem
from components.versions import Versions, image_tag, parse_kubernetes_version

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
HOSTNAME = re.compile(
    r"(?=.{1,253}\Z)[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*",
    re.ASCII,
)
UNIX_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}", re.ASCII)  # POSIX portable names (first.last too)
MAX_CARDS_PER_TENANT = MAX_CARDS
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

    gpus: int | None = Field(default=None, gt=0)
    gpumem: int | None = Field(default=None, gt=0, description="MB")
    gpucores: int | None = Field(default=None, gt=0, le=800, description="percent of one card, summed")


class GpuQuota(_Model):
    """A ResourceQuota in each workload namespace, with the keys HAMi actually tracks (notes/hami.md section 5)."""

    gpumem: int | None = Field(default=None, gt=0)
    gpucores: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, gt=0)


class Workload(_Model):
    """A GPU workload gpulab deploys into the tenant after its GPU node is ready."""

    name: str
    kind: Literal["Pod", "Deployment"] = "Pod"
    namespace: str | None = None
    replicas: int = Field(default=1, gt=0, le=MAX_REPLICAS)
    gpus: int = Field(default=1, gt=0)
    gpumem: int | None = Field(default=None, gt=0)
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
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            pass
        if not HOSTNAME.fullmatch(value):
            raise ValueError(
                "must be a hostname (ASCII letters, digits, '-', '.') or an IP address, e.g. gpu-box-1.lan"
            )
        return value

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
    gpus: list[GpuCards] | None = Field(default=None, min_length=1)
    nodes: list[GpuNode] | None = Field(default=None, min_length=1, max_length=MAX_GPU_NODES)
    split_count: int = Field(default=DEFAULT_SPLIT_COUNT, gt=0, le=MAX_SPLIT_COUNT)
    worker_image: str | None = None
    limits: PodLimits = PodLimits()
    quota: GpuQuota | None = None
    namespaces: list[str] = Field(default=["gpu-workloads"], min_length=1)
    workloads: list[Workload] = []
    # container: a kindest/node container on the Docker host; ssh: real machines over SSH.
    worker_mode: Literal["container", "ssh"] = "container"
    workers: list[SshWorker] = []
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
        hosts = [(worker.host.lower(), worker.port) for worker in value]
        repeated = sorted({f"{host}:{port}" for host, port in hosts if hosts.count((host, port)) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed more than once; each machine joins one tenant once")
        return value

    @field_validator("pod_cidr", "service_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            network = ipaddress.ip_network(value, strict=True)
        except ValueError:
            raise ValueError("is not a network in CIDR notation with host bits zero, e.g. 10.244.0.0/16") from None
        if network.version != 4:
            raise ValueError("must be an IPv4 CIDR (the lab's tenants are single-stack IPv4)")
        return value

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for namespace in value:
            if not DNS1123_LABEL.fullmatch(namespace):
                raise ValueError(f"{namespace!r} is not a valid namespace name (lowercase DNS label)")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> Tenant:
        pod = ipaddress.ip_network(self.pod_cidr)
        service = ipaddress.ip_network(self.service_cidr)
        if pod.overlaps(service):
            raise at(
                "podCidr",
                f"overlaps serviceCidr {self.service_cidr}; pick disjoint ranges, "
                "e.g. podCidr 10.244.0.0/16 and serviceCidr 10.96.0.0/16",
                self.pod_cidr,
            )
        names = [workload.name for workload in self.workloads]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise at("workloads", f"duplicate names {duplicates}; give each workload its own name")
        if self.worker_mode == "ssh":
            if not self.workers:
                raise at(
                    "workers", "workerMode ssh needs workers: [{host: 10.0.0.21, user: ubuntu}] (the machines to join)"
                )
            if sum(1 for worker in self.workers if worker.gpu_node) > 1:
                raise at("workers", "mark at most one worker gpuNode: true (it carries the declared gpus)")
            if self.worker_image is not None:
                raise at(
                    "workerImage", "is for workerMode container; ssh workers bring their own kubelet", self.worker_image
                )
            node_names = self.worker_node_names()
            if len(set(node_names)) != len(node_names):
                raise at("workers", f"node names {node_names} are not unique; set `name` on each")
        elif self.workers:
            raise at("workers", "are only for workerMode: ssh; remove them or set workerMode: ssh")
        self._gpu_nodes_coherent()
        if self.gpu_mode == "real" and self.worker_mode != "ssh":
            raise at(
                "gpuMode",
                "gpuMode real needs real GPUs, so workerMode ssh; a kindest/node container has none (use gpuMode mock)",
                self.gpu_mode,
            )
        for i, workload in enumerate(self.workloads):
            if workload.namespace is not None and workload.namespace not in self.namespaces:
                raise at(
                    f"workloads[{i}].namespace",
                    f"is not in namespaces {self.namespaces}; add it there so gpulab creates it with its quota",
                    workload.namespace,
                )
        return self

    def _gpu_nodes_coherent(self) -> None:
        """Where the cards are declared: tenant `gpus` (one GPU node), `nodes` (several containers) or
        `workers[].gpus` (several SSH machines), exactly one of them; node names unique; card bounds."""
        worker_gpus = [i for i, worker in enumerate(self.workers) if worker.gpus is not None]
        if self.gpus is not None and self.nodes is not None:
            raise at("nodes", "give either gpus (one GPU node) or nodes (several), not both; move gpus into nodes")
        if self.nodes is not None and self.worker_mode == "ssh":
            raise at("nodes", "are kindest/node containers; with workerMode ssh give each GPU worker its own gpus")
        if worker_gpus and self.gpus is not None:
            raise at(
                "gpus",
                "is the one GPU worker's cards; with workers[].gpus set, give every GPU worker its own gpus instead",
            )
        if worker_gpus and any(worker.gpu_node for worker in self.workers):
            raise at("workers", "gpuNode marks the worker that carries the tenant's gpus; with workers[].gpus drop it")
        if self.gpus is None and self.nodes is None and not worker_gpus:
            raise at(
                "gpus",
                "is required: the tenant's cards, e.g. [{model: L4, count: 1}] (or nodes: [{gpus: [...]}, ...] "
                "for several GPU nodes)",
            )
        names = [node.name for node in self.gpu_nodes()]
        if len(set(names)) != len(names):
            raise at("nodes", f"node names {names} are not unique; give each node its own name")
        cards = sum(len(node.cards) for node in self.gpu_nodes())
        if cards > MAX_CARDS_PER_TENANT:
            key = "gpus" if self.gpus is not None else "nodes" if self.nodes is not None else "workers"
            raise at(key, f"declares {cards} cards; a tenant holds at most {MAX_CARDS_PER_TENANT} across its GPU nodes")

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
    metallb_addresses: list[str] = []

    @field_validator("metallb_addresses")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            problem = address_problem(address)
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _mode(self) -> Management:
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
    def _across_tenants(self) -> LabConfig:
        names = [tenant.name for tenant in self.tenants]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise at("tenants", f"duplicate names {duplicates}; every tenant needs its own name")
        stems = [tenant.output_stem for tenant in self.tenants]
        clashing = sorted({stem for stem in stems if stems.count(stem) > 1})
        if clashing:
            raise at("tenants", f"names {names} give clashing stack outputs {clashing}_*; rename one of them")
        # Container workers share the Docker host: their names (and hostnames) must differ across tenants.
        owner: dict[str, str] = {f"{self.management.name}-control-plane": "the management cluster"}
        for i, tenant in enumerate(self.tenants):
            if tenant.worker_mode != "container":
                continue
            for node in tenant.worker_node_names():
                if node in owner:
                    raise at(
                        f"tenants[{i}].nodes" if tenant.nodes is not None else f"tenants[{i}].name",
                        f"gives the container {node}, which {owner[node]} already uses; rename the tenant or node",
                    )
                owner[node] = f"tenant {tenant.name}"
        # One machine, one tenant: a second join would find kubelet.conf and report success on the first
        # tenant's node, and destroying either tenant would reset it.
        seen: dict[tuple[str, int], str] = {}
        for i, tenant in enumerate(self.tenants):
            for j, worker in enumerate(tenant.workers):
                key = (worker.host.lower(), worker.port)
                if key in seen and seen[key] != tenant.name:
                    raise at(
                        f"tenants[{i}].workers[{j}].host",
                        f"is already a worker of tenant {seen[key]}; a machine can join one tenant only",
                        worker.host,
                    )
                seen[key] = tenant.name
        max_major, max_minor = self.versions.kamaji_max_minor()
        problems: list[tuple[str, object, str]] = []
        if self.management.mode == "existing":
            problems += [
                (
                    f"tenants[{i}].workerMode",
                    "container",
                    "container workers live on the kind management cluster's Docker network; with management.mode "
                    "existing use workerMode: ssh",
                )
                for i, tenant in enumerate(self.tenants)
                if tenant.worker_mode == "container"
            ]
        for i, tenant in enumerate(self.tenants):
            major, minor, _ = parse_kubernetes_version(tenant.kubernetes_version)
            if (major, minor) > (max_major, max_minor):
                problems.append(
                    (
                        f"tenants[{i}].kubernetesVersion",
                        tenant.kubernetes_version,
                        f"the pinned Kamaji supports up to {self.versions.kamaji_max_kubernetes}.x; pick "
                        f"{self.versions.kamaji_max_kubernetes}.x or lower (or pin a newer Kamaji in versions)",
                    )
                )
                continue
            if tenant.worker_mode != "container":
                continue  # ssh workers bring their own kubelet; the remote check compares its version
            image = self.worker_image(tenant)
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
        if problems:
            raise KeyedError(problems)
        return self

    def worker_image(self, tenant: Tenant) -> str | None:
        return tenant.worker_image or self.versions.worker_node_images.get(tenant.kubernetes_version)


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


# Values are echoed so a user sees what was wrong, but never a secret: a key pasted under the wrong
# name would otherwise be printed whole (and with escaped newlines Pulumi's masking cannot match it).
_SECRET_NAME = re.compile(r"(key|secret|token|password|passphrase|kubeconfig|credential|cert)", re.IGNORECASE)
_SECRET_TEXT = re.compile(
    r"-----BEGIN|PRIVATE KEY|client-key-data|client-certificate-data|certificate-authority-data|token:|password:",
    re.IGNORECASE,
)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{40,}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")  # image digests are long but public
MAX_ECHO = 60


def _looks_secret(text: str) -> bool:
    return bool(_SECRET_TEXT.search(text) or _LONG_TOKEN.search(_DIGEST.sub("", text)))


def shown(key: str, value: object) -> str:
    """How a config value may be echoed in an error: hidden if it looks secret, else truncated."""
    text = repr(value)
    if _SECRET_NAME.search(key.rsplit(".", 1)[-1]) or _looks_secret(text):
        return f"<hidden: {len(str(value))} characters that may be a secret>"
    return text if len(text) <= MAX_ECHO else f"{text[: MAX_ECHO - 3]}... ({len(text)} characters)"


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def _scrub(message: str) -> str:
    """A validator's message with quoted values that look secret (or are long) cut out: some
    messages quote the offending value."""

    def quoted(match: re.Match[str]) -> str:
        text = match.group(0)
        if _looks_secret(text):
            return "<hidden>"
        return text if len(text) <= MAX_ECHO else f"{text[: MAX_ECHO - 3]}..."

    message = _QUOTED.sub(quoted, message)
    if _looks_secret(message):
        message = _LONG_TOKEN.sub(
            lambda m: m.group(0) if re.fullmatch("[0-9a-f]{64}", m.group(0)) else "<hidden>", message
        )
    return message if len(message) <= 400 else message[:397] + "..."


def _problem_line(key: str, value: object, message: str) -> str:
    message = _scrub(message)
    return (
        f"  {PROJECT}:{key}: {message}" if value is _NO_VALUE else f"  {PROJECT}:{key} = {shown(key, value)}: {message}"
    )


def format_errors(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        keyed = (item.get("ctx") or {}).get("error")
        if isinstance(keyed, KeyedError):
            base = _key_path(item["loc"])
            for relative, value, message in keyed.problems:
                key = f"{base}.{relative}" if base and not relative.startswith("[") else base + relative
                lines.append(_problem_line(key, value, message))
            continue
        key = f"{PROJECT}:{_key_path(item['loc'])}" if item["loc"] else f"{PROJECT}:<root>"
        message = _scrub(item["msg"].removeprefix("Value error, "))
        if item["type"] == "missing":
            lines.append(f"  {key}: is required but missing; set it in Pulumi.<stack>.yaml")
        elif item["type"] in ("value_error", "assertion_error") and not isinstance(item.get("input"), str | int):
            lines.append(f"  {key}: {message}")
        else:
            lines.append(f"  {key} = {shown(key, item.get('input'))}: {message}")
    return "invalid gpulab configuration (nothing was created):\n" + "\n".join(lines)


def parse_config(raw: dict[str, Any]) -> LabConfig:
    """Validate the `gpulab:*` config keys (without the prefix); raises ConfigError with every problem."""
    if not raw.get("tenants"):
        raise ConfigError(
            "invalid gpulab configuration (nothing was created):\n"
            f"  {PROJECT}:tenants = {shown('tenants', raw.get('tenants'))}: declare at least one tenant, "
            "e.g. [{name: tenant-a, gpus: [{model: A100-80GB, count: 1}]}] (see Pulumi.dev.yaml)"
        )
    try:
        return LabConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(format_errors(error)) from None


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
                f"  {PROJECT}:{key} is not set; it must hold {holds}: pulumi config set --secret {PROJECT}:{key} < FILE"
            )
        elif not is_secret(key):
            problems.append(
                f"  {PROJECT}:{key} holds {holds} in plain text; set it again with "
                f"pulumi config set --secret {PROJECT}:{key} < FILE"
            )
    if problems:
        raise ConfigError("invalid gpulab configuration (nothing was created):\n" + "\n".join(problems))


def load_config() -> LabConfig:
    """Read and validate the stack config inside a Pulumi program."""
    import pulumi

    config = pulumi.Config(PROJECT)
    raw = {key: config.get_object(key) for key in CONFIG_KEYS}
    try:
        lab = parse_config({key: value for key, value in raw.items() if value is not None})
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


def load_stack_file(path: Path) -> LabConfig:
    """Validate the `gpulab:*` keys of a `Pulumi.<stack>.yaml` (used by the offline checker)."""
    try:
        document = safe_yaml.load(safe_yaml.read_text(path), str(path))
    except safe_yaml.YamlError as error:
        raise ConfigError(str(error)) from None
    document = {} if document is None else document
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: must be a mapping with a `config:` key, not a {type(document).__name__}")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: `config` must be a mapping of `{PROJECT}:<key>: value`")
    bad = [key for key in config if not isinstance(key, str)]
    if bad:
        raise ConfigError(f"{path}: config keys must be strings like `{PROJECT}:tenants`, not {bad[0]!r}")
    raw = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{PROJECT}:")}
    return parse_config({key: value for key, value in raw.items() if key in CONFIG_KEYS})
