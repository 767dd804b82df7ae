"""What `python -m policies check` reports: where HAMi would place the pods, as text lines or as one JSON
document (`--output json`) for CI pipelines and other tools:

    {"tenant": NAME,
     "findings": [{"severity": "error"|"warning", "reason": HAMi_REASON, "workload": ..., "message": ...}],
     "placements": [{"workload": ..., "pod": ..., "node": NODE, "containers": [{"name": ..., "cards": [ID]}]}],
     "notes": [...]}

`notes` holds the checker's other lines (quantity notes, current usage, label warnings). On bad input
(exit 2) the document is `{"tenant": NAME, "error": MESSAGE, "findings": [], "placements": [], "notes": []}`.
A placement whose node tied with others in HAMi's node score (HAMi then picks any of them) lists
them in `tiedNodes`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from placement.findings import Finding
from placement.inventory import TenantInventory
from placement.replay import Placed, Replay
from placement.workloads import Workload

UsageLabel = Literal["now", "running"]  # what the cards hold now (live), or once the stack's workloads run


def describe_usage(inventory: TenantInventory, label: UsageLabel = "now") -> list[str]:
    """One line per card: what it holds, under `label`."""
    lines = []
    for card, use in zip(inventory.cards, inventory.card_usage, strict=True):
        lines.append(
            f"{label}: {card.id} ({card.type}): {use.slots} of {card.split_count} slots, "
            f"{use.memory_mb} of {card.memory_mb} MB, {use.cores} of {card.cores}% cores in use"
        )
    return lines


def placement_lines(found: Sequence[dict[str, Any]], several_nodes: bool) -> list[str]:
    """Where `make check` says HAMi would put each pod (`placements` below): the node too on a
    tenant of several GPU nodes, with the nodes it tied with."""
    lines = []
    for entry in found:
        cards = "; ".join(f"{c['name']} -> {', '.join(c['cards'])}" for c in entry["containers"])
        if several_nodes:
            others = [node for node in entry.get("tiedNodes", ()) if node != entry["node"]]
            tied = f" (tied with {', '.join(others)}: HAMi picks any)" if others else ""
            lines.append(f"place: {entry['pod']} on {entry['node']}: {cards}{tied}")
        else:
            lines.append(f"place: {entry['pod']}: {cards}")
    return lines


def placements(run: Replay, submitted: Sequence[Workload]) -> list[dict[str, Any]]:
    """Where HAMi would put the submitted pods, from its one run over them in order after what runs now (live
    usage) or what the stack declares: the node (HAMi's node policy, with several) and each container's cards."""
    submitted_pods = {id(pod): workload for workload in submitted for pod in workload.pods}
    found: list[dict[str, Any]] = []
    for outcome in run.outcomes:
        if isinstance(outcome, Placed) and id(outcome.pod) in submitted_pods:
            entry = {
                "workload": submitted_pods[id(outcome.pod)].label,
                "pod": outcome.pod.workload,
                "node": outcome.node,
                "containers": [
                    {"name": container.name, "cards": ids}
                    for container, ids in zip(outcome.pod.containers, outcome.cards, strict=True)
                ],
            }
            if outcome.tied:
                entry["tiedNodes"] = list(outcome.tied)
            found.append(entry)
    return found


def document(
    tenant: str,
    findings: Sequence[Finding] = (),
    found: Sequence[dict[str, Any]] = (),
    notes: Sequence[str] = (),
    error: str | None = None,
) -> str:
    """The one JSON document of `--output json` (ASCII: names from YAML may hold anything)."""
    body: dict[str, Any] = {"tenant": tenant}
    if error is not None:
        body["error"] = error
    body["findings"] = [
        {
            "severity": f.severity,
            "reason": f.reason,
            "workload": f.workload,
            "message": f.message,
            **({"cards": f.card} if f.card else {}),
        }
        for f in findings
    ]
    body["placements"] = list(found)
    body["notes"] = list(notes)
    return json.dumps(body, indent=2, ensure_ascii=True)
