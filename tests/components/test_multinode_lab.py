"""Tenants with several GPU nodes: the config, and the lab under Pulumi mocks."""

from __future__ import annotations

import copy
import json

import pytest
from lab_harness import LAB_PROJECT, lab_config, run_program, shared_program
from registration_snapshot import CONFIGS, SSH_SECRETS, as_before
from shared_data import ROOT

from model.catalog import register_annotation, totals
from model.config import ConfigError, parse_config

CONTAINER = "docker:index/container:Container"
TWO_NODES = [
    {"name": "gpu-1", "gpus": [{"model": "L4", "count": 2}]},
    {"name": "gpu-2", "gpus": [{"model": "A100-80GB", "count": 1}]},
]


def two_node_config(nodes: list | None = None) -> dict:
    """The reference stack with tenant-b on two GPU nodes (nodes instead of gpus)."""
    config = lab_config()
    tenant = config["tenants"][1]
    del tenant["gpus"]
    tenant["nodes"] = copy.deepcopy(TWO_NODES if nodes is None else nodes)
    return config


def error_for(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


# --- config -----------------------------------------------------------------------------------------


def test_nodes_give_one_named_node_each_with_its_own_cards() -> None:
    tenant = parse_config(two_node_config()).tenants[1]
    assert tenant.worker_node_names() == ["tenant-b-gpu-1", "tenant-b-gpu-2"]
    nodes = tenant.gpu_nodes()
    assert [node.name for node in nodes] == ["tenant-b-gpu-1", "tenant-b-gpu-2"]
    assert [card.id for card in nodes[0].cards] == ["GPU-MOCK-tenant-b-gpu-1-0", "GPU-MOCK-tenant-b-gpu-1-1"]
    assert [card.index for card in nodes[1].cards] == [0], "the register annotation indexes cards per node"
    assert [card.id for card in tenant.cards()] == [c.id for node in nodes for c in node.cards]
    assert tenant.gpu_node_name() == "tenant-b-gpu-1"


def test_unnamed_nodes_are_numbered() -> None:
    nodes = [{"gpus": [{"model": "L4", "count": 1}]}, {"gpus": [{"model": "L4", "count": 1}]}]
    assert parse_config(two_node_config(nodes)).tenants[1].worker_node_names() == [
        "tenant-b-worker-0",
        "tenant-b-worker-1",
    ]


def test_the_one_node_shorthand_is_unchanged() -> None:
    tenant = parse_config(lab_config()).tenants[0]
    assert tenant.worker_node_names() == ["tenant-a-worker"]
    assert [(n.name, [c.id for c in n.cards]) for n in tenant.gpu_nodes()] == [
        ("tenant-a-worker", ["GPU-MOCK-tenant-a-0"])
    ]


def test_gpus_and_nodes_together_are_an_error_naming_the_key() -> None:
    config = two_node_config()
    config["tenants"][1]["gpus"] = [{"model": "L4", "count": 1}]
    message = error_for(config)
    assert "gpulab:tenants[1].nodes: give either gpus (one GPU node) or nodes (several), not both" in message


def test_neither_gpus_nor_nodes_says_what_is_required() -> None:
    config = lab_config()
    del config["tenants"][0]["gpus"]
    assert "gpulab:tenants[0].gpus: is required: the tenant's cards" in error_for(config)


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ([], "gpulab:tenants[1].nodes = []"),
        ([{"gpus": []}], "gpulab:tenants[1].nodes[0].gpus = []"),
        ([{"name": "gpu-1"}], "gpulab:tenants[1].nodes[0].gpus: is required but missing"),
        ([{"name": "GPU_1", "gpus": [{"model": "L4", "count": 1}]}], "gpulab:tenants[1].nodes[0].name = 'GPU_1'"),
        ([{"name": "a" * 17, "gpus": [{"model": "L4", "count": 1}]}], "at most 16 characters"),
        ([{"gpus": [{"model": "A200", "count": 1}]}], "gpulab:tenants[1].nodes[0].gpus[0].model = 'A200'"),
        ([{"gpus": [{"model": "L4", "count": 1}], "cards": 2}], "gpulab:tenants[1].nodes[0].cards"),
        ([{"name": "x", "gpus": [{"model": "L4", "count": 1}]}] * 2, "node names ['tenant-b-x', 'tenant-b-x']"),
        ([{"gpus": [{"model": "L4", "count": 1}]}] * 17, "gpulab:tenants[1].nodes"),
        ([{"gpus": [{"model": "L4", "count": 40}]}] * 2, "declares 80 cards; a tenant holds at most 64"),
    ],
)
def test_bad_nodes_are_refused_naming_the_key(nodes: list, expected: str) -> None:
    assert expected in error_for(two_node_config(nodes))


