"""TenantControlPlane and TenantWorker under mocks, for the reference stack, one tenant and five."""

from __future__ import annotations

import json

import jsonschema
import pulumi
import pytest
import yaml
from lab_harness import UNKNOWN_ID, LabMocks, lab_config, make_tenant, reference_program, run_program, tenant_kubeconfig
from shared_data import crd_schema, undeclared_paths, validate_crd

from components.docker.tenant_worker import JOIN_TIMEOUT, calico_pool_transform, gone_with, set_container_env
from model.config import parse_config
from model.docker_lab.kamaji import control_plane_spec
from model.node_container import CONTAINER_PREFLIGHT, join_token_ttl_minutes
from scripts.join_config import join_configuration

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


@pytest.fixture(scope="module")
def program():
    return reference_program()


def test_two_control_planes_and_two_workers(program) -> None:
    assert sorted(r.name for r in program.of_type(TCP)) == ["tenant-a-tcp", "tenant-b-tcp"]
    assert sorted(r.name for r in program.of_type("docker:index/container:Container")) == [
        "tenant-a-worker-node",
        "tenant-b-worker-node",
    ]
    for component in ("gpulab:index:TenantControlPlane", "gpulab:index:TenantWorker"):
        assert len(program.of_type(component)) == 2


def test_tenant_kubeconfigs_are_secret_outputs(program) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        key = f"{tenant.replace('-', '_')}_kubeconfig"
        assert program.exports[key] == tenant_kubeconfig(tenant)
        assert key in program.secret_exports


def test_endpoints_are_the_metallb_ips(program) -> None:
    endpoints = {program.exports["tenant_a_endpoint"], program.exports["tenant_b_endpoint"]}
    assert endpoints == {"172.30.255.201", "172.30.255.202"}
    assert "tenant_a_endpoint" not in program.secret_exports


