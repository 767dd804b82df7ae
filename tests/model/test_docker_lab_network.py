"""The Docker lab's network choices: the kind network made `--internal`, and the tenants' pod network as the CNI
bridge plugin of gpulab's kind node image instead of Calico.

Boundary: what the program hands pulumi-docker and pulumi-command (the node container's uploads, the kind
Command's command line), under Pulumi mocks; the node image's side (the bridge plugin in /opt/cni/bin, the file
read by containerd's CNI) is held by tests/model/test_node_contract.py and the real tier.
"""

from __future__ import annotations

import json

import pytest
from lab_harness import LabMocks, lab_config, reference_program, run_program

from model.config import ConfigError, parse_config
from model.docker_lab.images import inventory
from model.node_container import CNI_CONFLIST

KIND_NODE = "gpulab/kind-node:v1.36.4"


def bridge_config(**keys) -> dict:
    """The reference stack on gpulab's kind node image, with the bridge plugin as the tenants' pod network."""
    return lab_config(
        cni="bridge",
        versions={"managementNodeImage": KIND_NODE, "workerNodeImages": {"v1.36.4": KIND_NODE}},
        **keys,
    )


def test_bridge_tenants_get_their_conflist_with_the_container_and_no_calico() -> None:
    program = run_program(bridge_config())
    assert not [r for r in program.registrations.values() if r.name.endswith("-calico")]
    for tenant, pod_cidr in (("tenant-a", "10.244.0.0/16"), ("tenant-b", "10.245.0.0/16")):
        node = program.named(f"{tenant}-worker-node")
        (upload,) = node.inputs["uploads"]
        assert upload["file"] == CNI_CONFLIST
        conflist = json.loads(upload["content"])
        bridge = conflist["plugins"][0]
        assert bridge["type"] == "bridge" and bridge["ipam"]["ranges"] == [[{"subnet": pod_cidr}]]
        # The node is Ready once it joined: nothing else installs its pod network.
        ready = program.named(f"{tenant}-worker-ready")
        assert program.named(f"{tenant}-worker-join").urn in ready.dependencies
    images = {use.ref.full for use in inventory(parse_config(bridge_config()))}
    assert not {image for image in images if "calico" in image}


def test_calico_tenants_keep_calico_and_containers_without_uploads() -> None:
    program = reference_program()
    assert program.named("tenant-a-worker-calico")
    assert "uploads" not in program.named("tenant-a-worker-node").inputs


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"versions": {"managementNodeImage": KIND_NODE}},
            "(94 characters): kindest/node has no CNI bridge plugin (kind images/base has host-local, loopback, ptp, "
            "portmap); use gpulab/kind-node:v1.36.4 (make lab-images) or cni: calico",
        ),
        (
            {"tenants": "two nodes"},
            "gpulab:tenants[0].nodes = ['tenant-a-worker-0', 'tenant-a-worker-1']: cni: bridge runs one node per "
            "tenant",
        ),
    ],
)
def test_bridge_is_refused_where_a_node_cannot_run_it(change: dict, line: str) -> None:
    config = bridge_config()
    if change.get("tenants") == "two nodes":
        tenant = dict(config["tenants"][0])
        gpus = tenant.pop("gpus")
        tenant["nodes"] = [{"gpus": gpus}, {"gpus": gpus}]
        config["tenants"] = [tenant, *config["tenants"][1:]]
    else:
        config.update(change)
    with pytest.raises(ConfigError) as refused:
        parse_config(config)
    assert line in str(refused.value)


def test_an_internal_kind_network_is_asked_for_on_the_create_command_line_only_when_set() -> None:
    plain = reference_program().named("management-kind")
    assert "INTERNAL_NETWORK" not in plain.inputs["create"]
    internal = run_program(lab_config(management={"name": "gpulab", "internalNetwork": True})).named("management-kind")
    assert internal.inputs["create"].startswith("OWNER=") and " INTERNAL_NETWORK=yes " in internal.inputs["create"]
    # Not in the Command's environment, which replaces the cluster when it changes.
    assert internal.inputs["environment"] == plain.inputs["environment"]


def test_an_internal_network_is_for_the_kind_cluster_gpulab_makes() -> None:
    config = lab_config(management={"mode": "existing", "internalNetwork": True, "install": {"kamaji": True}})
    with pytest.raises(ConfigError) as refused:
        parse_config(config)
    assert "gpulab:management.internalNetwork = True: is for mode: kind" in str(refused.value)


def test_a_first_preview_does_not_read_the_kind_network_before_kind_made_it() -> None:
    """Boundary: the engine's first preview of a new lab (the Docker network does not exist yet; a getNetwork
    invoke fails: `network gpulab not found`, seen with CLI v3.274.0, which ran the invoke despite its
    depends_on). The pool is read from the network only once the kind Command has run."""
    mocks = LabMocks(first_preview=True)
    program = run_program(lab_config(), preview=True, mocks=mocks)
    assert "docker:index/getNetwork:getNetwork" not in [token for token, _ in mocks.invokes]
    assert program.named("management-metallb-pool")  # declared, its addresses unknown until then
    after = LabMocks()
    run_program(lab_config(), mocks=after)
    assert [args["name"] for token, args in after.invokes if token.endswith("getNetwork")] == ["gpulab"]


def test_every_container_tenant_holds_the_workload_image_even_without_workloads() -> None:
    """Boundary: a node on an --internal network can pull nothing; `make verify` runs its pods on every tenant's
    node (TC-05 on tenant-b, which declares no workload), and so may a user's first pod. Seen failing on the
    first make verify of the Docker lab: ErrImagePull of docker.io/library/busybox:1.37.0 on tenant-b-worker."""
    from model.docker_lab.images import to_load

    lab = parse_config(lab_config())
    assert not next(t for t in lab.tenants if t.name == "tenant-b").workloads
    assert "docker.io/library/busybox:1.37.0" in {ref.full for ref in to_load(lab, "tenant-b")}
