"""TenantNamespaces: a tenant's GPU namespaces, their GPU quota, and the inventory ConfigMap that says
what the tenant's GPU nodes offer and allow (read by the policy pack and by tenant users).

In older stacks these were children of the tenant's GPU node component (`<tenant>-gpus`); each keeps
its name and carries an alias to that parent, so an existing stack adopts them without replacing any.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.parts import TenantGpus, TenantParts
from model.config import LabConfig
from model.kube_objects.tenant_objects import quota_initialised, tenant_objects


def former_parents(gpu_node: TenantGpus) -> list[pulumi.Alias]:
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
        self, name: str, parts: TenantParts, lab: LabConfig, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpulab:index:TenantNamespaces", name, None, opts)
        tenant, gpu_node, worker = parts.tenant, parts.gpus, parts.workers
        # Names as they were under the GPU node component (`<tenant>-gpus-...`), which was their parent.
        former = gpu_node.resource_name
        child = pulumi.ResourceOptions(
            parent=self,
            provider=parts.control_plane.provider,
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
                        metadata={
                            **quota["metadata"],
                            "namespace": namespace.metadata.name,
                            # Pulumi's own wait for a quota is one fixed minute: see quota_initialised.
                            "annotations": {"pulumi.com/waitFor": quota_initialised(quota["spec"]["hard"])},
                        },
                        spec=quota["spec"],
                        opts=child,
                    )
                )
        k8s.core.v1.ConfigMap(
            f"{former}-inventory-document", metadata=inventory["metadata"], data=inventory["data"], opts=child
        )
        self.register_outputs({"namespaces": list(tenant.namespaces)})
