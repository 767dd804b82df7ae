"""MetalLB address pool carved out of the kind Docker network.

kind networks are often dual-stack (kind adds an IPv6 ULA subnet whenever the host allows it), and
the naive `{{range .IPAM.Config}}{{.Gateway}}{{end}}` glues both gateways into garbage that MetalLB's
webhook rejects (kind pkg/cluster/internal/providers/docker/network.go; Kamaji 26.8.2-edge
docs/content/getting-started/kamaji-kind.md, Troubleshooting). So: pick the IPv4 entry, whatever its
prefix length, and take the pool from the top of it. Docker hands container addresses out from the
bottom of the subnet (or from `IPRange` when one is set), so the top end stays free for MetalLB.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

# One address range MetalLB may hand out: a CIDR or `first-last` (metallb.io IPAddressPool spec.addresses).
_RANGE = re.compile(r"([0-9.]{7,15})-([0-9.]{7,15})", re.ASCII)
_CIDR = re.compile(r"([0-9.]{7,15})/([0-9]{1,2})", re.ASCII)


def metallb_addresses(address: str) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]:
    """(first, last) of a MetalLB pool entry; raises ValueError saying what is wrong and what to write."""
    form = "write an ascending IPv4 range first-last or a CIDR, e.g. 192.168.10.240-192.168.10.250 or 192.168.10.240/28"
    if match := _RANGE.fullmatch(address):
        try:
            first, last = (ipaddress.IPv4Address(part) for part in match.groups())
        except ValueError:
            raise ValueError(f"is not a range of two IPv4 addresses; {form}") from None
        if first > last:
            raise ValueError(f"descends ({first} is above {last}); {form}")
    elif match := _CIDR.fullmatch(address):
        try:
            network = ipaddress.IPv4Network(address, strict=True)
        except ValueError:
            raise ValueError(f"is not an IPv4 CIDR with host bits zero; {form}") from None
        if network.prefixlen == 0:
            raise ValueError("is every IPv4 address; give MetalLB only the free addresses of your network")
        first, last = network.network_address, network.broadcast_address
    elif ":" in address:
        raise ValueError("is not IPv4: MetalLB's pool for tenant control planes holds IPv4 addresses only")
    else:
        raise ValueError(f"is neither a CIDR nor a first-last range; {form}")
    for end in (first, last):
        if end.is_unspecified or end.is_multicast or end.is_loopback or end == ipaddress.IPv4Address("255.255.255.255"):
            raise ValueError(f"holds {end}, which no machine can have; {form}")
    return first, last


def address_problem(address: str) -> str | None:
    """Why a MetalLB pool entry is not a well-formed IPv4 CIDR or ascending range; None if it is."""
    try:
        metallb_addresses(address)
    except ValueError as error:
        return str(error)
    return None


def ranges_overlap(first: ipaddress.IPv4Address, last: ipaddress.IPv4Address, network: Any) -> bool:
    return int(first) <= int(network.broadcast_address) and int(network.network_address) <= int(last)


# Hosts: what `ssh` and glibc would take for something else is refused, and one machine has one spelling.
_HOSTNAME = re.compile(
    r"(?=.{1,253}\Z)[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*",
    re.ASCII,
)
# glibc's inet_aton reads `10`, `10.1`, `0x0a.1` and `010.0.0.21` (octal) as IPv4 addresses: a name whose
# last label is a number is one of those (the WHATWG URL standard's "ends in a number" rule).
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*", re.ASCII)
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}", re.ASCII)  # a Linux interface name (IFNAMSIZ 16 with the NUL)


def host_problem(host: str) -> str | None:
    """Why `host` is not a usable SSH host (a hostname or a unicast IP address); None if it is."""
    address, _, zone = host.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    if ip is not None:
        if "%" in host and (ip.version != 6 or not _ZONE.fullmatch(zone)):
            return "has a zone id that is not an interface name (letters, digits, '_', '.', '-'), e.g. fe80::1%eth0"
        effective = ip.ipv4_mapped if ip.version == 6 and ip.ipv4_mapped else ip
        if effective.is_unspecified or effective.is_multicast or effective == ipaddress.IPv4Address("255.255.255.255"):
            kind = "an unspecified" if effective.is_unspecified else "a multicast or broadcast"
            return f"is {kind} address, not a machine"
        return None
    if not _HOSTNAME.fullmatch(host):
        return "must be a hostname (ASCII letters, digits, '-', '.') or an IP address, e.g. gpu-box-1.lan"
    if _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        return (
            "reads as an IPv4 address in another notation (glibc takes numbers, hex and leading zeros); write the "
            "address in dotted decimal without leading zeros, e.g. 10.0.0.21, or a hostname"
        )
    return None


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a host is written as (an IPv4-mapped IPv6 address as the IPv4 one); None for a hostname."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None
    return ip.ipv4_mapped if ip.version == 6 and ip.ipv4_mapped else ip


def canonical_host(host: str) -> str:
    """One spelling per machine: IPv6 compressed and lower-case, an IPv4-mapped IPv6 address as the IPv4
    address, a hostname lower-case. `localhost` and every loopback address (127.0.0.0/8, ::1) are the machine
    gpulab runs on, whichever is written."""
    ip = host_address(host)
    if ip is None:
        name = host.lower().rstrip(".")
        # RFC 6761 6.3: `localhost` and every name under it are loopback; `localhost.localdomain` is the alias
        # Debian's and Red Hat's /etc/hosts give it.
        loopback = name in ("localhost", "localhost.localdomain") or name.endswith(".localhost")
        return "localhost" if loopback else name
    if ip.is_loopback:
        return "localhost"
    _, sep, zone = host.partition("%")
    return str(ip) + (f"%{zone}" if sep and ip.version == 6 else "")


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
