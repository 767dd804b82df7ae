"""TenantControlPlane: one Kamaji control plane per tenant, on a MetalLB IP, and its admin kubeconfig.

Its spec is model/docker_lab/kamaji.py's, which wait-kamaji.sh's probe shares; Kamaji 26.8.2-edge's CRD judges both
in tests.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.parts import tenant_provider
from components.shell import script_command
from model.config import Tenant
from model.docker_lab.kamaji import (
    control_plane_namespace,
    control_plane_spec,
)
from model.docker_lab.kube_proxy import config_map_data, kube_proxy_objects
from model.names import KAMAJI_MAX_ANNOTATION, TENANT_LABEL

if TYPE_CHECKING:
    from components.docker.management_cluster import ManagementCluster


READY_TIMEOUT_SECONDS = 900  # Pulumi's wait for the TenantControlPlane's Ready condition


class KamajiTenantControlPlane(pulumi.CustomResource):
    """The Kamaji CR, with `status` readable (pulumi-kubernetes' CustomResource exposes only the spec)."""

    status: pulumi.Output[dict]

    def __init__(self, resource_name: str, metadata: dict, spec: dict, opts: pulumi.ResourceOptions) -> None:
        super().__init__(
            "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane",
            resource_name,
            {
                "apiVersion": "kamaji.clastix.io/v1alpha1",
                "kind": "TenantControlPlane",
                "metadata": metadata,
                "spec": spec,
                "status": None,
            },
            opts,
        )


# kubeadm's kube-proxy objects as typed resources (model/docker_lab/kube_proxy.py), with the suffix of each one's name.
KUBE_PROXY_KINDS = {
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
    "Role": k8s.rbac.v1.Role,
    "RoleBinding": k8s.rbac.v1.RoleBinding,
    "ConfigMap": k8s.core.v1.ConfigMap,
    "DaemonSet": k8s.apps.v1.DaemonSet,
}
KUBE_PROXY_SUFFIX = {
    "ServiceAccount": "sa",
    "ClusterRoleBinding": "crb",
    "Role": "role",
    "RoleBinding": "rolebinding",
    "ConfigMap": "config",
    "DaemonSet": "daemonset",
}
FIELD_ARGS = {"roleRef": "role_ref"}  # the Python SDK's argument for a top-level field


def admin_secret_id(namespace: str, status: dict) -> str:
    return f"{namespace}/{status['kubeconfig']['admin']['secretName']}"


def endpoint_ip(status: dict) -> str:
    """`status.controlPlaneEndpoint` is `<address>:<port>`; the address is the MetalLB IP."""
    return status["controlPlaneEndpoint"].rsplit(":", 1)[0]


class TenantControlPlane(pulumi.ComponentResource):
    """A Kamaji TenantControlPlane, Ready, with its admin kubeconfig (secret) and a provider on it."""

    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    provider: k8s.Provider
    api_ready: command.local.Command
    tenant_control_plane: KamajiTenantControlPlane
    kube_proxy: list[pulumi.Resource]  # the tenant's kube-proxy objects: its CNI needs Services

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        management: ManagementCluster,
        kamaji_max_kubernetes: str,
        startup_seconds: int,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:TenantControlPlane", name, None, opts)
        in_management = pulumi.ResourceOptions(parent=self, provider=management.provider)

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": control_plane_namespace(tenant), "labels": {TENANT_LABEL: tenant.name}},
            opts=in_management,
        )
        # Depends on the namespace through its name, so destroy deletes the TCP (and waits for Kamaji's
        # finalizers to clean its datastore) before the namespace; and on Kamaji, which must outlive it.
        self.tenant_control_plane = KamajiTenantControlPlane(
            f"{name}-tcp",
            metadata={
                "name": tenant.name,
                "namespace": namespace.metadata.name,
                "labels": {TENANT_LABEL: tenant.name, "tenant.clastix.io": tenant.name},
                "annotations": {
                    # TCPs have no conditions; Ready is this status string
                    # (Kamaji api/v1alpha1/tenantcontrolplane_status.go).
                    "pulumi.com/waitFor": "jsonpath={.status.kubernetesResources.version.status}=Ready",
                    "pulumi.com/timeoutSeconds": str(READY_TIMEOUT_SECONDS),
                    KAMAJI_MAX_ANNOTATION: kamaji_max_kubernetes,
                },
            },
            spec=control_plane_spec(tenant, startup_seconds),
            opts=pulumi.ResourceOptions.merge(
                in_management, pulumi.ResourceOptions(depends_on=management.ready_for_tenants)
            ),
        )
        status = self.tenant_control_plane.status

        # The read's id is unknown until the TCP exists, which defers the read on a fresh stack's first
        # preview instead of failing on a missing Secret (pulumi pkg/resource/deploy/step.go, ReadStep.Apply).
        admin = k8s.core.v1.Secret.get(
            f"{name}-admin-kubeconfig",
            pulumi.Output.all(namespace.metadata.name, status).apply(lambda args: admin_secret_id(*args)),
            opts=pulumi.ResourceOptions(
                parent=self, provider=management.provider, depends_on=[self.tenant_control_plane]
            ),
        )
        self.kubeconfig = pulumi.Output.secret(
            admin.data.apply(lambda data: base64.b64decode(data["admin.conf"]).decode())
        )
        self.endpoint = status.apply(endpoint_ip)

        self.api_ready = script_command(
            f"{name}-api-ready",
            "wait-tenant-api.sh",
            stdin=self.kubeconfig,
            environment={"TENANT": tenant.name, "TIMEOUT": "300"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[admin]),
        )
        self._finish(name, tenant)

    def _finish(self, name: str, tenant: Tenant) -> None:
        self.provider = tenant_provider(name, self, self.kubeconfig, self.api_ready)
        self.kube_proxy = self._kube_proxy(name, tenant)
        self.register_outputs({"kubeconfig": self.kubeconfig, "endpoint": self.endpoint})

    def _kube_proxy(self, name: str, tenant: Tenant) -> list[pulumi.Resource]:
        """The tenant's kube-proxy (model/docker_lab/kube_proxy.py), in place of Kamaji's addon, once the API
        answers. A TCP that had the addon until this update gets it removed first (the TCP's update comes before
        this, which depends on it), and Kamaji then deletes its own objects of the same names: the handover waits
        for that."""
        handover = script_command(
            f"{name}-kube-proxy-handover",
            "wait-kube-proxy-handover.sh",
            stdin=self.kubeconfig,
            # The same update rolls the TCP's pod out (its probes changed); should the TCP be NotReady meanwhile,
            # Kamaji stops its soot controllers until it is Ready again (controllers/soot/manager.go).
            environment={"TENANT": tenant.name, "TIMEOUT": "600"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.api_ready, self.tenant_control_plane]),
        )
        in_container = tenant.worker_mode == "container"
        data = self.tenant_control_plane.status.apply(
            lambda status: config_map_data(status["controlPlaneEndpoint"], tenant.pod_cidr, in_container)
        )
        objects = kube_proxy_objects(tenant.kubernetes_version, data)
        # Destroying the TCP takes them with it (as HAMi's release: components/docker/hami_chart.py).
        options = pulumi.ResourceOptions(
            parent=self, provider=self.provider, depends_on=[handover], deleted_with=self.tenant_control_plane
        )
        created: dict[str, pulumi.Resource] = {}
        for kind_, make in KUBE_PROXY_KINDS.items():
            [item] = [o for o in objects if o["kind"] == kind_]
            # The DaemonSet's pods mount the ConfigMap and run as the ServiceAccount.
            after = [created["ConfigMap"], created["ServiceAccount"]] if kind_ == "DaemonSet" else []
            args = {FIELD_ARGS.get(key, key): value for key, value in item.items() if key not in ("apiVersion", "kind")}
            created[kind_] = make(
                f"{name}-kube-proxy-{KUBE_PROXY_SUFFIX[kind_]}",
                **args,
                opts=pulumi.ResourceOptions.merge(options, pulumi.ResourceOptions(depends_on=after)),
            )
        return list(created.values())
