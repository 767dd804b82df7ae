"""`make diagnose` on a DRA tenant (gpuSharing: dra): its GPU nodes' ResourceSlices of gpulab's driver
(model/dra.py), which its claims are allocated from."""

from __future__ import annotations

from diagnose.analyze import Cluster, Finding
from model.dra import DRIVER as DRA_DRIVER


def dra_findings(cluster: Cluster, nodes: tuple[str, ...]) -> list[Finding]:
    """Each GPU node of a DRA tenant has its ResourceSlice of gpulab's driver: without it no claim is allocated."""
    sliced = {
        (item.get("spec") or {}).get("nodeName")
        for item in cluster.items("resourceslices")
        if (item.get("spec") or {}).get("driver") == DRA_DRIVER
    }
    return [
        Finding(
            cluster.where,
            f"node {node}",
            f"no ResourceSlice of {DRA_DRIVER}",
            "",
            "the tenant's claims find no card there (gpuSharing: dra): `make up` creates its slices again (on a "
            f"real node gpulab's DRA kubelet plugin publishes them: `docker exec {node} systemctl status "
            "gpulab-dra-plugin`)",
            "DRA devices missing",
        )
        for node in nodes
        if node not in sliced
    ]
