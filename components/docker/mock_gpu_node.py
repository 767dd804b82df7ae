"""MockGpuNode: HAMi and simulated GPUs in a tenant (gpuMode mock, the default).

HAMi's scheduler places pods by `nvidia.com/gpumem` / `nvidia.com/gpucores` on cards it reads from
the node's `hami.io/node-nvidia-register` annotation; a device plugin advertises those same cards to the kubelet.
Which plugin is the tenant's devicePlugin (model/config/hami.py device_plugin):
- mock (the default on hamiVersion v2.8.3): HAMi's chart's mock-device-plugin, with the register annotation and
  nvidia.com/gpu capacity written from config by apply-gpu-inventory.sh (the mock writes neither) and HAMi's
  node-lock timeout (it never releases the lock). Every choice follows HAMi v2.8.3 and mock-device-plugin 1.0.1
  (hami_chart.py names the files);
- gpulab (the default on v2.10.0): gpulab-hami-plugin as a DaemonSet (hami_device_plugin.py), which registers every
  resource with the kubelet, writes the annotation and releases the lock itself: gpulab waits for what it registers,
  then installs HAMi's chart, so HAMi finds each node's cards on its first look (v2.8.3 reads them again only when
  the count of nvidia.com/gpu changes, pkg/device/nvidia/device.go CheckHealth).
Real GPUs are RealGpuNode's (real_gpu_node.py), process mode's ProcessGpuNode's (components/process/gpu_node.py);
the tenant's namespaces, quotas and inventory ConfigMap are TenantNamespaces' (tenant_namespaces.py).
"""

from __future__ import annotations

import pulumi

from components.docker.hami_chart import HAMI_NAMESPACE, HamiGpuNode, gpu_node_ready
from components.docker.hami_device_plugin import HamiDevicePlugin
from components.docker.tenant_control_plane import TenantControlPlane
from components.docker.tenant_worker import TenantWorker
from components.shell import script_command
from model.catalog import Card, gpu_capacity, register_annotation, totals
from model.config import LabConfig, Tenant
from model.config.hami import device_plugin
from model.kube_objects.hami_device_plugin import NAME as PLUGIN_NAME


def plugin_wait(node_cards: list[Card], webhook: bool) -> dict[str, str]:
    """What a GPU node's waits also ask where gpulab's plugin registers it (wait-gpu-node.sh)."""
    return {
        "REGISTER_JSON": register_annotation(node_cards),
        "PLUGIN_SELECTOR": f"app.kubernetes.io/name={PLUGIN_NAME}",
        "WEBHOOK": "yes" if webhook else "no",
    }


class MockGpuNode(HamiGpuNode):
    """HAMi + a device plugin of simulated cards (the chart's mock, or gpulab's) + each GPU node's cards."""

    plugin: HamiDevicePlugin | None = None

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        worker: TenantWorker,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        gpulab = device_plugin(lab, tenant) == "gpulab"
        registered: list[pulumi.Resource] = []

        def gpulab_plugin() -> list[pulumi.Resource]:
            """gpulab's plugin on each GPU node, and the wait until each node carries what it registers: the
            resources in its allocatable and its cards in the register annotation (HAMi not installed yet)."""
            self.plugin = HamiDevicePlugin(
                f"{name}-plugin",
                tenant,
                lab,
                control_plane,
                after=[worker.ready],
                opts=pulumi.ResourceOptions(parent=self),
            )
            for prefix, node in self._node_prefixes(tenant):
                opts = pulumi.ResourceOptions(parent=self, depends_on=[self.plugin.daemon_set])
                wait = plugin_wait(node.cards, webhook=False)
                registered.append(
                    gpu_node_ready(prefix, node.name, totals(node.cards), control_plane, opts, wait, "registered")
                )
            return registered

        super().__init__(
            "gpulab:index:MockGpuNode",
            name,
            tenant,
            lab,
            control_plane,
            worker,
            opts,
            gpulab_plugin if gpulab else None,
        )
        previous: pulumi.Resource = self.hami
        for prefix, node in self._node_prefixes(tenant):
            if gpulab:  # the plugin wrote the annotation; the kubelet has the capacity from it
                ready_opts = pulumi.ResourceOptions(parent=self, depends_on=[self.hami])
                wait = plugin_wait(node.cards, webhook=True)
                self.readies.append(
                    gpu_node_ready(prefix, node.name, totals(node.cards), control_plane, ready_opts, wait)
                )
                continue
            # The register annotation and capacity written from config. One inventory write at a time:
            # a changed inventory restarts hami-scheduler, and two restarts at once would race
            # (apply-gpu-inventory.sh).
            previous = script_command(
                f"{prefix}-inventory",
                "apply-gpu-inventory.sh",
                stdin=control_plane.kubeconfig,
                environment={
                    "NODE_NAME": node.name,
                    "REGISTER_JSON": register_annotation(node.cards),
                    "GPU_CAPACITY": str(gpu_capacity(node.cards)),
                    "HAMI_NAMESPACE": HAMI_NAMESPACE,
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[previous]),
            )
            ready_opts = pulumi.ResourceOptions(parent=self, depends_on=[previous])
            self.readies.append(gpu_node_ready(prefix, node.name, totals(node.cards), control_plane, ready_opts))
        self._finish()
