"""ManagementCluster under Pulumi mocks: what it declares, the orderings that matter, its outputs."""

from __future__ import annotations

import json

import pytest
import yaml
from lab_harness import KIND_KUBECONFIG, KIND_RECORD, LabMocks, lab_config, reference_program, run_program
from shared_data import KAMAJI_CHART, ROOT, chart_values, has_path, leaf_paths

from model.versions import Versions


@pytest.fixture(scope="module")
def program():
    return reference_program()


def test_kind_cluster_command(program) -> None:
    kind = program.named("management-kind")
    # A create command line unlike the one of states whose stdout was the kubeconfig: they update once.
    assert kind.inputs["create"] == "OWNER=gpulab.dev OUTPUT=record bash scripts/kind-create.sh"
    assert kind.inputs["delete"] == "OWNER=gpulab.dev bash scripts/kind-delete.sh"
    assert kind.inputs["environment"] == {
        "CLUSTER_NAME": "gpulab",
        "NODE_IMAGE": Versions().management_node_image,
        "NETWORK": "gpulab",
    }
    assert kind.delete_before_replace, "kind cluster names are singletons: delete before replacing"
    assert "environment" in kind.replace_on_changes
    # Its stdout is the ownership record that its update and delete read back (PULUMI_COMMAND_STDOUT): no secret.
    assert kind.additional_secret_outputs == []
    assert kind.inputs.get("addPreviousOutputInEnv", True) is True


def test_the_kind_kubeconfig_is_read_by_a_command_that_never_hands_it_on(program) -> None:
    """pulumi-command puts a Command's previous stdout into its update's and delete's environment: the one
    Command whose stdout is the kubeconfig runs with that off, and is replaced (never updated) on changes."""
    read = program.named("management-kind-kubeconfig")
    assert read.inputs["create"] == "bash scripts/kind-kubeconfig.sh"
    assert read.inputs["addPreviousOutputInEnv"] is False
    assert read.additional_secret_outputs == ["stdout"]
    assert "*" in read.replace_on_changes
    assert "delete" not in read.inputs and "update" not in read.inputs
    assert read.inputs["logging"] == "stderr", "stdout carries the kubeconfig and must never be logged"
    assert read.inputs["environment"]["RECORD"] == KIND_RECORD, "a new cluster (record) reads afresh"
    assert program.depends_on(read, program.named("management-kind"))


def test_no_command_with_a_secret_stdout_hands_it_to_another_run(program) -> None:
    for command in program.of_type("command:local:Command"):
        if command.name == "management-kind":
            continue
        assert command.inputs.get("addPreviousOutputInEnv") is False, command.name


def test_releases_in_the_kind_cluster_go_with_it(program) -> None:
    """The provider cannot delete a helm.v3.Release on an unreachable cluster (pulumi-kubernetes#2675): a
    Release in the kind cluster is deleted with the cluster's Command, HAMi with its tenant's control plane."""
    kind = program.named("management-kind")
    for name in ("management-cert-manager", "management-kamaji"):
        assert program.named(name).deleted_with == kind.urn, name
    for tenant in ("tenant-a", "tenant-b"):
        hami = program.named(f"{tenant}-gpus-hami")
        assert hami.deleted_with == program.named(f"{tenant}-tcp").urn


def test_management_kubeconfig_is_a_secret_export(program) -> None:
    assert program.exports["management_kubeconfig"] == KIND_KUBECONFIG
    assert "management_kubeconfig" in program.secret_exports


def test_provider_uses_the_kind_kubeconfig(program) -> None:
    provider = program.named("management-provider")
    assert provider.inputs["kubeconfig"] == KIND_KUBECONFIG
    assert "kubeconfig" in provider.secret_inputs
    assert program.depends_on(provider, program.named("management-kind"))


def test_cert_manager_release_is_pinned(program) -> None:
    release = program.named("management-cert-manager")
    assert release.inputs["chart"] == "cert-manager"
    assert release.inputs["version"] == "v1.21.2"
    assert release.inputs["repositoryOpts"] == {"repo": "https://charts.jetstack.io"}
    assert release.inputs["values"] == {"crds": {"enabled": True}}


def test_cert_manager_ready_before_kamaji(program) -> None:
    kamaji = program.named("management-kamaji")
    ready = program.named("management-cert-manager-ready")
    assert ready.inputs["create"] == "bash scripts/wait-cert-manager.sh"
    assert ready.inputs["stdin"] == KIND_KUBECONFIG
    assert "stdin" in ready.secret_inputs, "a kubeconfig on stdin must stay secret in state"
    assert program.depends_on(ready, program.named("management-cert-manager"))
    assert program.depends_on(kamaji, ready)


def test_metallb_ready_before_its_pool(program) -> None:
    metallb = program.named("management-metallb")
    pool = program.named("management-metallb-pool")
    l2 = program.named("management-metallb-l2")
    assert metallb.inputs["file"].endswith("/metallb/metallb/v0.16.1/config/manifests/metallb-native.yaml")
    assert program.depends_on(pool, metallb)
    assert program.depends_on(l2, pool)


