"""The config's building blocks: patterns and limits, the base model, and the small models a tenant is made
of (GPU cards and nodes, limits, quota, workloads, SSH workers)."""

from __future__ import annotations

import ipaddress
import math
import re
import typing
from typing import Annotated, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from model.catalog import (
    GPU_CATALOG,
    MAX_CARDS,
    MAX_REPLICAS,
    Card,
)
from model.config.errors import at
from model.network import canonical_host, host_address, host_problem
from model.wings import WINGS

# Kamaji requires TenantControlPlane names to be DNS-1035 labels (internal/webhook/handlers/tcp_name.go);
# 40 characters leaves room for the suffixes gpulab adds (container, namespace and secret names).
# Every pattern is matched whole (fullmatch) and ASCII only: `$` would accept a trailing newline and
# `\d` other scripts' digits, and both would reach container names, flags and manifests.
TENANT_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", re.ASCII)
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
DURATION = re.compile(r"[0-9]{1,6}(ms|s|m)", re.ASCII)
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60}


def duration_seconds(value: str) -> int | None:
    """Whole seconds of a duration DURATION matches (`4m` -> 240), rounded up; None for anything else."""
    if not DURATION.fullmatch(value):
        return None
    number = value.rstrip("ms")
    return math.ceil(int(number) * _DURATION_UNITS[value[len(number) :]])


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
# gpulab puts cluster DNS at the 10th address of the service range (model/docker_lab/kamaji.py), so the range
# must hold it below its broadcast address: at least a /28.
MAX_SERVICE_PREFIX = 28
MAX_GPU_NODES = 16  # GPU nodes per tenant: far above a lab, keeps a typo from creating dozens of containers
# A GPU node's own name; the node is `<tenant>-<name>`, so 40 + 1 + 16 stays a DNS label (<= 63).
GPU_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?", re.ASCII)


class ConfigModel(BaseModel):
    """The base of every config model: unknown keys refused, camelCase keys, frozen, no booleans as counts."""

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


class GpuCards(ConfigModel):
    model: str
    count: int = Field(gt=0, le=MAX_CARDS)

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in GPU_CATALOG:
            raise ValueError(f"unknown GPU model; use one of: {', '.join(GPU_CATALOG)}")
        return value


class GpuNode(ConfigModel):
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


class PodLimits(ConfigModel):
    """Per-pod caps enforced by the policy pack and the admission policy: sums over a pod's app containers, or under
    HAMi v2.10.0 (which places init containers) the pod's effective request, the larger of that sum and its largest
    init container, a native sidecar among them as HAMi counts it (placement/per_pod.py `pod_asks`)."""

    gpus: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpumem: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT, description="MB")
    gpucores: int | None = Field(default=None, gt=0, le=800, description="percent of one card, summed")


class GpuQuota(ConfigModel):
    """A ResourceQuota in each workload namespace, with the keys HAMi tracks (HAMi v2.8.3 pkg/device/quota.go)."""

    gpumem: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpucores: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)
    gpus: int | None = Field(default=None, gt=0, le=MAX_POD_LIMIT)


class Workload(ConfigModel):
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


class SshWorker(ConfigModel):
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
    def address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The machine's IP address when `host` is one (None for a hostname)."""
        return host_address(self.host)

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


def _wing_name(value: object) -> object:
    """A row of model/wings.py, refused as a Literal of their names would be (the same error, the same line)."""
    if isinstance(value, str) and value in WINGS:
        return value
    names = [repr(name) for name in WINGS]
    expected = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


# `gpulab:runtime`: the name of the lab's wing, whichever wings model/wings.py has (a throwaway one in a test too).
WingName = Annotated[str, BeforeValidator(_wing_name)]