def test_container_names_must_differ_across_tenants() -> None:
    config = two_node_config([{"name": "worker", "gpus": [{"model": "L4", "count": 1}]}])
    config["tenants"][0]["name"] = "tenant-b-worker"  # its container would be tenant-b-worker-worker
    config["tenants"][1]["nodes"][0]["name"] = "worker-worker"
    message = error_for(config)
    assert "gpulab:tenants[1].nodes: gives the container tenant-b-worker-worker" in message
    assert "tenant tenant-b-worker already uses" in message


def ssh_two_gpu_workers() -> dict:
    config = lab_config()
    tenant = config["tenants"][0]
    del tenant["gpus"]
    tenant["workerMode"] = "ssh"
    tenant["workers"] = [
        {"host": "10.0.0.21", "name": "cpu-1"},
        {"host": "10.0.0.22", "name": "gpu-1", "gpus": [{"model": "A100-80GB", "count": 1}]},
        {"host": "10.0.0.23", "name": "gpu-2", "gpus": [{"model": "L4", "count": 2}]},
    ]
    return config


def test_ssh_workers_carry_their_own_cards() -> None:
    tenant = parse_config(ssh_two_gpu_workers()).tenants[0]
    assert [(n.name, [c.id for c in n.cards]) for n in tenant.gpu_nodes()] == [
        ("gpu-1", ["GPU-MOCK-gpu-1-0"]),
        ("gpu-2", ["GPU-MOCK-gpu-2-0", "GPU-MOCK-gpu-2-1"]),
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t: t.update(gpus=[{"model": "L4", "count": 1}]), "gpulab:tenants[0].gpus: is the one GPU worker's"),
        (lambda t: t["workers"][1].update(gpuNode=True), "gpulab:tenants[0].workers: gpuNode marks"),
        (lambda t: t.update(nodes=TWO_NODES), "gpulab:tenants[0].nodes: are kindest/node containers"),
        (lambda t: t["workers"][1].update(gpus=[]), "gpulab:tenants[0].workers[1].gpus = []"),
    ],
)
def test_ssh_gpu_workers_are_refused_when_ambiguous(change, expected: str) -> None:
    config = ssh_two_gpu_workers()
    change(config["tenants"][0])
    assert expected in error_for(config)


# --- the lab under mocks ----------------------------------------------------------------------------


