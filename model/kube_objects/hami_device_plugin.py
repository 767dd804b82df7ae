"""gpulab's HAMi device plugin (tools/gpulab-hami-plugin) as the Docker lab runs it: a DaemonSet in the tenant.

In the Docker lab a mock tenant with `devicePlugin: gpulab` runs gpulab-hami-plugin in place of HAMi's chart's mock
plugin: one pod per GPU node, from the image `make lab-images` builds (versions.hamiDevicePluginImage). It is what
the node image's systemd unit is on real nodes (node-image/files/etc/systemd/system/gpulab-hami-plugin.service,
process_lab/hami_plugin.py), as Kubernetes objects:

- a ServiceAccount with a ClusterRole of exactly the plugin's calls (RULES, which real nodes use too: the
  kubelet's credentials may not patch a pod's annotations), bound to it; the plugin takes the pod's in-cluster
  credentials (main.go: `--kubeconfig` empty);
- a ConfigMap with each GPU node's cards, one key per node (`<node>.json`), in the file format the plugin reads
  (config.go Card and ReadCards: a JSON array of exactly {id, index, type, memory_mb, cores, split_count}, whole
  numbers);
- a DaemonSet on exactly the tenant's GPU nodes (required node affinity on metadata.name, one term per node), each
  pod mounting the kubelet's device plugin folder and its node's cards, with the unit's settings: NODE_NAME (the pod's
  spec.nodeName), HAMI_VERSION (the tenant's release) and MEMORY_FACTOR (1: a larger node is refused at config
  time, model/config/hami.py). The cards' hash on the pod template rolls the pods when the cards change (the plugin
  reads its file once, at start).

Everything is in kube-system, HAMi's own namespace in gpulab (model/names.py HAMI_NAMESPACE: the chart's release
namespace), and the namespace the ServiceAccount has on real nodes: one name for one identity in both runtimes.
Plain data: the standard library and model.catalog only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from model.catalog import Card
from model.names import HAMI_NAMESPACE

NAME = "gpulab-hami-device-plugin"  # the ServiceAccount, ClusterRole, binding and DaemonSet (as on real nodes)
NAMESPACE = HAMI_NAMESPACE
CARDS_CONFIGMAP = f"{NAME}-cards"
PROGRAM = "/usr/bin/gpulab-hami-plugin"  # where the image has it, as gpulab's node image does
CARDS_DIR = "/etc/gpulab/hami/cards"  # the ConfigMap, mounted: one file per GPU node
SOCKET_DIR = "/var/lib/kubelet/device-plugins"  # the kubelet's device plugin folder (main.go --socket-dir)
# The plugin's calls (tools/gpulab-hami-plugin kube.go and register.go, through client-go's CoreV1): pods get, list
# (every namespace) and patch; nodes get and patch. Real nodes use the same (process_lab/hami_plugin.py).
RULES = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
)
# MB per nvidia.com/gpumem device: 1 on every node the Docker lab gives the plugin (a node of more card memory than
# one kubelet message holds is refused at config time: model/hami_releases.py PLUGIN_MAX_NODE_MEMORY_MB).
MEMORY_FACTOR = 1
CARD_KEYS = ("id", "index", "type", "memory_mb", "cores", "split_count")  # config.go Card, in its order
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "gpulab"}
# HAMi's mutating webhook leaves pods with this label alone (charts/hami/templates/scheduler/webhook.yaml
# objectSelector at v2.8.3 and v2.10.0); HAMi's own device plugin pods carry it (daemonsetnvidia.yaml).
WEBHOOK_IGNORE = {"hami.io/webhook": "ignore"}
CARDS_HASH_ANNOTATION = "gpulab.io/cards-sha256"
# HAMi's chart's mock plugin DaemonSet tolerates CriticalAddonsOnly (templates/device-plugin/daemonsetmock.yaml at
# v2.8.3 and v2.10.0); its NVIDIA plugin runs at priority system-node-critical (daemonsetnvidia.yaml), with the
# chart's devicePlugin.tolerations, empty by default (values.yaml). The DaemonSet controller adds the not-ready,
# unreachable and pressure tolerations of every daemon pod itself.
TOLERATIONS = ({"key": "CriticalAddonsOnly", "operator": "Exists"},)
PRIORITY_CLASS = "system-node-critical"


def cards_file(cards: list[Card]) -> str:
    """A node's cards as the plugin reads them (config.go ReadCards; process_lab/hami_plugin.py cards_file writes the
    same text for a real node)."""
    return json.dumps([{key: getattr(card, key) for key in CARD_KEYS} for card in cards], indent=2)


def cards_data(nodes: dict[str, list[Card]]) -> dict[str, str]:
    """The ConfigMap's data: `<node>.json` per GPU node (node names are DNS labels: valid ConfigMap keys)."""
    return {f"{node}.json": cards_file(cards) for node, cards in sorted(nodes.items())}


