"""A Docker-lab tenant with `devicePlugin: gpulab` under mocks: gpulab-hami-plugin as a DaemonSet (RBAC, cards,
pods) in place of HAMi's chart's mock plugin, in the order the plugin needs, and HAMi's values for it.

Boundaries: the plugin's own source (tools/gpulab-hami-plugin: the flags main.go declares, the Card struct config.go
reads, the unit file real nodes run it with), process_lab/hami_plugin.py (the RBAC and cards file real nodes get)
and HAMi's charts' values.yaml at tags v2.10.0 and v2.8.3 (shared/upstream/hami/)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from lab_harness import lab_config, make_tenant, run_program, shared_program, tenant_kubeconfig
from shared_data import ROOT, leaf_paths, upstream_yaml

from components.docker.hami_chart import hami_values
from model.catalog import REGISTER_ANNOTATION, register_annotation, totals
from model.config import parse_config
from model.docker_lab.images import tenant_images, to_load
from model.kube_objects.hami_device_plugin import (
    CARD_KEYS,
    CARDS_DIR,
    CARDS_HASH_ANNOTATION,
    NAME,
    RULES,
    cards_data,
    cards_file,
    cards_hash,
)
from model.versions import HAMI_DEVICE_PLUGIN_IMAGE, Versions
from process_lab import hami_plugin as real_node_plugin

PLUGIN = ROOT / "tools" / "gpulab-hami-plugin"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
UNIT = ROOT / "node-image" / "files" / "etc" / "systemd" / "system" / "gpulab-hami-plugin.service"


def gpulab_config(**tenant_a: object) -> dict:
    """The reference stack with tenant-a on HAMi v2.10.0 and gpulab's plugin; tenant-b unchanged (v2.8.3, mock)."""
    config = lab_config()
    config["tenants"][0].update({"hamiVersion": "v2.10.0", "devicePlugin": "gpulab", **tenant_a})
    return config


@pytest.fixture(scope="module")
def program():
    return shared_program(gpulab_config())


def daemon_set_spec(program) -> dict:
    return program.named("tenant-a-gpus-plugin-daemonset").inputs["spec"]


def container(program) -> dict:
    [plugin] = daemon_set_spec(program)["template"]["spec"]["containers"]
    return plugin


def test_the_plugins_objects_are_in_the_tenant_in_kube_system_with_the_tenants_provider(program) -> None:
    names = {
        "tenant-a-gpus-plugin-sa": "kubernetes:core/v1:ServiceAccount",
        "tenant-a-gpus-plugin-role": "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
        "tenant-a-gpus-plugin-binding": "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        "tenant-a-gpus-plugin-cards": "kubernetes:core/v1:ConfigMap",
        "tenant-a-gpus-plugin-daemonset": "kubernetes:apps/v1:DaemonSet",
    }
    for name, type_ in names.items():
        resource = program.named(name)
        assert resource.type == type_
        assert program.provider_of(resource).name == "tenant-a-provider"
        assert resource.inputs["metadata"]["name"] in (NAME, f"{NAME}-cards")
        if not type_.split(":")[-1].startswith("Cluster"):
            assert resource.inputs["metadata"]["namespace"] == "kube-system"
    assert not [r for r in program.registrations.values() if r.name.startswith("tenant-b-gpus-plugin")]


def test_the_cluster_role_is_exactly_what_the_plugin_calls_as_on_real_nodes(program) -> None:
    role = program.named("tenant-a-gpus-plugin-role").inputs
    assert role["rules"] == [dict(rule) for rule in RULES]
    assert role == next(o for o in real_node_plugin.rbac_objects() if o["kind"] == "ClusterRole")  # one identity
    binding = program.named("tenant-a-gpus-plugin-binding").inputs
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": "kube-system"}]
    assert (NAME, "kube-system") == (real_node_plugin.SERVICE_ACCOUNT, real_node_plugin.NAMESPACE)
    assert daemon_set_spec(program)["template"]["spec"]["serviceAccountName"] == NAME