# Components added since a snapshot was stored: they hold resources that moved there under an alias.
NEW_COMPONENTS = {"gpulab:index:TenantNamespaces"}
# Resources added since: (type, name), each new to existing stacks (created on their next `pulumi up`), and what
# waits for it is a dependency added to a stored resource, which keeps every dependency it had.
NEW_RESOURCES = {
    # Every container tenant's node holds the workload image (make verify's pods run it on each), so a stack whose
    # only workloads were on an SSH tenant now pulls it for its container tenant.
    ("command:local:Command", "images-pull-library-busybox-1-37-0"),
    # The address pool waits until MetalLB's webhook admits it (scripts/wait-metallb.sh).
    ("command:local:Command", "management-metallb-ready"),
    # Kamaji's control-plane pods pull nothing (model/docker_lab/pull_policy.py); every TCP waits for the binding.
    ("kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy", "management-kamaji-pull-policy"),
    (
        "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding",
        "management-kamaji-pull-policy-binding",
    ),
    # On destroy, a container worker's join lock file goes from the host's temp folder (worker-join-unlock.sh).
    *(("command:local:Command", f"{tenant}-worker-join-unlock") for tenant in ("tenant-a", "tenant-b")),
    # The tenants' kube-proxy, gpulab's instead of Kamaji's addon (model/docker_lab/kube_proxy.py); Calico waits for it.
    *(
        (type_, f"{tenant}-kube-proxy-{suffix}")
        for tenant in ("tenant-a", "tenant-b")
        for type_, suffix in (
            ("command:local:Command", "handover"),
            ("kubernetes:core/v1:ServiceAccount", "sa"),
            ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "crb"),
            ("kubernetes:rbac.authorization.k8s.io/v1:Role", "role"),
            ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "rolebinding"),
            ("kubernetes:core/v1:ConfigMap", "config"),
            ("kubernetes:apps/v1:DaemonSet", "daemonset"),
        )
    ),
}


# A stored resource that now also waits for a stored one: (its name, the name it waits for). The loading of
# tenant-b's images waits for the workload image it now loads (model/docker_lab/images.py), pulled already for tenant-a.
NEW_DEPENDENCIES = {("tenant-b-worker-images", "images-pull-library-busybox-1-37-0")}


@pytest.mark.parametrize(
    ("snapshot_file", "name"),
    [
        ("one-node-registrations.json", "reference"),
        ("one-node-registrations.json", "ssh-gpu-node"),
        ("real-gpu-registrations.json", "real-gpus"),
    ],
)
def test_existing_stacks_register_what_they_did_before(snapshot_file: str, name: str) -> None:
    """URNs, parents and dependencies of the reference stack, an SSH stack with a gpuNode worker (stored by
    the code before multi-node support) and a real-GPU tenant (stored before MockGpuNode and RealGpuNode were split),
    read through the aliases the engine would follow: every stored resource is still there, adopted under
    its old URN (none replaced), with its parent and every dependency it had; only new components and the
    resources NEW_RESOURCES names were added, and a stored resource depends on nothing else new."""
    stored = json.loads((ROOT / "tests" / "snapshots" / snapshot_file).read_text())[name]
    program = shared_program(CONFIGS[name](), secrets=None if name == "reference" else SSH_SECRETS)
    now, new = as_before(program.registrations, set(stored))
    assert sorted(now) == sorted(stored), f"{name}: missing {sorted(set(stored) - set(now))[:3]}"
    added_urns = set(new)
    changed = []
    for urn, before in stored.items():
        after = now[urn]
        kept = (after["type"], after["parent"]) == (before["type"], before["parent"])
        extra = set(after["dependencies"]) - set(before["dependencies"])
        extra -= {dep for dep in extra if (urn.rsplit("::", 1)[1], dep.rsplit("::", 1)[1]) in NEW_DEPENDENCIES}
        if not kept or not set(before["dependencies"]) <= set(after["dependencies"]) or not extra <= added_urns:
            changed.append(urn)
    assert not changed, f"{name}: registered differently: {[(urn, now[urn], stored[urn]) for urn in changed[:2]]}"
    unexpected = [
        urn
        for urn in new
        if program.registrations[urn].type not in NEW_COMPONENTS
        and (program.registrations[urn].type, program.registrations[urn].name) not in NEW_RESOURCES
    ]
    assert not unexpected, f"{name}: resources with no former URN: {unexpected[:3]}"


