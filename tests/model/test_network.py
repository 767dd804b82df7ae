"""MetalLB pool derivation from real-shaped `docker network inspect` documents."""

from __future__ import annotations

import ipaddress
import json
import re

import pytest

from model.network import PoolError, ipv4_ipam_entry, metallb_range


def inspect_document(configs: list[dict]) -> list[dict]:
    """What `docker network inspect kind` prints (trimmed to the fields that matter, same shape)."""
    return json.loads(
        json.dumps(
            [
                {
                    "Name": "kind",
                    "Id": "5f1c0d5e8b9c",
                    "Driver": "bridge",
                    "EnableIPv6": any(":" in c["Subnet"] for c in configs),
                    "IPAM": {"Driver": "default", "Options": {}, "Config": configs},
                    "Containers": {},
                    "Options": {"com.docker.network.bridge.enable_ip_masquerade": "true"},
                }
            ]
        )
    )


def ipam(document: list[dict]) -> list[dict]:
    return document[0]["IPAM"]["Config"]


IPV6_FIRST = inspect_document(
    [
        {"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"},
        {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"},
    ]
)


def test_ipv4_only_slash16() -> None:
    document = inspect_document([{"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}])
    assert metallb_range(ipam(document), 16) == ("172.18.255.239-172.18.255.254", "172.18.0.0/16")


def test_dual_stack_with_ipv6_listed_first_picks_ipv4() -> None:
    address_range, subnet = metallb_range(ipam(IPV6_FIRST), 16)
    assert subnet == "172.18.0.0/16"
    assert address_range == "172.18.255.239-172.18.255.254"
    assert ":" not in address_range  # the glued gateways of Kamaji's kamaji-kind.md, Troubleshooting


def test_slash24() -> None:
    document = inspect_document([{"Subnet": "192.168.58.0/24", "Gateway": "192.168.58.1"}])
    assert metallb_range(ipam(document), 20) == ("192.168.58.235-192.168.58.254", "192.168.58.0/24")


def test_slash20() -> None:
    document = inspect_document(
        [{"Subnet": "fd00::/64", "Gateway": "fd00::1"}, {"Subnet": "10.89.16.0/20", "Gateway": "10.89.16.1"}]
    )
    assert metallb_range(ipam(document), 50) == ("10.89.31.205-10.89.31.254", "10.89.16.0/20")


def test_no_ipv4_at_all_is_a_clear_error() -> None:
    document = inspect_document([{"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"}])
    with pytest.raises(PoolError, match="no IPv4 subnet"):
        metallb_range(ipam(document), 16)


def test_subnet_too_small_for_the_pool() -> None:
    document = inspect_document([{"Subnet": "192.168.58.0/26", "Gateway": "192.168.58.1"}])
    with pytest.raises(PoolError, match="too small for a MetalLB pool of 40 addresses: only 31 fit"):
        metallb_range(ipam(document), 40)


def test_pool_never_overlaps_the_container_ip_range() -> None:
    document = inspect_document([{"Subnet": "172.18.0.0/16", "IPRange": "172.18.128.0/17", "Gateway": "172.18.0.1"}])
    with pytest.raises(PoolError, match=re.escape("container range 172.18.128.0/17")):
        metallb_range(ipam(document), 16)


def test_tenant_network_inside_the_kind_subnet_is_refused_naming_its_key() -> None:
    avoid = {"tenants[0].podCidr": "10.244.0.0/16", "tenants[1].serviceCidr": "172.18.64.0/18"}
    with pytest.raises(PoolError, match=re.escape("172.18.64.0/18 overlaps the kind network 172.18.0.0/16")) as raised:
        metallb_range(ipam(IPV6_FIRST), 16, avoid=avoid)
    assert raised.value.key == "tenants[1].serviceCidr"


def test_pool_errors_name_the_key_to_change() -> None:
    too_small = inspect_document([{"Subnet": "192.168.58.0/26", "Gateway": "192.168.58.1"}])
    with pytest.raises(PoolError) as raised:
        metallb_range(ipam(too_small), 40)
    assert raised.value.key == "management.metallbPoolSize"
    no_ipv4 = inspect_document([{"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"}])
    with pytest.raises(PoolError) as raised:
        metallb_range(ipam(no_ipv4), 16)
    assert raised.value.key == "management.network"


@pytest.mark.parametrize("prefix", range(16, 29))
def test_pool_stays_in_the_upper_half_and_off_the_broadcast(prefix: int) -> None:
    subnet = ipaddress.ip_network(f"172.20.0.0/{prefix}")
    size = max(1, subnet.num_addresses // 2 - 1)
    address_range, _ = metallb_range([{"subnet": str(subnet)}], size)
    first, last = (ipaddress.ip_address(part) for part in address_range.split("-"))
    assert int(last) - int(first) + 1 == size
    assert last == subnet.broadcast_address - 1
    assert int(first) >= int(subnet.network_address) + subnet.num_addresses // 2


def test_lowercase_keys_from_the_pulumi_invoke_work_too() -> None:
    entry = ipv4_ipam_entry([{"subnet": "fc00::/64"}, {"subnet": "172.30.0.0/16", "ip_range": None}])
    assert entry["subnet"] == "172.30.0.0/16"