def test_pool_comes_from_the_ipv4_subnet_of_a_dual_stack_network(program) -> None:
    assert program.exports["metallb_pool"] == "172.30.255.239-172.30.255.254"
    assert program.exports["kind_subnet"] == "172.30.0.0/16"
    assert program.named("management-metallb-pool").inputs["spec"]["addresses"] == ["172.30.255.239-172.30.255.254"]
    network_reads = [args for token, args in program.mocks.invokes if token == "docker:index/getNetwork:getNetwork"]
    assert network_reads == [{"name": "gpulab"}]


def test_pool_size_is_configurable() -> None:
    program = run_program(lab_config(management={"name": "gpulab", "metallbPoolSize": 4}))
    assert program.exports["metallb_pool"] == "172.30.255.251-172.30.255.254"


def test_network_without_ipv4_stops_with_a_clear_error() -> None:
    import pulumi

    mocks = LabMocks(ipam=[{"subnet": "fc00:f853:ccd:e793::/64"}])
    with pytest.raises(pulumi.RunError, match="no IPv4 subnet"):
        run_program(lab_config(), mocks=mocks)


def test_kamaji_release(program) -> None:
    kamaji = program.named("management-kamaji")
    assert kamaji.inputs["name"] == "kamaji"
    assert kamaji.inputs["namespace"] == "kamaji-system"
    assert kamaji.inputs["createNamespace"] is True
    assert kamaji.inputs["chart"] == "kamaji"
    assert kamaji.inputs["version"] == Versions().kamaji.version
    assert kamaji.inputs["values"]["image"]["tag"] == Versions().kamaji_image_tag
    assert kamaji.inputs["timeout"] > 300, "the kamaji-etcd setup hook may take 5 minutes"


def test_kamaji_resources_null_really_reaches_the_chart(program) -> None:
    kamaji = program.named("management-kamaji")
    files = kamaji.inputs["valueYamlFiles"]
    assert len(files) == 1
    path = ROOT / files[0].path
    values = yaml.safe_load(path.read_text())
    assert "resources" in values and values["resources"] is None


def test_every_kamaji_value_exists_in_the_upstream_chart(program) -> None:
    upstream = chart_values(KAMAJI_CHART)  # the kamaji-etcd subchart's values included
    kamaji = program.named("management-kamaji")
    file_values = yaml.safe_load((ROOT / kamaji.inputs["valueYamlFiles"][0].path).read_text())
    for values in (kamaji.inputs["values"], file_values):
        for path in leaf_paths(values):
            assert has_path(upstream, path), f"Kamaji chart has no value {'.'.join(path)}"


def test_kamaji_ready_gates_tenants(program) -> None:
    ready = program.named("management-kamaji-ready")
    assert ready.inputs["create"] == "bash scripts/wait-kamaji.sh"
    assert ready.inputs["environment"]["DATASTORE"] == "default"
    assert program.depends_on(ready, program.named("management-kamaji"))
    for tcp in program.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert program.depends_on(tcp, ready), "no TenantControlPlane before Kamaji's webhooks serve"
        assert program.depends_on(tcp, program.named("management-metallb-l2"))


def test_kamaji_ready_dry_runs_the_tenants_tcps_as_the_program_creates_them(program) -> None:
    """Boundary: Kamaji's webhooks and its CRD judge the spec they are sent. The probe wait-kamaji.sh dry-runs is
    each tenant's TenantControlPlane spec as registered, named as a probe, not a spec written a second time."""
    probe_matches_the_tcps(program)


def test_the_probe_carries_the_stacks_startup_timeout() -> None:
    """The startup probe's failureThreshold follows management.controlPlaneStartupTimeout in the probe too."""
    management = {**lab_config()["management"], "controlPlaneStartupTimeout": "10m"}
    program = run_program(lab_config(management=management))
    thresholds = probe_matches_the_tcps(program)
    assert thresholds == {60}  # 10 minutes of 10 s periods


def probe_matches_the_tcps(program) -> set[int]:
    """Asserts the probe is the TCPs' specs; the startup failureThresholds of its kube-apiservers."""
    probe = json.loads(program.named("management-kamaji-ready").inputs["environment"]["PROBE_JSON"])
    assert probe["kind"] == "List"
    probed = {item["metadata"]["name"]: item for item in probe["items"]}
    tcps = program.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")
    assert len(tcps) == 2 and len(probed) == len(tcps)
    for tcp in tcps:
        item = probed[f"gpulab-probe-{tcp.inputs['metadata']['name']}"]
        assert (item["apiVersion"], item["kind"]) == ("kamaji.clastix.io/v1alpha1", "TenantControlPlane")
        assert item["metadata"]["namespace"] == "kamaji-system"
        assert item["spec"] == tcp.inputs["spec"]
    return {
        item["spec"]["controlPlane"]["deployment"]["probes"]["startup"]["failureThreshold"] for item in probe["items"]
    }


