"""A tenant's GPU nodes as KWOK nodes: the cards of the catalog as HAMi's register annotation and node capacity.

HAMi v2.8.x reads a node's cards from `hami.io/node-nvidia-register` and takes the node in while its
allocatable `nvidia.com/gpu` is above 0 (notes/hami.md section 2); KWOK keeps a node's status capacity as
given and takes bound pods to Running (notes/process-lab.md). The annotation and the capacity come from
the same functions as the Docker lab's mock device plugin inventory (model/catalog.py).
"""

from __future__ import annotations

from model.catalog import REGISTER_ANNOTATION, Card, register_annotation, totals

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
