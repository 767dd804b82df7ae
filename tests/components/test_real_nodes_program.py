"""The nodes stack (Pulumi.nodes.yaml: process mode with workers: containers) under Pulumi's mocks: what the
program declares for real nodes, and for a lab that leaves HAMi out (scheduling.scheduler: kube-scheduler)."""

from __future__ import annotations

import pytest
import yaml
from lab_harness import LAB_PROJECT, ROOT, run_program, stack_keys

from model import dra
from model.catalog import expand_cards
from model.config import ConfigError, parse_config
from model.names import DENY_POLICY

DYNAMIC = "pulumi-python:dynamic:Resource"


def nodes_config(**changes) -> dict:
    config = stack_keys(ROOT / "Pulumi.nodes.yaml")
    config.update(changes)
    return config


@pytest.fixture(autouse=True)
def no_program_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_PLAN", "1")  # the mocks start nothing: no check of ./bin or the engine


def test_the_nodes_stack_is_the_sim_stack_on_node_containers() -> None:
    sim = yaml.safe_load((LAB_PROJECT / "Pulumi.sim.yaml").read_text())["config"]
    nodes = yaml.safe_load((ROOT / "Pulumi.nodes.yaml").read_text())["config"]
    assert nodes["gpulab:tenants"] == sim["gpulab:tenants"]
    assert nodes["gpulab:runtime"] == "process" and nodes["gpulab:workers"] == "containers"
    lab = parse_config(nodes_config())
    assert [lab.worker_image(t) for t in lab.tenants] == ["gpulab/node:v1.36.4"] * 2


def test_each_tenant_gets_a_node_container_on_the_lab_network_and_a_control_plane_bound_to_its_gateway() -> None:
    program = run_program(nodes_config())
    network = program.named("nodes-network")
    assert network.type == DYNAMIC and network.inputs["name"] == program.exports["nodes_network"]
    for tenant in ("tenant-a", "tenant-b"):
        plane = program.named(f"{tenant}-processes")
        assert program.depends_on(plane, network), "the API server binds to the network's gateway"
        node = program.named(f"{tenant}-worker-node")
        assert node.inputs["image"] == "gpulab/node:v1.36.4" and node.inputs["pod_cidr"]
        assert node.inputs["network"] == network.inputs["name"]
        assert program.depends_on(node, plane)
        assert not [r for r in program.registrations.values() if r.name == f"{tenant}-worker-kwok-nodes"]
        assert program.depends_on(program.named(f"{tenant}-gpus-hami-plugin"), node)
        assert "kubeconfig" not in node.inputs, "the admin kubeconfig is read on the host, never handed over"


def test_without_hami_kube_scheduler_places_gpu_pods_and_no_rule_asks_for_hami() -> None:
    program = run_program(nodes_config(scheduling={"scheduler": "kube-scheduler"}))
    assert not [r for r in program.registrations.values() if r.name.endswith("-gpus-hami")]
    assert program.named("tenant-a-processes").inputs["without_hami"] is True
    assert program.named("tenant-a-gpus-inventory").inputs["without_hami"] is True
    pod = program.named("tenant-a-workloads-trainer-1")
    assert pod.inputs["spec"]["schedulerName"] == "default-scheduler"
    deny = program.named(f"tenant-a-admission-{DENY_POLICY}")
    assert "hami-scheduler" not in str(deny.inputs["spec"]["validations"])


