"""MockGpuNode: HAMi and simulated GPUs in a tenant, plus the tenant's GPU quota.

HAMi's scheduler places pods by `nvidia.com/gpumem` / `nvidia.com/gpucores` on cards it reads from
the node's `hami.io/node-nvidia-register` annotation; the mock device plugin advertises those same
cards to the kubelet. Every choice below is from ../shared/notes/hami.md (sections in comments).
"""

from __future__ import annotations

import json
import sys

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.shell import script_command
from components.tenant_control_plane import TenantControlPlane
from components.tenant_worker import TenantWorker
from model.catalog import (
    GPU_RESOURCE,
    GPUCORES_RESOURCE,
    GPUMEM_RESOURCE,
    Card,
    gpu_capacity,
    register_annotation,
    totals,
)
from model.config import LabConfig, Tenant
from model.names import INVENTORY_CONFIGMAP, INVENTORY_LABEL, INVENTORY_NAMESPACE, TENANT_LABEL

HAMI_RELEASE = "hami"  # fullname `hami`: Deployment hami-scheduler, ConfigMap hami-scheduler-device
HAMI_NAMESPACE = "kube-system"  # the mock plugin mounts hami-scheduler-device from its own namespace (section 6)


def split_image(image: str) -> dict[str, str]:
    """`registry/repo:tag[@digest]` -> the chart's {registry, repository, tag} (digest kept on the tag)."""
    registry, _, rest = image.partition("/")
    repository, _, tag = rest.partition(":")
    return {"registry": registry, "repository": repository, "tag": tag}


def hami_values(tenant: Tenant, lab: LabConfig) -> dict:
    """HAMi chart values; every key exists in the pinned chart's values.yaml (checked in tests)."""
    scheduling = lab.scheduling
    scheduler: dict = {
        # The in-pod kube-scheduler must match the tenant API server; Aliyun's default mirror may lag
        # (section 1, "How the kube-scheduler sidecar image is chosen").
        "kubeScheduler": {
            "image": {"registry": "registry.k8s.io", "repository": "kube-scheduler", "tag": tenant.kubernetes_version}
        },
        "defaultSchedulerPolicy": {
            "nodeSchedulerPolicy": scheduling.node_scheduler_policy,
            "gpuSchedulerPolicy": scheduling.gpu_scheduler_policy,
        },
        # ClusterIP: no NodePort is claimed on the workers (checklist item 12).
        "service": {"type": "ClusterIP"},
    }
    values: dict = {
        "scheduler": scheduler,
        # The real NVIDIA plugin DaemonSet selects `gpu: "on"`: set on real GPU nodes only.
        "devicePlugin": {"deviceSplitCount": tenant.split_count, "service": {"type": "ClusterIP"}},
    }
    if tenant.gpu_mode == "mock":
        # The mock plugin never releases HAMi's node lock, so every bind after the first would wait
        # 5 minutes. `nodeLockExpire` is ignored (#2790); this flag works (section 3). Real plugins
        # release the lock themselves, and a short timeout there risks swapped allocations (#3096).
        scheduler["extender"] = {
            "extraArgs": ["--debug", "-v=4", f"--node-lock-timeout={scheduling.node_lock_timeout}"]
        }
        # The chart's mock plugin, and not the mock repo's manifests too: same RBAC names (checklist item 11).
        values["mockDevicePlugin"] = {"enabled": True, "image": split_image(lab.versions.mock_device_plugin_image)}
    return values


def quota_hard(tenant: Tenant) -> dict[str, str]:
    """ResourceQuota keys HAMi tracks: limits.nvidia.com/gpumem|gpucores; the GPU count via the native
    requests.nvidia.com/gpu (HAMi ignores limits.nvidia.com/gpu; section 5)."""
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