def test_the_cards_file_of_each_node_is_what_config_go_reads_and_what_a_real_node_gets(program) -> None:
    data = program.named("tenant-a-gpus-plugin-cards").inputs["data"]
    assert list(data) == ["tenant-a-worker.json"]
    cards = json.loads(data["tenant-a-worker.json"])
    # config.go's Card: exactly its json tags, in its order (ReadCards disallows unknown fields), whole numbers.
    struct = re.search(r"type Card struct \{(.*?)\n\}", (PLUGIN / "config.go").read_text(), re.S).group(1)
    assert tuple(re.findall(r'json:"([a-z_]+)"', struct)) == CARD_KEYS == real_node_plugin.CARD_KEYS
    assert [tuple(card) for card in cards] == [CARD_KEYS]
    assert cards == [
        {
            "id": "GPU-MOCK-tenant-a-0",
            "index": 0,
            "type": "NVIDIA-A100-SXM4-80GB",
            "memory_mb": 81920,
            "cores": 100,
            "split_count": 10,
        }
    ]
    # Byte for byte the file process_lab/hami_plugin.py writes on a real node for the same cards.
    tenant = parse_config(gpulab_config()).tenants[0]
    [node] = tenant.gpu_nodes()
    as_real_node = real_node_plugin.cards_file(SimpleNamespace(cards=[card.__dict__ for card in node.cards]))
    assert data["tenant-a-worker.json"] == cards_file(node.cards) == as_real_node


