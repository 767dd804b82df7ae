"""`make diagnose` on a HAMi tenant's GPU node: HAMi's register annotation and the node's GPU resources, with a fix
that names what puts them there in this runtime."""

from __future__ import annotations

from fractions import Fraction

from diagnose.analyze import Cluster, Finding, _meta
from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_RESOURCE, REGISTER_ANNOTATION
from model.quantity import QuantityError, parse_quantity

# Who puts a GPU node's cards on it, and so what to look at when they are missing (diagnose/collect.py
# tenant_expectations): the Docker lab's inventory script with the mock device plugin, or gpulab's HAMi device plugin
# as a DaemonSet (devicePlugin: gpulab); gpulab's HAMi device plugin, the node container's systemd unit on a real
# node (process_lab/hami_plugin.py); process mode's GpuInventory, a patch of the node's annotation and status
# (process_lab/node_inventory.py).
CARD_FIXES = {
    "docker-mock": (
        "HAMi sees no GPU on it: `make up` writes it once the node is Ready (apply-gpu-inventory); run it",
        "{source} sets it: see hami-mock-device-plugin above; `make up` re-applies the inventory",
    ),
    "plugin-daemonset": (
        "gpulab's HAMi device plugin (DaemonSet kube-system/gpulab-hami-device-plugin, devicePlugin: gpulab) writes it "
        "once the kubelet has registered it: its pod on {node} says why not (kubectl -n kube-system logs -l "
        "app.kubernetes.io/name=gpulab-hami-device-plugin); `make up` makes it again",
        "gpulab's HAMi device plugin registers it with the kubelet: see gpulab-hami-device-plugin above; `make up` "
        "makes it again",
    ),
    "plugin-unit": (
        "gpulab's HAMi device plugin writes it once the kubelet has registered it: `docker exec {node} "
        "systemctl status gpulab-hami-plugin` and `journalctl -u gpulab-hami-plugin` there say why not; "
        "`make up` starts it again",
        "gpulab's HAMi device plugin registers it with the kubelet: `docker exec {node} systemctl status "
        "gpulab-hami-plugin`; `make up` starts it again",
    ),
    "inventory": (
        "gpulab writes it on the node (process mode's GPU inventory): `make up` writes it again",
        "gpulab patches it onto the node's status (process mode's GPU inventory): `make up` writes it again",
    ),
}


def gpu_node_findings(
    cluster: Cluster, node_name: str, expected: dict[str, int] | None, cards_from: str = "docker-mock"
) -> list[Finding]:
    """The GPU node carries HAMi's register annotation and advertises the declared totals (mock mode).
    `cards_from`: what puts them there (CARD_FIXES), which the fix names."""
    node = next((n for n in cluster.items("nodes") if _meta(n).get("name") == node_name), None)
    if node is None:
        if cluster.items("nodes"):
            return [Finding(cluster.where, f"node {node_name}", "GPU node not found", "", "its worker never joined")]
        return []
    annotation_fix, capacity_fix = CARD_FIXES[cards_from]
    findings = []
    annotations = _meta(node).get("annotations") or {}
    if not annotations.get(REGISTER_ANNOTATION):
        findings.append(
            Finding(
                cluster.where,
                f"node {node_name}",
                f"no {REGISTER_ANNOTATION} annotation",
                "",
                annotation_fix.format(node=node_name),
                "GPU inventory missing",
            )
        )
    # Allocatable is what the kubelet admits against and what HAMi 2.8 registers by (pkg/device/nvidia/device.go
    # `CheckHealth`).
    status = node.get("status") or {}
    capacity = status.get("allocatable") or status.get("capacity") or {}
    for resource in (GPU_RESOURCE, GPUMEM_RESOURCE, GPUCORES_RESOURCE):
        want = (expected or {}).get(resource)
        have = capacity.get(resource)
        value = _quantity(have)
        if not value or (want is not None and value != want):
            source = "the capacity patch" if resource == GPU_RESOURCE else "the mock device plugin"
            findings.append(
                Finding(
                    cluster.where,
                    f"node {node_name}",
                    f"{resource} capacity {have or 'missing'}" + (f", declared {want}" if want is not None else ""),
                    "",
                    capacity_fix.format(source=source, node=node_name),
                    "GPU capacity not advertised",
                )
            )
    return findings


def _quantity(value: object) -> Fraction | None:
    """The API server sends quantities in canonical form: 20000 MB arrives as "20k" (boundaries.md)."""
    try:
        return parse_quantity(str(value)) if value is not None else None
    except QuantityError:
        return None
