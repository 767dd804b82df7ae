"""GpuWorkloads: the GPU pods and deployments a tenant declares in config.

They are plain Kubernetes resources (not a Helm release) so that the policy pack sees every one of
them at preview, created once the tenant's GPU node is ready and its quota exists to count them.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.parts import TenantParts
from components.tenant_namespaces import TenantNamespaces
from model.config import LabConfig
from model.workload_manifests import workload_manifest


class GpuWorkloads(pulumi.ComponentResource):
    """A tenant's declared GPU workloads."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        parts: TenantParts,
        lab: LabConfig,
        namespaces: TenantNamespaces,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:GpuWorkloads", name, None, opts)
        tenant = parts.tenant
        child = pulumi.ResourceOptions(
            parent=self,
            provider=parts.control_plane.provider,
            depends_on=[*parts.gpus.readies, *namespaces.namespaces, *namespaces.quotas],
        )
        self.resources = []
        for workload in tenant.workloads:
            manifest = workload_manifest(
                tenant, workload, lab.versions.workload_image, lab.scheduling.scheduler_name, lab.workload_pull_policy
            )
            kind = k8s.core.v1.Pod if manifest["kind"] == "Pod" else k8s.apps.v1.Deployment
            self.resources.append(
                kind(f"{name}-{workload.name}", metadata=manifest["metadata"], spec=manifest["spec"], opts=child)
            )
        self.register_outputs({"workloads": [workload.name for workload in tenant.workloads]})
