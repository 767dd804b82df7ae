"""gpulab: several teams' own Kubernetes, with fractional (simulated) GPUs, on one Docker host.

config -> images pulled once on the host -> management cluster (kind, cert-manager, MetalLB, Kamaji)
       -> per tenant: control plane -> GPU admission policy (the pack's per-pod rules, in the tenant)
                                    -> workers -> GPU node (mock or real) -> namespaces, quota, inventory
                                                                          -> GPU workloads
Tenants are independent sub-graphs, so Pulumi builds them in parallel. The wing is chosen here, once
(components/wings.py, by the stack's runtime key): the Docker lab above (components/docker/lab.py), or process mode
(runtime: process; components/process/lab.py), where each tenant's parts are local processes (kwokctl's control
planes, KWOK nodes, hami-scheduler) and there is no management cluster or image cache. What each part gives the
next is components/parts.py; what each wing is like, model/wings.py; the model (model/) is plain Python.
"""

import pulumi

from components.gpu_admission import GpuAdmissionPolicy
from components.gpu_workloads import GpuWorkloads
from components.tenant_namespaces import TenantNamespaces
from components.wings import tenant_builder
from model.config import load_config

lab = load_config()  # validates everything before a single resource is declared
tenant_parts = tenant_builder(lab)  # the stack's wing: its shared parts now, then each tenant's

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
