"""Real GPU mode: do the cards a node registers match the cards the config declares?

HAMi's NVIDIA device plugin writes `hami.io/node-nvidia-register` from NVML; gpulab reads it as HAMi does
(hami/annotations.py `parse_register`), compares it with the declared cards (count, type, memory) and fails
clearly on a mismatch instead of letting the policy pack reason about cards that are not there. Memory is compared
with a tolerance: NVML reports usable memory, a little below the marketing size (an "L4 24 GB" registers about
23034 MB). Standard library only, like gpu_readiness.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hami.annotations import REGISTER, AnnotationError, RegisteredDevice, parse_register

MEMORY_TOLERANCE = 0.10  # registered memory may be up to 10 % below or above the declared size


def registered_cards(node: Mapping[str, Any]) -> tuple[RegisteredDevice, ...] | None:
    """The node's registered devices, or None while HAMi's plugin has not registered any yet; AnnotationError for
    an annotation HAMi cannot read."""
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(REGISTER)
    if not value:
        return None
    return parse_register(value)


def _matches(declared: Mapping[str, Any], device: RegisteredDevice) -> bool:
    same_type = str(declared["type"]).lower() in device.type.lower()
    close = abs(device.devmem - int(declared["memoryMb"])) <= MEMORY_TOLERANCE * int(declared["memoryMb"])
    return same_type and close


def mismatches(declared: Sequence[Mapping[str, Any]], registered: Sequence[RegisteredDevice]) -> list[str]:
    """What differs between the declared cards and the registered devices; empty when they match. HAMi writes a
    card's `health` only when true (omitempty): one without it is unhealthy."""
    problems = []
    unhealthy = [device.id for device in registered if not device.health]
    if unhealthy:
        problems.append(f"HAMi reports unhealthy devices: {unhealthy}")
    unmatched = list(registered)
    missing = []
    for card in declared:
        found = next((device for device in unmatched if _matches(card, device)), None)
        if found is None:
            missing.append(card)
        else:
            unmatched.remove(found)

    def describe(cards: Iterable[tuple[Any, Any]]) -> str:
        counts = Counter(f"{kind} ({memory} MB)" for kind, memory in cards)
        return ", ".join(f"{count} x {what}" for what, count in sorted(counts.items()))

    def declared_cards(cards: Sequence[Mapping[str, Any]]) -> str:
        return describe((card.get("type"), card.get("memoryMb")) for card in cards)

    def devices(registered: Sequence[RegisteredDevice]) -> str:
        return describe((device.type, device.devmem) for device in registered)

    if missing or unmatched:
        problems.append(
            f"declared {declared_cards(declared)}, but the node registers {devices(registered) or 'no devices'}"
            + (f"; not found: {declared_cards(missing)}" if missing else "")
            + (f"; not declared: {devices(unmatched)}" if unmatched else "")
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", required=True, help='JSON list of declared cards: [{"type":..., "memoryMb":...}]')
    parser.add_argument("--node", required=True, help="file with `kubectl get node NAME -o json`")
    args = parser.parse_args(argv)
    with open(args.node) as node_file:
        node = json.load(node_file)
    try:
        registered = registered_cards(node)
    except AnnotationError as error:
        print(f"HAMi cannot read the node's {error}", file=sys.stderr)
        return 1
    if registered is None:
        print(f"the node has no {REGISTER} annotation yet (HAMi's device plugin has not registered)", file=sys.stderr)
        return 3  # not yet: keep waiting
    found = mismatches(json.loads(args.expect), registered)
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