def test_with_hami_the_pods_and_the_rule_name_hami_scheduler() -> None:
    program = run_program(nodes_config())
    assert program.named("tenant-a-workloads-trainer-1").inputs["spec"]["schedulerName"] == "hami-scheduler"
    deny = program.named(f"tenant-a-admission-{DENY_POLICY}")
    assert "hami-scheduler" in str(deny.inputs["spec"]["validations"])
    assert "without_hami" not in program.named("tenant-a-processes").inputs


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"runtime": "docker"}, "gpulab:workers = 'containers': is for runtime: process"),
        (
            {"runtime": "docker", "workers": "kwok", "scheduling": {"scheduler": "kube-scheduler"}},
            "gpulab:scheduling.scheduler = 'kube-scheduler': is for runtime: process",
        ),
        ({"scheduling": {"scheduler": "kwok"}}, "gpulab:scheduling.scheduler = 'kwok': must be one of"),
    ],
)
def test_the_runtime_s_keys_are_refused_where_they_mean_nothing(changes: dict, line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(nodes_config(**changes))
    assert line in str(refused.value)


def test_real_nodes_run_one_node_per_tenant() -> None:
    config = nodes_config()
    tenant = dict(config["tenants"][0])
    gpus = tenant.pop("gpus")
    tenant["nodes"] = [{"name": "n1", "gpus": gpus}, {"name": "n2", "gpus": gpus}]
    config["tenants"] = [tenant, *config["tenants"][1:]]
    with pytest.raises(ConfigError) as refused:
        parse_config(config)
    assert "workers: containers runs one node per tenant" in str(refused.value)


def test_a_workload_image_the_node_image_does_not_hold_is_refused_before_anything_is_made() -> None:
    """Boundary: a real node on the lab's --internal network, which can pull nothing (notes: real-nodes.md 6)."""
    config = nodes_config()
    config["versions"] = {"workloadImage": "docker.io/library/busybox:1.37.0"}
    with pytest.raises(ConfigError) as refused:
        parse_config(config)
    assert (
        "gpulab:versions.workloadImage = 'docker.io/library/busybox:1.37.0': is not in gpulab's node image, and a "
        "real node cannot pull it (its network is --internal): use localhost/gpulab/busybox:1.35.0"
    ) in str(refused.value)


def test_a_tenant_on_a_node_image_of_its_own_may_name_its_own_workload_image() -> None:
    config = nodes_config(versions={"workloadImage": "registry.example/busybox:1.37.0"})
    config["tenants"] = [{**tenant, "workerImage": "registry.example/node:v1.36.4"} for tenant in config["tenants"]]
    assert parse_config(config).versions.workload_image == "registry.example/busybox:1.37.0"


def test_real_nodes_never_pull_the_labs_workloads_and_kwok_nodes_keep_the_default() -> None:
    """A missing image on a real node is ErrImageNeverPull, naming the image, never a pull from a registry."""
    trainer = run_program(nodes_config()).named("tenant-a-workloads-trainer-1")
    assert trainer.inputs["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    simulated = run_program(nodes_config(workers="kwok", cni=None)).named("tenant-a-workloads-trainer-1")
    assert "imagePullPolicy" not in simulated.inputs["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"cni": "calico"},
            "gpulab:cni = 'calico': real nodes run the CNI bridge plugin of gpulab's node image: Calico's images",
        ),
        (
            {"runtime": "docker", "workers": "kwok", "cni": "bridge"},
            "gpulab:versions.workerNodeImages = 'kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e194... (94 "
            "characters): kindest/node has no CNI bridge plugin",
        ),
        ({"workers": "kwok"}, "gpulab:cni = 'bridge': KWOK nodes run no pod and need no pod network"),
        ({"cni": "flannel"}, "gpulab:cni = 'flannel': must be one of"),
    ],
)
def test_a_cni_the_nodes_cannot_run_is_refused_with_the_one_they_can(changes: dict, line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(nodes_config(**changes))
    assert line in str(refused.value)


@pytest.mark.parametrize(
    ("changes", "network"),
    [
        ({}, "bridge"),
        ({"cni": "bridge"}, "bridge"),
        ({"runtime": "docker", "workers": "kwok", "cni": "calico"}, "calico"),
    ],
)
def test_each_runtime_names_its_pod_network(changes: dict, network: str) -> None:
    config = nodes_config(**changes)
    if changes.get("runtime") == "docker":  # the Docker lab's own HAMi release (model/hami_releases.py)
        config["tenants"] = [{k: v for k, v in t.items() if k != "hamiVersion"} for t in config["tenants"]]
    assert parse_config(config).pod_network == network


def test_a_dra_tenant_on_a_real_node_gets_gpulabs_plugin_which_publishes_its_slice() -> None:
    """Pulumi.nodes-dra.yaml: on a real node the kubelet removes a node's slices of a driver not registered with it,
    so gpulab's DRA kubelet plugin publishes them (model/dra.py node_devices); the program creates no slice of its
    own there, only the class, and starts the plugin once the node is Ready (and anew on a node made anew)."""
    config = stack_keys(LAB_PROJECT / "Pulumi.nodes-dra.yaml")
    program = run_program(config)
    plugin = program.named("tenant-b-gpus-dra-tenant-b-worker-plugin")
    assert plugin.type == DYNAMIC
    assert plugin.inputs["devices"] == dra.node_devices("tenant-b", "tenant-b-worker", tenant_b_cards(config))
    assert plugin.inputs["node"] == "tenant-b-worker"
    node = program.named("tenant-b-worker-node")
    assert program.depends_on(plugin, node)
    types_b = {r.type for r in program.registrations.values() if r.name.startswith("tenant-b-")}
    assert "kubernetes:resource.k8s.io/v1:DeviceClass" in types_b
    assert "kubernetes:resource.k8s.io/v1:ResourceSlice" not in types_b
    # tenant-a shares its card through HAMi: HAMi's device plugin on its node, no DRA plugin.
    tenant_a_plugins = [
        r.name for r in program.registrations.values() if r.name.startswith("tenant-a-") and "plugin" in r.name
    ]
    assert tenant_a_plugins == ["tenant-a-gpus-hami-plugin"]
    assert "devices" not in program.named("tenant-a-gpus-hami-plugin").inputs


def tenant_b_cards(config: dict) -> list:
    return next(t for t in parse_config(config).tenants if t.name == "tenant-b").cards()


# --- HAMi's device plugin on real nodes -----------------------------------------------------------------------


def registered(program) -> dict[str, list[str]]:
    """Resource names per type, sorted: what a stack registers."""
    found: dict[str, list[str]] = {}
    for registration in program.registrations.values():
        found.setdefault(registration.type, []).append(registration.name)
    return {kind: sorted(names) for kind, names in sorted(found.items())}


def dynamic_inputs(program) -> dict[str, list[str]]:
    """Each dynamic resource's input keys (what its provider's diff and an existing state compare)."""
    return {
        r.name: sorted(key for key in r.inputs if key != "__provider")
        for r in program.registrations.values()
        if r.type == DYNAMIC
    }


def test_a_hami_tenants_real_node_runs_gpulabs_hami_plugin_and_hami_runs_without_the_bind_time_role() -> None:
    """Pulumi.nodes.yaml: the kubelet of each HAMi tenant's node calls gpulab-hami-plugin's Allocate, which writes
    what HAMi's device plugin writes; no GpuInventory writes the annotation or capacity by hand, and no bind-time role
    marks the pods (process_lab/hami_plugin.py)."""
    program = run_program(nodes_config())
    lab = parse_config(nodes_config())
    dynamic = {r.name for r in program.registrations.values() if r.type == DYNAMIC}
    parts = ("processes", "worker-node", "gpus-hami", "gpus-hami-plugin")  # before: gpus-inventory for the plugin
    assert dynamic == {"nodes-network", *(f"{t}-{part}" for t in ("tenant-a", "tenant-b") for part in parts)}
    for tenant in lab.tenants:
        plugin = program.named(f"{tenant.name}-gpus-hami-plugin")
        assert plugin.type == DYNAMIC and plugin.parent == program.named(f"{tenant.name}-gpus").urn
        node = tenant.gpu_node_name()
        assert plugin.inputs["node"] == node
        assert plugin.inputs["cards"] == [card.__dict__ for card in tenant.gpu_nodes()[0].cards]
        assert plugin.inputs["hami_version"] == tenant.hami_version == "v2.10.0"
        assert plugin.inputs["folder"].endswith(f"/{tenant.name}") and plugin.inputs["running"] is True
        hami = program.named(f"{tenant.name}-gpus-hami")
        assert hami.inputs["without_bind_time_role"] is True
        assert program.depends_on(plugin, hami), "HAMi serves before the node gets its cards"
        assert program.depends_on(plugin, program.named(f"{tenant.name}-worker-node")), "a node made anew: anew"
        pods = [r for r in program.registrations.values() if r.name.startswith(f"{tenant.name}-workloads-")]
        assert all(program.depends_on(pod, plugin) for pod in pods if pod.type == "kubernetes:core/v1:Pod")
    advertised = program.exports["tenant_a_gpus"]["advertised"]
    assert advertised == {
        "nvidia.com/gpu": 10,
        "nvidia.com/gpumem": 81920,
        "nvidia.com/gpucores": 100,
        "nvidia.com/gpumem-percentage": 100,
    }


def test_a_hami_plugin_per_gpu_node_takes_the_tenants_release() -> None:
    config = nodes_config()
    config["tenants"] = [{**config["tenants"][0], "hamiVersion": "v2.8.3"}, config["tenants"][1]]
    program = run_program(config)
    assert program.named("tenant-a-gpus-hami-plugin").inputs["hami_version"] == "v2.8.3"
    cards = program.named("tenant-b-gpus-hami-plugin").inputs["cards"]
    assert cards == [card.__dict__ for card in expand_cards("tenant-b", [("L4", 2)])]


# What the KWOK stack (the tests' Pulumi.sim.yaml) and Pulumi.nodes-without-hami.yaml registered before HAMi's device
# plugin came to real nodes (read from the program under mocks at that commit): both keep it, input keys included,
# so that an existing state sees no change.
KWOK_SIM = {
    "gpulab:index:GpuAdmissionPolicy": ["tenant-a-admission", "tenant-b-admission"],
    "gpulab:index:GpuWorkloads": ["tenant-a-workloads"],
    "gpulab:index:MockGpuNode": ["tenant-a-gpus", "tenant-b-gpus"],
    "gpulab:index:TenantControlPlane": ["tenant-a", "tenant-b"],
    "gpulab:index:TenantNamespaces": ["tenant-a-namespaces", "tenant-b-namespaces"],
    "gpulab:index:TenantWorker": ["tenant-a-worker", "tenant-b-worker"],
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy": [
        "tenant-a-admission-gpulab-gpu-requests",
        "tenant-a-admission-gpulab-gpu-requests-advice",
        "tenant-b-admission-gpulab-gpu-requests",
        "tenant-b-admission-gpulab-gpu-requests-advice",
    ],
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding": [
        "tenant-a-admission-gpulab-gpu-requests-advice-binding",
        "tenant-a-admission-gpulab-gpu-requests-binding",
        "tenant-b-admission-gpulab-gpu-requests-advice-binding",
        "tenant-b-admission-gpulab-gpu-requests-binding",
    ],
    "kubernetes:core/v1:ConfigMap": ["tenant-a-gpus-inventory-document", "tenant-b-gpus-inventory-document"],
    "kubernetes:core/v1:Namespace": ["tenant-a-gpus-ns-gpu-workloads", "tenant-b-gpus-ns-gpu-workloads"],
    "kubernetes:core/v1:Pod": [
        "tenant-a-workloads-trainer-1",
        "tenant-a-workloads-trainer-2",
        "tenant-a-workloads-trainer-3",
    ],
    "kubernetes:core/v1:ResourceQuota": ["tenant-a-gpus-quota-gpu-workloads", "tenant-b-gpus-quota-gpu-workloads"],
    "pulumi-python:dynamic:Resource": [
        "tenant-a-gpus-hami",
        "tenant-a-gpus-inventory",
        "tenant-a-processes",
        "tenant-a-worker-kwok-nodes",
        "tenant-b-gpus-hami",
        "tenant-b-gpus-inventory",
        "tenant-b-processes",
        "tenant-b-worker-kwok-nodes",
    ],
    "pulumi:providers:kubernetes": ["tenant-a-provider", "tenant-b-provider"],
    "pulumi:pulumi:Stack": ["gpulab-dev"],
}
KWOK_SIM_DYNAMIC_INPUTS = {
    "tenant-a-gpus-hami": [
        "bin_dir",
        "cluster",
        "control_plane",
        "folder",
        "hami_binary",
        "hami_metrics_port",
        "hami_port",
        "running",
        "settings",
    ],
    "tenant-a-gpus-inventory": [
        "bin_dir",
        "capacity",
        "cluster",
        "control_plane",
        "folder",
        "node",
        "register",
        "running",
    ],
    "tenant-a-processes": ["bin_dir", "cluster", "folder", "running"],
    "tenant-a-worker-kwok-nodes": ["bin_dir", "cluster", "control_plane", "folder", "nodes", "running"],
    "tenant-b-gpus-hami": [
        "bin_dir",
        "cluster",
        "control_plane",
        "folder",
        "hami_binary",
        "hami_metrics_port",
        "hami_port",
        "running",
        "settings",
    ],
    "tenant-b-gpus-inventory": [
        "bin_dir",
        "capacity",
        "cluster",
        "control_plane",
        "folder",
        "node",
        "register",
        "running",
    ],
    "tenant-b-processes": ["bin_dir", "cluster", "folder", "running"],
    "tenant-b-worker-kwok-nodes": ["bin_dir", "cluster", "control_plane", "folder", "nodes", "running"],
}
NODES_WITHOUT_HAMI = {
    "gpulab:index:DraDevices": ["tenant-c-gpus-dra"],
    "gpulab:index:GpuAdmissionPolicy": ["tenant-a-admission", "tenant-b-admission"],
    "gpulab:index:GpuWorkloads": ["tenant-a-workloads", "tenant-c-workloads"],
    "gpulab:index:MockGpuNode": ["tenant-a-gpus", "tenant-b-gpus", "tenant-c-gpus"],
    "gpulab:index:TenantControlPlane": ["tenant-a", "tenant-b", "tenant-c"],
    "gpulab:index:TenantNamespaces": ["tenant-a-namespaces", "tenant-b-namespaces", "tenant-c-namespaces"],
    "gpulab:index:TenantWorker": ["tenant-a-worker", "tenant-b-worker", "tenant-c-worker"],
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy": [
        "tenant-a-admission-gpulab-gpu-requests",
        "tenant-a-admission-gpulab-gpu-requests-advice",
        "tenant-b-admission-gpulab-gpu-requests",
        "tenant-b-admission-gpulab-gpu-requests-advice",
    ],
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding": [
        "tenant-a-admission-gpulab-gpu-requests-advice-binding",
        "tenant-a-admission-gpulab-gpu-requests-binding",
        "tenant-b-admission-gpulab-gpu-requests-advice-binding",
        "tenant-b-admission-gpulab-gpu-requests-binding",
    ],
    "kubernetes:core/v1:ConfigMap": [
        "tenant-a-gpus-inventory-document",
        "tenant-b-gpus-inventory-document",
        "tenant-c-gpus-inventory-document",
    ],
    "kubernetes:core/v1:Namespace": [
        "tenant-a-gpus-ns-gpu-workloads",
        "tenant-b-gpus-ns-gpu-workloads",
        "tenant-c-gpus-ns-gpu-workloads",
    ],
    "kubernetes:core/v1:Pod": [
        "tenant-a-workloads-trainer-1",
        "tenant-a-workloads-trainer-2",
        "tenant-a-workloads-trainer-3",
        "tenant-c-workloads-trainer-1",
        "tenant-c-workloads-trainer-2",
        "tenant-c-workloads-trainer-3",
    ],
    "kubernetes:core/v1:ResourceQuota": [
        "tenant-a-gpus-quota-gpu-workloads",
        "tenant-b-gpus-quota-gpu-workloads",
        "tenant-c-gpus-quota-gpu-workloads",
    ],
    "kubernetes:resource.k8s.io/v1:DeviceClass": ["tenant-c-gpus-dra-class"],
    "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate": [
        "tenant-c-workloads-trainer-1-claim",
        "tenant-c-workloads-trainer-2-claim",
        "tenant-c-workloads-trainer-3-claim",
    ],
    "pulumi-python:dynamic:Resource": [
        "nodes-network",
        "tenant-a-gpus-inventory",
        "tenant-a-processes",
        "tenant-a-worker-node",
        "tenant-b-gpus-inventory",
        "tenant-b-processes",
        "tenant-b-worker-node",
        "tenant-c-gpus-dra-tenant-c-worker-plugin",
        "tenant-c-processes",
        "tenant-c-worker-node",
    ],
    "pulumi:providers:kubernetes": ["tenant-a-provider", "tenant-b-provider", "tenant-c-provider"],
    "pulumi:pulumi:Stack": ["gpulab-dev"],
}
NODES_WITHOUT_HAMI_DYNAMIC_INPUTS = {
    "nodes-network": ["name", "owner", "running"],
    "tenant-a-gpus-inventory": [
        "bin_dir",
        "capacity",
        "cluster",
        "control_plane",
        "folder",
        "node",
        "register",
        "running",
        "without_hami",
    ],
    "tenant-a-processes": ["bin_dir", "cluster", "folder", "join", "running", "without_hami"],
    "tenant-a-worker-node": [
        "bin_dir",
        "cluster",
        "control_plane",
        "folder",
        "image",
        "images",
        "network",
        "node",
        "pod_cidr",
        "running",
        "tenant",
    ],
    "tenant-b-gpus-inventory": [
        "bin_dir",
        "capacity",
        "cluster",
        "control_plane",
        "folder",
        "node",
        "register",
        "running",
        "without_hami",
    ],
    "tenant-b-processes": ["bin_dir", "cluster", "folder", "join", "running", "without_hami"],
    "tenant-b-worker-node": [
        "bin_dir",
        "cluster",
        "control_plane",
        "folder",
        "image",
        "images",
        "network",
        "node",
        "pod_cidr",
        "running",
        "tenant",
    ],
    "tenant-c-gpus-dra-tenant-c-worker-plugin": [
        "bin_dir",
        "cluster",
        "control_plane",
        "devices",
        "folder",
        "node",
        "running",
    ],
    "tenant-c-processes": ["bin_dir", "cluster", "folder", "join", "running", "without_hami"],
    "tenant-c-worker-node": [
        "bin_dir",
        "cluster",
        "control_plane",
        "folder",
        "image",
        "images",
        "network",
        "node",
        "pod_cidr",
        "running",
        "tenant",
    ],
}


@pytest.mark.parametrize(
    ("path", "expected", "inputs"),
    [
        (LAB_PROJECT / "Pulumi.sim.yaml", KWOK_SIM, KWOK_SIM_DYNAMIC_INPUTS),
        (ROOT / "Pulumi.nodes-without-hami.yaml", NODES_WITHOUT_HAMI, NODES_WITHOUT_HAMI_DYNAMIC_INPUTS),
    ],
    ids=["kwok-sim", "nodes-without-hami"],
)
def test_kwok_nodes_and_tenants_without_hami_register_what_they_did_before(path, expected, inputs) -> None:
    program = run_program(stack_keys(path))
    assert registered(program) == expected
    assert dynamic_inputs(program) == inputs
    assert not [r for r in program.registrations.values() if "without_bind_time_role" in r.inputs]
