"""A tenant's namespaces, their GPU quota and the inventory ConfigMap (what its GPU nodes offer and allow, read
by the policy pack and by tenant users), as plain Kubernetes objects: components/tenant_namespaces.py creates
them in the Docker lab and process mode; process_lab's tenants apply them with the real kubectl."""

from __future__ import annotations

import json

from model import dra
from model.catalog import GPUCORES_RESOURCE, GPUMEM_RESOURCE, Card
from model.config import LabConfig, Tenant
from model.names import INVENTORY_CONFIGMAP, INVENTORY_LABEL, INVENTORY_NAMESPACE, TENANT_LABEL
from model.quantity import canonical_whole


def quota_hard(tenant: Tenant) -> dict[str, str]:
    """ResourceQuota keys HAMi tracks: limits.nvidia.com/gpumem|gpucores; the GPU count via the native
    requests.nvidia.com/gpu (HAMi ignores limits.nvidia.com/gpu; HAMi v2.8.3 pkg/device/quota.go)."""
    quota = tenant.quota
    if quota is None:
        return {}
    if tenant.gpu_sharing == "dra":  # only the devices its claims ask count (model/config/rules.py refuses the rest)
        return {dra.devices_quota_key(tenant.name): str(quota.gpus)} if quota.gpus is not None else {}
    hard = {}
    if quota.gpumem is not None:
        hard[f"limits.{GPUMEM_RESOURCE}"] = str(quota.gpumem)
    if quota.gpucores is not None:
        hard[f"limits.{GPUCORES_RESOURCE}"] = str(quota.gpucores)
    if quota.gpus is not None:
        hard["requests.nvidia.com/gpu"] = str(quota.gpus)
    return hard


def quota_initialised(hard: dict[str, str]) -> str:
    """The quota's `pulumi.com/waitFor` value: every key of `status.hard` holds the value of `spec.hard`, as the
    API server writes it (`20k` for 20000). The quota controller writes that status; until it does, the API
    server's quota admission reads an empty `status.hard` and counts nothing, so a workload created then could
    pass the quota (k8s.io/apiserver pkg/admission/plugin/resourcequota/controller.go). pulumi-kubernetes' own
    wait for a quota gives up after one fixed minute (provider/v4 pkg/await/awaiters.go
    untilCoreV1ResourceQuotaInitialized), too short for a tenant's controller-manager starting on a busy host;
    a waitFor condition replaces that wait and has the resource's timeout, ten minutes (pkg/await/await.go,
    pkg/metadata/overrides.go ReadyCondition)."""
    return json.dumps(
        [f"jsonpath={{.status.hard['{key}']}}={canonical_whole(int(value))}" for key, value in sorted(hard.items())]
    )


def inventory_document(tenant: Tenant, lab: LabConfig, cards: list[Card], node_name: str) -> dict:
    """What the tenant's GPU node(s) offer and allow; read by the policy pack and by tenant users.
    `cards` lists every card; with several GPU nodes, `nodes` says which node holds which (by id) and
    the node policy HAMi applies between them, and `hamiVersion` the HAMi release the tenant runs."""
    document = {
        "tenant": tenant.name,
        "mode": tenant.gpu_mode,
        "node": node_name,
        "gpuSchedulerPolicy": lab.scheduling.gpu_scheduler_policy,
        "cards": [
            {"id": c.id, "type": c.type, "memoryMb": c.memory_mb, "cores": c.cores, "splitCount": c.split_count}
            for c in cards
        ],
        "limits": tenant.limits.model_dump(by_alias=True, exclude_none=True),
        "quota": tenant.quota.model_dump(by_alias=True, exclude_none=True) if tenant.quota else {},
        "namespaces": list(tenant.namespaces),
        # The HAMi release the tenant runs: whose placement rules the pack judges it with (placement/inventory.py
        # `from_inventory_document`; a document without it, written before releases were named, reads as v2.8.3).
        "hamiVersion": tenant.hami_version,
    }
    if tenant.gpu_sharing == "dra":  # its pods claim the cards through DRA: nvidia.com/* limits find no node
        document["sharing"] = "dra"
    gpu_nodes = tenant.gpu_nodes()
    if len(gpu_nodes) > 1:
        document["nodeSchedulerPolicy"] = lab.scheduling.node_scheduler_policy
        document["nodes"] = [{"name": node.name, "cards": [card.id for card in node.cards]} for node in gpu_nodes]
    return document


def tenant_objects(
    tenant: Tenant, lab: LabConfig, cards: list[Card], node_name: str
) -> tuple[list[dict], dict[str, dict], dict]:
    """The tenant's namespaces, their quotas (by namespace) and the inventory ConfigMap, as Kubernetes
    objects: what this component creates, and what the process-mode lab applies."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {TENANT_LABEL: tenant.name}}}
        for name in tenant.namespaces
    ]
    hard = quota_hard(tenant)
    quotas = {
        name: {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpulab-gpu-quota", "namespace": name},
            "spec": {"hard": hard},
        }
        for name in tenant.namespaces
        if hard
    }
    inventory = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": INVENTORY_CONFIGMAP,
            "namespace": INVENTORY_NAMESPACE,
            "labels": {TENANT_LABEL: tenant.name, INVENTORY_LABEL: "true"},
        },
        "data": {"inventory.json": json.dumps(inventory_document(tenant, lab, cards, node_name), indent=2)},
    }
    return namespaces, quotas, inventory
