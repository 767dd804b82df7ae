"""DraDevices: a DRA tenant's simulated cards as devices of gpulab's driver (model/dra.py), in process mode.

The tenant's DeviceClass and one ResourceSlice per GPU node, created through the tenant's provider once its KWOK
nodes exist. No program plays the driver: on a KWOK node nothing prepares a claim (there is no kubelet), and the
tenant's own kube-scheduler allocates claims from the slices alone (tests/real/test_dra_allocation.py).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from model import dra
from model.config import Tenant


def _object(name: str, manifest: dict, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    # CustomResource carries any apiVersion/kind through the provider's dynamic client (resource.k8s.io/v1 is
    # built in, not a CRD, which it handles the same way).
    body = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind", "metadata")}
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        opts=opts,
        **body,
    )


class DraDevices(pulumi.ComponentResource):
    """The tenant's DeviceClass and its GPU nodes' ResourceSlices."""

    readies: list[pulumi.Resource]

    def __init__(
        self, name: str, tenant: Tenant, provider: k8s.Provider, after: pulumi.Resource, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("gpulab:index:DraDevices", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[after])
        device_class = _object(f"{name}-class", dra.device_class(tenant.name), child)
        self.readies = [device_class]
        for node in tenant.gpu_nodes():
            manifest = dra.resource_slice(tenant.name, node.name, node.cards)
            self.readies.append(_object(f"{name}-{node.name}", manifest, child))
        self.register_outputs({"driver": dra.DRIVER, "device_class": dra.device_class_name(tenant.name)})