def test_moved_resources_carry_aliases_to_their_former_parent() -> None:
    """The aliases themselves, as the engine receives them: a tenant's namespaces, quotas and inventory name
    the GPU node component as their former parent; a real-GPU tenant's component names its former type."""
    program = shared_program(CONFIGS["real-gpus"](), secrets=SSH_SECRETS)
    gpus = {r.name: r for r in program.registrations.values() if r.name.endswith("-gpus")}
    assert gpus["tenant-a-gpus"].type == "gpulab:index:RealGpuNode"
    assert gpus["tenant-a-gpus"].aliases == [{"type": "gpulab:index:MockGpuNode"}]
    assert gpus["tenant-b-gpus"].type == "gpulab:index:MockGpuNode" and gpus["tenant-b-gpus"].aliases == []
    # A real-GPU tenant's also name the former parent's URN outright, in the engine's form for a top-level
    # resource (the mock monitor prefixes the stack's type, so the snapshot test cannot read this one).
    former_parents = {
        "tenant-a": [
            {"parentUrn": gpus["tenant-a-gpus"].urn},
            {"parentUrn": "urn:pulumi:dev::gpulab::gpulab:index:MockGpuNode::tenant-a-gpus"},
        ],
        "tenant-b": [{"parentUrn": gpus["tenant-b-gpus"].urn}],
    }
    for tenant in ("tenant-a", "tenant-b"):
        for moved in (f"{tenant}-gpus-ns-gpu-workloads", f"{tenant}-gpus-quota-gpu-workloads"):
            registration = program.named(moved)
            assert program.registrations[registration.parent].type == "gpulab:index:TenantNamespaces"
            assert registration.aliases == former_parents[tenant]
        assert program.named(f"{tenant}-gpus-inventory-document").aliases == former_parents[tenant]


@pytest.fixture(scope="module")
def two_nodes():
    return run_program(two_node_config())


def test_every_gpu_node_is_its_own_container_with_its_images_and_join(two_nodes) -> None:
    containers = {r.name: r for r in two_nodes.of_type(CONTAINER)}
    assert sorted(containers) == [
        "tenant-a-worker-node",
        "tenant-b-worker-tenant-b-gpu-1-node",
        "tenant-b-worker-tenant-b-gpu-2-node",
    ]
    for node in ("tenant-b-gpu-1", "tenant-b-gpu-2"):
        container = containers[f"tenant-b-worker-{node}-node"]
        assert container.inputs["name"] == container.inputs["hostname"] == node
        assert container.delete_before_replace
        assert two_nodes.depends_on(container, two_nodes.named("management-kind")), "destroyed before the cluster"
        images = two_nodes.named(f"tenant-b-worker-{node}-images")
        assert images.inputs["environment"]["NODE"] == node
        join = two_nodes.named(f"tenant-b-worker-{node}-join")
        assert join.inputs["environment"]["CONTAINER"] == node
        assert two_nodes.depends_on(join, images) and two_nodes.depends_on(join, container)
        assert two_nodes.depends_on(two_nodes.named("tenant-b-worker-calico"), join)
    first, second = (two_nodes.named(f"tenant-b-worker-tenant-b-gpu-{i}-join") for i in (1, 2))
    assert not two_nodes.depends_on(first, second) and not two_nodes.depends_on(second, first), "joins in parallel"
    # One image pull and host check for the tenant.
    assert len([r for r in two_nodes.registrations.values() if r.name == "tenant-b-worker-image"]) == 1
    ready = two_nodes.named("tenant-b-worker-ready")
    assert ready.inputs["environment"]["NODE_NAMES"] == "tenant-b-gpu-1 tenant-b-gpu-2"


