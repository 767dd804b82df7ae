"""MetalLB address pool carved out of the kind Docker network.

kind networks are often dual-stack (kind adds an IPv6 ULA subnet whenever the host allows it), and
the naive `{{range .IPAM.Config}}{{.Gateway}}{{end}}` glues both gateways into garbage that MetalLB's
webhook rejects (../shared/notes/kamaji.md section 0 item 13). So: pick the IPv4 entry, whatever its
prefix length, and take the pool from the top of it. Docker hands container addresses out from the
bottom of the subnet (or from `IPRange` when one is set), so the top end stays free for MetalLB.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any


def address_problem(address: str) -> str | None:
    """Why a MetalLB pool entry (a CIDR or a `first-last` range) is not IPv4; None if it is."""
    parts = address.split("-") if "-" in address else [address]
    try:
        versions = {ipaddress.ip_network(part.strip(), strict=False).version for part in parts}
    except ValueError:
        return f"{address!r} is neither a CIDR nor a first-last range"
    if versions != {4}:
        return f"{address!r} is not IPv4: MetalLB's pool for tenant control planes holds IPv4 addresses only"
    return None


class PoolError(ValueError):
    """The kind network cannot hold the requested MetalLB pool; `key` is the config key to change."""

    def __init__(self, message: str, key: str = "management.metallbPoolSize") -> None:
        super().__init__(message)
        self.key = key


def ipv4_ipam_entry(ipam_configs: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The IPv4 entry of a network's IPAM config list (keys `Subnet`/`subnet`, `IPRange`/`ip_range`, ...)."""
    entries = list(ipam_configs)
    for entry in entries:
        subnet = entry.get("Subnet") or entry.get("subnet")
        if subnet and ipaddress.ip_network(subnet, strict=False).version == 4:
            return entry
    subnets = [entry.get("Subnet") or entry.get("subnet") for entry in entries]
    raise PoolError(
        f"the kind Docker network has no IPv4 subnet (subnets: {subnets}); MetalLB needs IPv4 addresses. "
        "Delete the network (docker network rm NAME) so kind recreates it with IPv4, or create it with "
        "docker network create --subnet 172.30.0.0/16 NAME",
        key="management.network",
    )


def metallb_range(
    ipam_configs: Iterable[Mapping[str, Any]],
    size: int,
    avoid: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """(`first-last` range, IPv4 subnet) for a pool of `size` addresses at the top of the IPv4 subnet.

    The pool must stay in the upper half of the subnet (the lower half is where Docker places
    containers), outside any configured container `IPRange`, and clear of the CIDRs in `avoid`
    (tenant pod and service networks, which would otherwise shadow the node addresses), given as
    config key -> CIDR so an error names the key to change.
    """
    if size < 1:
        raise PoolError(f"metallbPoolSize = {size}: must be at least 1")
    entry = ipv4_ipam_entry(ipam_configs)
    subnet = ipaddress.ip_network(entry.get("Subnet") or entry.get("subnet"), strict=False)
    broadcast = int(subnet.broadcast_address)
    last = broadcast - 1
    first = last - size + 1
    upper_half_start = int(subnet.network_address) + subnet.num_addresses // 2
    if first < upper_half_start:
        room = max(0, last - upper_half_start + 1)
        raise PoolError(
            f"the kind network {subnet} is too small for a MetalLB pool of {size} addresses: only {room} fit in "
            f"its upper half, which gpulab keeps for MetalLB; lower gpulab:management.metallbPoolSize to {room} "
            "or less, or use a larger network"
        )
    pool = (ipaddress.IPv4Address(first), ipaddress.IPv4Address(last))
    ip_range = entry.get("IPRange") or entry.get("ip_range")
    if ip_range:
        containers = ipaddress.ip_network(ip_range, strict=False)
        if _overlaps(pool, containers):
            raise PoolError(
                f"the pool {pool[0]}-{pool[1]} would overlap the network's container range {containers}; "
                "lower gpulab:management.metallbPoolSize or recreate the network without --ip-range"
            )
    for key, cidr in (avoid or {}).items():
        network = ipaddress.ip_network(cidr, strict=False)
        if network.overlaps(subnet):
            raise PoolError(f"{cidr} overlaps the kind network {subnet}; pick a range outside it", key=key)
    return f"{pool[0]}-{pool[1]}", str(subnet)


def _overlaps(pool: tuple[ipaddress.IPv4Address, ipaddress.IPv4Address], network: Any) -> bool:
    return int(pool[0]) <= int(network.broadcast_address) and int(network.network_address) <= int(pool[1])
