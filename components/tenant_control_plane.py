"""TenantControlPlane: one Kamaji control plane per tenant, on a MetalLB IP, and its admin kubeconfig.

Every value below follows Kamaji 26.8.2-edge (api/v1alpha1/tenantcontrolplane_types.go) and, in tests, is
checked against its CRD schema (charts/kamaji/crds/kamaji.clastix.io_tenantcontrolplanes.yaml).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
from typing import TYPE_CHECKING

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.parts import tenant_provider
from components.shell import script_command
from model import names
from model.config import Tenant
from model.config.fields import duration_seconds
from model.config.management import DEFAULT_STARTUP_TIMEOUT
from model.kube_proxy import config_map_data, kube_proxy_objects
from model.names import KAMAJI_DATASTORE, KAMAJI_MAX_ANNOTATION, TENANT_LABEL

if TYPE_CHECKING:  # management_cluster.py imports webhook_probe from here
    from components.management_cluster import ManagementCluster

API_PORT = 6443
KONNECTIVITY_PORT = 8132
READY_TIMEOUT_SECONDS = 900
# Kamaji probes each control-plane container with 3 failures 10 s apart and a 1 s timeout, startup included
# (internal/builders/controlplane/deployment.go, defaultProbe): a tenant API server that needs more than about 30 s
# to start is restarted, and on a busy 2-core host they took up to about 100 s and were restarted 8-10 times
# before they were Ready. These are kubeadm's probes for its own control-plane static pods instead
# (cmd/kubeadm/app/util/staticpod/utils.go: LivenessProbe, ReadinessProbe's timeout, StartupProbe, whose failures
# cover controlPlaneComponentHealthCheck, 4m by default). The price: a control plane wedged at its start is
# restarted after that window, and a running one that stopped answering after 8 x 10 s, not 3 x 10 s.
PROBE_PERIOD_SECONDS = 10
PROBE_TIMEOUT_SECONDS = 15
LIVENESS_FAILURES = 8
STARTUP_SECONDS = duration_seconds(DEFAULT_STARTUP_TIMEOUT) or 0


def control_plane_probes(startup_seconds: int) -> dict:
    """Kamaji's `controlPlane.deployment.probes`: global values, applied to the API server, controller manager and
    scheduler alike (the builder applies the global ones first, then per-component ones: applyProbeSetOverrides)."""
    return {
        "startup": {
            "periodSeconds": PROBE_PERIOD_SECONDS,
            "timeoutSeconds": PROBE_TIMEOUT_SECONDS,
            "failureThreshold": math.ceil(startup_seconds / PROBE_PERIOD_SECONDS),
        },
        "liveness": {
            "periodSeconds": PROBE_PERIOD_SECONDS,
            "timeoutSeconds": PROBE_TIMEOUT_SECONDS,
            "failureThreshold": LIVENESS_FAILURES,
        },
        # Kamaji's period and failures; a busy host's /readyz may take more than 1 s without anything being wrong.
        "readiness": {"timeoutSeconds": PROBE_TIMEOUT_SECONDS},
    }


def control_plane_namespace(tenant: Tenant) -> str:
    return names.control_plane_namespace(tenant.name)


def control_plane_spec(tenant: Tenant, startup_seconds: int = STARTUP_SECONDS) -> dict:
    """The TenantControlPlane spec; every field Kamaji's CRD requires is here. `startup_seconds`: how long its
    control-plane containers may take to start (management.controlPlaneStartupTimeout)."""
    service = ipaddress.ip_network(tenant.service_cidr)
    return {
        "dataStore": KAMAJI_DATASTORE,
        "controlPlane": {
            "deployment": {
                "replicas": 1,  # one pod with the four control-plane containers
                "probes": control_plane_probes(startup_seconds),
            },
            "service": {"serviceType": "LoadBalancer"},  # required; MetalLB gives it an IP
        },
        "kubernetes": {
            "version": tenant.kubernetes_version,
            # `kubelet` is required even when empty. Patches use `add`: `replace` fails on the missing
            # key (omitempty) and kubelet-config is never uploaded (Kamaji internal/kubeadm/uploadconfig.go).
            "kubelet": {
                "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
                "configurationJSONPatches": [
                    # kindest/node's containerd runs with SystemdCgroup = true.
                    {"op": "add", "path": "/cgroupDriver", "value": "systemd"},
                    # Swap on the host must not stop the kubelet (Kamaji uploads kubelet defaults: failSwapOn true).
                    {"op": "add", "path": "/failSwapOn", "value": False},
                    # The kubelet sees the host disk; kind turns these thresholds off too
                    # (kind pkg/cluster/internal/kubeadm/config.go).
                    {
                        "op": "add",
                        "path": "/evictionHard",
                        "value": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
                    },
                    # And its image garbage collection, which would delete the images loaded into the node: kind sets
                    # it beside evictionHard (same file). `add` replaces Kamaji's default of 85.
                    {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},
                    # Kamaji uploads the kubelet defaults, failCgroupV1: true among them (its internal/kubeadm/
                    # uploadconfig.go; k8s.io/kubernetes pkg/kubelet/apis/config/v1beta1/defaults.go), so no kubelet
                    # starts on a cgroup v1 host. false is harmless on cgroup v2: the kubelet reads it only as
                    # `FailCgroupV1 && isCgroup1` (pkg/kubelet/apis/config/validation/validation_linux.go).
                    {"op": "add", "path": "/failCgroupV1", "value": False},
                ],
            },
        },
        "networkProfile": {
            "port": API_PORT,
            "podCidr": tenant.pod_cidr,  # also Calico's pool: the controller-manager allocates node CIDRs from it
            "serviceCidr": tenant.service_cidr,
            "dnsServiceIPs": [str(service.network_address + 10)],  # what Kamaji's webhook would compute
        },
        "addons": {
            "coreDNS": {},
            # No kubeProxy: Kamaji's addon cannot be configured to run in a node container; gpulab runs it
            # (TenantControlPlane._kube_proxy, model/kube_proxy.py).
            # Required: the tenant API server reaches webhooks on the worker (HAMi's) only through it.
            "konnectivity": {"server": {"port": KONNECTIVITY_PORT}, "agent": {"mode": "DaemonSet"}},
        },
    }


WEBHOOK_PROBE_PREFIX = "gpulab-probe-"  # + a tenant name (at most 40): a DNS-1035 label, as Kamaji asks


def webhook_probe(tenants: list[Tenant], namespace: str, startup_seconds: int = STARTUP_SECONDS) -> str:
    """What wait-kamaji.sh dry-runs on the server before any TenantControlPlane is made: each tenant's as this
    program creates it (control_plane_spec), named as a probe, in a List (JSON). The very spec, not a second one:
    Kamaji's mutating webhook computes its patch on the Go struct, and the API server applies it to the object as
    sent (Kamaji internal/webhook/utils/jsonpatch.go; k8s.io/apiserver pkg/admission/plugin/webhook/mutating/
    dispatcher.go), and the CRD's rules read fields a short spec lacks (`self.networkProfile...`)."""
    items = [
        {
            "apiVersion": "kamaji.clastix.io/v1alpha1",
            "kind": "TenantControlPlane",
            # Named for its tenant: the API server's and the webhooks' answers name the object.
            "metadata": {"name": f"{WEBHOOK_PROBE_PREFIX}{tenant.name}", "namespace": namespace},
            "spec": control_plane_spec(tenant, startup_seconds),
        }
        for tenant in tenants
    ]
    # Sorted keys: the same text on every run, so the Command is not updated for nothing.
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=True)


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


# kubeadm's kube-proxy objects as typed resources (model/kube_proxy.py), with the suffix of each one's name.
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
        startup_seconds: int = STARTUP_SECONDS,
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
        """The tenant's kube-proxy (model/kube_proxy.py), in place of Kamaji's addon, once the API answers. A TCP
        that had the addon until this update gets it removed first (the TCP's update comes before this, which
        depends on it), and Kamaji then deletes its own objects of the same names: the handover waits for that."""
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
        # Destroying the TCP takes them with it (as HAMi's release: components/hami_chart.py).
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