def test_everything_in_the_cluster_uses_its_provider(program) -> None:
    for name in ("management-cert-manager", "management-metallb", "management-metallb-pool", "management-kamaji"):
        provider = program.provider_of(program.named(name))
        assert provider is not None and provider.name == "management-provider", name


def test_children_are_parented_to_the_component(program) -> None:
    component = program.named("management")
    assert component.type == "gpulab:index:ManagementCluster"
    for name in ("management-kind", "management-provider", "management-kamaji", "management-metallb-pool"):
        assert program.named(name).parent == component.urn


# --- Kamaji's control-plane pods pull nothing ----------------------------------------------------------------

MAP = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"
MAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A LabelSelector's verdict on `labels` (k8s.io/apimachinery pkg/apis/meta/v1 LabelSelector: all terms)."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for term in selector.get("matchExpressions", []):
        key, operator, values = term["key"], term["operator"], term.get("values", [])
        verdict = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not verdict:
            return False
    return True


def kamaji_pod_labels(tcp: str) -> dict[str, str]:
    """The labels of a TCP Deployment's pod template (Kamaji 26.8.2-edge internal/builders/controlplane/
    deployment.go, templateLabels): its name, its component, and hashes of its secrets."""
    return {
        "kamaji.clastix.io/name": tcp,
        "kamaji.clastix.io/component": "deployment",
        "component.kamaji.clastix.io/ca": "0cc175b9c0f1b6a831c399e269772661",
        "component.kamaji.clastix.io/datastore": "default",
    }


def test_kamajis_pods_in_the_tenants_namespaces_and_nothing_else_get_the_policy(program) -> None:
    [policy] = program.of_type(MAP)
    constraints = policy.inputs["spec"]["matchConstraints"]
    namespace_labels = {
        name: {"kubernetes.io/metadata.name": name, "gpulab.io/tenant": name.removeprefix("gpulab-")}
        for name in ("gpulab-tenant-a", "gpulab-tenant-b")
    }
    in_management = [
        namespace
        for namespace in program.of_type("kubernetes:core/v1:Namespace")
        if program.provider_of(namespace).name == "management-provider"
    ]
    assert len(in_management) == 2
    for namespace in in_management:
        name = namespace.inputs["metadata"]["name"]
        assert namespace.inputs["metadata"]["labels"] == {"gpulab.io/tenant": name.removeprefix("gpulab-")}
        assert selects(constraints["namespaceSelector"], namespace_labels[name])
    for other in ({"kubernetes.io/metadata.name": "kamaji-system"}, {"kubernetes.io/metadata.name": "gpulab-x"}):
        assert not selects(constraints["namespaceSelector"], other)
    assert selects(constraints["objectSelector"], kamaji_pod_labels("tenant-a"))
    assert not selects(constraints["objectSelector"], {"kamaji.clastix.io/name": "tenant-a"})
    assert not selects(constraints["objectSelector"], {"app": "kamaji", "kamaji.clastix.io/component": "deployment"})
    assert constraints["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]


def test_the_policy_is_bound_before_the_first_tenant_control_plane(program) -> None:
    [policy], [binding] = program.of_type(MAP), program.of_type(MAP_BINDING)
    assert binding.inputs["spec"] == {"policyName": policy.inputs["metadata"]["name"]}
    assert program.depends_on(binding, policy)
    for resource in (policy, binding):
        assert program.provider_of(resource).name == "management-provider"
        assert resource.parent == program.named("management").urn
    for tcp in program.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert program.depends_on(tcp, binding), "a TCP pod created before the binding would pull"


def test_an_existing_management_cluster_gets_no_policy() -> None:
    """Only the kind node is loaded with every image beforehand; a cluster of the user's pulls as it always did."""
    secrets = {"managementKubeconfig": "apiVersion: v1\nkind: Config\nclusters: [{name: existing}]\n"}
    config = lab_config(management={"mode": "existing", "install": {"kamaji": True}})
    config["tenants"] = [
        {**tenant, "workerMode": "ssh", "workers": [{"host": f"10.0.0.{21 + i}"}]}
        for i, tenant in enumerate(config["tenants"])
    ]
    program = run_program(
        config,
        secrets={
            **secrets,
            "sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
        },
    )
    assert program.of_type(MAP) == [] and program.of_type(MAP_BINDING) == []
    assert program.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")


def test_a_kind_node_without_the_v1_api_is_refused_with_the_fix() -> None:
    from model.config import ConfigError, parse_config

    image = "kindest/node:v1.35.1@sha256:" + "0" * 64
    with pytest.raises(ConfigError) as raised:
        parse_config(lab_config(versions={"managementNodeImage": image}))
    message = str(raised.value)
    assert "gpulab:versions.managementNodeImage = 'kindest/node:v1.35.1@sha256:" in message
    assert "runs Kubernetes v1.35" in message and "use a kindest/node of v1.36 or newer" in message
    parse_config(lab_config(versions={"managementNodeImage": "gpulab/kind-node:dev"}))  # no version: taken as is
