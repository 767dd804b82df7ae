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
from model.kube_objects.workload_manifests import workload_claim_template, workload_manifest


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
        previous_pod: pulumi.CustomResource | None = None
        for workload in tenant.workloads:
            manifest = workload_manifest(
                tenant, workload, lab.versions.workload_image, lab.scheduling.scheduler_name, lab.workload_pull_policy
            )
            kind = k8s.core.v1.Pod if manifest["kind"] == "Pod" else k8s.apps.v1.Deployment
            # GPU pods one after another: HAMi binds one pod at a time per node (its node lock), so pods created
            # together meet the lock, fail their bind (a warning each) and wait kube-scheduler's back-off.
            after: list[pulumi.Resource] = [previous_pod] if previous_pod is not None else []
            if (template := workload_claim_template(tenant, workload)) is not None:  # a DRA tenant's claim template
                after.append(
                    k8s.apiextensions.CustomResource(
                        f"{name}-{workload.name}-claim",
                        api_version=template["apiVersion"],
                        kind=template["kind"],
                        metadata=template["metadata"],
                        spec=template["spec"],
                        opts=child,
                    )
                )
            opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=after))
            if template is not None and manifest["kind"] == "Pod":
                # A pod's claims cannot change in place (the API server refuses a pod spec update): a workload that
                # asks otherwise names a new template, and its pod is replaced, the old one gone first (same name).
                replaced = pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
                opts = pulumi.ResourceOptions.merge(opts, replaced)
            resource = kind(f"{name}-{workload.name}", metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)
            self.resources.append(resource)
            if manifest["kind"] == "Pod":
                previous_pod = resource
        self.register_outputs({"workloads": [workload.name for workload in tenant.workloads]})
