"""The management cluster of the lab: kind (made by gpulab) or an existing cluster, and what gpulab installs there."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator, model_validator

from model.config.errors import KeyedError, at
from model.config.fields import (
    DOCKER_NETWORK,
    MAX_METALLB_ADDRESSES,
    RESERVED_DOCKER_NETWORKS,
    TENANT_NAME,
    ConfigModel,
    SecretKeyName,
    duration_seconds,
)
from model.network import metallb_addresses

# Kamaji's own startup window (3 probes 10 s apart) is the least; half an hour hides any real fault.
MIN_STARTUP_SECONDS, MAX_STARTUP_SECONDS = 30, 1800
DEFAULT_STARTUP_TIMEOUT = "4m"


class Install(ConfigModel):
    """What gpulab installs into an existing management cluster (all three in kind mode)."""

    cert_manager: bool = False
    metallb: bool = False
    kamaji: bool = False


class Management(ConfigModel):
    # kind: gpulab creates a kind cluster; existing: use the cluster of a given kubeconfig.
    mode: Literal["kind", "existing"] = "kind"
    name: str = "gpulab"
    # kind puts its nodes on this Docker network (KIND_EXPERIMENTAL_DOCKER_NETWORK); a network of gpulab's own,
    # rather than the shared `kind` one, is what lets destroy remove it.
    network: str | None = None
    # kind mode: gpulab creates that network `--internal` (no route beyond this host, nothing published): for a
    # host that must not reach out, and the lab's tests. The host reaches kind's API server at the node's address.
    internal_network: bool = False
    metallb_pool_size: int = Field(default=16, ge=1, le=1024)
    # existing mode: the secret config key with the cluster's kubeconfig, what to install, MetalLB's addresses.
    kubeconfig_secret: SecretKeyName = "managementKubeconfig"
    install: Install | None = None
    metallb_addresses: list[str] = Field(default=[], max_length=MAX_METALLB_ADDRESSES)
    # How long a tenant's control-plane containers (Kamaji's TenantControlPlane pod) may take to start before the
    # kubelet restarts them: kubeadm's own default for its control plane (ClusterConfiguration
    # timeouts.controlPlaneComponentHealthCheck, 4m: cmd/kubeadm/app/constants/constants.go).
    control_plane_startup_timeout: str = DEFAULT_STARTUP_TIMEOUT

    @field_validator("control_plane_startup_timeout")
    @classmethod
    def _startup_timeout(cls, value: str) -> str:
        seconds = duration_seconds(value)
        if seconds is None or not MIN_STARTUP_SECONDS <= seconds <= MAX_STARTUP_SECONDS:
            raise ValueError(
                "must be a duration from 30s to 30m, e.g. 4m: how long a tenant's control plane may take to start "
                "before the kubelet restarts it (a busy 2-core host took about 100 s)"
            )
        return value

    @property
    def control_plane_startup_seconds(self) -> int:
        seconds = duration_seconds(self.control_plane_startup_timeout)
        assert seconds is not None  # validated
        return seconds

    @field_validator("metallb_addresses")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        problems: list[tuple[str, object, str]] = []
        for i, address in enumerate(value):
            try:
                metallb_addresses(address)
            except ValueError as error:
                problems.append((f"[{i}]", address, str(error)))
        if problems:
            raise KeyedError(problems)
        return value

    def metallb_ranges(self) -> list[tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]]:
        return [metallb_addresses(address) for address in self.metallb_addresses]

    @model_validator(mode="after")
    def _mode(self) -> Management:
        if self.network_name in RESERVED_DOCKER_NETWORKS:
            key = "network" if self.network is not None else "name"
            raise at(
                key,
                f"names Docker's predefined network {self.network_name!r}, which kind cannot use and destroy must "
                "not remove; pick another name, e.g. gpulab",
                self.network_name,
            )
        if self.mode != "kind" and self.internal_network:
            raise at("internalNetwork", "is for mode: kind (gpulab creates the kind network); remove it", True)
        if self.mode == "kind":
            if self.install is not None or self.metallb_addresses:
                raise at(
                    "install" if self.install is not None else "metallbAddresses",
                    "install and metallbAddresses are for mode: existing; in kind mode gpulab installs everything and "
                    "takes MetalLB's pool from the kind network",
                )
        elif self.installs("metallb") and not self.metallb_addresses:
            raise at(
                "metallbAddresses",
                "install.metallb needs metallbAddresses: the IPv4 range MetalLB may hand out on your network, "
                "e.g. [192.168.10.240-192.168.10.250]",
            )
        return self

    def installs(self, component: Literal["cert_manager", "metallb", "kamaji"]) -> bool:
        """Whether gpulab installs `component`: always in kind mode, where asked in existing mode."""
        if self.mode == "kind":
            return True
        return bool(self.install and getattr(self.install, component))

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TENANT_NAME.fullmatch(value):
            raise ValueError("must be a lowercase DNS label of at most 40 characters, e.g. gpulab")
        return value

    @field_validator("network")
    @classmethod
    def _network(cls, value: str | None) -> str | None:
        if value is not None and not DOCKER_NETWORK.fullmatch(value):
            raise ValueError("must be a Docker network name (letters, digits, '_', '.', '-'; at most 63), e.g. gpulab")
        return value

    @property
    def network_name(self) -> str:
        return self.network or self.name