def test_tcp_waits_for_the_real_ready_signal(program) -> None:
    tcp = program.named("tenant-a-tcp")
    annotations = tcp.inputs["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == "jsonpath={.status.kubernetesResources.version.status}=Ready"
    assert int(annotations["pulumi.com/timeoutSeconds"]) >= 600


@pytest.mark.parametrize("tenant_index", [0, 1])
def test_generated_tcp_validates_against_kamajis_crd(program, tenant_index: int) -> None:
    schema = crd_schema("kamaji/tenantcontrolplanes.crd.yaml", "v1alpha1")
    tcp = program.of_type(TCP)[tenant_index]
    validate_crd(tcp.inputs, "kamaji/tenantcontrolplanes.crd.yaml", "v1alpha1")
    assert {"controlPlane", "kubernetes"} <= set(schema["properties"]["spec"]["required"])


def test_tcp_crd_validation_catches_a_missing_required_field() -> None:
    """The schema check is not vacuous: without `kubelet` Kamaji's CRD rejects the object."""
    spec = control_plane_spec(parse_config(lab_config()).tenants[0])
    del spec["kubernetes"]["kubelet"]
    with pytest.raises(jsonschema.ValidationError, match="'kubelet' is a required property"):
        validate_crd(
            {"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane", "spec": spec},
            "kamaji/tenantcontrolplanes.crd.yaml",
            "v1alpha1",
        )


@pytest.mark.parametrize("tenant_index", [0, 1])
def test_generated_tcp_has_no_field_kamajis_crd_would_prune(program, tenant_index: int) -> None:
    """Unknown fields pass JSON Schema but the API server drops them: every field sent, the probes included, is
    one Kamaji's CRD declares."""
    tcp = program.of_type(TCP)[tenant_index].inputs
    schema = crd_schema("kamaji/tenantcontrolplanes.crd.yaml", "v1alpha1")
    assert tcp["spec"]["controlPlane"]["deployment"]["probes"]
    assert undeclared_paths({"spec": tcp["spec"]}, schema) == []


def test_the_pruning_check_is_not_vacuous() -> None:
    spec = control_plane_spec(parse_config(lab_config()).tenants[0])
    spec["controlPlane"]["deployment"]["probes"]["apiServer"] = {"startupProbe": {"failureThreshold": 24}}
    schema = crd_schema("kamaji/tenantcontrolplanes.crd.yaml", "v1alpha1")
    found = undeclared_paths({"spec": spec}, schema)
    assert found == [".spec.controlPlane.deployment.probes.apiServer.startupProbe"]


def test_the_crd_judges_the_probe_values() -> None:
    """The probes are inside the schema's reach: a value below the CRD's minimum is refused."""
    spec = control_plane_spec(parse_config(lab_config()).tenants[0])
    spec["controlPlane"]["deployment"]["probes"]["startup"]["failureThreshold"] = 0
    with pytest.raises(jsonschema.ValidationError, match="0 is less than the minimum of 1"):
        validate_crd(
            {"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane", "spec": spec},
            "kamaji/tenantcontrolplanes.crd.yaml",
            "v1alpha1",
        )


# Kamaji 26.8.2-edge internal/builders/controlplane/deployment.go: defaultProbe, then applyProbeSetOverrides
# (the global probes first, then the component's own).
KAMAJI_DEFAULT_PROBE = {
    "initialDelaySeconds": 0,
    "timeoutSeconds": 1,
    "periodSeconds": 10,
    "successThreshold": 1,
    "failureThreshold": 3,
}


def kamaji_probe(probes: dict | None, component: str, kind: str) -> dict:
    """The probe Kamaji's builder gives a container of `component` for the TCP's `probes`."""
    probe = dict(KAMAJI_DEFAULT_PROBE)
    if probes:
        probe.update(probes.get(kind) or {})
        probe.update((probes.get(component) or {}).get(kind) or {})
    return probe


BUSY_HOST_START_SECONDS = 100  # the longest tenant API server start seen on a busy 2-core host


def test_a_slow_api_server_start_is_not_killed(program) -> None:
    """The API server's startup probe gives a start as slow as the busy host's room to finish (Kamaji's own,
    3 x 10 s, restarted such starts 8-10 times); probes answer within kubeadm's 15 s; and the controller manager
    and scheduler, in the same pod, get the same."""
    probes = program.named("tenant-a-tcp").inputs["spec"]["controlPlane"]["deployment"]["probes"]
    before = kamaji_probe(None, "apiServer", "startup")
    assert before["failureThreshold"] * before["periodSeconds"] < BUSY_HOST_START_SECONDS
    for component in ("apiServer", "controllerManager", "scheduler"):
        startup = kamaji_probe(probes, component, "startup")
        assert startup["failureThreshold"] * startup["periodSeconds"] == 240  # 4m, twice the slowest start seen
        assert startup["timeoutSeconds"] == 15 and startup["successThreshold"] == 1  # 1 is required of startup
        liveness = kamaji_probe(probes, component, "liveness")
        assert (liveness["failureThreshold"], liveness["periodSeconds"], liveness["timeoutSeconds"]) == (8, 10, 15)
        assert kamaji_probe(probes, component, "readiness")["timeoutSeconds"] == 15


def test_the_startup_window_follows_the_stack() -> None:
    program = run_program(lab_config(management={"name": "gpulab", "controlPlaneStartupTimeout": "10m"}))
    probes = program.named("tenant-b-tcp").inputs["spec"]["controlPlane"]["deployment"]["probes"]
    startup = kamaji_probe(probes, "apiServer", "startup")
    assert startup["failureThreshold"] * startup["periodSeconds"] == 600


def test_tcp_spec_values(program) -> None:
    spec = program.named("tenant-b-tcp").inputs["spec"]
    assert spec["controlPlane"]["service"]["serviceType"] == "LoadBalancer"
    assert spec["kubernetes"]["version"] == "v1.36.4"
    patches = spec["kubernetes"]["kubelet"]["configurationJSONPatches"]
    assert {"op": "add", "path": "/cgroupDriver", "value": "systemd"} in patches
    assert all(patch["op"] == "add" for patch in patches), "replace on a missing key fails (notes item 10)"
    assert spec["networkProfile"] == {
        "port": 6443,
        "podCidr": "10.245.0.0/16",
        "serviceCidr": "10.97.0.0/16",
        "dnsServiceIPs": ["10.97.0.10"],
    }
    assert spec["addons"]["konnectivity"] == {"server": {"port": 8132}, "agent": {"mode": "DaemonSet"}}
    assert "coreDNS" in spec["addons"]
    assert "kubeProxy" not in spec["addons"], "gpulab runs kube-proxy: Kamaji's addon cannot be configured"


def test_admin_kubeconfig_is_read_after_readiness(program) -> None:
    secret = program.named("tenant-a-admin-kubeconfig")
    assert secret.read_id == "gpulab-tenant-a/tenant-a-admin-kubeconfig"
    assert program.named("tenant-a-tcp").urn in secret.dependencies


def test_first_preview_defers_the_kubeconfig_read() -> None:
    """On a fresh stack the TCP has no status yet: the Secret read must wait, not fail."""
    program = run_program(lab_config(), preview=True, mocks=LabMocks(unknown_tcp_status=True))
    reads = [r for r in program.of_type("kubernetes:core/v1:Secret") if r.read_id]
    assert len(reads) == 2
    assert all(r.read_id == UNKNOWN_ID for r in reads), "the read id must be unknown until the TCP exists"
    assert program.exports.get("tenant_a_kubeconfig") is None


def test_tenant_provider_waits_for_the_tenant_api(program) -> None:
    provider = program.named("tenant-a-provider")
    api_ready = program.named("tenant-a-api-ready")
    assert provider.inputs["kubeconfig"] == tenant_kubeconfig("tenant-a")
    assert "kubeconfig" in provider.secret_inputs
    assert api_ready.inputs["create"] == "bash scripts/wait-tenant-api.sh"
    assert program.depends_on(provider, api_ready)


def test_worker_container_uses_kinds_node_flags(program) -> None:
    container = program.named("tenant-a-worker-node").inputs
    assert container["name"] == container["hostname"] == "tenant-a-worker"
    assert container["privileged"] is True
    assert container["securityOpts"] == ["seccomp=unconfined", "apparmor=unconfined"]
    assert container["tmpfs"] == {"/tmp": "", "/run": ""}
    assert {"containerPath": "/var"} in container["volumes"]
    assert {"hostPath": "/lib/modules", "containerPath": "/lib/modules", "readOnly": True} in container["volumes"]
    assert container["cgroupnsMode"] == "private"
    assert container["init"] is False and container["tty"] is True
    assert (container["restart"], container["maxRetryCount"]) == ("on-failure", 1)
    assert container["networksAdvanced"] == [{"name": "gpulab"}]
    labels = {label["label"]: label["value"] for label in container["labels"]}
    assert labels["gpulab.io/tenant"] == "tenant-a"
    assert container["image"] == "sha256:" + "ab" * 32, "the pulled image's id, not a name (no refresh diffs)"
    assert labels["gpulab.io/node-image"].startswith("kindest/node:v1.36.4@sha256:")
    assert not any(key.startswith("io.x-k8s.kind") for key in labels), "kind must not own tenant workers"
    assert program.named("tenant-a-worker-node").delete_before_replace


def test_worker_image_is_pinned_with_digest_and_matches_the_tenant(program) -> None:
    image = program.named("tenant-a-worker-image").inputs
    assert image["name"].startswith("kindest/node:v1.36.4@sha256:")
    assert image["keepLocally"] is True


def test_host_prerequisites_run_before_the_container(program) -> None:
    prerequisites = program.named("tenant-a-worker-host-prerequisites")
    assert prerequisites.inputs["create"] == "bash scripts/host-prereqs.sh"
    assert program.depends_on(program.named("tenant-a-worker-node"), prerequisites)


def test_join_keeps_its_input_and_output_secret(program) -> None:
    join = program.named("tenant-a-worker-join")
    assert join.inputs["create"] == "bash scripts/worker-join.sh"
    assert "stdin" in join.secret_inputs
    assert join.additional_secret_outputs == ["stdout"]
    assert join.inputs["logging"] == "stderr"
    assert "KUBECONFIG" not in str(join.inputs["environment"])
    assert join.inputs["environment"]["CONTAINER"] == "tenant-a-worker"
    assert join.inputs["environment"]["JOIN_CONFIG_RESOURCE"] == "tenant-a-worker-join-config"


def join_material(tenant: str) -> str:
    """What join-config.sh prints for a tenant's node container (a token id per tenant: tokena, tokenb)."""
    config = join_configuration(
        "172.30.255.201:6443", f"token{tenant[-1]}", "0123456789abcdef", "sha256:5e1f", f"{tenant}-worker", []
    )
    return yaml.safe_dump(config, sort_keys=False)


class JoinMaterialMocks(LabMocks):
    """As the engine answers once join-config.sh has run: a join-config Command's stdout is its JoinConfiguration."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        resource_id, outputs = super().new_resource(args)
        if args.typ == "command:local:Command" and args.name.endswith("-join-config"):
            outputs["stdout"] = join_material(args.inputs["environment"]["TENANT"])
        return resource_id, outputs


def test_a_container_join_gets_a_join_configuration_never_the_admin_kubeconfig() -> None:
    """Boundary: what the engine is asked to run for the Docker lab's container worker. As for an SSH worker, its
    JoinConfiguration is made on the Pulumi host from the admin kubeconfig (join-config.sh); the join's stdin is
    that Command's stdout, and the token in it is deleted once the node has joined (delete-token.sh)."""
    program = run_program(lab_config(), mocks=JoinMaterialMocks())
    for tenant in ("tenant-a", "tenant-b"):
        node = program.named(f"{tenant}-worker-node")
        material = program.named(f"{tenant}-worker-join-config")
        join = program.named(f"{tenant}-worker-join")
        delete = program.named(f"{tenant}-worker-join-token-delete")
        assert material.inputs["create"] == "bash scripts/join-config.sh"
        assert material.inputs["stdin"] == tenant_kubeconfig(tenant), "made on the Pulumi host"
        assert material.additional_secret_outputs == ["stdout"]
        environment = material.inputs["environment"]
        assert environment["NODE_NAME"] == f"{tenant}-worker" and environment["IGNORE_PREFLIGHT"] == CONTAINER_PREFLIGHT
        assert environment["TTL_MINUTES"] == str(join_token_ttl_minutes(JOIN_TIMEOUT))
        assert program.depends_on(material, program.named(f"{tenant}-api-ready"))
        assert program.depends_on(material, program.named(f"{tenant}-worker-images"))

        assert join.inputs["stdin"] == join_material(tenant) and "stdin" in join.secret_inputs
        assert tenant_kubeconfig(tenant) not in json.dumps(join.inputs), "the node never gets the admin kubeconfig"
        assert program.depends_on(join, material)

        assert delete.inputs["create"] == "bash scripts/delete-token.sh"
        assert delete.inputs["stdin"] == tenant_kubeconfig(tenant)
        assert delete.inputs["environment"] == {"TOKEN_ID": f"token{tenant[-1]}", "TENANT": tenant}
        assert program.depends_on(delete, join)
        # A replaced container is joined again with a new token: its id is in both Commands' inputs.
        assert environment["CONTAINER_ID"] == join.inputs["environment"]["CONTAINER_ID"] == f"{node.name}-id"
        # On destroy only, the join's lock file on the Pulumi host goes (worker-join-unlock.sh).
        unlock = program.named(f"{tenant}-worker-join-unlock")
        assert "create" not in unlock.inputs or not unlock.inputs["create"]
        assert unlock.inputs["delete"] == "bash scripts/worker-join-unlock.sh"
        assert unlock.inputs["environment"] == {"CONTAINER": join.inputs["environment"]["CONTAINER"]}


def test_calico_is_pinned_applied_through_the_tenant_and_transformed(program) -> None:
    calico = program.named("tenant-a-worker-calico")
    assert calico.inputs["file"].startswith("https://raw.githubusercontent.com/projectcalico/calico/v3.")
    assert program.provider_of(calico).name == "tenant-a-provider"
    assert program.depends_on(calico, program.named("tenant-a-worker-join"))
    assert len(program.mocks.transforms.get("tenant-a-worker-calico", [])) == 2  # the pool, and gone with the TCP


def test_calico_transform_sets_the_pool_to_the_pod_cidr() -> None:
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "calico-node", "namespace": "kube-system"},
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [{"name": "install-cni"}],
                    "containers": [
                        {"name": "calico-node", "env": [{"name": "CALICO_IPV4POOL_IPIP", "value": "Always"}]}
                    ],
                }
            }
        },
    }
    transform = calico_pool_transform("10.245.0.0/16")
    args = pulumi.ResourceTransformArgs(
        custom=True,
        type_="kubernetes:apps/v1:DaemonSet",
        name="calico-node",
        props=daemonset,
        opts=pulumi.ResourceOptions(),
    )
    result = transform(args)
    env = result.props["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "CALICO_IPV4POOL_CIDR", "value": "10.245.0.0/16"} in env
    assert {"name": "CALICO_IPV4POOL_IPIP", "value": "Always"} in env
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "CALICO_IPV4POOL_IPIP", "value": "Always"}
    ], "the transform must not mutate its input"
    other = pulumi.ResourceTransformArgs(
        custom=True, type_="kubernetes:apps/v1:Deployment", name="x", props=daemonset, opts=pulumi.ResourceOptions()
    )
    assert transform(other) is None


