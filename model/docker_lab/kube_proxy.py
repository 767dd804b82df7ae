"""A tenant's kube-proxy, as kubeadm's proxy addon makes it, with a configuration that runs in a node container.

gpulab runs it, not Kamaji: Kamaji's addon (`spec.addons.kubeProxy`) takes only an image repository and tag, and its
soot controller writes the `kube-proxy` ConfigMap's data again on every reconcile and server-side-applies the
DaemonSet with force (Kamaji 26.8.2-edge internal/resources/addons/kube_proxy.go, mutateConfigMap and
mutateDaemonSet; controllers/soot/controllers/kubeproxy.go), so its configuration cannot be changed. That
configuration is kubeadm's default, under which kube-proxy v1.36.4 writes nf_conntrack_max whenever it differs from
max(131072, 32768 x CPUs) (pkg/proxy/conntrack/sysctls.go, setIntSysCtl and getConntrackMax): inside a container's
network namespace that sysctl is read-only, and kube-proxy exits with `could not set conntrack parameters from
kube-proxy configuration: ... permission denied` (cmd/kube-proxy/app/server_linux.go, platformSetup). Without it
no Service works on the node, Calico's included.

The objects are kubeadm v1.36.4's (cmd/kubeadm/app/phases/addons/proxy/proxy.go and manifests.go), under its names,
which Kamaji's addon used too: ServiceAccount, ClusterRoleBinding to system:node-proxier, the Role and RoleBinding
that let joining nodes read the ConfigMap, the ConfigMap (config.conf, kubeconfig.conf) and the DaemonSet.
"""

from __future__ import annotations

from typing import Any

import yaml

NAMESPACE = "kube-system"
NAME = "kube-proxy"  # kubeadm's KubeProxy, KubeProxyConfigMap, KubeProxyServiceAccountName, KubeProxyConfigMapRoleName
CLUSTER_ROLE_BINDING = "kubeadm:node-proxier"  # constants.KubeProxyClusterRoleBindingName
CLUSTER_ROLE = "system:node-proxier"  # constants.KubeProxyClusterRoleName, a role every cluster has
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"  # constants.NodeBootstrapTokenAuthGroup
CONFIG_KEY = "config.conf"  # constants.KubeProxyConfigMapKey
KUBECONFIG_KEY = "kubeconfig.conf"
CONFIG_DIR = "/var/lib/kube-proxy"  # where the DaemonSet mounts the ConfigMap
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # the projected token and CA
# Kamaji deletes, when its addon is turned off, the objects of these names that carry this label (CleanUp):
# gpulab's never carry it.
KAMAJI_LABEL = ("kamaji.clastix.io/project", "kamaji")  # internal/constants/labels.go
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpulab"}


def kube_proxy_image(version: str) -> str:
    """kubeadm's kube-proxy image for a Kubernetes version (images.GetKubernetesImage): a kindest/node of that
    version carries it (kind pre-loads kubeadm's images)."""
    return f"registry.k8s.io/kube-proxy:{version}"


def proxy_configuration(pod_cidr: str, in_container: bool) -> dict[str, Any]:
    """The KubeProxyConfiguration: kubeadm's defaults (componentconfigs/kubeproxy.go: bindAddress, clusterCIDR from
    the pod subnet, the kubeconfig it mounts) and kind's settings (kind v0.33.0 pkg/cluster/internal/kubeadm/
    config.go: mode iptables, iptables.minSyncPeriod 1s and, in a node container, conntrack.maxPerCore 0)."""
    config: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "bindAddress": "0.0.0.0",
        "clientConnection": {"kubeconfig": f"{CONFIG_DIR}/{KUBECONFIG_KEY}"},
        "clusterCIDR": pod_cidr,
        "mode": "iptables",
        "iptables": {"minSyncPeriod": "1s"},
    }
    if in_container:
        # kind: "Skip setting sysctl value net.netfilter.nf_conntrack_max. It is a global variable that affects
        # other namespaces", and from a container's network namespace it cannot be written. 0 leaves it alone
        # (getConntrackMax returns 0, SetSysctls skips SetMax); the timeouts stay kube-proxy's, which each network
        # namespace may write. A machine of its own (SSH worker) keeps kubeadm's conntrack defaults.
        config["conntrack"] = {"maxPerCore": 0}
    return config


def proxy_kubeconfig(endpoint: str) -> str:
    """kubeadm's kubeconfig.conf (KubeProxyConfigMap19): the pod's service account token and CA, and the API server
    at `endpoint` (host:port). Kamaji's addon puts the TCP's advertised endpoint there, `status.controlPlaneEndpoint`
    in gpulab (internal/resources/kubeadm_config.go: ControlPlaneEndpoint; kubeadm GetControlPlaneEndpoint)."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "cluster": {
                        "certificate-authority": f"{SERVICE_ACCOUNT_DIR}/ca.crt",
                        "server": f"https://{endpoint}",
                    },
                    "name": "default",
                }
            ],
            "contexts": [
                {"context": {"cluster": "default", "namespace": "default", "user": "default"}, "name": "default"}
            ],
            "current-context": "default",
            "users": [{"name": "default", "user": {"tokenFile": f"{SERVICE_ACCOUNT_DIR}/token"}}],
        },
        sort_keys=False,
    )


def config_map_data(endpoint: str, pod_cidr: str, in_container: bool) -> dict[str, str]:
    return {
        CONFIG_KEY: yaml.safe_dump(proxy_configuration(pod_cidr, in_container), sort_keys=False),
        KUBECONFIG_KEY: proxy_kubeconfig(endpoint),
    }


def _metadata(namespaced: bool = True, name: str = NAME, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {**(labels or {}), **MANAGED_BY}}
    if namespaced:
        metadata["namespace"] = NAMESPACE
    return metadata


def kube_proxy_objects(version: str, data: Any) -> list[dict[str, Any]]:
    """kubeadm's six objects in its order, for a tenant of Kubernetes `version`; `data` is the ConfigMap's data
    (config_map_data, or what stands for it until the endpoint is known)."""
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata()}
    cluster_role_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _metadata(namespaced=False, name=CLUSTER_ROLE_BINDING),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(),
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NAME]}],
    }
    role_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
        "subjects": [{"kind": "Group", "name": BOOTSTRAP_GROUP}],
    }
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(labels={"app": NAME}), "data": data}
    labels = {"k8s-app": NAME}
    daemon_set = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(labels=labels),
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "containers": [
                        {
                            "name": NAME,
                            "image": kube_proxy_image(version),
                            "imagePullPolicy": "IfNotPresent",
                            "command": [
                                "/usr/local/bin/kube-proxy",
                                f"--config={CONFIG_DIR}/{CONFIG_KEY}",
                                "--hostname-override=$(NODE_NAME)",
                            ],
                            "securityContext": {"privileged": True},
                            "volumeMounts": [
                                {"mountPath": CONFIG_DIR, "name": NAME},
                                {"mountPath": "/run/xtables.lock", "name": "xtables-lock", "readOnly": False},
                                {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": True},
                            ],
                            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                        }
                    ],
                    "hostNetwork": True,
                    "serviceAccountName": NAME,
                    "volumes": [
                        {"name": NAME, "configMap": {"name": NAME}},
                        {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                        {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                    ],
                    "tolerations": [{"operator": "Exists"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                },
            },
        },
    }
    return [service_account, cluster_role_binding, role, role_binding, config_map, daemon_set]
