"""gpulab: several teams' own Kubernetes, with fractional (simulated) GPUs, on one Docker host.

config -> images pulled once on the host -> management cluster (kind, cert-manager, MetalLB, Kamaji)
       -> per tenant: control plane -> GPU admission policy (the pack's per-pod rules, in the tenant)
                                    -> worker -> GPU node (mock or real) -> namespaces, quota, inventory
                                                                         -> GPU workloads
Tenants are independent sub-graphs, so Pulumi builds them in parallel. In process mode (runtime: process)
the same graph runs on local processes: kwokctl's control planes, KWOK nodes, hami-scheduler. The model
(model/) is plain Python; the components here build on it.
"""

import pulumi

from components.gpu_admission import GpuAdmissionPolicy
from components.gpu_workloads import GpuWorkloads
from components.image_cache import ImageCache
from components.management_cluster import ManagementCluster
from components.mock_gpu_node import MockGpuNode
from components.real_gpu_node import RealGpuNode
from components.tenant_control_plane import TenantControlPlane
from components.tenant_namespaces import TenantNamespaces
from components.tenant_worker import TenantWorker
from model.config import load_config

lab = load_config()  # validates everything before a single resource is declared

images = ImageCache("images", lab)  # pulled once on the host, loaded into each node before it runs them
management = ManagementCluster("management", lab, images)  # process mode (runtime: process): no cluster
if management.kubeconfig is not None:
    pulumi.export("management_kubeconfig", management.kubeconfig)
if management.metallb_pool is not None:
    pulumi.export("metallb_pool", management.metallb_pool)
if management.kind_subnet is not None:
    pulumi.export("kind_subnet", management.kind_subnet)

for tenant in lab.tenants:
    control_plane = TenantControlPlane(tenant.name, tenant, management, lab.versions.kamaji_max_kubernetes)
    GpuAdmissionPolicy(f"{tenant.name}-admission", tenant, control_plane.provider)
    worker = TenantWorker(f"{tenant.name}-worker", tenant, lab, management, control_plane, images)
    GpuNode = MockGpuNode if tenant.gpu_mode == "mock" else RealGpuNode
    gpus = GpuNode(f"{tenant.name}-gpus", tenant, lab, control_plane, worker)
    namespaces = TenantNamespaces(f"{tenant.name}-namespaces", tenant, lab, control_plane, worker, gpus)
    if tenant.workloads:
        GpuWorkloads(f"{tenant.name}-workloads", tenant, lab, control_plane, gpus, namespaces)

    prefix = tenant.output_stem  # tenant-a -> tenant_a_kubeconfig, ...
    pulumi.export(f"{prefix}_kubeconfig", control_plane.kubeconfig)
    pulumi.export(f"{prefix}_endpoint", control_plane.endpoint)
    pulumi.export(f"{prefix}_node", worker.node_name)
    # A real card's id is its UUID, which only its node knows: real cards are listed without the catalog's
    # placeholder (GPU-MOCK-...), and a node's cards by their index on it.
    real = tenant.gpu_mode == "real"
    cards = [{key: value for key, value in card.__dict__.items() if not (real and key == "id")} for card in gpus.cards]
    gpu_summary = {"cards": cards, "advertised": gpus.advertised}
    if len(gpu_nodes := tenant.gpu_nodes()) > 1:  # which node holds which card (one node: as always)
        gpu_summary["nodes"] = [
            {"name": node.name, "cards": [card.index if real else card.id for card in node.cards]} for node in gpu_nodes
        ]
    pulumi.export(f"{prefix}_gpus", gpu_summary)
