"""What users read of the placement engine's verdicts (placement/wording.py makes them): one finding per
verdict, with HAMi's reason name where HAMi has one, and the reasons gpulab adds to HAMi's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ORDER_DEPENDENT = "OrderDependentPlacement"
UNDECIDED = "PlacementUndecided"
NO_PLACEMENT = "NoPlacement"  # only if HAMi's walk and the search ever disagreed on why
# gpulab's own: a pod asking nvidia.com/* of a tenant whose cards DRA shares (gpuSharing: dra), where no node
# advertises those resources.
NOT_SHARED_BY_HAMI = "CardsSharedByDra"


@dataclass(frozen=True)
class Finding:
    severity: Literal["error", "warning"]
    tenant: str
    workload: str  # kind/namespace/name of the workload at fault
    reason: str  # HAMi's reason name where HAMi has one
    message: str
    card: str | None = None

    def line(self) -> str:
        card = f" on {self.card}" if self.card else ""
        return printable(f"{self.severity}: tenant {self.tenant}: {self.workload}{card}: {self.reason}: {self.message}")


def printable(text: str) -> str:
    """Text that any UTF-8 output (a terminal, the analyzer's protobuf) accepts: names from YAML can
    hold lone surrogates (escaped halves of a pair), which would crash the writer."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