def test_the_daemon_set_runs_the_plugin_as_its_unit_does_with_the_pods_own_credentials(program) -> None:
    plugin = container(program)
    assert plugin["image"] == HAMI_DEVICE_PLUGIN_IMAGE == Versions().hami_device_plugin_image
    assert plugin["imagePullPolicy"] == "Never", "the lab loads it into the node: never a pull"
    assert plugin["command"] == ["/usr/bin/gpulab-hami-plugin"]
    env = {item["name"]: item for item in plugin["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["HAMI_VERSION"]["value"] == "v2.10.0"
    assert env["MEMORY_FACTOR"]["value"] == "1"
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in plugin["args"])
    # Every flag is one main.go declares; the unit's flags but --kubeconfig (in-cluster credentials instead).
    declared = set(re.findall(r'flag\.(?:String|Int64|Bool)\("([a-z-]+)"', (PLUGIN / "main.go").read_text()))
    assert set(flags) <= declared
    unit = dict(re.findall(r"--([a-z-]+)=(\S+)", UNIT.read_text()))
    assert set(unit) - set(flags) == {"kubeconfig"} and "kubeconfig" not in flags
    assert {flags[key] for key in ("node-name", "hami-version", "memory-factor")} == {
        "$(NODE_NAME)",
        "$(HAMI_VERSION)",
        "$(MEMORY_FACTOR)",
    }
    assert flags["socket-dir"] == "/var/lib/kubelet/device-plugins"
    # The cards flag names the node's own file in the mounted ConfigMap.
    data = program.named("tenant-a-gpus-plugin-cards").inputs["data"]
    mounts = {mount["name"]: mount for mount in plugin["volumeMounts"]}
    assert mounts["cards"]["mountPath"] == CARDS_DIR and mounts["cards"]["readOnly"] is True
    assert flags["cards"].replace("$(NODE_NAME)", "tenant-a-worker") == f"{CARDS_DIR}/tenant-a-worker.json"
    assert f"{CARDS_DIR}/{next(iter(data))}" == f"{CARDS_DIR}/tenant-a-worker.json"
    assert mounts["device-plugins"]["mountPath"] == "/var/lib/kubelet/device-plugins"


def test_the_daemon_set_runs_one_pod_on_each_gpu_node_as_hamis_device_plugin_does(program) -> None:
    spec = daemon_set_spec(program)
    pod = spec["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    # HAMi's chart's mock plugin DaemonSet's toleration (templates/device-plugin/daemonsetmock.yaml, both tags).
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["tenant-a-worker"]}]}]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["device-plugins"]["hostPath"] == {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}
    assert volumes["cards"]["configMap"] == {"name": f"{NAME}-cards"}
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert labels["hami.io/webhook"] == "ignore", "HAMi's webhook leaves the plugin's own pods alone"
    # Not awaited by the provider: gpulab's own wait names the pod's state (ErrImageNeverPull, CrashLoopBackOff).
    metadata = program.named("tenant-a-gpus-plugin-daemonset").inputs["metadata"]
    assert metadata["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_the_plugin_comes_after_the_worker_then_its_registration_then_hami(program) -> None:
    daemon_set = program.named("tenant-a-gpus-plugin-daemonset")
    for first in ("sa", "binding", "cards"):
        assert program.depends_on(daemon_set, program.named(f"tenant-a-gpus-plugin-{first}"))
    assert program.depends_on(daemon_set, program.named("tenant-a-worker-ready"))
    registered = program.named("tenant-a-gpus-registered")
    assert registered.inputs["create"] == "bash scripts/wait-gpu-node.sh"
    assert program.depends_on(registered, daemon_set)
    hami = program.named("tenant-a-gpus-hami")
    assert program.depends_on(hami, registered), "HAMi finds the cards on its first look"
    ready = program.named("tenant-a-gpus-ready")
    assert program.depends_on(ready, hami)
    assert ready.inputs["stdin"] == registered.inputs["stdin"] == tenant_kubeconfig("tenant-a")


def test_the_waits_ask_what_the_plugin_registers_and_gpulab_writes_nothing_itself(program) -> None:
    tenant = parse_config(gpulab_config()).tenants[0]
    cards = tenant.cards()
    labels = daemon_set_spec(program)["template"]["metadata"]["labels"]
    for name, webhook in (("tenant-a-gpus-registered", "no"), ("tenant-a-gpus-ready", "yes")):
        environment = program.named(name).inputs["environment"]
        assert json.loads(environment["EXPECT_JSON"]) == totals(cards)
        assert environment["REGISTER_JSON"] == register_annotation(cards)
        key, _, value = environment["PLUGIN_SELECTOR"].partition("=")
        assert labels[key] == value
        assert environment["WEBHOOK"] == webhook
    # No inventory script for tenant-a: the plugin writes the annotation, the kubelet the capacity.
    assert not [r for r in program.registrations.values() if r.name == "tenant-a-gpus-inventory"]
    assert program.named("tenant-b-gpus-inventory").inputs["create"] == "bash scripts/apply-gpu-inventory.sh"
    for registration in program.registrations.values():
        assert REGISTER_ANNOTATION not in json.dumps(registration.inputs.get("metadata", {})), registration.name


def test_hami_runs_without_the_mock_plugin_and_without_the_lock_timeout(program) -> None:
    values = program.named("tenant-a-gpus-hami").inputs["values"]
    assert values["mockDevicePlugin"] == {"enabled": False}
    assert not any("node-lock-timeout" in arg for arg in values["scheduler"]["extender"]["extraArgs"])
    # The scheduler's pod carries the plugin pods' hash of the cards: a change restarts HAMi after the plugin.
    pod_hash = daemon_set_spec(program)["template"]["metadata"]["annotations"][CARDS_HASH_ANNOTATION]
    data = program.named("tenant-a-gpus-plugin-cards").inputs["data"]
    assert values["scheduler"]["podAnnotations"] == {CARDS_HASH_ANNOTATION: pod_hash} and pod_hash == cards_hash(data)
    assert program.named("tenant-a-gpus-hami").inputs["version"] == "2.10.0"
    b = program.named("tenant-b-gpus-hami").inputs["values"]
    assert b["mockDevicePlugin"]["enabled"] is True and "podAnnotations" not in b["scheduler"]


def _free_form_or_declared(chart: dict, path: tuple[str, ...]) -> bool:
    """`path` is a value of the chart, or lies under one of its free-form maps (podAnnotations: {})."""
    node = chart
    for key in path:
        if node == {}:
            return True
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


@pytest.mark.parametrize("hami_version", ["v2.10.0", "v2.8.3"])
def test_every_value_set_for_a_gpulab_plugin_tenant_exists_in_its_releases_chart(hami_version: str) -> None:
    lab = parse_config(gpulab_config(hamiVersion=hami_version))
    tenant = lab.tenants[0]
    chart = upstream_yaml(f"hami/chart-values-{hami_version.removeprefix('v')}.yaml")
    values = hami_values(tenant, lab)
    for path in leaf_paths(values):
        assert _free_form_or_declared(chart, path), f"HAMi {hami_version} has no value {'.'.join(path)}"
    assert chart["scheduler"]["podAnnotations"] == {} and chart["mockDevicePlugin"]["enabled"] is False


def test_the_plugin_image_is_in_the_tenants_inventory_and_loaded_into_its_node() -> None:
    lab = parse_config(gpulab_config())
    a, b = lab.tenants
    images_a = {use.ref.full: use for use in tenant_images(lab, a)}
    assert HAMI_DEVICE_PLUGIN_IMAGE in images_a and images_a[HAMI_DEVICE_PLUGIN_IMAGE].needs_pull
    assert not any("mock-device-plugin" in image for image in images_a)
    assert HAMI_DEVICE_PLUGIN_IMAGE in {ref.full for ref in to_load(lab, "tenant-a")}
    assert "docker.io/projecthami/mock-device-plugin:1.0.1" in {use.ref.full for use in tenant_images(lab, b)}
    assert HAMI_DEVICE_PLUGIN_IMAGE not in {ref.full for ref in to_load(lab, "tenant-b")}


def test_the_nodes_image_load_is_before_the_join_and_the_join_before_the_plugin(program) -> None:
    load = program.named("tenant-a-worker-images")
    assert HAMI_DEVICE_PLUGIN_IMAGE in load.inputs["environment"]["IMAGES"].split()
    assert program.depends_on(program.named("tenant-a-gpus-plugin-daemonset"), load)


def test_changed_cards_roll_the_plugin_pods_and_hami_after_them() -> None:
    before = shared_program(gpulab_config())
    after = run_program(gpulab_config(gpus=[{"model": "A100-80GB", "count": 1}, {"model": "L4", "count": 1}]))

    def hashes(program) -> tuple[str, str]:
        pod = daemon_set_spec(program)["template"]["metadata"]["annotations"][CARDS_HASH_ANNOTATION]
        return pod, program.named("tenant-a-gpus-hami").inputs["values"]["scheduler"]["podAnnotations"][
            CARDS_HASH_ANNOTATION
        ]

    old, new = hashes(before), hashes(after)
    assert old[0] == old[1] and new[0] == new[1] and old != new
    cards = json.loads(after.named("tenant-a-gpus-plugin-cards").inputs["data"]["tenant-a-worker.json"])
    assert [card["type"] for card in cards] == ["NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"]
    expect = json.loads(after.named("tenant-a-gpus-ready").inputs["environment"]["EXPECT_JSON"])
    assert expect["nvidia.com/gpumem"] == 81920 + 24576


def test_a_tenant_of_several_gpu_nodes_gets_one_pod_and_one_cards_file_on_each() -> None:
    tenant = make_tenant(
        "tenant-c",
        3,
        hamiVersion="v2.10.0",
        devicePlugin="gpulab",
        nodes=[
            {"name": "gpu-1", "gpus": [{"model": "L4", "count": 2}]},
            {"name": "gpu-2", "gpus": [{"model": "T4", "count": 1}]},
        ],
    )
    del tenant["gpus"]
    program = run_program(lab_config(tenants=[tenant]))
    data = program.named("tenant-c-gpus-plugin-cards").inputs["data"]
    assert sorted(data) == ["tenant-c-gpu-1.json", "tenant-c-gpu-2.json"]
    assert [card["id"] for card in json.loads(data["tenant-c-gpu-2.json"])] == ["GPU-MOCK-tenant-c-gpu-2-0"]
    spec = daemon_set_spec_of(program, "tenant-c")
    terms = spec["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # One term per node: the API server takes one value per metadata.name selector (tests/real: it refuses two).
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"tenant-c-{node}"]}]}
        for node in ("gpu-1", "gpu-2")
    ]
    hami = program.named("tenant-c-gpus-hami")
    for node in ("gpu-1", "gpu-2"):
        registered = program.named(f"tenant-c-gpus-tenant-c-{node}-registered")
        assert registered.inputs["environment"]["NODE_NAME"] == f"tenant-c-{node}"
        assert program.depends_on(hami, registered)
    nodes = parse_config(lab_config(tenants=[tenant])).tenants[0].gpu_nodes()
    assert data == cards_data({node.name: node.cards for node in nodes})


def daemon_set_spec_of(program, tenant: str) -> dict:
    return program.named(f"{tenant}-gpus-plugin-daemonset").inputs["spec"]


def test_an_ssh_tenant_pulls_the_plugin_image_of_a_registry_itself() -> None:
    """SSH machines are not fed by the lab's loader: a plugin image of a registry they reach, IfNotPresent."""
    config = gpulab_config(workerMode="ssh", workers=[{"host": "10.0.0.21", "user": "ubuntu"}])
    config["versions"] = {"hamiDevicePluginImage": "registry.example.com/gpulab/hami-device-plugin:v0.36.4"}
    program = run_program(config, secrets={"sshPrivateKey": SSH_KEY})
    plugin = container(program)
    assert plugin["image"] == "registry.example.com/gpulab/hami-device-plugin:v0.36.4"
    assert plugin["imagePullPolicy"] == "IfNotPresent"
