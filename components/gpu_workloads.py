"""GpuWorkloads: the GPU pods and deployments a tenant declares in config.

They are plain Kubernetes resources (not a Helm release) so that the policy pack sees every one of
them at preview. They ask for `schedulerName: hami-scheduler` themselves, which keeps them on HAMi
even if its webhook ever fails open (../shared/notes/hami.md section 7).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE
from components.config import LabConfig, Tenant, Workload
from components.mock_gpu_node import MockGpuNode
from components.tenant_control_plane import TENANT_LABEL, TenantControlPlane

WORKLOAD_LABEL = "gpulab.io/workload"
# Sleeps until stopped and stops at once on SIGTERM (the mock has no CUDA to run).
IDLE_COMMAND = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait $!; done"]


def gpu_limits(workload: Workload) -> dict[str, str]:
    limits = {GPU_RESOURCE: str(workload.gpus)}
    if workload.gpumem is not None:
        limits[GPUMEM_RESOURCE] = str(workload.gpumem)
    if workload.gpumem_percentage is not None:
        limits[GPUMEM_PERCENTAGE_RESOURCE] = str(workload.gpumem_percentage)
    if workload.gpucores is not None:
        limits[GPUCORES_RESOURCE] = str(workload.gpucores)
    return limits


def pod_template(tenant: Tenant, workload: Workload, image: str) -> tuple[dict, dict]:
    """(metadata, spec) of the workload's pods."""
    labels = {"app.kubernetes.io/name": workload.name, TENANT_LABEL: tenant.name, WORKLOAD_LABEL: workload.name}
    spec = {
        "schedulerName": "hami-scheduler",
        "terminationGracePeriodSeconds": 5,
        "containers": [
            {"name": "gpu", "image": image, "command": IDLE_COMMAND, "resources": {"limits": gpu_limits(workload)}}
        ],
    }
    return {"labels": labels}, spec


class GpuWorkloads(pulumi.ComponentResource):
    """A tenant's declared GPU workloads, created once its GPU node is ready and its quota counts them."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        gpu_node: MockGpuNode,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:GpuWorkloads", name, None, opts)
        child = pulumi.ResourceOptions(
            parent=self, provider=control_plane.provider, depends_on=[gpu_node.ready, *gpu_node.namespaces, *gpu_node.quotas]
        )
        self.resources = []
        for workload in tenant.workloads:
            template_metadata, spec = pod_template(tenant, workload, lab.versions.workload_image)
            metadata = {
                "name": workload.name,
                "namespace": tenant.workload_namespace(workload),
                "labels": template_metadata["labels"],
            }
            if workload.kind == "Pod":
                resource: pulumi.CustomResource = k8s.core.v1.Pod(
                    f"{name}-{workload.name}", metadata=metadata, spec=spec, opts=child
                )
            else:
                resource = k8s.apps.v1.Deployment(
                    f"{name}-{workload.name}",
                    metadata=metadata,
                    spec={
                        "replicas": workload.replicas,
                        "selector": {"matchLabels": {WORKLOAD_LABEL: workload.name}},
                        "template": {"metadata": template_metadata, "spec": spec},
                    },
                    opts=child,
                )
            self.resources.append(resource)
        self.register_outputs({"workloads": [workload.name for workload in tenant.workloads]})