def cards_hash(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _metadata(name: str = NAME, namespaced: bool = True) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespaced:
        metadata["namespace"] = NAMESPACE
    return metadata


def rbac_objects() -> list[dict[str, Any]]:
    """The ServiceAccount, a ClusterRole with exactly the plugin's calls, and the binding of the two."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata()},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _metadata(namespaced=False),
            "rules": [json.loads(json.dumps(rule)) for rule in RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _metadata(namespaced=False),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        },
    ]


def cards_config_map(nodes: dict[str, list[Card]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(CARDS_CONFIGMAP), "data": cards_data(nodes)}


def daemon_set(image: str, hami_version: str, nodes: dict[str, list[Card]], pull_policy: str) -> dict[str, Any]:
    """One plugin pod on each of `nodes` (their names), its node's cards from the ConfigMap."""
    selector = {"app.kubernetes.io/name": NAME}
    env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "HAMI_VERSION", "value": hami_version},
        {"name": "MEMORY_FACTOR", "value": str(MEMORY_FACTOR)},
    ]
    # The unit's command line (gpulab-hami-plugin.service), the kubelet expanding $(VAR) from the container's env;
    # no --kubeconfig: the pod's own service account credentials (main.go restConfig).
    args = [
        f"--cards={CARDS_DIR}/$(NODE_NAME).json",
        "--node-name=$(NODE_NAME)",
        "--hami-version=$(HAMI_VERSION)",
        "--memory-factor=$(MEMORY_FACTOR)",
        f"--socket-dir={SOCKET_DIR}",
    ]
    # One term per node (terms are ORed): the API server takes a single value for a metadata.name field selector
    # (kube-apiserver v1.36.4's validation says so; the DaemonSet controller pins its pods the same way).
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]} for node in sorted(nodes)]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    container = {
        "name": "plugin",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": [PROGRAM],
        "args": args,
        "env": env,
        # Root (the kubelet's socket folder is root's), nothing else: it writes only its sockets there.
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
        "volumeMounts": [
            {"name": "device-plugins", "mountPath": SOCKET_DIR},
            {"name": "cards", "mountPath": CARDS_DIR, "readOnly": True},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(),
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {
                    "labels": {**LABELS, **WEBHOOK_IGNORE},
                    "annotations": {CARDS_HASH_ANNOTATION: cards_hash(cards_data(nodes))},
                },
                "spec": {
                    "serviceAccountName": NAME,
                    "priorityClassName": PRIORITY_CLASS,
                    "tolerations": [dict(toleration) for toleration in TOLERATIONS],
                    "affinity": affinity,
                    "containers": [container],
                    "volumes": [
                        {"name": "device-plugins", "hostPath": {"path": SOCKET_DIR, "type": "Directory"}},
                        {"name": "cards", "configMap": {"name": CARDS_CONFIGMAP}},
                    ],
                },
            },
        },
    }


def plugin_objects(
    image: str, hami_version: str, nodes: dict[str, list[Card]], pull_policy: str = "IfNotPresent"
) -> list[dict[str, Any]]:
    """Every object of the plugin in a tenant, in the order they are created."""
    return [
        *rbac_objects(),
        cards_config_map(nodes),
        daemon_set(image, hami_version, nodes, pull_policy),
    ]
