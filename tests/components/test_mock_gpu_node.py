"""MockGpuNode and TenantNamespaces under mocks: HAMi, mock plugin, inventory, quota and workloads, in the right
order."""

from __future__ import annotations

import json

import pytest
from lab_harness import lab_config, make_tenant, reference_program, run_program, tenant_kubeconfig
from shared_data import has_path, leaf_paths, upstream_yaml

from components.docker.hami_chart import hami_values, split_image
from model.config import parse_config
from model.kube_objects.tenant_objects import quota_hard, quota_initialised
from model.versions import Versions
from tests.model.test_catalog import TENANT_A_ANNOTATION, TENANT_B_ANNOTATION


@pytest.fixture(scope="module")
def program():
    return reference_program()


def test_hami_release_in_each_tenant(program) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        release = program.named(f"{tenant}-gpus-hami")
        assert release.inputs["name"] == "hami"
        assert release.inputs["namespace"] == "kube-system"
        assert release.inputs["chart"] == "hami"
        assert release.inputs["version"] == Versions().hami.version == "2.8.3"
        assert program.provider_of(release).name == f"{tenant}-provider"
        assert program.depends_on(release, program.named(f"{tenant}-worker-ready"))


def test_hami_values(program) -> None:
    values = program.named("tenant-a-gpus-hami").inputs["values"]
    scheduler = values["scheduler"]
    assert scheduler["kubeScheduler"]["image"] == {
        "registry": "registry.k8s.io",
        "repository": "kube-scheduler",
        "tag": "v1.36.4",
    }, "the in-pod kube-scheduler must equal the tenant API server version"
    assert "--node-lock-timeout=2s" in scheduler["extender"]["extraArgs"]
    # The list replaces the chart's (`--debug -v=4`): HAMi's client at the lab's rate, its verbosity the lab's.
    assert scheduler["extender"]["extraArgs"][:4] == ["--debug", "--kube-qps=400", "--kube-burst=800", "-v=2"]
    assert scheduler["service"]["type"] == "ClusterIP"
    assert values["devicePlugin"]["service"]["type"] == "ClusterIP"
    assert values["mockDevicePlugin"]["enabled"] is True
    assert values["mockDevicePlugin"]["image"] == {
        "registry": "docker.io",
        "repository": "projecthami/mock-device-plugin",
        "tag": "1.0.1",
    }


@pytest.mark.parametrize("device_plugin", ["mock", "gpulab"])
@pytest.mark.parametrize("hami_version", ["v2.8.3", "v2.10.0"])
def test_every_hami_value_exists_in_the_chart_of_the_tenants_release(hami_version: str, device_plugin: str) -> None:
    """Each tenant's values against its own release's chart (charts/hami/values.yaml at the tag), with either device
    plugin of the Docker lab (their values differ: gpulab's sets the scheduler's podAnnotations)."""
    config = lab_config()
    for tenant in config["tenants"]:
        tenant.update(hamiVersion=hami_version, devicePlugin=device_plugin)
    # chart 2.10 needs a mock plugin image that reads its device config (model/config/hami.py)
    lab = parse_config({**config, "versions": {"mockDevicePluginImage": "docker.io/example/mock:fixed"}})
    for tenant in lab.tenants:
        assert tenant.device_plugin == device_plugin
        version = lab.hami_chart(tenant).version
        assert version == hami_version.removeprefix("v")
        upstream = upstream_yaml(f"hami/chart-values-{version}.yaml")
        for path in leaf_paths(hami_values(tenant, lab)):
            assert has_path(upstream, path), f"HAMi {version} has no value {'.'.join(path)}"


def test_value_check_catches_a_misspelt_key() -> None:
    upstream = upstream_yaml("hami/chart-values-2.8.3.yaml")
    assert not has_path(upstream, ("scheduler", "kubeScheduler", "imageTag"))  # the old doc spelling (#1991)
    assert has_path(upstream, ("scheduler", "kubeScheduler", "image", "tag"))
    # a key of the user's own under a map the chart leaves empty (podAnnotations: {}), but not beside it
    assert has_path(upstream, ("scheduler", "podAnnotations", "example.com/any"))
    assert not has_path(upstream, ("scheduler", "podAnnotation", "example.com/any"))


def test_mock_plugin_only_once_and_no_gpu_on_label(program) -> None:
    names = [r.name for r in program.registrations.values()]
    assert not any("mock-plugin" in name or "mock-rbac" in name for name in names), "only the chart's mock plugin"
    for registration in program.registrations.values():
        labels = (registration.inputs.get("metadata") or {}).get("labels") or {}
        assert labels.get("gpu") != "on", f"{registration.name} labels gpu=on"
        assert "gpu=on" not in json.dumps(registration.inputs.get("environment", {}))
    assert not program.of_type("kubernetes:core/v1:NodePatch")