def test_every_gpu_node_gets_its_own_inventory_and_readiness(two_nodes) -> None:
    tenant = parse_config(two_node_config()).tenants[1]
    inventories = []
    for node in tenant.gpu_nodes():
        inventory = two_nodes.named(f"tenant-b-gpus-{node.name}-inventory")
        environment = inventory.inputs["environment"]
        assert environment["NODE_NAME"] == node.name
        assert environment["REGISTER_JSON"] == register_annotation(node.cards)
        assert environment["GPU_CAPACITY"] == str(10 * len(node.cards))
        ready = two_nodes.named(f"tenant-b-gpus-{node.name}-ready")
        assert ready.inputs["environment"]["NODE_NAME"] == node.name
        assert json.loads(ready.inputs["environment"]["EXPECT_JSON"]) == totals(node.cards)
        assert two_nodes.depends_on(ready, inventory)
        inventories.append(inventory)
        for workload in two_nodes.of_type("kubernetes:core/v1:Pod"):
            if workload.name.startswith("tenant-b"):
                assert two_nodes.depends_on(workload, ready)
    # A changed inventory restarts hami-scheduler: one write at a time.
    assert two_nodes.depends_on(inventories[1], inventories[0])
    assert json.loads(register_annotation(tenant.gpu_nodes()[1].cards))[0]["index"] == 0


def test_the_inventory_document_says_which_node_holds_which_card(two_nodes) -> None:
    documents = {
        json.loads(r.inputs["data"]["inventory.json"])["tenant"]: json.loads(r.inputs["data"]["inventory.json"])
        for r in two_nodes.of_type("kubernetes:core/v1:ConfigMap")
        if "inventory.json" in (r.inputs.get("data") or {})
    }
    document = documents["tenant-b"]
    assert document["nodes"] == [
        {"name": "tenant-b-gpu-1", "cards": ["GPU-MOCK-tenant-b-gpu-1-0", "GPU-MOCK-tenant-b-gpu-1-1"]},
        {"name": "tenant-b-gpu-2", "cards": ["GPU-MOCK-tenant-b-gpu-2-0"]},
    ]
    assert document["nodeSchedulerPolicy"] == "binpack"
    assert [c["id"] for c in document["cards"]] == [c for n in document["nodes"] for c in n["cards"]]
    assert "nodes" not in documents["tenant-a"], "a one-node tenant's document is unchanged"
    assert two_nodes.exports["tenant_b_gpus"]["advertised"]["nvidia.com/gpumem"] == 2 * 24576 + 81920
    assert two_nodes.exports["tenant_b_gpus"]["nodes"] == document["nodes"]
    assert "nodes" not in two_nodes.exports["tenant_a_gpus"]


def test_ssh_workers_with_cards_each_get_inventory_and_readiness() -> None:
    program = run_program(ssh_two_gpu_workers(), secrets=SSH_SECRETS)
    assert not [r for r in program.of_type(CONTAINER) if r.name.startswith("tenant-a")]
    for node, capacity in (("gpu-1", "10"), ("gpu-2", "20")):
        inventory = program.named(f"tenant-a-gpus-{node}-inventory")
        assert inventory.inputs["environment"]["NODE_NAME"] == node
        assert inventory.inputs["environment"]["GPU_CAPACITY"] == capacity
        assert program.named(f"tenant-a-gpus-{node}-ready").inputs["environment"]["NODE_NAME"] == node
        assert program.depends_on(inventory, program.named(f"tenant-a-worker-{node}-join"))
    assert not [r for r in program.registrations.values() if r.name == "tenant-a-gpus-cpu-1-inventory"]


# --- make plan and make report ----------------------------------------------------------------------


