"""Config validation: the reference loads; each bad input names the key, the value and the fix."""

from __future__ import annotations

import copy

import pulumi
import pytest
from lab_harness import LabMocks, lab_config, make_tenant, run_program

from model.config import ConfigError, LabConfig, parse_config


def reference() -> dict:
    return copy.deepcopy(lab_config())


def test_reference_stack_loads() -> None:
    lab = parse_config(reference())
    assert [t.name for t in lab.tenants] == ["tenant-a", "tenant-b"]
    a, b = lab.tenants
    assert [(c.type, c.memory_mb, c.cores) for c in a.cards()] == [("NVIDIA-A100-SXM4-80GB", 81920, 100)]
    assert sum(c.memory_mb for c in b.cards()) == 49152 and len(b.cards()) == 2
    assert [w.gpumem for w in a.workloads] == [20000, 20000, 20000]
    assert lab.worker_image(a).startswith("kindest/node:v1.36.4@sha256:")


def error_for(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


def with_tenant(**changes) -> dict:
    config = reference()
    config["tenants"][0].update(changes)
    return config


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (lambda: {**reference(), "tenants": []}, ["gpulab:tenants", "declare at least one tenant"]),
        (lambda: {k: v for k, v in reference().items() if k != "tenants"}, ["gpulab:tenants", "at least one"]),
        (
            lambda: {**reference(), "tenants": [make_tenant("dup", 0), make_tenant("dup", 1)]},
            ["gpulab:tenants: duplicate names ['dup']"],
        ),
        (lambda: with_tenant(name="Tenant_A"), ["gpulab:tenants[0].name = 'Tenant_A'", "DNS-1035", "tenant-a"]),
        (lambda: with_tenant(name="1team"), ["gpulab:tenants[0].name = '1team'", "lowercase letter first"]),
        (
            lambda: with_tenant(gpus=[{"model": "A200", "count": 1}]),
            ["gpulab:tenants[0].gpus[0].model = 'A200'", "unknown GPU model", "A100-80GB"],
        ),
        (
            lambda: with_tenant(gpus=[{"model": "L4", "count": 0}]),
            ["gpulab:tenants[0].gpus[0].count = 0", "must be at least 1; write 1 or more"],
        ),
        (lambda: with_tenant(gpus=[{"model": "L4", "count": -2}]), ["gpulab:tenants[0].gpus[0].count = -2"]),
        (lambda: with_tenant(gpus=[]), ["gpulab:tenants[0].gpus"]),
        (lambda: with_tenant(podCidr="10.244.0.0/33"), ["gpulab:tenants[0].podCidr = '10.244.0.0/33'", "CIDR"]),
        (lambda: with_tenant(podCidr="10.244.1.0/16"), ["gpulab:tenants[0].podCidr = '10.244.1.0/16'", "host bits"]),
        (lambda: with_tenant(serviceCidr="banana"), ["gpulab:tenants[0].serviceCidr = 'banana'"]),
        (
            lambda: with_tenant(podCidr="10.96.0.0/12", serviceCidr="10.96.0.0/16"),
            ["gpulab:tenants[0].podCidr = '10.96.0.0/12': overlaps serviceCidr 10.96.0.0/16", "disjoint"],
        ),
        (
            lambda: with_tenant(kubernetesVersion="v1.37.0"),
            ["gpulab:tenants[0].kubernetesVersion = 'v1.37.0': the pinned Kamaji supports up to v1.36.x"],
        ),
        (
            lambda: with_tenant(kubernetesVersion="1.36"),
            ["gpulab:tenants[0].kubernetesVersion = '1.36'", "vMAJOR.MINOR.PATCH"],
        ),
        (
            lambda: with_tenant(workerImage="kindest/node:v1.35.1@sha256:" + "0" * 64),
            [
                "gpulab:tenants[0].workerImage = 'kindest/node:v1.35.1@sha256:",
                "does not match kubernetesVersion v1.36.4",
            ],
        ),
        (
            lambda: with_tenant(kubernetesVersion="v1.36.2"),
            [
                "gpulab:tenants[0].kubernetesVersion = 'v1.36.2': no kindest/node image is pinned",
                "versions.workerNodeImages.v1.36.2",
            ],
        ),
        (
            lambda: with_tenant(workloads=[{"name": "x", "namespace": "elsewhere", "gpumem": 10}]),
            ["gpulab:tenants[0].workloads[0].namespace = 'elsewhere': is not in namespaces", "add it there"],
        ),
        (
            lambda: with_tenant(workloads=[{"name": "x", "replicas": 3}]),
            ["gpulab:tenants[0].workloads[0].replicas = 3: a Pod has exactly one replica", "kind: Deployment"],
        ),
        (
            lambda: with_tenant(workloads=[{"name": "x", "gpucores": 101}]),
            ["gpucores = 101", "must be at most 100; write 100 or less"],
        ),
        (lambda: with_tenant(surprise=1), ["gpulab:tenants[0].surprise: is not a key of gpulab"]),
        (lambda: {**reference(), "management": {"metallbPoolSize": 0}}, ["gpulab:management.metallbPoolSize = 0"]),
        (lambda: {**reference(), "scheduling": {"gpuSchedulerPolicy": "random"}}, ["gpuSchedulerPolicy = 'random'"]),
        (
            lambda: {**reference(), "management": {"controlPlaneStartupTimeout": "4h"}},
            ["gpulab:management.controlPlaneStartupTimeout = '4h'", "from 30s to 30m, e.g. 4m"],
        ),
        (
            lambda: {**reference(), "management": {"controlPlaneStartupTimeout": "10s"}},
            ["gpulab:management.controlPlaneStartupTimeout = '10s'", "from 30s to 30m"],
        ),
        (
            lambda: {**reference(), "management": {"controlPlaneStartupTimeout": 240}},
            ["gpulab:management.controlPlaneStartupTimeout = 240"],
        ),
    ],
    ids=lambda value: "" if callable(value) else "-".join(value)[:60],
)
def test_bad_input_names_key_value_and_fix(config, expected: list[str]) -> None:
    message = error_for(config())
    assert "<root>" not in message, "every problem names its key"
    assert message.startswith("invalid gpulab configuration (nothing was created)")
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in:\n{message}"