def test_inventory_annotation_and_capacity(program) -> None:
    for tenant, annotation, capacity in (
        ("tenant-a", TENANT_A_ANNOTATION, "10"),
        ("tenant-b", TENANT_B_ANNOTATION, "20"),
    ):
        inventory = program.named(f"{tenant}-gpus-inventory")
        assert inventory.inputs["create"] == "bash scripts/apply-gpu-inventory.sh"
        environment = inventory.inputs["environment"]
        assert environment["REGISTER_JSON"] == annotation
        assert environment["GPU_CAPACITY"] == capacity
        assert environment["NODE_NAME"] == f"{tenant}-worker"
        assert inventory.inputs["stdin"] == tenant_kubeconfig(tenant)
        assert program.depends_on(inventory, program.named(f"{tenant}-gpus-hami"))


def test_changed_inventory_changes_the_command_inputs() -> None:
    """A new card count must reach the node on the next `pulumi up` (the Command re-runs on input changes)."""
    bigger = lab_config()
    bigger["tenants"][1]["gpus"] = [{"model": "L4", "count": 3}]
    program = run_program(bigger)
    environment = program.named("tenant-b-gpus-inventory").inputs["environment"]
    assert environment["GPU_CAPACITY"] == "30"
    assert json.loads(environment["REGISTER_JSON"])[2]["id"] == "GPU-MOCK-tenant-b-2"
    expect = json.loads(program.named("tenant-b-gpus-ready").inputs["environment"]["EXPECT_JSON"])
    assert expect["nvidia.com/gpumem"] == 3 * 24576


def test_readiness_gate(program) -> None:
    ready = program.named("tenant-a-gpus-ready")
    assert ready.inputs["create"] == "bash scripts/wait-gpu-node.sh"
    assert json.loads(ready.inputs["environment"]["EXPECT_JSON"]) == {
        "nvidia.com/gpu": 10,
        "nvidia.com/gpucores": 100,
        "nvidia.com/gpumem": 81920,
        "nvidia.com/gpumem-percentage": 100,
    }
    assert program.depends_on(ready, program.named("tenant-a-gpus-inventory"))


