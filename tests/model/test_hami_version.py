"""A tenant's HAMi release (hamiVersion): the default by runtime, the releases gpulab knows, what each selects in
the Docker lab (chart, image, source cache) and the clear errors of a stack that asks for what cannot run.

Boundary: HAMi's chart repository as it publishes its releases (gh-pages index.yaml: the chart version and digest
of each release) and the charts' values.yaml at tags v2.8.3 and v2.10.0 (shared/upstream/hami/)."""

from __future__ import annotations

import copy
import re

import pytest
from lab_harness import LAB_PROJECT, lab_config, stack_keys
from shared_data import ROOT

from model.config import ConfigError, parse_config
from model.docker_lab.images import tenant_images
from model.docker_lab.sources import needed
from model.hami_releases import (
    DEFAULT_VERSION,
    KNOWN_VERSIONS,
    PLUGIN_MAX_NODE_MEMORY_MB,
    RELEASES,
    WITHOUT_HAMI_VERSION,
    default_version,
    hami_release,
)
from model.versions import CHECKSUMS

# A plugin image that reads chart 2.10's device config (any image but the upstream mock's tags).
OWN_PLUGIN = "docker.io/example/hami-mock-plugin:fixed"


def error_for(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


def docker_lab(*versions: str | None, **keys) -> dict:
    config = copy.deepcopy(lab_config(**keys))
    for tenant, version in zip(config["tenants"], versions, strict=False):
        if version is not None:
            tenant["hamiVersion"] = version
    return config


def test_the_known_releases_are_v2_10_0_and_v2_8_3_with_their_tags_commits_and_charts() -> None:
    assert KNOWN_VERSIONS == ("v2.10.0", "v2.8.3") and DEFAULT_VERSION == "v2.10.0"
    assert RELEASES["v2.10.0"].commit == "4707fb02c91c545bc7343ce26dba4c32919f9a3e"
    assert RELEASES["v2.8.3"].commit == "8f039ad22bfc14970e2ea557f24c411c34203079"
    assert [r.chart for r in RELEASES.values()] == ["2.10.0", "2.8.3"]
    # The chart repository's digest of each release's archive is pinned (gh-pages index.yaml).
    for release in RELEASES.values():
        assert CHECKSUMS[f"https://project-hami.github.io/HAMi|hami|{release.chart}"]


def test_a_tenant_that_names_no_release_runs_its_runtimes_default() -> None:
    """v2.10.0 in every runtime: the Docker lab (the reference stack, whose tenants name v2.8.3, without it) and
    process mode."""
    dev = stack_keys(LAB_PROJECT / "Pulumi.dev.yaml")
    for tenant in dev["tenants"]:
        tenant.pop("hamiVersion")
    sim = parse_config(stack_keys(LAB_PROJECT / "Pulumi.sim.yaml"))
    assert {t.hami_version for t in parse_config(dev).tenants} == {DEFAULT_VERSION} == {default_version()}
    assert {t.hami_version for t in sim.tenants} == {DEFAULT_VERSION}


def test_process_mode_runs_either_release_per_tenant() -> None:
    config = stack_keys(LAB_PROJECT / "Pulumi.sim.yaml")
    config["tenants"][1]["hamiVersion"] = "v2.8.3"
    lab = parse_config(config)
    assert [t.hami_version for t in lab.tenants] == ["v2.10.0", "v2.8.3"]
    assert [lab.hami_release(t).chart for t in lab.tenants] == ["2.10.0", "2.8.3"]


@pytest.mark.parametrize("version", ["v2.9.0", "2.10.0", "v2.10", "latest", ""])
def test_a_release_gpulab_does_not_know_is_refused_naming_the_ones_it_knows(version: str) -> None:
    said = error_for(docker_lab(version))
    assert "nothing was created" in said
    assert f"tenants[0].hamiVersion = {version!r}" in said
    assert "use one of v2.10.0, v2.8.3" in said
    with pytest.raises(ValueError, match=re.escape("v2.10.0, v2.8.3")):
        hami_release(version)


def test_the_docker_lab_refuses_v2_10_0_with_the_upstream_mock_plugin_that_cannot_read_its_config() -> None:
    config = docker_lab("v2.10.0")
    config["tenants"][0]["devicePlugin"] = "mock"
    said = error_for(config)
    assert "tenants[0].hamiVersion = 'v2.10.0'" in said
    assert "mock-device-plugin:1.0.1" in said and "PR #18" in said and "hamiVersion: v2.8.3" in said
    assert "tenants[1]" not in said, "tenant-b runs v2.8.3, whose config the upstream mock reads"


def test_the_docker_lab_runs_v2_10_0_with_a_plugin_image_that_reads_it_chart_image_and_cache_follow() -> None:
    config = docker_lab("v2.10.0", versions={"mockDevicePluginImage": OWN_PLUGIN})
    config["tenants"][0]["devicePlugin"] = "mock"  # unset on v2.10.0 would be gpulab's plugin
    lab = parse_config(config)
    a, b = lab.tenants
    assert (lab.hami_chart(a).version, lab.hami_chart(b).version) == ("2.10.0", "2.8.3")
    assert lab.hami_chart(a).repo == lab.versions.hami.repo and lab.hami_chart(a).chart == "hami"
    images_a = {use.ref.full for use in tenant_images(lab, a)}
    images_b = {use.ref.full for use in tenant_images(lab, b)}
    assert "docker.io/projecthami/hami:v2.10.0" in images_a and "docker.io/projecthami/hami:v2.8.3" in images_b
    assert OWN_PLUGIN in images_a
    charts = {item.key: item.sha256 for item in needed(lab) if item.kind == "chart" and "|hami|" in item.key}
    assert charts == {
        "https://project-hami.github.io/HAMi|hami|2.10.0": CHECKSUMS["https://project-hami.github.io/HAMi|hami|2.10.0"],
        "https://project-hami.github.io/HAMi|hami|2.8.3": CHECKSUMS["https://project-hami.github.io/HAMi|hami|2.8.3"],
    }


def test_a_real_gpu_tenant_runs_v2_10_0_in_the_docker_lab_with_no_mock_plugin_to_read_its_config() -> None:
    config = docker_lab("v2.10.0")
    config["tenants"][0].update(workerMode="ssh", gpuMode="real", workers=[{"host": "10.0.0.21", "user": "ubuntu"}])
    lab = parse_config(config)
    assert lab.hami_chart(lab.tenants[0]).version == "2.10.0"


def test_a_stack_that_pins_versions_hami_pins_every_tenants_chart() -> None:
    hami = {"repo": "https://project-hami.github.io/HAMi/", "chart": "hami", "version": "2.8.3"}
    assert parse_config(docker_lab(versions={"hami": hami}))  # both tenants on v2.8.3: the same chart
    said = error_for(docker_lab("v2.10.0", versions={"hami": hami, "mockDevicePluginImage": OWN_PLUGIN}))
    assert "tenants[0].hamiVersion = 'v2.10.0': runs chart 2.10.0, but versions.hami.version pins 2.8.3" in said


def test_a_tenant_that_runs_no_hami_keeps_the_rules_it_was_judged_with() -> None:
    """kube-scheduler alone (Pulumi.nodes-without-hami.yaml, CI's lab) and DRA tenants run no HAMi release: left
    unset, they keep v2.8.3's per-pod rules, as before the key existed (their admission policy and inventory
    document unchanged)."""
    without = parse_config(stack_keys(ROOT / "Pulumi.nodes-without-hami.yaml"))
    assert {(lab_runs, t.hami_version) for t in without.tenants for lab_runs in [without.runs_hami(t)]} == {
        (False, WITHOUT_HAMI_VERSION)
    }
    dra = parse_config(stack_keys(LAB_PROJECT / "Pulumi.dra.yaml"))
    assert [(t.gpu_sharing, t.hami_version) for t in dra.tenants] == [("hami", "v2.10.0"), ("dra", "v2.8.3")]


def test_a_real_node_of_more_card_memory_than_the_plugin_registers_is_refused(tmp_path) -> None:
    """gpulab-hami-plugin registers one gpumem device per MB in the kubelet's one 4 MiB message: two A100 80 GB on
    one real node (163840 MB) would need a memory factor HAMi and the pods do not share. Refused with the fix; the same
    cards on two nodes are fine, and so is a KWOK node (no kubelet, no plugin)."""
    config = stack_keys(ROOT / "Pulumi.nodes.yaml")
    config["tenants"][0]["gpus"] = [{"model": "A100-80GB", "count": 2}]
    said = error_for(config)
    assert "tenants[0].gpus = 'tenant-a-worker': puts 163840 MB of cards on real node tenant-a-worker" in said
    assert f"at most {PLUGIN_MAX_NODE_MEMORY_MB} MB per node" in said and "workers: kwok" in said
    config["tenants"][0]["gpus"] = [{"model": "A100-80GB", "count": 1}, {"model": "L4", "count": 1}]
    assert parse_config(config)  # 106496 MB
    kwok = stack_keys(LAB_PROJECT / "Pulumi.sim.yaml")
    kwok["tenants"][0]["gpus"] = [{"model": "A100-80GB", "count": 2}]
    assert parse_config(kwok)


def test_the_plugins_limit_is_what_the_kubelets_message_holds() -> None:
    from process_lab.hami_plugin import max_counted_devices

    assert max_counted_devices() == PLUGIN_MAX_NODE_MEMORY_MB
