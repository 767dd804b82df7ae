"""gpulab: several teams' own Kubernetes, with fractional (simulated) GPUs, on one Docker host.

config -> images pulled once on the host -> management cluster (kind, cert-manager, MetalLB, Kamaji)
       -> per tenant: control plane -> GPU admission policy (the pack's per-pod rules, in the tenant)
                                    -> workers -> GPU node (mock or real) -> namespaces, quota, inventory
                                                                          -> GPU workloads
Tenants are independent sub-graphs, so Pulumi builds them in parallel. The runtime is chosen here, once: the
Docker lab above, or process mode (runtime: process), where each tenant's parts are local processes
(kwokctl's control planes, KWOK nodes, hami-scheduler) and there is no management cluster or image cache.
What each part gives the next is components/parts.py; the model (model/) is plain Python.
"""

from collections.abc import Callable

import pulumi

from components.docker.image_cache import ImageCache
from components.docker.management_cluster import ManagementCluster
from components.docker.mock_gpu_node import MockGpuNode
from components.docker.real_gpu_node import RealGpuNode
from components.docker.sources import check_sources
from components.docker.tenant_control_plane import TenantControlPlane
from components.docker.tenant_worker import TenantWorker
from components.gpu_admission import GpuAdmissionPolicy
from components.gpu_workloads import GpuWorkloads
from components.parts import TenantParts
from components.process.control_plane import ProcessControlPlane, process_stack
from components.process.gpu_node import ProcessGpuNode
from components.process.kwok_workers import KwokWorkers
from components.process.node_container_workers import LabNetwork, NodeContainerWorkers
from components.tenant_namespaces import TenantNamespaces
from model.config import LabConfig, Tenant, load_config
from model.names import docker_name


def docker_lab(lab: LabConfig) -> Callable[[Tenant], TenantParts]:
    """The Docker lab: kind's management cluster with Kamaji; per tenant a TenantControlPlane, node containers
    (or SSH machines) and HAMi's chart."""
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


def process_lab(lab: LabConfig) -> Callable[[Tenant], TenantParts]:
    """Process mode: per tenant a control plane of local processes, its workers (KWOK nodes, or node containers
    with real kubelets on the lab's --internal network: workers: containers) and HAMi as a local process."""
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


lab = load_config()  # validates everything before a single resource is declared
tenant_parts = process_lab(lab) if lab.process_mode else docker_lab(lab)

for tenant in lab.tenants:
    parts = tenant_parts(tenant)
    if tenant.gpu_sharing == "hami":  # its rules are on pods' nvidia.com limits, which DRA pods do not carry
        GpuAdmissionPolicy(f"{tenant.name}-admission", tenant, parts.control_plane.provider, lab.runs_hami(tenant))
    namespaces = TenantNamespaces(f"{tenant.name}-namespaces", parts, lab)
    if tenant.workloads:
        GpuWorkloads(f"{tenant.name}-workloads", parts, lab, namespaces)

    prefix = tenant.output_stem  # tenant-a -> tenant_a_kubeconfig, ...
    pulumi.export(f"{prefix}_kubeconfig", parts.control_plane.kubeconfig)
    pulumi.export(f"{prefix}_endpoint", parts.control_plane.endpoint)
    pulumi.export(f"{prefix}_node", parts.workers.node_name)
    # A real card's id is its UUID, which only its node knows: real cards are listed without the catalog's
    # placeholder (GPU-MOCK-...), and a node's cards by their index on it.
    real = tenant.gpu_mode == "real"
    cards = [{key: value for key, value in c.__dict__.items() if not (real and key == "id")} for c in parts.gpus.cards]
    gpu_summary = {"cards": cards, "advertised": parts.gpus.advertised}
    if len(gpu_nodes := tenant.gpu_nodes()) > 1:  # which node holds which card (one node: as always)
        gpu_summary["nodes"] = [
            {"name": node.name, "cards": [card.index if real else card.id for card in node.cards]} for node in gpu_nodes
        ]
    pulumi.export(f"{prefix}_gpus", gpu_summary)