def test_every_problem_is_reported_at_once() -> None:
    config = with_tenant(name="Bad_Name", podCidr="nope")
    message = error_for(config)
    assert "tenants[0].name" in message and "tenants[0].podCidr" in message


def test_output_stems_must_not_clash() -> None:
    config = {**reference(), "tenants": [make_tenant("a", 0), make_tenant("tenant-a", 1)]}
    assert "clashing stack outputs ['tenant_a']" in error_for(config)


def test_versions_are_overridable_from_config() -> None:
    config = reference()
    config["versions"] = {
        "calicoManifest": "https://example.test/calico-v9.yaml",
        "hami": {"repo": "https://charts.example.test/hami", "chart": "hami", "version": "2.8.3"},
    }
    lab = parse_config(config)
    assert lab.versions.calico_manifest == "https://example.test/calico-v9.yaml"
    assert lab.versions.kamaji_image_tag == LabConfig.model_fields["versions"].default.kamaji_image_tag


def test_bad_config_stops_the_program_before_any_resource() -> None:
    config = with_tenant(gpus=[{"model": "A200", "count": 1}])
    with pytest.raises(pulumi.RunError, match=r"gpulab:tenants\[0\]\.gpus\[0\]\.model = 'A200'"):
        run_program(config)


def test_bad_config_registers_nothing() -> None:
    config = with_tenant(podCidr="10.96.0.0/12", serviceCidr="10.96.0.0/16")
    mocks = LabMocks()
    try:
        run_program(config, mocks=mocks)
    except pulumi.RunError:
        pass
    else:
        raise AssertionError("an overlapping CIDR must stop the program")
    assert mocks.monitor is not None
    declared = [r.type for r in mocks.monitor.registrations.values() if r.type != "pulumi:pulumi:Stack"]
    assert declared == [], f"an invalid config must declare nothing, declared {declared}"
    assert mocks.invokes == []