def test_plan_lists_the_nodes_and_their_cards(capsys, tmp_path) -> None:
    import yaml

    from preview.__main__ import main as plan_main

    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    tenant = document["config"]["gpulab:tenants"][1]
    del tenant["gpus"]
    tenant["nodes"] = TWO_NODES
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    code = plan_main(["--stack", "dev", "--project-dir", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("tenant tenant-b (Kubernetes v1.36.4; 2 GPU nodes; mock GPUs)")
    assert lines[header + 1 : header + 3] == [
        "  GPU node tenant-b-gpu-1: 2x L4",
        "  GPU node tenant-b-gpu-2: 1x A100-80GB",
    ]
    assert "    docker:index/container:Container  tenant-b-worker-tenant-b-gpu-2-node" in lines[header:]
    assert "tenant tenant-a (Kubernetes v1.36.4; 1x A100-80GB; mock GPUs)" in lines, "one node: as before"
    assert code == 0, "\n".join(lines)


def test_report_shows_cards_per_node() -> None:
    from report.model import tenant_report
    from report.render import render_text

    tenant = parse_config(two_node_config()).tenants[1]
    nodes = [
        {
            "metadata": {
                "name": node.name,
                "annotations": {"hami.io/node-nvidia-register": register_annotation(node.cards)},
            }
        }
        for node in tenant.gpu_nodes()
    ]
    pod = {
        "metadata": {
            "name": "small",
            "namespace": "gpu-workloads",
            "annotations": {"hami.io/vgpu-devices-allocated": "GPU-MOCK-tenant-b-gpu-2-0,NVIDIA,20000,30:;"},
        },
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "20000"}}}]},
        "status": {"phase": "Running"},
    }
    text = render_text([tenant_report("tenant-b", nodes, [pod])]).splitlines()
    first = text.index("  node tenant-b-gpu-1: 2 card(s), 0 / 49152 MB, 0 / 200 % cores, 0 pod(s)")
    second = text.index("  node tenant-b-gpu-2: 1 card(s), 20000 / 81920 MB, 30 / 100 % cores, 1 pod(s)")
    assert text[first + 1] == "    GPU-MOCK-tenant-b-gpu-1-0  NVIDIA-L4"
    assert text[second + 1] == "    GPU-MOCK-tenant-b-gpu-2-0  NVIDIA-A100-SXM4-80GB"
    assert "      pods   1 / 10: gpu-workloads/small" in text[second:]


# --- admission and the pack's inventory for a tenant with several GPU nodes --------------------------------


def gpu_pod(gpus: int, gpumem: int = 1000) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "gpu-workloads"},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": str(gpumem)}},
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("gpus", "gpumem", "refused"),
    [
        (2, 1000, set()),  # the L4 node holds two cards
        (3, 1000, {"NodeInsufficientDevice"}),  # three cards in the tenant, but no node has three
        (1, 80000, set()),  # the A100 holds it, on the other node
        (1, 90000, {"CardInsufficientMemory"}),
    ],
)
def test_admission_judges_card_rules_against_the_node_that_holds_the_most(gpus, gpumem, refused) -> None:
    from cel_harness import run_policy

    from model.kube_objects.admission_policy import DENY_POLICY, policy_objects
    from placement.inventory import from_tenant
    from placement.per_pod import per_pod_refusals
    from placement.workloads import read_workload

    config = two_node_config()
    config["tenants"][1]["limits"] = {}
    tenant = parse_config(config).tenants[1]
    deny = next(o for o in policy_objects(tenant) if o["metadata"]["name"] == DENY_POLICY)
    obj = gpu_pod(gpus, gpumem)
    cel = {message.split(":", 1)[0] for message in run_policy(deny, obj).failed}
    pack = {r.reason for r in per_pod_refusals(from_tenant(tenant), read_workload("Pod", obj).pods[0])}
    assert cel == pack == refused
    if refused == {"NodeInsufficientDevice"}:
        assert any("largest GPU node has (2)" in m for m in run_policy(deny, obj).failed)


def test_the_pack_reads_the_nodes_from_the_inventory_configmap(two_nodes) -> None:
    from placement.inventory import from_stack_resources

    found = from_stack_resources((r.type, r.inputs) for r in two_nodes.registrations.values())
    assert found["tenant-b"].nodes == (("tenant-b-gpu-1", 2), ("tenant-b-gpu-2", 1))
    assert found["tenant-b"].node_policy == "binpack"
    assert found["tenant-a"].nodes == ()


