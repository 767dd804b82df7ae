"""What HAMi's scheduler counts of a placed pod, read back from its allocation annotation (hami/annotations.py), per
release: the checker's live usage (placement/live.py) and the report (report/model.py) both count with it.

- v2.8.3 allocates app containers only, one part each: every card share counts, a slot each.
- v2.10.0 (tag v2.10.0, commit 4707fb02c91c) lists init containers first. When it rebuilds its usage from the
  annotation (pkg/scheduler/scheduler.go `onAddPod` 137-171) it counts per card the larger of the init containers'
  peak and the app containers' sum, for memory, cores and slots each (pkg/device/initContainer.go
  `CollapseInitContainerUsage` 36-113; hami/nodes.py `collapsed_use`). Once every init container has succeeded it
  counts the app containers only (`onUpdatePod` 204-222, `AppContainersOnlyDeviceUsage` 116-157; pkg/util/util.go
  `AllInitContainersSucceeded` 162-172), but only from the pod's next change after it saw them: a scheduler
  restarted since reads the peak again (`onAddPod`), up to the pod's next update or the informer's hourly resync.
  `PodUse.cards` is the app containers' then, and `PodUse.after_restart` the peak a restarted scheduler counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hami.annotations import ALLOCATED, PodAllocation, pod_allocation
from hami.nodes import collapsed_use
from hami.releases import Rules

Held = dict[str, tuple[int, int, int]]  # card -> (slots, MB, cores)


def all_init_containers_succeeded(pod: Mapping[str, Any]) -> bool:
    """v2.10.0 pkg/util/util.go `AllInitContainersSucceeded` (162-172): some init container status, and every one
    terminated with exit code 0."""
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or []
    return bool(statuses) and all(
        isinstance(s, Mapping)
        and isinstance((terminated := (s.get("state") or {}).get("terminated")), Mapping)
        and terminated.get("exitCode") == 0
        for s in statuses
    )


def init_container_count(pod: Mapping[str, Any]) -> int:
    return len((pod.get("spec") or {}).get("initContainers") or [])


def read_allocation(pod: Mapping[str, Any], value: str, rules: Rules, key: str = ALLOCATED) -> PodAllocation:
    """The pod's allocation annotation `value` as its release reads it (init containers first at v2.10.0)."""
    return pod_allocation(value, init_container_count(pod), rules.init_containers_counted, key)


@dataclass(frozen=True)
class PodUse:
    cards: Held  # what the release's scheduler counts of the pod now, per card
    after_restart: Held | None = None  # what one restarted since would count, where that differs (v2.10.0)


def pod_use(pod: Mapping[str, Any], allocation: PodAllocation) -> PodUse:
    """What the scheduler counts of `pod`, whose cards are `allocation` (read for its release: `read_allocation`)."""
    entries = allocation.entries()
    peak = {str(card): held for card, held in collapsed_use(entries).items()}
    if not allocation.init or not all_init_containers_succeeded(pod):
        return PodUse(peak)
    apps = {str(card): held for card, held in collapsed_use([e for e in entries if not e[0]]).items()}
    return PodUse(apps, None if apps == peak else peak)
