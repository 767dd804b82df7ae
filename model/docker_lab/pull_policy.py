"""Kamaji's control-plane pods run the images already on the node: a MutatingAdmissionPolicy for the management
cluster that sets `imagePullPolicy: IfNotPresent` on every container of the pods Kamaji creates for gpulab's
TenantControlPlanes, and on nothing else.

Why: Kamaji 26.8.2-edge sets `PullAlways` on kube-apiserver and konnectivity-server (and kine, for SQL datastores)
whatever the TCP says (internal/builders/controlplane/deployment.go buildKubeAPIServer and the kine container,
konnectivity_server.go), and has no setting for it. So every start of a TCP pod asks the registry, and offline none
starts, although gpulab loads every image the management node runs into it beforehand
(components/docker/image_cache.py).

How: admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, GA and on by default from Kubernetes v1.36
(k8s.io/kubernetes pkg/features/kube_features.go, MutatingAdmissionPolicy; the plugin is on by default:
pkg/kubeapiserver/options/plugins.go; the config refuses an older management node: model/config/lab.py
MINIMUM_KUBERNETES). An ApplyConfiguration merges by each container's name (containers and
initContainers are map lists keyed by name), so only imagePullPolicy changes (k8s.io/api admissionregistration/v1
types.go, ApplyConfiguration). Standard library only: the real tier applies these objects as they are.
"""

from __future__ import annotations

from model.names import TENANT_LABEL

POLICY_NAME = "gpulab-kamaji-pods-if-not-present"
# The labels of the pod template of every TCP Deployment (Kamaji 26.8.2-edge
# internal/builders/controlplane/deployment.go, templateLabels; the selector is kamaji.clastix.io/name alone).
KAMAJI_NAME_LABEL = "kamaji.clastix.io/name"
KAMAJI_COMPONENT_LABEL = "kamaji.clastix.io/component"
KAMAJI_POD_COMPONENT = "deployment"
PULL_POLICY = "IfNotPresent"

# Every container, by name: the merge leaves all else as it was.
CONTAINERS = f"""Object{{
  spec: Object.spec{{
    containers: object.spec.containers.map(c,
      Object.spec.containers{{name: c.name, imagePullPolicy: "{PULL_POLICY}"}})
  }}
}}"""
# Kamaji adds init containers only for kine (SQL datastores) and the TCP's additionalInitContainers.
INIT_CONTAINERS = f"""has(object.spec.initContainers) ?
  Object{{
    spec: Object.spec{{
      initContainers: object.spec.initContainers.map(c,
        Object.spec.initContainers{{name: c.name, imagePullPolicy: "{PULL_POLICY}"}})
    }}
  }} :
  Object{{}}"""


def pull_policy_objects(namespaces: list[str]) -> tuple[dict, dict]:
    """The policy and its binding, for the control-plane namespaces `namespaces` (each labelled TENANT_LABEL)."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "matchConstraints": {
                # Pods are created, never updated to another pull policy (a pod's containers are immutable).
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ],
                # gpulab's control-plane namespaces, by name and by gpulab's label.
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)},
                        {"key": TENANT_LABEL, "operator": "Exists"},
                    ]
                },
                # Kamaji's control-plane pods: component `deployment` of a TCP.
                "objectSelector": {
                    "matchLabels": {KAMAJI_COMPONENT_LABEL: KAMAJI_POD_COMPONENT},
                    "matchExpressions": [{"key": KAMAJI_NAME_LABEL, "operator": "Exists"}],
                },
            },
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": CONTAINERS}},
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": INIT_CONTAINERS}},
            ],
            # Containers a later mutating webhook adds get it too.
            "reinvocationPolicy": "IfNeeded",
            # A policy that cannot run refuses the pod, with its reason in the ReplicaSet's events, rather than let
            # it pull (offline: an ImagePullBackOff that hides the cause).
            "failurePolicy": "Fail",
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME},
    }
    return policy, binding
