"""The rules between a tenant's HAMi release (hamiVersion) and the rest of a Docker-lab stack."""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.hami_releases import PLUGIN_MAX_NODE_MEMORY_MB, RELEASES, UPSTREAM_MOCK_REPOSITORY, UPSTREAM_MOCK_TAGS
from model.image_ref import ImageRef

if TYPE_CHECKING:
    from model.config.lab import LabConfig


def docker_lab_hami_problems(lab: LabConfig) -> list[tuple[str, object, str]]:
    """The Docker lab installs the chart of each tenant's HAMi release. A stack that sets versions.hami pins that
    chart for every tenant, so it must be the chart of the release each HAMi tenant names; and a mock tenant on a
    release whose device config the upstream mock plugin cannot read (chart >= 2.9.0 makes `vnpus` a mapping, and
    mock-device-plugin 1.0.1 exits on it) needs another plugin image."""
    problems: list[tuple[str, object, str]] = []
    pinned = "hami" in lab.versions.model_fields_set  # the stack set versions.hami
    mock_image = lab.versions.mock_device_plugin_image
    mock = ImageRef.parse(mock_image)
    upstream_mock = mock.name == UPSTREAM_MOCK_REPOSITORY and mock.tag in UPSTREAM_MOCK_TAGS
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
        if tenant.gpu_mode == "mock" and upstream_mock and not release.upstream_mock_reads_config:
            message = (
                f"needs a device plugin that reads HAMi chart {release.chart}'s device config, and "
                f"versions.mockDevicePluginImage ({mock_image}) cannot: every mock-device-plugin tag predates its "
                "fix (PR #18). Use hamiVersion: v2.8.3 in the Docker lab, or set versions.mockDevicePluginImage to "
                "a plugin image built after that fix"
            )
            problems.append((key, tenant.hami_version, message))
    return problems


def real_node_plugin_problems(lab: LabConfig) -> list[tuple[str, object, str]]:
    """A HAMi tenant's real node runs gpulab-hami-plugin, which registers one gpumem device per MB with the kubelet
    (model/hami_releases.py PLUGIN_MAX_NODE_MEMORY_MB): a node of more card memory than one message holds would need
    a memory factor that HAMi, pods and gpulab all share, which gpulab does not do. Refused, with the fix."""
    if not lab.real_nodes:
        return []
    problems: list[tuple[str, object, str]] = []
    for i, tenant in enumerate(lab.tenants):
        if not lab.runs_hami(tenant):
            continue
        for node in tenant.gpu_nodes():
            memory = sum(card.memory_mb for card in node.cards)
            if memory > PLUGIN_MAX_NODE_MEMORY_MB:
                key = f"tenants[{i}].gpus"  # real nodes: one node per tenant, its cards under gpus
                message = (
                    f"puts {memory} MB of cards on real node {node.name}; HAMi's device plugin registers at most "
                    f"{PLUGIN_MAX_NODE_MEMORY_MB} MB per node: give it fewer or smaller cards, or use workers: kwok"
                )
                problems.append((key, node.name, message))
    return problems
