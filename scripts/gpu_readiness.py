"""Is a mock GPU node usable through HAMi? Decided from real node, EndpointSlice and Pod objects.

`scripts/wait-gpu-node.sh` polls `kubectl get node -o json` and the hami-scheduler EndpointSlices
and asks this module; it exits 0 only when the node's allocatable equals the declared totals and
HAMi's webhook Service has a ready endpoint (without one the webhook fails open and GPU pods land
on default-scheduler: the chart's failurePolicy is Ignore, HAMi v2.8.3 charts/hami/values.yaml). Where gpulab's
device plugin registers the node (`devicePlugin: gpulab`), it also waits for the register annotation the plugin
writes to hold the declared cards (`--register`), may leave HAMi's webhook out (`--endpoints` not given: the wait
before HAMi is installed) and names the plugin pod's state while it waits (`--pods`). Standard
library only: it runs under whatever Python runs the Pulumi program.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from hami.annotations import REGISTER, AnnotationError, parse_register  # standard library only, like this module
from model.quantity import QuantityError, parse_quantity


def _quantity(value: Any) -> int | None:
    """The API server sends quantities in canonical form: 1000 gpucores (10 cards) arrive as "1k",
    20000 MB as "20k" (apimachinery resource/quantity.go, Quantity.String)."""
    try:
        exact = parse_quantity(str(value))
    except QuantityError:
        return None
    return int(exact) if exact.denominator == 1 else None


def allocatable_problems(node: Mapping[str, Any], expect: Mapping[str, int]) -> list[str]:
    name = node.get("metadata", {}).get("name", "?")
    allocatable = node.get("status", {}).get("allocatable") or {}
    problems = []
    for resource, wanted in sorted(expect.items()):
        seen = allocatable.get(resource)
        if seen is None:
            problems.append(f"node {name}: {resource} not advertised yet (declared {wanted})")
        elif _quantity(seen) != wanted:
            problems.append(f"node {name}: {resource} advertises {seen}, declared {wanted}")
    return problems


def ready_endpoints(endpoint_slices: Mapping[str, Any]) -> list[str]:
    """Addresses of ready endpoints; an unset `ready` condition means ready (discovery/v1 semantics)."""
    addresses = []
    for item in endpoint_slices.get("items") or []:
        for endpoint in item.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready", True) is not False:
                addresses.extend(endpoint.get("addresses") or [])
    return addresses


def _cards(register: str) -> list[tuple]:
    """(id, index, count, devmem, devcore, type) of each card of a register annotation, as HAMi reads it
    (hami/annotations.py `parse_register`: AnnotationError where HAMi cannot read it)."""
    return [(d.id, d.index, d.count, d.devmem, d.devcore, d.type) for d in parse_register(register)]


def register_problems(node: Mapping[str, Any], register: str) -> list[str]:
    """The node's register annotation holds the cards of `register` (what gpulab declares), in order. Compared by
    the fields HAMi's scheduler reads, since each HAMi release's plugin writes its own extra keys
    (v2.8.3: devicepairscore)."""
    name = node.get("metadata", {}).get("name", "?")
    written = (node.get("metadata", {}).get("annotations") or {}).get(REGISTER)
    if not written:
        return [f"node {name}: {REGISTER} not written yet (the device plugin writes it)"]
    try:
        found: list[tuple] | None = _cards(written)
    except AnnotationError:
        found = None
    wanted = _cards(register)  # gpulab's own (model/catalog.py register_annotation): an error here is a bug
    if found != wanted:
        ids = ", ".join(card[0] for card in found or []) or "none readable"
        return [f"node {name}: {REGISTER} holds other cards ({ids}), declared {len(wanted)}"]
    return []


def pod_problems(pods: Mapping[str, Any], node_name: str) -> list[str]:
    """Why the device plugin's pod on the node does not run yet, as its status says (waiting reason and message,
    ErrImageNeverPull or CrashLoopBackOff say what to fix); nothing for a pod that runs."""
    found = []
    on_node = [pod for pod in pods.get("items") or [] if (pod.get("spec") or {}).get("nodeName") == node_name]
    if not on_node:
        return [f"no device plugin pod on node {node_name} yet"]
    for pod in on_node:
        name = pod.get("metadata", {}).get("name", "?")
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting")
            if waiting:
                said = f"{waiting.get('reason', 'waiting')}: {waiting.get('message', '')}".rstrip(": ")
                found.append(f"pod {name}: {said} (restarts: {status.get('restartCount', 0)})")
    return found


def problems(
    node: Mapping[str, Any],
    endpoint_slices: Mapping[str, Any] | None,
    expect: Mapping[str, int],
    register: str | None = None,
    pods: Mapping[str, Any] | None = None,
) -> list[str]:
    found = allocatable_problems(node, expect)
    if register is not None:
        found += register_problems(node, register)
    if endpoint_slices is not None and not ready_endpoints(endpoint_slices):
        found.append("Service hami-scheduler has no ready endpoint yet: HAMi's webhook would fail open")
    if found and pods is not None:
        found += pod_problems(pods, node.get("metadata", {}).get("name", "?"))
    return found


def _read(path: str | None) -> Any:
    if not path:
        return None
    with open(path) as file:
        return json.load(file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", required=True, help="JSON object: resource name -> declared total")
    parser.add_argument("--node", required=True, help="file with `kubectl get node NAME -o json`")
    parser.add_argument("--endpoints", help="file with the hami-scheduler EndpointSlice list (none: not checked)")
    parser.add_argument("--register", help="the declared register annotation (JSON) the device plugin writes")
    parser.add_argument("--pods", help="file with the device plugin's pods, whose state is named while waiting")
    args = parser.parse_args(argv)
    with open(args.node) as node_file:
        node = json.load(node_file)
    endpoints = _read(args.endpoints)
    found = problems(node, endpoints, json.loads(args.expect), args.register, _read(args.pods))
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
