"""Real GPU mode: do the cards a node registers match the cards the config declares?

HAMi's NVIDIA device plugin writes `hami.io/node-nvidia-register` from NVML; gpulab compares it with
the declared cards (count, type, memory) and fails clearly on a mismatch instead of letting the
policy pack reason about cards that are not there. Memory is compared with a tolerance: NVML reports
usable memory, a little below the marketing size (an "L4 24 GB" registers about 23034 MB).
Standard library only, like gpu_readiness.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from model.catalog import REGISTER_ANNOTATION as REGISTER

MEMORY_TOLERANCE = 0.10  # registered memory may be up to 10 % below or above the declared size


def registered_cards(node: Mapping[str, Any]) -> list[dict] | None:
    """The node's registered devices, or None while HAMi's plugin has not registered any yet."""
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(REGISTER)
    if not value:
        return None
    return json.loads(value)


def _matches(declared: Mapping[str, Any], device: Mapping[str, Any]) -> bool:
    same_type = str(declared["type"]).lower() in str(device.get("type", "")).lower()
    memory = int(device.get("devmem", 0))
    close = abs(memory - int(declared["memoryMb"])) <= MEMORY_TOLERANCE * int(declared["memoryMb"])
    return same_type and close


def mismatches(declared: Sequence[Mapping[str, Any]], registered: Sequence[Mapping[str, Any]]) -> list[str]:
    """What differs between the declared cards and the registered devices; empty when they match."""
    problems = []
    if any(device.get("health") is False for device in registered):
        unhealthy = [device.get("id") for device in registered if device.get("health") is False]
        problems.append(f"HAMi reports unhealthy devices: {unhealthy}")
    unmatched = list(registered)
    missing = []
    for card in declared:
        found = next((device for device in unmatched if _matches(card, device)), None)
        if found is None:
            missing.append(card)
        else:
            unmatched.remove(found)

    def describe(cards: Sequence[Mapping[str, Any]], type_key: str, memory_key: str) -> str:
        counts = Counter(f"{card.get(type_key)} ({card.get(memory_key)} MB)" for card in cards)
        return ", ".join(f"{count} x {what}" for what, count in sorted(counts.items()))

    if missing or unmatched:
        problems.append(
            f"declared {describe(declared, 'type', 'memoryMb')}, but the node registers "
            f"{describe(registered, 'type', 'devmem') or 'no devices'}"
            + (f"; not found: {describe(missing, 'type', 'memoryMb')}" if missing else "")
            + (f"; not declared: {describe(unmatched, 'type', 'devmem')}" if unmatched else "")
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", required=True, help='JSON list of declared cards: [{"type":..., "memoryMb":...}]')
    parser.add_argument("--node", required=True, help="file with `kubectl get node NAME -o json`")
    args = parser.parse_args(argv)
    with open(args.node) as node_file:
        registered = registered_cards(json.load(node_file))
    if registered is None:
        print(f"the node has no {REGISTER} annotation yet (HAMi's device plugin has not registered)", file=sys.stderr)
        return 3  # not yet: keep waiting
    found = mismatches(json.loads(args.expect), registered)
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
