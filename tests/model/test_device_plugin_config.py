"""A tenant's device plugin in the Docker lab (tenants[].devicePlugin: mock or gpulab, versions.hamiDevicePluginImage):
what each allows, the upstream mock plugin however a reference spells it, and the errors that name key, value and
fix. Boundary: image references as Docker reads them (distribution/reference: ImageRef)."""

from __future__ import annotations

import copy

import pytest
from lab_harness import LAB_PROJECT, lab_config, stack_keys

from model.config import ConfigError, parse_config
from model.config.hami import device_plugin, upstream_mock
from model.hami_releases import DEFAULT_VERSION, PLUGIN_MAX_NODE_MEMORY_MB
from model.versions import HAMI_DEVICE_PLUGIN_IMAGE, Versions

DIGEST = "sha256:" + "a" * 64


def error_for(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


def tenant_a(**keys: object) -> dict:
    config = copy.deepcopy(lab_config())
    config["tenants"][0].update(keys)
    return config


def test_the_docker_labs_default_is_v2_10_0_with_gpulabs_plugin_and_v2_8_3_keeps_the_upstream_mock() -> None:
    """The reference lab runs the seed's HAMi with gpulab's plugin; a tenant that names no plugin gets the one that
    reads its release's device config: gpulab's on v2.10.0, the chart's mock on v2.8.3."""
    config = stack_keys(LAB_PROJECT / "Pulumi.dev.yaml")  # the tests' frozen copy names v2.8.3: without it
    for tenant in config["tenants"]:
        tenant.pop("hamiVersion", None)
        tenant.pop("devicePlugin", None)
    lab = parse_config(config)
    assert [(t.hami_version, t.device_plugin, device_plugin(lab, t)) for t in lab.tenants] == [
        (DEFAULT_VERSION, None, "gpulab")
    ] * 2
    config = copy.deepcopy(lab_config())
    for tenant in config["tenants"]:
        tenant.pop("hamiVersion", None)
        tenant.pop("devicePlugin", None)
    config["tenants"][1]["hamiVersion"] = "v2.8.3"
    unset = parse_config(config)
    assert [(t.hami_version, device_plugin(unset, t)) for t in unset.tenants] == [
        ("v2.10.0", "gpulab"),
        ("v2.8.3", "mock"),
    ]
    assert Versions().mock_device_plugin_image == "docker.io/projecthami/mock-device-plugin:1.0.1"
    assert Versions().hami_device_plugin_image == HAMI_DEVICE_PLUGIN_IMAGE


def test_v2_10_0_runs_in_the_docker_lab_with_gpulabs_plugin() -> None:
    lab = parse_config(tenant_a(hamiVersion="v2.10.0", devicePlugin="gpulab"))
    a, b = lab.tenants
    assert (a.hami_version, device_plugin(lab, a)) == ("v2.10.0", "gpulab")
    assert (b.hami_version, device_plugin(lab, b)) == ("v2.8.3", "mock")
    assert parse_config(tenant_a(devicePlugin="gpulab")).tenants[0].hami_version == "v2.8.3"  # either release


def test_v2_10_0_with_the_upstream_mock_is_refused_naming_gpulabs_plugin_as_the_fix() -> None:
    said = error_for(tenant_a(hamiVersion="v2.10.0", devicePlugin="mock"))
    assert "gpulab:tenants[0].hamiVersion = 'v2.10.0': needs a device plugin that reads HAMi chart 2.10.0" in said
    assert "(docker.io/projecthami/mock-device-plugin:1.0.1) is the upstream mock plugin" in said
    assert "Set tenants[0].devicePlugin: gpulab" in said and "hamiVersion: v2.8.3" in said
    lab = parse_config(tenant_a(hamiVersion="v2.10.0"))  # unset, the plugin is gpulab's: no upstream mock to refuse
    assert device_plugin(lab, lab.tenants[0]) == "gpulab"


@pytest.mark.parametrize(
    "image",
    [
        "docker.io/projecthami/mock-device-plugin:1.0.1",
        "projecthami/mock-device-plugin:1.0.0",  # docker.io implied
        f"docker.io/projecthami/mock-device-plugin@{DIGEST}",  # a digest, no tag: the old check let it through
        f"projecthami/mock-device-plugin:1.0.1@{DIGEST}",
        "docker.io/projecthami/mock-device-plugin:latest",  # moves: cannot be shown to hold the fix
        "index.docker.io/projecthami/mock-device-plugin:1.0.1",  # Docker Hub's other names
        "registry-1.docker.io/projecthami/mock-device-plugin:1.0.1",
        "Docker.IO/projecthami/mock-device-plugin:1.0.1",
        "mirror.gcr.io/projecthami/mock-device-plugin:1.0.1",  # a mirror keeping the path
        f"harbor.example.com/hub-proxy/projecthami/mock-device-plugin@{DIGEST}",  # a proxy's prefix
        "registry.example.com/mock-device-plugin:1.0.1",  # a copy of an upstream tag
    ],
)
def test_the_upstream_mock_is_told_however_a_reference_spells_it(image: str) -> None:
    assert upstream_mock(image)
    said = error_for(
        tenant_a(hamiVersion="v2.10.0", devicePlugin="mock") | {"versions": {"mockDevicePluginImage": image}}
    )
    assert "is the upstream mock plugin" in said and "tenants[0].devicePlugin: gpulab" in said


@pytest.mark.parametrize(
    "image",
    ["docker.io/example/hami-mock-plugin:fixed", "registry.example.com/team/mock-device-plugin:pr18-4f2a9c1"],
)
def test_a_mock_image_of_ones_own_runs_v2_10_0(image: str) -> None:
    assert not upstream_mock(image)
    config = tenant_a(hamiVersion="v2.10.0", devicePlugin="mock") | {"versions": {"mockDevicePluginImage": image}}
    lab = parse_config(config)
    assert (lab.tenants[0].hami_version, device_plugin(lab, lab.tenants[0])) == ("v2.10.0", "mock")


def test_an_unknown_device_plugin_is_refused_naming_the_two() -> None:
    said = error_for(tenant_a(devicePlugin="nvidia"))
    assert "gpulab:tenants[0].devicePlugin = 'nvidia': must be one of: gpulab, mock" in said


def test_a_real_gpu_tenant_has_no_device_plugin_to_choose() -> None:
    config = tenant_a(
        devicePlugin="gpulab", workerMode="ssh", gpuMode="real", workers=[{"host": "10.0.0.21", "user": "ubuntu"}]
    )
    said = error_for(config)
    assert "gpulab:tenants[0].devicePlugin = 'gpulab': chooses the plugin of simulated cards" in said
    assert "remove it" in said


def test_process_mode_picks_its_own_plugin() -> None:
    for stack in ("Pulumi.sim.yaml",):
        config = stack_keys(LAB_PROJECT / stack)
        config["tenants"][0]["devicePlugin"] = "gpulab"
        said = error_for(config)
        assert "gpulab:tenants[0].devicePlugin = 'gpulab': is a choice of the Docker lab" in said
        assert "remove it" in said
        del config["tenants"][0]["devicePlugin"]
        lab = parse_config(config)
        assert {device_plugin(lab, tenant) for tenant in lab.tenants} == {None}


def test_a_node_of_more_memory_than_the_plugins_kubelet_message_holds_is_refused() -> None:
    said = error_for(tenant_a(devicePlugin="gpulab", gpus=[{"model": "A100-80GB", "count": 2}], limits={}))
    assert "gpulab:tenants[0].gpus = 'tenant-a-worker': puts 163840 MB of cards on node tenant-a-worker" in said
    assert f"at most {PLUGIN_MAX_NODE_MEMORY_MB} MB per node" in said and "several nodes (nodes)" in said
    # The same cards on two nodes fit.
    nodes = [{"name": f"gpu-{i}", "gpus": [{"model": "A100-80GB", "count": 1}]} for i in (1, 2)]
    config = tenant_a(devicePlugin="gpulab", nodes=nodes, limits={})
    del config["tenants"][0]["gpus"]
    assert parse_config(config)


def test_ssh_machines_cannot_pull_the_image_this_host_built() -> None:
    ssh = {"workerMode": "ssh", "workers": [{"host": "10.0.0.21", "user": "ubuntu"}]}
    said = error_for(tenant_a(devicePlugin="gpulab", **ssh))
    assert "gpulab:tenants[0].devicePlugin = 'gpulab': runs the device plugin of gpulab on SSH machines" in said
    assert f"versions.hamiDevicePluginImage ({HAMI_DEVICE_PLUGIN_IMAGE})" in said and "push it to a registry" in said
    pushed = {"versions": {"hamiDevicePluginImage": "registry.example.com/gpulab/hami-device-plugin:v0.36.4"}}
    assert parse_config(tenant_a(devicePlugin="gpulab", **ssh) | pushed)
    # gpulab's plugin as v2.10.0's default: the same refusal, saying it is the default and naming v2.8.3's mock
    said = error_for(tenant_a(hamiVersion="v2.10.0", **ssh))
    assert "gpulab:tenants[0].devicePlugin = 'gpulab': runs the device plugin of gpulab (the default for " in said
    assert "or use hamiVersion: v2.8.3 with devicePlugin: mock" in said
    assert parse_config(tenant_a(hamiVersion="v2.10.0", **ssh) | pushed)
    assert parse_config(tenant_a(hamiVersion="v2.8.3", devicePlugin="mock", **ssh))


def test_the_plugin_image_is_a_checked_reference() -> None:
    said = error_for(lab_config(versions={"hamiDevicePluginImage": "Gpulab/Plugin"}))
    assert "gpulab:versions" in said and "hamiDevicePluginImage" in said


def test_the_pin_is_one_line_that_make_lab_images_reads_and_its_tag_is_the_plugins_kubelet_api() -> None:
    """node-image/hami-plugin-image.sh reads the pin from model/versions.py (one place) with this very pattern, and
    checks that the binary's --version line names the k8s.io/kubelet its tag says (tools/gpulab-hami-plugin/go.mod)."""
    import re

    from shared_data import ROOT

    from tools.manifest import required_version

    script = (ROOT / "node-image" / "hami-plugin-image.sh").read_text()
    assert 'sed -n \'s/^HAMI_DEVICE_PLUGIN_IMAGE = "\\(.*\\)"$/\\1/p\' "$root/model/versions.py"' in script
    lines = re.findall(r'^HAMI_DEVICE_PLUGIN_IMAGE = "(.*)"$', (ROOT / "model" / "versions.py").read_text(), re.M)
    assert lines == [HAMI_DEVICE_PLUGIN_IMAGE]
    kubelet = required_version((ROOT / "tools" / "gpulab-hami-plugin" / "go.mod").read_text(), "k8s.io/kubelet")
    assert f"localhost/gpulab/hami-device-plugin:{kubelet}" == HAMI_DEVICE_PLUGIN_IMAGE
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\nlab-images:") : makefile.index("\nupstream-data:")]
    assert "gpulab-hami-plugin" in target and "bash node-image/hami-plugin-image.sh" in target
