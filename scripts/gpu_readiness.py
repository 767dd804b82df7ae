"""Is a mock GPU node usable through HAMi? Decided from real node and EndpointSlice objects.

`scripts/wait-gpu-node.sh` polls `kubectl get node -o json` and the hami-scheduler EndpointSlices
and asks this module; it exits 0 only when the node's allocatable equals the declared totals and
HAMi's webhook Service has a ready endpoint (without one the webhook fails open and GPU pods land
on default-scheduler: the chart's failurePolicy is Ignore, HAMi v2.8.3 charts/hami/values.yaml). Standard
library only: it runs under whatever Python runs the Pulumi program.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from model.quantity import QuantityError, parse_quantity  # standard library only, like this module


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


def problems(node: Mapping[str, Any], endpoint_slices: Mapping[str, Any], expect: Mapping[str, int]) -> list[str]:
    found = allocatable_problems(node, expect)
    if not ready_endpoints(endpoint_slices):
        found.append("Service hami-scheduler has no ready endpoint yet: HAMi's webhook would fail open")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", required=True, help="JSON object: resource name -> declared total")
    parser.add_argument("--node", required=True, help="file with `kubectl get node NAME -o json`")
    parser.add_argument("--endpoints", required=True, help="file with the hami-scheduler EndpointSlice list")
    args = parser.parse_args(argv)
    with open(args.node) as node_file, open(args.endpoints) as endpoints_file:
        found = problems(json.load(node_file), json.load(endpoints_file), json.loads(args.expect))
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