def test_an_inventory_whose_nodes_do_not_cover_the_cards_is_refused() -> None:
    from placement.inventory import from_stack_resources

    document = {
        "tenant": "t",
        "cards": [
            {"id": "c0", "type": "NVIDIA-L4", "memoryMb": 24576},
            {"id": "c1", "type": "NVIDIA-L4", "memoryMb": 24576},
        ],
        "nodes": [{"name": "n1", "cards": ["c1"]}, {"name": "n2", "cards": ["c0"]}],
    }
    props = {
        "metadata": {"name": "gpulab-gpu-inventory", "namespace": "kube-public"},
        "data": {"inventory.json": json.dumps(document)},
    }
    with pytest.raises(ValueError, match="its nodes do not list every card once, in the order of cards"):
        from_stack_resources([("kubernetes:core/v1:ConfigMap", props)])


def test_the_pack_judges_a_two_node_tenant_per_node() -> None:
    """Two L4 nodes of one card each: two cards in the tenant, but a pod asking two cards fits no node."""
    from model.config import Workload
    from model.kube_objects.workload_manifests import workload_manifest
    from placement.inventory import from_tenant
    from placement.wording import evaluate_tenant
    from placement.workloads import read_workload
    from preview import pack

    one_each = [{"name": f"gpu-{i}", "gpus": [{"model": "L4", "count": 1}]} for i in (1, 2)]
    config = two_node_config(one_each)
    pair = {"name": "pair", "gpus": 2, "gpumem": 4000, "gpucores": 10}
    # Declared in the stack, the config refuses it before anything is created, naming the key...
    config["tenants"][1]["workloads"] = [pair]
    assert "tenants[1].workloads[0].gpus = 2: asks more cards than the tenant's largest GPU node has (1)" in (
        error_for(config)
    )
    # ...and sent as a manifest, the pack refuses it per node.
    tenant = parse_config(two_node_config(one_each)).tenants[1]
    manifest = workload_manifest(tenant, Workload.model_validate(pair), "busybox")
    findings = evaluate_tenant(from_tenant(tenant), [read_workload(manifest["kind"], manifest)])
    assert [(f.severity, f.reason) for f in findings] == [("error", "NodeInsufficientDevice")], findings
    assert "the largest of its 2 GPU nodes has 1" in findings[0].message
    config["tenants"][1]["workloads"] = [{"name": f"one-{i}", "gpumem": 20000, "gpucores": 50} for i in (1, 2)]
    violations = pack.run_pack(run_program(config))
    assert violations["gpu-request-limits"] == [] and violations["gpu-placement-order"] == []


def test_the_live_unplaceable_pod_passes_admission_and_the_model_refuses_it_for_cores() -> None:
    """TC-11's pod (tests/acceptance/test_multinode.py) is well-formed for a two-node tenant: admitted
    by the tenant's policy, refused by the pack's model with the reason the live case waits for."""
    from cel_harness import run_policy

    from model.kube_objects.admission_policy import DENY_POLICY, policy_objects
    from placement.inventory import from_tenant
    from placement.wording import evaluate_tenant
    from placement.workloads import read_workload
    from tests.acceptance.test_multinode import unplaceable_pod

    config = two_node_config()
    config["tenants"][1]["limits"] = {}
    tenant = parse_config(config).tenants[1]
    pod = unplaceable_pod(tenant, "busybox")
    pod["metadata"]["namespace"] = "scratch"
    assert len(pod["spec"]["containers"]) == 3  # the largest node has two cards
    admitted = {**pod, "spec": {**pod["spec"], "schedulerName": "hami-scheduler"}}
    deny = next(o for o in policy_objects(tenant) if o["metadata"]["name"] == DENY_POLICY)
    assert run_policy(deny, admitted).failed == []
    findings = evaluate_tenant(from_tenant(tenant), [read_workload("Pod", pod)])
    assert [(f.severity, f.reason) for f in findings] == [("error", "CardInsufficientCore")]
