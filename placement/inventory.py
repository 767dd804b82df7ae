"""Where a tenant's cards and limits come from, and the schema of the policy config.

One source of truth, three doors to it:
- the lab stack: the `kube-public/gpulab-gpu-inventory` ConfigMap each TenantNamespaces declares,
  generated from the stack's own config (so preview sees the cards without anyone repeating them);
- another stack (a tenant team deploying with its kubeconfig): the `tenants` policy config below;
- the offline checker: `Pulumi.<stack>.yaml`, validated by the same config model as the program.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from hami.cards import CardSpec, CardUse, NamespaceQuota, PodRequest
from hami.cluster import Cluster
from hami.nodes import Node
from hami.releases import rules_for
from model.catalog import DEFAULT_SPLIT_COUNT, GPU_CATALOG, MAX_CARDS, MAX_SPLIT_COUNT
from model.config import GpuQuota, LabConfig, PodLimits, Tenant
from model.names import INVENTORY_CONFIGMAP, INVENTORY_NAMESPACE


@dataclass(frozen=True)
class NamespaceUsage:
    """What a namespace's running pods already count against its quota, in HAMi's words (hami.cards CardUse and
    NamespaceQuota: memory_mb, cores), and the cards they ask for (the API server's nvidia.com/gpu quota)."""

    memory_mb: int = 0
    cores: int = 0
    gpus: int = 0

    def __add__(self, other: NamespaceUsage) -> NamespaceUsage:
        return NamespaceUsage(self.memory_mb + other.memory_mb, self.cores + other.cores, self.gpus + other.gpus)


@dataclass(frozen=True)
class TenantInventory:
    name: str
    cards: tuple[CardSpec, ...]
    limits: PodLimits
    quota: GpuQuota | None
    namespaces: tuple[str, ...]
    gpu_policy: str = "spread"
    # Current allocations, one per card (same order as `cards`); empty = nothing runs yet.
    card_usage: tuple[CardUse, ...] = ()
    namespace_usage: Mapping[str, NamespaceUsage] = field(default_factory=dict)
    # Several GPU nodes: (node name, how many of `cards` it holds), in card order; empty = one node.
    nodes: tuple[tuple[str, int], ...] = ()
    node_policy: str = "binpack"  # HAMi's nodeSchedulerPolicy (the chart's default)
    sharing: str = "hami"  # gpuSharing: dra shares the cards through DRA claims, not nvidia.com/* limits
    # The HAMi release the tenant runs (its hamiVersion): whose placement rules judge it (hami/releases.py).
    # v2.8.3 when not said: what gpulab judged with before tenants named a release.
    hami_version: str = "v2.8.3"

    def node_cards(self) -> list[tuple[str, tuple[CardSpec, ...]]]:
        """Each GPU node with its cards (one unnamed node when `nodes` is empty)."""
        if not self.nodes:
            return [("", self.cards)]
        found, start = [], 0
        for name, count in self.nodes:
            found.append((name, self.cards[start : start + count]))
            start += count
        return found

    def cluster(self, pods: Sequence[PodRequest], one_node: str = "") -> Cluster:
        """The GPU nodes as HAMi sees them now: each node's cards and their use, and one quota table per
        namespace (HAMi's quota counts a namespace over every node). `one_node` names a tenant's only node."""
        quotas = {}
        quota = self.quota
        if quota is not None and (quota.gpumem or quota.gpucores):
            namespaces = set(self.namespaces) or {pod.namespace for pod in pods} | set(self.namespace_usage)
            quotas = {ns: NamespaceQuota(quota.gpumem, quota.gpucores) for ns in namespaces}
        usage = {ns: (u.memory_mb, u.cores) for ns, u in self.namespace_usage.items()}
        use = list(self.card_usage) or None
        nodes, names, start = [], [], 0
        for name, cards in self.node_cards():
            nodes.append(Node(cards, use[start : start + len(cards)] if use else None, quotas, usage))
            names.append(name or one_node)
            start += len(cards)
        return Cluster(names, nodes, rules=rules_for(self.hami_version))

    def quota_applies(self, namespace: str) -> bool:
        """gpulab creates the quota in the tenant's workload namespaces (all, when none are listed)."""
        return not self.namespaces or namespace in self.namespaces


def from_tenant(tenant: Tenant, gpu_policy: str = "spread", node_policy: str = "binpack") -> TenantInventory:
    gpu_nodes = tenant.gpu_nodes()
    return TenantInventory(
        name=tenant.name,
        cards=tuple(CardSpec(c.id, c.type, c.memory_mb, c.cores, c.split_count) for c in tenant.cards()),
        limits=tenant.limits,
        quota=tenant.quota,
        namespaces=tuple(tenant.namespaces),
        gpu_policy=gpu_policy,
        nodes=tuple((node.name, len(node.cards)) for node in gpu_nodes) if len(gpu_nodes) > 1 else (),
        node_policy=node_policy,
        sharing=tenant.gpu_sharing,
        hami_version=tenant.hami_version,
    )


def from_lab_config(lab: LabConfig) -> dict[str, TenantInventory]:
    scheduling = lab.scheduling
    return {
        tenant.name: from_tenant(tenant, scheduling.gpu_scheduler_policy, scheduling.node_scheduler_policy)
        for tenant in lab.tenants
    }


def _document_nodes(document: Mapping[str, Any], cards: tuple[CardSpec, ...]) -> tuple[tuple[str, int], ...]:
    """The `nodes` of an inventory document as (name, card count), checked to list every card once,
    in card order (that is how the lab writes it)."""
    nodes = document.get("nodes")
    if not nodes:
        return ()
    listed = [(str(node["name"]), [str(card) for card in node["cards"]]) for node in nodes]
    if [card for _, ids in listed for card in ids] != [card.id for card in cards]:
        raise ValueError("its nodes do not list every card once, in the order of cards")
    return tuple((name, len(ids)) for name, ids in listed)


def from_inventory_document(document: Mapping[str, Any]) -> TenantInventory:
    """The JSON the lab writes into its inventory ConfigMap (model/kube_objects/tenant_objects.py)."""
    cards = tuple(
        CardSpec(c["id"], c["type"], int(c["memoryMb"]), int(c.get("cores", 100)), int(c.get("splitCount", 10)))
        for c in document["cards"]
    )
    quota = document.get("quota") or None
    return TenantInventory(
        name=document["tenant"],
        cards=cards,
        limits=PodLimits.model_validate(document.get("limits") or {}),
        quota=GpuQuota.model_validate(quota) if quota else None,
        namespaces=tuple(document.get("namespaces") or ()),
        gpu_policy=document.get("gpuSchedulerPolicy", "spread"),
        nodes=_document_nodes(document, cards),
        node_policy=document.get("nodeSchedulerPolicy", "binpack"),
        sharing=document.get("sharing", "hami"),
        hami_version=_hami_version(document.get("hamiVersion", "v2.8.3")),
    )


def _hami_version(version: Any) -> str:
    """A document's hamiVersion, checked to name a release hami/releases.py has rules for (ValueError)."""
    rules_for(version)
    return version


def is_inventory_configmap(resource_type: str, props: Mapping[str, Any]) -> bool:
    # Type first: during preview other resources' props may hold unknowns, which must not be touched.
    if resource_type != "kubernetes:core/v1:ConfigMap":
        return False
    metadata = props.get("metadata") or {}
    return metadata.get("name") == INVENTORY_CONFIGMAP and metadata.get("namespace") == INVENTORY_NAMESPACE


def from_stack_resources(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, TenantInventory]:
    """Inventories declared by a lab stack, from (type, props) pairs."""
    found = {}
    for resource_type, props in resources:
        if is_inventory_configmap(resource_type, props):
            try:
                inventory = from_inventory_document(json.loads((props.get("data") or {})["inventory.json"]))
            except (KeyError, TypeError, AttributeError, ValueError) as error:
                raise ValueError(
                    f"ConfigMap {INVENTORY_NAMESPACE}/{INVENTORY_CONFIGMAP} is malformed ({type(error).__name__}: "
                    f"{str(error)[:200]})"
                ) from None
            found[inventory.name] = inventory
    return found


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class PolicyCards(_Model):
    """Cards by catalog model (`model`), or described outright (`type` + `memoryMb`)."""

    count: int = Field(default=1, gt=0, le=MAX_CARDS)
    model: str | None = None
    type: str | None = None
    memory_mb: int | None = Field(default=None, gt=0)
    cores: int = Field(default=100, gt=0, le=100)
    split_count: int = Field(default=DEFAULT_SPLIT_COUNT, gt=0, le=MAX_SPLIT_COUNT)

    @model_validator(mode="after")
    def _described(self) -> PolicyCards:
        if self.model is not None:
            if self.model not in GPU_CATALOG:
                raise ValueError(f"unknown GPU model {self.model!r}; use one of {', '.join(GPU_CATALOG)}")
        elif self.type is None or self.memory_mb is None:
            raise ValueError("give either `model` (from the catalog) or both `type` and `memoryMb`")
        return self


class PolicyCardUsage(_Model):
    """What already runs on one card (HAMi's Used, Usedmem, Usedcores)."""

    slots: int = Field(default=0, ge=0, le=10_000)
    memory_mb: int = Field(default=0, ge=0, le=10**9)
    cores: int = Field(default=0, ge=0, le=100)


class PolicyNamespaceUsage(_Model):
    gpumem: int = Field(default=0, ge=0, le=10**12)
    gpucores: int = Field(default=0, ge=0, le=10**9)
    gpus: int = Field(default=0, ge=0, le=10**6)


class PolicyUsage(_Model):
    """Current usage: per card, by index in the tenant's card list (0 = first card), and per namespace."""

    cards: dict[int, PolicyCardUsage] = {}
    namespaces: dict[str, PolicyNamespaceUsage] = {}


class PolicyNode(_Model):
    """One of a tenant's GPU nodes and its cards (instead of the tenant's `cards`)."""

    name: str = Field(min_length=1, max_length=63)
    cards: list[PolicyCards] = Field(min_length=1)


class PolicyTenant(_Model):
    cards: list[PolicyCards] | None = Field(default=None, min_length=1)
    nodes: list[PolicyNode] | None = Field(default=None, min_length=1, max_length=16)
    limits: PodLimits = PodLimits()
    quota: GpuQuota | None = None
    namespaces: list[str] = []
    gpu_scheduler_policy: Literal["spread", "binpack"] = "spread"
    node_scheduler_policy: Literal["spread", "binpack"] = "binpack"
    usage: PolicyUsage = PolicyUsage()
    # The HAMi release the tenant runs (hami/releases.py); v2.8.3 when not said, as before releases were named.
    hami_version: str = "v2.8.3"

    @field_validator("hami_version")
    @classmethod
    def _known_release(cls, value: str) -> str:
        return _hami_version(value)

    def all_cards(self) -> list[PolicyCards]:
        return list(self.cards or ()) + [entry for node in self.nodes or () for entry in node.cards]

    @model_validator(mode="after")
    def _usage_on_known_cards(self) -> PolicyTenant:
        if (self.cards is None) == (self.nodes is None):
            raise ValueError("give either `cards` (one GPU node) or `nodes` (several), exactly one of them")
        names = [node.name for node in self.nodes or ()]
        if len(set(names)) != len(names):
            raise ValueError(f"nodes {names} are not unique; give each node its own name")
        count = sum(entry.count for entry in self.all_cards())
        if count > MAX_CARDS:
            raise ValueError(f"declares {count} cards; a tenant holds at most {MAX_CARDS}")
        for index in self.usage.cards:
            if not 0 <= index < count:
                raise ValueError(f"usage.cards has card {index}, but the tenant has cards 0..{count - 1}")
        return self


class GpuPolicyConfig(_Model):
    """Config of the `gpu-request-limits` and `gpu-placement-order` policies (both optional):

    {"tenants": {"<tenant>": {"cards": [{"model": "A100-80GB", "count": 1}],
                              "limits": {"gpus": 1, "gpumem": 81920, "gpucores": 100},
                              "quota": {"gpumem": 81920, "gpucores": 100, "gpus": 10},
                              "namespaces": ["gpu-workloads"], "gpuSchedulerPolicy": "spread"}},
     "defaultTenant": "<tenant>"}

    `tenants` replaces the inventories a lab stack declares; `defaultTenant` names the tenant of
    workloads that carry no `gpulab.io/tenant` label (a tenant team's stack deploys into one tenant).
    """

    tenants: dict[str, PolicyTenant] = {}
    default_tenant: str | None = None
    enforcement_level: str | None = None  # CrossGuard's own key, passed through in the config


def parse_policy_config(config: Mapping[str, Any]) -> GpuPolicyConfig:
    try:
        return GpuPolicyConfig.model_validate(dict(config))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in error.errors()
        )
        raise ValueError(f"invalid policy config: {problems}") from None