def test_quota_uses_the_keys_hami_tracks(program) -> None:
    quota = program.named("tenant-b-gpus-quota-gpu-workloads")
    assert quota.inputs["metadata"]["namespace"] == "gpu-workloads"
    assert quota.inputs["spec"]["hard"] == {
        "limits.nvidia.com/gpumem": "40960",
        "limits.nvidia.com/gpucores": "150",
        "requests.nvidia.com/gpu": "8",
    }
    assert program.named("tenant-a-gpus-quota-gpu-workloads").inputs["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert "limits.nvidia.com/gpu" not in quota.inputs["spec"]["hard"], "HAMi does not track it (notes section 5)"
    assert program.depends_on(quota, program.named("tenant-b-worker-ready"))
    assert program.provider_of(quota).name == "tenant-b-provider"


def test_the_quota_is_waited_for_until_its_status_holds_every_key_as_the_api_server_writes_it(program) -> None:
    """Boundary: pulumi-kubernetes' own quota wait, one fixed minute; a waitFor condition replaces it (and has the
    resource's ten minutes). The values are the API server's canonical form, which tests/real checks."""
    quota = program.named("tenant-b-gpus-quota-gpu-workloads")
    conditions = json.loads(quota.inputs["metadata"]["annotations"]["pulumi.com/waitFor"])
    assert conditions == [
        "jsonpath={.status.hard['limits.nvidia.com/gpucores']}=150",
        "jsonpath={.status.hard['limits.nvidia.com/gpumem']}=40960",
        "jsonpath={.status.hard['requests.nvidia.com/gpu']}=8",
    ]
    assert "pulumi.com/skipAwait" not in quota.inputs["metadata"]["annotations"], "skipAwait would win over waitFor"


def test_a_quota_value_is_awaited_in_the_form_the_api_server_gives_it_back() -> None:
    conditions = json.loads(quota_initialised({"limits.nvidia.com/gpumem": "20000", "requests.nvidia.com/gpu": "3"}))
    assert conditions == [
        "jsonpath={.status.hard['limits.nvidia.com/gpumem']}=20k",
        "jsonpath={.status.hard['requests.nvidia.com/gpu']}=3",
    ]


def test_no_quota_declared_means_no_resource_quota() -> None:
    tenant = parse_config(lab_config(tenants=[make_tenant("free", 0)])).tenants[0]
    assert quota_hard(tenant) == {}
    program = run_program(lab_config(tenants=[make_tenant("free", 0)]))
    assert not program.of_type("kubernetes:core/v1:ResourceQuota")


def test_reference_workloads_on_tenant_a(program) -> None:
    pods = program.of_type("kubernetes:core/v1:Pod")
    assert sorted(p.inputs["metadata"]["name"] for p in pods) == ["trainer-1", "trainer-2", "trainer-3"]
    for pod in pods:
        assert program.provider_of(pod).name == "tenant-a-provider"
        assert pod.inputs["metadata"]["namespace"] == "gpu-workloads"
        assert pod.inputs["metadata"]["labels"]["gpulab.io/tenant"] == "tenant-a"
        assert pod.inputs["spec"]["schedulerName"] == "hami-scheduler"
        limits = pod.inputs["spec"]["containers"][0]["resources"]["limits"]
        assert limits == {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}
        assert program.depends_on(pod, program.named("tenant-a-gpus-ready"))
        assert program.depends_on(pod, program.named("tenant-a-gpus-quota-gpu-workloads"))
        assert program.depends_on(pod, program.named("tenant-a-gpus-ns-gpu-workloads"))
    assert [w.name for w in program.of_type("gpulab:index:GpuWorkloads")] == ["tenant-a-workloads"]


def test_deployment_workload_with_replicas() -> None:
    config = lab_config()
    config["tenants"][1]["workloads"] = [
        {"name": "serve", "kind": "Deployment", "replicas": 2, "gpumem": 8000, "gpucores": 20}
    ]
    program = run_program(config)
    deployment = program.named("tenant-b-workloads-serve")
    assert deployment.type == "kubernetes:apps/v1:Deployment"
    assert deployment.inputs["spec"]["replicas"] == 2
    template = deployment.inputs["spec"]["template"]
    assert deployment.inputs["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_inventory_document_for_policies_and_users(program) -> None:
    document = program.named("tenant-b-gpus-inventory-document")
    assert document.inputs["metadata"]["namespace"] == "kube-public"
    inventory = json.loads(document.inputs["data"]["inventory.json"])
    assert inventory["tenant"] == "tenant-b" and inventory["mode"] == "mock"
    assert [card["memoryMb"] for card in inventory["cards"]] == [24576, 24576]
    assert inventory["limits"] == {"gpus": 2, "gpumem": 49152, "gpucores": 200}


def test_gpu_outputs_per_tenant(program) -> None:
    gpus = program.exports["tenant_b_gpus"]
    assert gpus["advertised"]["nvidia.com/gpumem"] == 49152
    assert [card["type"] for card in gpus["cards"]] == ["NVIDIA-L4", "NVIDIA-L4"]


def test_split_image_keeps_a_digest_on_the_tag() -> None:
    assert (
        split_image("docker.io/projecthami/mock-device-plugin:1.0.1@sha256:" + "f" * 64)["tag"]
        == "1.0.1@sha256:" + "f" * 64
    )


@pytest.mark.parametrize(
    ("scheduling", "line"),
    [
        ({"hamiKubeQps": 0}, "gpulab:scheduling.hamiKubeQps = 0: must be at least 1"),
        ({"hamiKubeBurst": "many"}, "gpulab:scheduling.hamiKubeBurst = 'many': must be a whole number"),
        ({"hamiLogVerbosity": 11}, "gpulab:scheduling.hamiLogVerbosity = 11: must be at most 10"),
    ],
)
def test_hami_s_client_settings_are_validated_with_the_key_and_the_fix(scheduling: dict, line: str) -> None:
    from model.config import ConfigError

    with pytest.raises(ConfigError) as refused:
        parse_config(lab_config(scheduling=scheduling))
    assert line in str(refused.value)


def test_hami_s_client_rate_and_verbosity_reach_both_gpu_modes_and_both_runtimes() -> None:
    """The stack's hamiKubeQps/hamiKubeBurst/hamiLogVerbosity are HAMi's flags as the chart's extraArgs
    (mock and real GPUs alike: a real-GPU tenant's extender had the chart's client-go defaults before) and as the
    local process's settings in process mode (process_lab.hami_scheduler renders the same flags)."""
    from model.config.lab import hami_client_flags
    from process_lab.hami_scheduler import HamiSettings

    lab = parse_config(lab_config(scheduling={"hamiKubeQps": 50, "hamiKubeBurst": 75, "hamiLogVerbosity": 0}))
    flags = ["--kube-qps=50", "--kube-burst=75", "-v=0"]
    for gpu_mode in ("mock", "real"):
        tenant = lab.tenants[0].model_copy(update={"gpu_mode": gpu_mode})
        extra = hami_values(tenant, lab)["scheduler"]["extender"]["extraArgs"]
        assert extra[1:4] == flags
        assert any(arg.startswith("--node-lock-timeout") for arg in extra) == (gpu_mode == "mock")
    settings = HamiSettings.of(lab, lab.tenants[0])
    assert hami_client_flags(settings.kube_qps, settings.kube_burst, settings.log_verbosity) == flags
    assert HamiSettings.from_props(settings.props()) == settings
