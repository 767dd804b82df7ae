"""HAMi's chart in a tenant, shared by the Docker lab's GPU node components (MockGpuNode, RealGpuNode): the values,
its Release, the wait until a GPU node is usable through HAMi, and the base both components build on. A mock tenant's
device plugin is the chart's mock plugin (devicePlugin: mock) or gpulab's (devicePlugin: gpulab: the chart's mock
plugin off, hami_device_plugin.py's DaemonSet instead).
Every choice below follows Project-HAMi/HAMi at tag v2.8.3 (its files named in comments), and holds at tag v2.10.0
too (every value set here exists in both charts' values.yaml: tests/components/test_mock_gpu_node.py and
test_hami_device_plugin.py); the chart is the tenant's release's (hamiVersion, model/hami_releases.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.docker.sources import release_chart, sources
from components.docker.tenant_control_plane import TenantControlPlane
from components.docker.tenant_worker import TenantWorker
from components.parts import gpu_node_prefixes
from components.shell import script_command
from model.catalog import Card, register_annotation, totals
from model.config import LabConfig, NodeCards, Tenant
from model.config.hami import device_plugin
from model.kube_objects.hami_device_plugin import CARDS_HASH_ANNOTATION, cards_data, cards_hash
from model.names import HAMI_NAMESPACE

HAMI_RELEASE = "hami"  # fullname `hami`: Deployment hami-scheduler, ConfigMap hami-scheduler-device


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
        # (charts/hami/templates/_helpers.tpl: the tag is .Capabilities' version unless set).
        "kubeScheduler": {
            "image": {"registry": "registry.k8s.io", "repository": "kube-scheduler", "tag": tenant.kubernetes_version}
        },
        "defaultSchedulerPolicy": {
            "nodeSchedulerPolicy": scheduling.node_scheduler_policy,
            "gpuSchedulerPolicy": scheduling.gpu_scheduler_policy,
        },
        # ClusterIP: none of the chart's NodePorts (31998, 31993, 31992: charts/hami/values.yaml) is claimed.
        "service": {"type": "ClusterIP"},
    }
    values: dict = {
        "scheduler": scheduler,
        # The real NVIDIA plugin DaemonSet selects `gpu: "on"`: set on real GPU nodes only.
        "devicePlugin": {"deviceSplitCount": tenant.split_count, "service": {"type": "ClusterIP"}},
    }
    # The chart's own extraArgs are `--debug -v=4`; the lab sets its client's rate and the verbosity for either mode.
    scheduler["extender"] = {"extraArgs": ["--debug", *scheduling.hami_flags()]}
    plugin = device_plugin(lab, tenant)
    if plugin == "gpulab":
        # gpulab-hami-plugin releases the node lock itself (its Allocate, as HAMi's plugin): no lock timeout. HAMi
        # v2.8.3 reads a node's register annotation again only when its nvidia.com/gpu count changes (pkg/device/
        # nvidia/device.go CheckHealth; v2.10.0 also when the annotation changes): the cards' hash on the scheduler's
        # pod (the plugin pods' own) restarts it when they change, after the plugin wrote them (mock_gpu_node.py).
        nodes = {node.name: node.cards for node in tenant.gpu_nodes()}
        scheduler["podAnnotations"] = {CARDS_HASH_ANNOTATION: cards_hash(cards_data(nodes))}
        values["mockDevicePlugin"] = {"enabled": False}  # the chart's default, said: gpulab's plugin instead
    if plugin == "mock":
        # The mock plugin never releases HAMi's node lock, so every bind after the first would wait
        # 5 minutes. `nodeLockExpire` is ignored (HAMi #2790); this flag works (cmd/scheduler/main.go). Real plugins
        # release the lock themselves, and a short timeout there risks swapped allocations (HAMi #3096).
        scheduler["extender"]["extraArgs"].append(f"--node-lock-timeout={scheduling.node_lock_timeout}")
        # The chart's mock plugin, and not the mock repo's manifests too: both name their RBAC hami-mock-device-plugin
        # (templates/device-plugin/daemonsetmock.yaml; mock-device-plugin's k8s-mock-rbac.yaml).
        values["mockDevicePlugin"] = {"enabled": True, "image": split_image(lab.versions.mock_device_plugin_image)}
    return values


def hami_release(
    name: str, tenant: Tenant, lab: LabConfig, control_plane: TenantControlPlane, opts: pulumi.ResourceOptions
) -> k8s.helm.v3.Release:
    """helm.v3.Release, not Chart v4: HAMi's webhook certificate comes from Helm hook Jobs, and the
    release renders against the tenant's real version (.Capabilities: charts/hami/templates/_helpers.tpl)."""
    return k8s.helm.v3.Release(
        f"{name}-hami",
        name=HAMI_RELEASE,
        **release_chart(lab.hami_chart(tenant), sources(lab)),
        namespace=HAMI_NAMESPACE,
        values=hami_values(tenant, lab),
        timeout=600,
        # Destroying the tenant's control plane removes HAMi with it. Without this, a destroy after the
        # tenant was deleted by hand would stop here: the provider refuses to delete a Release on an
        # unreachable cluster whatever deleteUnreachable says (see ManagementCluster._dropped_with_the_cluster).
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(deleted_with=control_plane.tenant_control_plane)
        ),
    )


