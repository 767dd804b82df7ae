"""The HAMi releases gpulab knows, one row each: what a tenant's `hamiVersion` may name.

A tenant runs exactly one HAMi release; everything that depends on it (the chart the Docker lab installs, the
scheduler binary process mode starts, the placement rules the policy pack and `make check` judge with, the
device plugin's register and Allocate behaviour) reads it from here. The rules themselves are hami/'s, keyed
by the same version strings (hami/releases.py); a test holds the two tables to one set of versions.

Each row's trace: the tag, its commit and date in github.com/Project-HAMi/HAMi, and the chart version the HAMi
chart repository (gh-pages `index.yaml`) publishes for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HamiRelease:
    version: str  # the tag, as a tenant's hamiVersion names it
    commit: str  # the tag's commit in Project-HAMi/HAMi
    date: str  # the tag's date (UTC)
    chart: str  # the chart version of the same release (charts/hami/Chart.yaml `version` at the tag)
    # mock-device-plugin 1.0.1 reads `vnpus` as a list (its internal/pkg/config/config.go `VNPUs []VNPUConfig`);
    # HAMi's chart makes it a mapping from 2.9.0 (charts/hami/templates/scheduler/device-configmap.yaml), and the
    # mock then exits on the YAML error: only releases before 2.9.0 run with the upstream mock's only tag.
    upstream_mock_reads_config: bool
    # Webhook refuses a pod over the namespace quota at create (pkg/scheduler/webhook.go, from v2.9.0, PR #1605);
    # before, the quota only refuses at scheduling (ResourceQuotaNotFit).
    quota_at_admission: bool


# Newest first. v2.10.0 is what `helm install hami hami-charts/hami` installed on the seed's date (2026-10-23)
# and is still HAMi's newest release; v2.8.3 is the release gpulab followed before it.
RELEASES: dict[str, HamiRelease] = {
    "v2.10.0": HamiRelease(
        version="v2.10.0",
        commit="4707fb02c91c545bc7343ce26dba4c32919f9a3e",
        date="2026-08-21",
        chart="2.10.0",
        upstream_mock_reads_config=False,
        quota_at_admission=True,
    ),
    "v2.8.3": HamiRelease(
        version="v2.8.3",
        commit="8f039ad22bfc14970e2ea557f24c411c34203079",
        date="2026-05-19",
        chart="2.8.3",
        upstream_mock_reads_config=True,
        quota_at_admission=False,
    ),
}
DEFAULT_VERSION = "v2.10.0"
KNOWN_VERSIONS = tuple(RELEASES)
# A tenant that does not say runs v2.10.0, what the seed's `helm install` took, in every runtime. In the Docker lab
# its device plugin is then gpulab's own (model/config/hami.py `device_plugin`): mock-device-plugin's only tag
# (1.0.1) cannot read chart 2.10's device config, and the fix (its PR #18) is in no tag. The whole Docker lab ran
# live with it on 2026-12-08 (docs/docker-lab.md).
# The upstream mock plugin, however a reference spells it: its repository path (on Docker Hub, under any of Docker
# Hub's names, or under a mirror's or proxy's prefix), whatever the tag or digest, since every tag of it (1.0.0,
# 1.0.1) predates PR #18 and `latest` moves; and a copy of one of those tags under another repository of that name.
UPSTREAM_MOCK_REPOSITORY = "docker.io/projecthami/mock-device-plugin"
UPSTREAM_MOCK_PATH = "projecthami/mock-device-plugin"
UPSTREAM_MOCK_NAME = "mock-device-plugin"
UPSTREAM_MOCK_TAGS = ("1.0.0", "1.0.1")


# gpulab-hami-plugin registers one nvidia.com/gpumem device per MB, and the kubelet reads a plugin's device list in one
# gRPC message of at most 4 MiB (kubernetes v1.36.4 pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go dials with
# grpc-go's default receive limit): at most this many MB of cards per real node at memory factor 1
# (process_lab/hami_plugin.py max_counted_devices computes it from the message's encoding; a test holds the two equal).
PLUGIN_MAX_NODE_MEMORY_MB = 123_011

# A tenant that runs no HAMi (scheduling.scheduler: kube-scheduler, or gpuSharing: dra) has no release of its own; the
# per-pod rules it is judged with stay the ones gpulab always used for it, v2.8.3's, so such a stack is unchanged.
WITHOUT_HAMI_VERSION = "v2.8.3"


def default_version(runs_hami: bool = True) -> str:
    """The HAMi release of a tenant whose stack does not name one."""
    return DEFAULT_VERSION if runs_hami else WITHOUT_HAMI_VERSION


def hami_release(version: str) -> HamiRelease:
    """The release a tenant's hamiVersion names; ValueError naming the known ones otherwise."""
    try:
        return RELEASES[version]
    except (KeyError, TypeError):
        known = ", ".join(KNOWN_VERSIONS)
        raise ValueError(f"is not a HAMi release gpulab knows; use one of {known} (unset: {DEFAULT_VERSION})") from None
