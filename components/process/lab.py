"""The process wing's one entry (components/wings.py registers it): per tenant a control plane of local processes,
its workers (KWOK nodes, or node containers with real kubelets on the lab's --internal network: workers: containers)
and HAMi as a local process; no management cluster, no image cache."""

from __future__ import annotations

import pulumi

from components.parts import TenantBuilder, TenantParts
from components.process.control_plane import ProcessControlPlane, process_stack
from components.process.gpu_node import ProcessGpuNode
from components.process.kwok_workers import KwokWorkers
from components.process.node_container_workers import LabNetwork, NodeContainerWorkers
from model.config import LabConfig, Tenant
from model.names import docker_name


def tenant_builder(lab: LabConfig) -> TenantBuilder:
    """Declares what the tenants share (the programs' check, the nodes' network) and returns how a tenant is built."""
    # The programs `make tools` built, checked before any starts (hami-scheduler if a tenant runs HAMi).
    stack = process_stack(pulumi.get_stack(), lab.hami_versions)
    network = None
    if lab.real_nodes:
        network_name = docker_name(f"gpulab-{pulumi.get_project()}-{pulumi.get_stack()}")
        network = LabNetwork("nodes-network", network_name, owner=str(stack.folder))
        pulumi.export("nodes_network", network_name)

    def tenant_parts(tenant: Tenant) -> TenantParts:
        hami = lab.runs_hami(tenant)
        if network is None:
            control_plane = ProcessControlPlane(tenant.name, tenant, stack, hami=hami)
            workers: KwokWorkers | NodeContainerWorkers = KwokWorkers(f"{tenant.name}-worker", tenant, control_plane)
        else:
            control_plane = ProcessControlPlane(tenant.name, tenant, stack, network.gateway, hami, after=[network])
            image = lab.worker_image(tenant) or ""
            images = lab.real_node_images(tenant)
            workers = NodeContainerWorkers(
                f"{tenant.name}-worker", tenant, image, images, network, network_name, control_plane
            )
        gpus = ProcessGpuNode(f"{tenant.name}-gpus", tenant, lab, stack, control_plane, workers)
        return TenantParts(tenant, control_plane, workers, gpus)

    return tenant_parts