def gpu_node_ready(
    prefix: str,
    node_name: str,
    expect: dict[str, int],
    control_plane: TenantControlPlane,
    opts: pulumi.ResourceOptions,
    plugin: dict[str, str] | None = None,
    suffix: str = "ready",
) -> command.local.Command:
    """Waits until the node advertises `expect` and HAMi's webhook serves (wait-gpu-node.sh). `plugin`: what the
    wait also asks where gpulab's device plugin registers the node (REGISTER_JSON, PLUGIN_SELECTOR, WEBHOOK)."""
    return script_command(
        f"{prefix}-{suffix}",
        "wait-gpu-node.sh",
        stdin=control_plane.kubeconfig,
        environment={
            "NODE_NAME": node_name,
            "EXPECT_JSON": json.dumps(expect, sort_keys=True),
            "PYTHON": sys.executable,
            "HAMI_NAMESPACE": HAMI_NAMESPACE,
            "TIMEOUT": "600",
            **(plugin or {}),
        },
        opts=opts,
    )


class HamiGpuNode(pulumi.ComponentResource):
    """What a GPU node component is, mock or real: HAMi in the tenant once the worker is ready, the tenant's
    cards, and a readiness Command per GPU node (the subclass adds each node's own resources)."""

    resource_name: str  # its children's names start with it
    former_type: str | None = None  # the type token it had in older stacks, if another
    cards: list[Card]
    advertised: dict[str, int]
    register_annotation: str
    hami: k8s.helm.v3.Release
    ready: command.local.Command  # the first GPU node's readiness
    readies: list[command.local.Command]  # every GPU node's

    def __init__(
        self,
        type_: str,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        opts: pulumi.ResourceOptions | None,
        hami_after: Callable[[], list[pulumi.Resource]] | None = None,
    ) -> None:
        """`hami_after`: what HAMi's release waits for besides the worker, made (as this component's children) before
        it."""
        super().__init__(type_, name, None, opts)
        self.resource_name = name
        self.cards = tenant.cards()
        self.advertised = totals(self.cards)
        self.register_annotation = register_annotation(self.cards)
        self.readies = []
        after = [worker.ready, *(hami_after() if hami_after else [])]
        after_worker = pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=after)
        self.hami = hami_release(name, tenant, lab, control_plane, after_worker)

    def _node_prefixes(self, tenant: Tenant) -> list[tuple[str, NodeCards]]:
        return gpu_node_prefixes(self.resource_name, tenant)

    def _finish(self) -> None:
        self.ready = self.readies[0]
        self.register_outputs({"cards": [card.__dict__ for card in self.cards], "advertised": self.advertised})
