"""The rules between a tenant's HAMi release (hamiVersion), its device plugin (devicePlugin) and the rest of a stack."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from model.hami_releases import (
    PLUGIN_MAX_NODE_MEMORY_MB,
    RELEASES,
    UPSTREAM_MOCK_NAME,
    UPSTREAM_MOCK_PATH,
    UPSTREAM_MOCK_TAGS,
)
from model.image_ref import ImageRef

if TYPE_CHECKING:
    from model.config.tenant import Tenant
    from model.versions import Versions

Problem = tuple[str, object, str]


class LabConfig(Protocol):
    """What these rules read of a stack: model/config/lab.py's LabConfig, which runs them from its validators (a
    Protocol, so that this module needs nothing of that one)."""

    @property
    def tenants(self) -> list[Tenant]: ...
    @property
    def versions(self) -> Versions: ...
    @property
    def process_mode(self) -> bool: ...
    @property
    def real_nodes(self) -> bool: ...
    def runs_hami(self, tenant: Tenant) -> bool: ...


def upstream_mock(image: str) -> bool:
    """Whether an image reference is HAMi's upstream mock plugin, which cannot read chart 2.9+'s device config.

    Read from the parsed reference (ImageRef: registry, repository path, tag, digest), not from its spelling: the
    upstream repository's path on any registry name (docker.io, index.docker.io, registry-1.docker.io, a mirror such
    as mirror.gcr.io) or under a proxy's prefix (`harbor.example/hub/projecthami/mock-device-plugin`), with any tag,
    a digest or both: every tag predates the fix (PR #18), `latest` moves, and a digest cannot be told apart offline.
    And a copy of an upstream tag under another repository named mock-device-plugin."""
    ref = ImageRef.parse(image)
    if ref.repository == UPSTREAM_MOCK_PATH or ref.repository.endswith(f"/{UPSTREAM_MOCK_PATH}"):
        return True
    return ref.repository.rsplit("/", 1)[-1] == UPSTREAM_MOCK_NAME and ref.tag in UPSTREAM_MOCK_TAGS


def device_plugin(lab: LabConfig, tenant: Tenant) -> Literal["gpulab", "mock"] | None:
    """The device plugin the Docker lab runs for a tenant's simulated cards: its devicePlugin; when unset, HAMi's
    chart's mock plugin where the upstream mock reads the release's device config (v2.8.3), else gpulab's (v2.10.0);
    None where the Docker lab runs none of its own (real GPUs: HAMi's NVIDIA plugin) and in process mode (KWOK nodes
    have the bind-time role, real nodes gpulab-hami-plugin as a systemd unit)."""
    if lab.process_mode or tenant.gpu_mode != "mock":
        return None
    return tenant.device_plugin or ("mock" if RELEASES[tenant.hami_version].upstream_mock_reads_config else "gpulab")


def docker_lab_hami_problems(lab: LabConfig) -> list[Problem]:
    """The Docker lab installs the chart of each tenant's HAMi release. A stack that sets versions.hami pins that
    chart for every tenant, so it must be the chart of the release each HAMi tenant names; a mock tenant on a
    release whose device config the upstream mock plugin cannot read (chart >= 2.9.0 makes `vnpus` a mapping, and
    mock-device-plugin 1.0.1 exits on it) needs gpulab's plugin or another mock image; and gpulab's plugin has the
    limits of its kubelet message and of an image no registry serves."""
    problems: list[Problem] = []
    pinned = "hami" in lab.versions.model_fields_set  # the stack set versions.hami
    mock_image = lab.versions.mock_device_plugin_image
    for i, tenant in enumerate(lab.tenants):
        if not lab.runs_hami(tenant):
            continue
        release = RELEASES[tenant.hami_version]
        key = f"tenants[{i}].hamiVersion"
        if pinned and lab.versions.hami.version != release.chart:
            message = (
                f"runs chart {release.chart}, but versions.hami.version pins {lab.versions.hami.version} for every "
                "tenant: remove versions.hami.version (each tenant's hamiVersion picks its chart)"
            )
            problems.append((key, tenant.hami_version, message))
        if tenant.device_plugin is not None and tenant.gpu_mode != "mock":
            message = (
                "chooses the plugin of simulated cards; a gpuMode: real tenant runs HAMi's NVIDIA device plugin: "
                "remove it"
            )
            problems.append((f"tenants[{i}].devicePlugin", tenant.device_plugin, message))
        plugin = device_plugin(lab, tenant)
        if plugin == "mock" and upstream_mock(mock_image) and not release.upstream_mock_reads_config:
            message = (
                f"needs a device plugin that reads HAMi chart {release.chart}'s device config, and "
                f"versions.mockDevicePluginImage ({mock_image}) is the upstream mock plugin, which cannot: every "
                f"mock-device-plugin tag predates its fix (PR #18). Set tenants[{i}].devicePlugin: gpulab (the "
                "plugin of gpulab, whose image `make lab-images` builds), or use hamiVersion: v2.8.3 in the Docker "
                "lab, or set versions.mockDevicePluginImage to a plugin image built after that fix, under a "
                "repository of your own"
            )
            problems.append((key, tenant.hami_version, message))
        if plugin == "gpulab":
            problems += gpulab_plugin_problems(lab, i, tenant)
    return problems


def gpulab_plugin_problems(lab: LabConfig, i: int, tenant: Tenant) -> list[Problem]:
    """A Docker-lab tenant that runs gpulab-hami-plugin: its nodes must fit the kubelet's message at memory factor
    1, and SSH machines, which pull their images themselves, cannot pull an image only this host has."""
    problems = [
        (f"tenants[{i}].{key}", name, message)
        for key, name, message in _plugin_memory_problems(tenant, "node", "or spread them over several nodes (nodes)")
    ]
    image = lab.versions.hami_device_plugin_image
    if tenant.worker_mode == "ssh" and ImageRef.parse(image).registry == "localhost":
        chosen = "" if tenant.device_plugin else f" (the default for hamiVersion {tenant.hami_version})"
        # the upstream mock reads no device config after v2.8.3's (docker_lab_hami_problems)
        other = "" if RELEASES[tenant.hami_version].upstream_mock_reads_config else "hamiVersion: v2.8.3 with "
        # within the 400 characters a config error's message keeps (boundary/redact.py scrub)
        message = (
            f"runs the device plugin of gpulab{chosen} on SSH machines, which pull their own images, and "
            f"versions.hamiDevicePluginImage ({image}) is built by `make lab-images` on this host, in no registry: "
            "push it to a registry the machines reach and set versions.hamiDevicePluginImage to it, or use "
            f"{other}devicePlugin: mock"
        )
        problems.append((f"tenants[{i}].devicePlugin", tenant.device_plugin or "gpulab", message))
    return problems


def _plugin_memory_problems(tenant: Tenant, what: str, alternative: str) -> list[Problem]:
    """gpulab-hami-plugin registers one gpumem device per MB with the kubelet (model/hami_releases.py
    PLUGIN_MAX_NODE_MEMORY_MB): a node of more card memory than one message holds would need a memory factor that
    HAMi, pods and gpulab all share, which gpulab does not do. Keyed relative to the tenant."""
    problems: list[Problem] = []
    for node in tenant.gpu_nodes():
        memory = sum(card.memory_mb for card in node.cards)
        if memory > PLUGIN_MAX_NODE_MEMORY_MB:
            key = "nodes" if tenant.nodes is not None else "workers" if tenant.worker_mode == "ssh" else "gpus"
            message = (
                f"puts {memory} MB of cards on {what} {node.name}; HAMi's device plugin registers at most "
                f"{PLUGIN_MAX_NODE_MEMORY_MB} MB per node: give it fewer or smaller cards, {alternative}"
            )
            problems.append((key, node.name, message))
    return problems


def real_node_plugin_problems(lab: LabConfig) -> list[Problem]:
    """Process mode: a HAMi tenant's real node runs gpulab-hami-plugin (its memory limit, as above); and a tenant's
    devicePlugin, which is the Docker lab's choice, is refused (process mode picks its own)."""
    problems: list[Problem] = [
        (
            f"tenants[{i}].devicePlugin",
            tenant.device_plugin,
            "is a choice of the Docker lab; process mode picks its own (KWOK nodes: the bind-time role of HAMi; real "
            "nodes: gpulab-hami-plugin in the node image): remove it",
        )
        for i, tenant in enumerate(lab.tenants)
        if tenant.device_plugin is not None
    ]
    if not lab.real_nodes:
        return problems
    for i, tenant in enumerate(lab.tenants):
        if not lab.runs_hami(tenant):
            continue
        problems += [
            (f"tenants[{i}].{key}", name, message)
            for key, name, message in _plugin_memory_problems(tenant, "real node", "or use workers: kwok")
        ]
    return problems
