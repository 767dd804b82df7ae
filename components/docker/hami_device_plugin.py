"""HamiDevicePlugin: gpulab's HAMi device plugin (tools/gpulab-hami-plugin) in a Docker-lab tenant, as a DaemonSet.

A mock tenant with `devicePlugin: gpulab` runs it in place of HAMi's chart's mock plugin: the objects are
model/kube_objects/hami_device_plugin.py's (its ServiceAccount and exactly its RBAC, the ConfigMap of each GPU node's
cards, the DaemonSet on the GPU nodes), created once the worker is Ready and before HAMi's chart (mock_gpu_node.py
orders them). The plugin then registers nvidia.com/gpu, gpumem, gpucores and gpumem-percentage with each node's kubelet
(which puts them in the node's capacity), writes the node's register annotation, and does HAMi's bind-time writes in its
Allocate; gpulab writes neither the annotation nor the capacity for such a tenant.

The image is `make lab-images`' (versions.hamiDevicePluginImage): the lab's loader puts it into each node container
before the join (model/docker_lab/images.py lists it), so the pods run it with imagePullPolicy Never there and a
missing image is ErrImageNeverPull naming it, never a pull. SSH machines pull their images themselves (IfNotPresent).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.docker.tenant_control_plane import TenantControlPlane
from model.config import LabConfig, Tenant
from model.kube_objects.hami_device_plugin import plugin_objects

KINDS = {
    "ServiceAccount": (k8s.core.v1.ServiceAccount, "sa"),
    "ClusterRole": (k8s.rbac.v1.ClusterRole, "role"),
    "ClusterRoleBinding": (k8s.rbac.v1.ClusterRoleBinding, "binding"),
    "ConfigMap": (k8s.core.v1.ConfigMap, "cards"),
    "DaemonSet": (k8s.apps.v1.DaemonSet, "daemonset"),
}
FIELD_ARGS = {"roleRef": "role_ref"}  # the Python SDK's argument for a top-level field


def pull_policy(tenant: Tenant) -> str:
    """Never where the lab loads the image into the node (its containers), IfNotPresent on SSH machines."""
    return "Never" if tenant.worker_mode == "container" else "IfNotPresent"


class HamiDevicePlugin(pulumi.ComponentResource):
    """gpulab-hami-plugin on each of a tenant's GPU nodes: RBAC, cards, DaemonSet."""

    daemon_set: k8s.apps.v1.DaemonSet
    objects: list[dict]  # the Kubernetes objects, as model/kube_objects/hami_device_plugin.py builds them

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        lab: LabConfig,
        control_plane: TenantControlPlane,
        after: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:HamiDevicePlugin", name, None, opts)
        nodes = {node.name: node.cards for node in tenant.gpu_nodes()}
        image = lab.versions.hami_device_plugin_image
        self.objects = plugin_objects(image, tenant.hami_version, nodes, pull_policy(tenant))
        # Destroying the tenant's control plane removes them with it (as HAMi's release: hami_chart.py).
        options = pulumi.ResourceOptions(
            parent=self,
            provider=control_plane.provider,
            depends_on=after,
            deleted_with=control_plane.tenant_control_plane,
        )
        created: dict[str, pulumi.Resource] = {}
        for item in self.objects:
            make, suffix = KINDS[item["kind"]]
            first: list[pulumi.Resource] = []
            if item["kind"] == "DaemonSet":
                # Its pods run as the ServiceAccount with its rights, and mount the cards. Not awaited by the provider:
                # the wait for what the plugin registers (mock_gpu_node.py) names the pod's state while it waits.
                first = [created[kind] for kind in ("ServiceAccount", "ClusterRoleBinding", "ConfigMap")]
                item = {**item, "metadata": {**item["metadata"], "annotations": {"pulumi.com/skipAwait": "true"}}}
            args = {FIELD_ARGS.get(key, key): value for key, value in item.items() if key not in ("apiVersion", "kind")}
            created[item["kind"]] = make(
                f"{name}-{suffix}",
                **args,
                opts=pulumi.ResourceOptions.merge(options, pulumi.ResourceOptions(depends_on=first)),
            )
        self.daemon_set = created["DaemonSet"]  # type: ignore[assignment]
        self.register_outputs({"nodes": sorted(nodes), "image": image})
