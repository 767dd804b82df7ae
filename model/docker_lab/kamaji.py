"""Kamaji's TenantControlPlane as gpulab asks for it: the spec, its probes, and the dry-run probe wait-kamaji.sh
sends. Plain data (no SDK): the management cluster's wait and the tenants' control planes build from the same
functions, so the probe is the very spec.

Every value below follows Kamaji 26.8.2-edge (api/v1alpha1/tenantcontrolplane_types.go) and, in tests, is
checked against its CRD schema (charts/kamaji/crds/kamaji.clastix.io_tenantcontrolplanes.yaml).
"""

from __future__ import annotations

import ipaddress
import json
import math

from model import names
from model.config import Tenant
from model.config.fields import duration_seconds
from model.config.management import DEFAULT_STARTUP_TIMEOUT
from model.names import KAMAJI_DATASTORE

API_PORT = 6443
KONNECTIVITY_PORT = 8132
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
            # (TenantControlPlane._kube_proxy, model/docker_lab/kube_proxy.py).
            # Required: the tenant API server reaches webhooks on the worker (HAMi's) only through it.
            "konnectivity": {"server": {"port": KONNECTIVITY_PORT}, "agent": {"mode": "DaemonSet"}},
        },
    }


WEBHOOK_PROBE_PREFIX = "gpulab-probe-"  # + a tenant name (at most 40): a DNS-1035 label, as Kamaji asks


def webhook_probe(tenants: list[Tenant], namespace: str, startup_seconds: int) -> str:
    """What wait-kamaji.sh dry-runs on the server before any TenantControlPlane is made: each tenant's as this
    program creates it (control_plane_spec), named as a probe, in a List (JSON). The very spec, not a second one:
    Kamaji's mutating webhook computes its patch on the Go struct, and the API server applies it to the object as
    sent (Kamaji internal/webhook/utils/jsonpatch.go; k8s.io/apiserver pkg/admission/plugin/webhook/mutating/
    dispatcher.go), and the CRD's rules read fields a short spec lacks (`self.networkProfile...`).
    `startup_seconds`: the stack's management.controlPlaneStartupTimeout, as the TenantControlPlanes get it."""
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
