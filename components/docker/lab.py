"""The Docker wing's one entry (components/wings.py registers it): kind's management cluster with Kamaji and the
images pulled once on the host, then per tenant a TenantControlPlane, node containers (or SSH machines) and HAMi's
chart."""

from __future__ import annotations

import pulumi

from components.docker.image_cache import ImageCache
from components.docker.management_cluster import ManagementCluster
from components.docker.mock_gpu_node import MockGpuNode
from components.docker.real_gpu_node import RealGpuNode
from components.docker.sources import check_sources
from components.docker.tenant_control_plane import TenantControlPlane
from components.docker.tenant_worker import TenantWorker
from components.parts import TenantBuilder, TenantParts
from model.config import LabConfig, Tenant


def tenant_builder(lab: LabConfig) -> TenantBuilder:
    """Declares what the tenants share (the management cluster, its exports) and returns how a tenant is built."""
    check_sources(lab)  # with a source cache: everything the stack needs is in it, or nothing is declared
    images = ImageCache("images", lab)  # pulled once on the host, loaded into each node before it runs them
    management = ManagementCluster("management", lab, images)
    pulumi.export("management_kubeconfig", management.kubeconfig)
    if management.metallb_pool is not None:
        pulumi.export("metallb_pool", management.metallb_pool)
    if management.kind_subnet is not None:
        pulumi.export("kind_subnet", management.kind_subnet)

    def tenant_parts(tenant: Tenant) -> TenantParts:
        control_plane = TenantControlPlane(
            tenant.name,
            tenant,
            management,
            lab.versions.kamaji_max_kubernetes,
            lab.management.control_plane_startup_seconds,
        )
        workers = TenantWorker(f"{tenant.name}-worker", tenant, lab, management, control_plane, images)
        GpuNode = MockGpuNode if tenant.gpu_mode == "mock" else RealGpuNode
        gpus = GpuNode(f"{tenant.name}-gpus", tenant, lab, control_plane, workers)
        return TenantParts(tenant, control_plane, workers, gpus)

    return tenant_parts