def test_every_calico_object_is_deleted_with_the_tenant_s_control_plane_never_one_by_one() -> None:
    """Boundary: the engine's transform callback, as it hands each child of a remote ConfigFile (type, props, opts).
    Destroyed one by one, Calico's CRDs and calico-node went before calico-kube-controllers, whose pod could not be
    torn down; `make down` of a Calico lab stalled 600 s (2026-12-08)."""
    owner = object()
    transform = gone_with(owner)  # type: ignore[arg-type]
    for kind, given in (
        ("kubernetes:apps/v1:Deployment", pulumi.ResourceOptions()),
        ("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", pulumi.ResourceOptions(protect=False)),
    ):
        args = pulumi.ResourceTransformArgs(custom=True, type_=kind, name="x", props={"a": 1}, opts=given)
        result = transform(args)
        assert result.opts.deleted_with is owner and result.props == {"a": 1}
        assert given.deleted_with is None, "the transform must not mutate its input"


def test_set_container_env_replaces_an_existing_value() -> None:
    obj = {"spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "old"}]}]}}}}
    assert set_container_env(obj, "c", {"A": "new"})["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "new"}
    ]


def test_worker_is_ready_only_after_calico(program) -> None:
    ready = program.named("tenant-a-worker-ready")
    assert ready.inputs["create"] == "bash scripts/wait-node-ready.sh"
    assert ready.inputs["environment"]["NODE_NAMES"] == "tenant-a-worker"
    assert program.depends_on(ready, program.named("tenant-a-worker-calico"))


def test_dependency_chain_management_control_plane_worker(program) -> None:
    kamaji_ready = program.named("management-kamaji-ready")
    for tenant in ("tenant-a", "tenant-b"):
        tcp = program.named(f"{tenant}-tcp")
        join = program.named(f"{tenant}-worker-join")
        ready = program.named(f"{tenant}-worker-ready")
        assert program.depends_on(tcp, kamaji_ready)
        assert program.depends_on(join, tcp)
        assert program.depends_on(join, program.named(f"{tenant}-worker-node"))
        assert program.depends_on(program.named(f"{tenant}-worker-join-config"), program.named(f"{tenant}-worker-node"))
        assert program.depends_on(ready, join)


def assert_tenants_independent(program, tenants: list[str]) -> None:
    owner = {}
    for registration in program.registrations.values():
        for tenant in tenants:
            if registration.name == tenant or registration.name.startswith(f"{tenant}-"):
                owner[registration.urn] = tenant
    assert owner, "no tenant resources found"
    for urn, tenant in owner.items():
        foreign = {owner[dep] for dep in program.closure(program.by_urn(urn)) if dep in owner} - {tenant}
        assert not foreign, f"{program.by_urn(urn).name} waits for tenant(s) {foreign}"


def test_no_dependency_between_tenants(program) -> None:
    assert_tenants_independent(program, ["tenant-a", "tenant-b"])


def test_one_tenant() -> None:
    program = run_program(lab_config(tenants=[make_tenant("solo", 0)]))
    assert [r.name for r in program.of_type(TCP)] == ["solo-tcp"]
    assert "tenant_solo_kubeconfig" in program.secret_exports
    assert program.exports["tenant_solo_endpoint"].startswith("172.30.255.")


def test_five_tenants_build_independently() -> None:
    names = [f"team-{i}" for i in range(5)]
    program = run_program(lab_config(tenants=[make_tenant(name, i) for i, name in enumerate(names)]))
    assert len(program.of_type(TCP)) == 5
    assert len(program.of_type("docker:index/container:Container")) == 5
    for name in names:
        key = f"tenant_{name.replace('-', '_')}_kubeconfig"
        assert key in program.secret_exports
    assert len({program.exports[f"tenant_team_{i}_endpoint"] for i in range(5)}) == 5
    assert_tenants_independent(program, names)


def test_control_plane_deleted_before_kamaji_and_its_namespace(program) -> None:
    """Pulumi deletes in reverse dependency order: the TCP depends on both, so it goes first."""
    tcp = program.named("tenant-a-tcp")
    assert program.depends_on(tcp, program.named("tenant-a-namespace"))
    assert program.depends_on(tcp, program.named("management-kamaji"))
    assert program.depends_on(program.named("tenant-a-worker-node"), program.named("management-kind"))


def test_destroy_survives_a_cluster_deleted_by_hand() -> None:
    """Providers of what gpulab itself created drop unreachable objects from the state on destroy
    (pulumi-kubernetes deleteUnreachable); an existing management cluster's provider does not."""
    program = reference_program()
    for name in ("tenant-a-provider", "tenant-b-provider", "management-provider"):
        assert program.named(name).inputs.get("deleteUnreachable") in (True, "true"), name
