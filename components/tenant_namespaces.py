"""TenantNamespaces: a tenant's GPU namespaces, their GPU quota, and the inventory ConfigMap that says
what the tenant's GPU nodes offer and allow (read by the policy pack and by tenant users).

Until issue 23 these were children of the tenant's GPU node component (`<tenant>-gpus`); each keeps
its name and carries an alias to that parent, so an existing stack adopts them without replacing any.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s

from components.hami import HamiGpuNode
from components.tenant_control_plane import TenantControlPlane
from components.tenant_worker import TenantWorker
from model.catalog import GPUCORES_RESOURCE, GPUMEM_RESOURCE, Card
from model.config import LabConfig, Tenant
from model.names import INVENTORY_CONFIGMAP, INVENTORY_LABEL, INVENTORY_NAMESPACE, TENANT_LABEL


def quota_hard(tenant: Tenant) -> dict[str, str]:
    """ResourceQuota keys HAMi tracks: limits.nvidia.com/gpumem|gpucores; the GPU count via the native
    requests.nvidia.com/gpu (HAMi ignores limits.nvidia.com/gpu; ../shared/notes/hami.md section 5)."""
    quota = tenant.quota
    if quota is None:
        return {}
    hard = {}
    if quota.gpumem is not None:
        hard[f"limits.{GPUMEM_RESOURCE}"] = str(quota.gpumem)
    if quota.gpucores is not None:
        hard[f"limits.{GPUCORES_RESOURCE}"] = str(quota.gpucores)
    if quota.gpus is not None:
        hard["requests.nvidia.com/gpu"] = str(quota.gpus)
    return hard


def inventory_document(tenant: Tenant, lab: LabConfig, cards: list[Card], node_name: str) -> dict:
    """What the tenant's GPU node(s) offer and allow; read by the policy pack and by tenant users.
    `cards` lists every card; with several GPU nodes, `nodes` says which node holds which (by id) and
    the node policy HAMi applies between them. A one-node tenant's document is as it always was."""
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
    }
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


def former_parents(gpu_node: HamiGpuNode) -> list[pulumi.Alias]:
    """Aliases to the parent these resources had: the GPU node component. A RealGpuNode was a MockGpuNode
    then; besides the engine following its own alias, name that parent's URN outright (a top-level
    component's, as the engine forms it: pulumi.create_urn without a parent)."""
    aliases = [pulumi.Alias(parent=gpu_node)]
    if gpu_node.former_type is not None:
        aliases.append(pulumi.Alias(parent=pulumi.create_urn(gpu_node.resource_name, gpu_node.former_type)))
    return aliases


class TenantNamespaces(pulumi.ComponentResource):
    """The tenant's namespaces (labelled with the tenant), a GPU ResourceQuota in each, and its inventory."""

    namespaces: list[k8s.core.v1.Namespace]
    quotas: list[k8s.core.v1.ResourceQuota]

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        gpu_node: HamiGpuNode,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:TenantNamespaces", name, None, opts)
        # Names as they were under the GPU node component (`<tenant>-gpus-...`), which was their parent.
        former = gpu_node.resource_name
        child = pulumi.ResourceOptions(
            parent=self,
            provider=control_plane.provider,
            depends_on=[worker.ready],
            aliases=former_parents(gpu_node),
        )
        self.namespaces = []
        self.quotas = []
        namespaces, quotas, inventory = tenant_objects(tenant, lab, gpu_node.cards, worker.node_name)
        for namespace_object in namespaces:
            namespace_name = namespace_object["metadata"]["name"]
            namespace = k8s.core.v1.Namespace(
                f"{former}-ns-{namespace_name}", metadata=namespace_object["metadata"], opts=child
            )
            self.namespaces.append(namespace)
            quota = quotas.get(namespace_name)
            if quota:
                self.quotas.append(
                    k8s.core.v1.ResourceQuota(
                        f"{former}-quota-{namespace_name}",
                        # The namespace's output, not its name: the quota waits for the namespace.
                        metadata={**quota["metadata"], "namespace": namespace.metadata.name},
                        spec=quota["spec"],
                        opts=child,
                    )
                )
        k8s.core.v1.ConfigMap(
            f"{former}-inventory-document", metadata=inventory["metadata"], data=inventory["data"], opts=child
        )
        self.register_outputs({"namespaces": list(tenant.namespaces)})