def from_policy_config(config: GpuPolicyConfig) -> dict[str, TenantInventory]:
    inventories = {}
    for name, tenant in config.tenants.items():
        cards: list[CardSpec] = []
        for entry in tenant.all_cards():  # node after node; usage indexes count across them
            card_type = GPU_CATALOG[entry.model].type if entry.model else entry.type
            memory = GPU_CATALOG[entry.model].memory_mb if entry.model else entry.memory_mb
            assert card_type is not None and memory is not None
            for _ in range(entry.count):
                cards.append(CardSpec(f"{name}-card-{len(cards)}", card_type, memory, entry.cores, entry.split_count))
        used = tenant.usage.cards
        inventories[name] = TenantInventory(
            name=name,
            cards=tuple(cards),
            limits=tenant.limits,
            quota=tenant.quota,
            namespaces=tuple(tenant.namespaces),
            gpu_policy=tenant.gpu_scheduler_policy,
            card_usage=tuple(
                CardUse(used[i].slots, used[i].memory_mb, used[i].cores) if i in used else CardUse()
                for i in range(len(cards))
            )
            if used
            else (),
            namespace_usage={
                ns: NamespaceUsage(u.gpumem, u.gpucores, u.gpus) for ns, u in tenant.usage.namespaces.items()
            },
            nodes=tuple((node.name, sum(e.count for e in node.cards)) for node in tenant.nodes)
            if tenant.nodes and len(tenant.nodes) > 1
            else (),
            node_policy=tenant.node_scheduler_policy,
            hami_version=tenant.hami_version,
        )
    return inventories
