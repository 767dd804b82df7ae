"""A tenant's GPU nodes as KWOK nodes: the cards of the catalog as HAMi's register annotation and node capacity.

HAMi v2.8.x reads a node's cards from `hami.io/node-nvidia-register` and takes the node in while its
allocatable `nvidia.com/gpu` is above 0 (pkg/device/nvidia/device.go `CheckHealth`); KWOK v0.8.0 keeps a node's
status capacity as given and takes bound pods to Running (kustomize/stage/node/fast, pod/fast). The annotation
and the capacity come from the same functions as the Docker lab's mock device plugin inventory (model/catalog.py).
"""

from __future__ import annotations

import json

from model.catalog import REGISTER_ANNOTATION, Card, register_annotation, totals
from process_lab.control_plane import ControlPlane

# kwokctl's binary runtime runs kwok-controller with --manage-all-nodes=true; the annotation says what
# KWOK's own examples say a fake node is.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Room for the lab's pods besides the GPUs; a KWOK node runs nothing, so these are bookkeeping only.
HOST_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110"}


def node_object(name: str, cards: list[Card]) -> dict:
    """The Node as created (status is a subresource: see node_status)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", REGISTER_ANNOTATION: register_annotation(cards)},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", "gpu": "on"},
        },
    }


def node_status(cards: list[Card]) -> dict:
    capacity = {**HOST_CAPACITY, **{resource: str(value) for resource, value in totals(cards).items()}}
    return {"status": {"capacity": capacity, "allocatable": capacity}}


def apply_nodes(control_plane: ControlPlane, nodes: dict[str, list[Card]]) -> None:
    """The nodes by server-side apply (nodes already there keep their pods), then their status: a Node's create
    keeps its status (as the kubelet registers), and the patch makes sure, also for a node that was there."""
    control_plane.apply([{**node_object(name, cards), **node_status(cards)} for name, cards in nodes.items()])
    for name, cards in nodes.items():
        status = json.dumps(node_status(cards))
        control_plane.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", status)


def ready_nodes(control_plane: ControlPlane, names: list[str]) -> None:
    """A tenant's KWOK nodes without cards (the inventory writes those), Ready: applied again on an update, and
    nodes there keep their pods."""
    apply_nodes(control_plane, {name: [] for name in names})
    control_plane.kubectl("wait", "--for=condition=Ready", "--timeout=60s", *(f"node/{name}" for name in names))


def write_inventory(
    control_plane: ControlPlane, node: str, register: str, capacity: dict[str, int], kwok: bool = True
) -> None:
    """One GPU node's cards on a node that is there: HAMi's register annotation and the node's capacity, as the
    Docker lab's apply-gpu-inventory.sh and mock device plugin write them. A KWOK node also gets room for pods
    (HOST_CAPACITY); a real node's cpu, memory and pods are its kubelet's, which keeps the GPU resources
    patched beside them across its status updates (seen with kubelet v1.36.4, also across its restart)."""
    control_plane.kubectl("annotate", "node", node, "--overwrite", f"{REGISTER_ANNOTATION}={register}")
    written = {**(HOST_CAPACITY if kwok else {}), **{key: str(value) for key, value in capacity.items()}}
    status = json.dumps({"status": {"capacity": written, "allocatable": written}})
    control_plane.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", status)