class MockGpuNode(pulumi.ComponentResource):
    """HAMi + the node's GPUs + per-tenant GPU quota. gpuMode mock (default): the mock device plugin and a
    simulated inventory written from config. gpuMode real: HAMi's NVIDIA device plugin on the node, and
    the declared cards checked against what it registers."""

    cards: list[Card]
    advertised: dict[str, int]
    register_annotation: str
    namespaces: list[k8s.core.v1.Namespace]
    quotas: list[k8s.core.v1.ResourceQuota]
    ready: command.local.Command  # the first GPU node's readiness
    readies: list[command.local.Command]  # every GPU node's

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:MockGpuNode", name, None, opts)
        self.cards = tenant.cards()
        self.advertised = totals(self.cards)
        self.register_annotation = register_annotation(self.cards)
        after_worker = pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=[worker.ready])

        # helm.v3.Release, not Chart v4: HAMi's webhook certificate comes from Helm hook Jobs, and the
        # release renders against the tenant's real version (.Capabilities; section 1).
        hami = k8s.helm.v3.Release(
            f"{name}-hami",
            name=HAMI_RELEASE,
            chart=lab.versions.hami.chart,
            version=lab.versions.hami.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=lab.versions.hami.repo),
            namespace=HAMI_NAMESPACE,
            values=hami_values(tenant, lab),
            timeout=600,
            # Destroying the tenant's control plane removes HAMi with it. Without this, a destroy after the
            # tenant was deleted by hand would stop here: the provider refuses to delete a Release on an
            # unreachable cluster whatever deleteUnreachable says (see ManagementCluster._dropped_with_the_cluster).
            opts=pulumi.ResourceOptions.merge(
                after_worker, pulumi.ResourceOptions(deleted_with=control_plane.tenant_control_plane)
            ),
        )
        gpu_nodes = tenant.gpu_nodes()
        self.readies = []
        previous: pulumi.Resource = hami
        for node in gpu_nodes:
            # One node keeps the resource names it always had; with several, each name carries the node.
            prefix = f"{name}-{node.name}" if len(gpu_nodes) > 1 else name
            set_up = self._node_set_up(prefix, tenant, control_plane, node.name, node.cards, previous)
            if tenant.gpu_mode == "mock":
                # One inventory write at a time: a changed inventory restarts hami-scheduler, and two
                # restarts at once would race (apply-gpu-inventory.sh).
                previous = set_up
            expect = totals(node.cards) if tenant.gpu_mode == "mock" else {GPU_RESOURCE: gpu_capacity(node.cards)}
            self.readies.append(
                script_command(
                    f"{prefix}-ready",
                    "wait-gpu-node.sh",
                    stdin=control_plane.kubeconfig,
                    environment={
                        "NODE_NAME": node.name,
                        "EXPECT_JSON": json.dumps(expect, sort_keys=True),
                        "PYTHON": sys.executable,
                        "HAMI_NAMESPACE": HAMI_NAMESPACE,
                        "TIMEOUT": "600",
                    },
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[set_up]),
                )
            )
        self.ready = self.readies[0]

        self.namespaces = []
        self.quotas = []
        hard = quota_hard(tenant)
        for namespace_name in tenant.namespaces:
            namespace = k8s.core.v1.Namespace(
                f"{name}-ns-{namespace_name}",
                metadata={"name": namespace_name, "labels": {TENANT_LABEL: tenant.name}},
                opts=after_worker,
            )
            self.namespaces.append(namespace)
            if hard:
                quota = k8s.core.v1.ResourceQuota(
                    f"{name}-quota-{namespace_name}",
                    metadata={"name": "gpulab-gpu-quota", "namespace": namespace.metadata.name},
                    spec={"hard": hard},
                    opts=after_worker,
                )
                self.quotas.append(quota)

        k8s.core.v1.ConfigMap(
            f"{name}-inventory-document",
            metadata={
                "name": INVENTORY_CONFIGMAP,
                "namespace": INVENTORY_NAMESPACE,
                "labels": {TENANT_LABEL: tenant.name, INVENTORY_LABEL: "true"},
            },
            data={
                "inventory.json": json.dumps(inventory_document(tenant, lab, self.cards, worker.node_name), indent=2)
            },
            opts=after_worker,
        )
        self.register_outputs(
            {
                "cards": [card.__dict__ for card in self.cards],
                "advertised": self.advertised,
            }
        )

    def _node_set_up(
        self,
        prefix: str,
        tenant: Tenant,
        control_plane: TenantControlPlane,
        node_name: str,
        cards: list[Card],
        after: pulumi.Resource,
    ) -> pulumi.Resource:
        """Gives one GPU node its cards: mock, the register annotation and capacity written from config;
        real, the `gpu: on` label that starts HAMi's NVIDIA plugin, and the declared cards checked
        against what it registers. The real plugin advertises only the card slots; memory and cores are
        HAMi's bookkeeping."""
        if tenant.gpu_mode == "mock":
            return script_command(
                f"{prefix}-inventory",
                "apply-gpu-inventory.sh",
                stdin=control_plane.kubeconfig,
                environment={
                    "NODE_NAME": node_name,
                    "REGISTER_JSON": register_annotation(cards),
                    "GPU_CAPACITY": str(gpu_capacity(cards)),
                    "HAMI_NAMESPACE": HAMI_NAMESPACE,
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[after]),
            )
        label = k8s.core.v1.NodePatch(
            f"{prefix}-gpu-label",
            metadata={"name": node_name, "labels": {"gpu": "on"}, "annotations": {"pulumi.com/patchForce": "true"}},
            opts=pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=[after]),
        )
        return script_command(
            f"{prefix}-expectation",
            "check-real-gpus.sh",
            stdin=control_plane.kubeconfig,
            environment={
                "NODE_NAME": node_name,
                "EXPECT_CARDS": json.dumps([{"type": c.type, "memoryMb": c.memory_mb} for c in cards]),
                "PYTHON": sys.executable,
                "TIMEOUT": "600",
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[label]),
        )
