"""The tenants' kube-proxy under mocks: gpulab's (model/docker_lab/kube_proxy.py), not Kamaji's addon, in kubeadm's
shape, with a configuration a node container can run, made after Kamaji's clean-up and before the CNI.

What the configuration does to the real kube-proxy is tests/real/test_kube_proxy.py's."""

from __future__ import annotations

import pytest
import yaml
from lab_harness import reference_program, shared_program
from registration_snapshot import SSH_SECRETS, ssh_config

from model.docker_lab.kube_proxy import CONFIG_DIR, CONFIG_KEY, KUBECONFIG_KEY, SERVICE_ACCOUNT_DIR

KINDS = {
    "sa": "kubernetes:core/v1:ServiceAccount",
    "crb": "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "role": "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "rolebinding": "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    "config": "kubernetes:core/v1:ConfigMap",
    "daemonset": "kubernetes:apps/v1:DaemonSet",
}


@pytest.fixture(scope="module")
def program():
    return reference_program()


def objects(program, tenant: str) -> dict:
    return {suffix: program.named(f"{tenant}-kube-proxy-{suffix}") for suffix in KINDS}


def config_of(program, tenant: str) -> tuple[dict, dict]:
    data = program.named(f"{tenant}-kube-proxy-config").inputs["data"]
    return yaml.safe_load(data[CONFIG_KEY]), yaml.safe_load(data[KUBECONFIG_KEY])


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_each_tenant_runs_kubeadms_kube_proxy_objects_through_its_provider(program, tenant: str) -> None:
    found = objects(program, tenant)
    for suffix, resource in found.items():
        assert resource.type == KINDS[suffix]
        assert program.provider_of(resource).name == f"{tenant}-provider"
        assert resource.parent == program.named(tenant).urn
        labels = resource.inputs["metadata"].get("labels", {})
        assert labels.get("kamaji.clastix.io/project") != "kamaji", "Kamaji's clean-up deletes what carries it"
    names = {suffix: r.inputs["metadata"]["name"] for suffix, r in found.items()}
    assert names == {"sa": "kube-proxy", "crb": "kubeadm:node-proxier", "role": "kube-proxy",
                     "rolebinding": "kube-proxy", "config": "kube-proxy", "daemonset": "kube-proxy"}  # fmt: skip
    crb = found["crb"].inputs
    assert crb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:node-proxier",
    }
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}]
    assert found["rolebinding"].inputs["subjects"] == [
        {"kind": "Group", "name": "system:bootstrappers:kubeadm:default-node-token"}
    ]
    [rule] = found["role"].inputs["rules"]
    assert rule["resourceNames"] == ["kube-proxy"] and rule["verbs"] == ["get"]


def test_kamajis_addon_is_off(program) -> None:
    for tcp in program.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert "kubeProxy" not in tcp.inputs["spec"]["addons"]


@pytest.mark.parametrize(("tenant", "pod_cidr"), [("tenant-a", "10.244.0.0/16"), ("tenant-b", "10.245.0.0/16")])
def test_the_configuration_leaves_conntrack_max_alone_in_a_node_container(program, tenant: str, pod_cidr: str) -> None:
    """kind's settings (maxPerCore 0: nf_conntrack_max is read-only in a container's network namespace), kubeadm's
    clusterCIDR (the tenant's pod CIDR) and the API server where Kamaji's addon pointed it: the TCP's endpoint."""
    config, kubeconfig = config_of(program, tenant)
    assert config["kind"] == "KubeProxyConfiguration" and config["apiVersion"] == "kubeproxy.config.k8s.io/v1alpha1"
    assert config["conntrack"] == {"maxPerCore": 0}
    assert config["clusterCIDR"] == pod_cidr
    assert (config["mode"], config["iptables"]) == ("iptables", {"minSyncPeriod": "1s"})
    assert config["clientConnection"]["kubeconfig"] == f"{CONFIG_DIR}/{KUBECONFIG_KEY}"
    # status.controlPlaneEndpoint: the MetalLB IP (the tenant's exported endpoint) and the API server's port.
    endpoint = f"{program.exports[tenant.replace('-', '_') + '_endpoint']}:6443"
    [cluster] = kubeconfig["clusters"]
    assert cluster["cluster"] == {
        "certificate-authority": f"{SERVICE_ACCOUNT_DIR}/ca.crt",
        "server": f"https://{endpoint}",
    }
    assert kubeconfig["users"] == [{"name": "default", "user": {"tokenFile": f"{SERVICE_ACCOUNT_DIR}/token"}}]


def test_a_machine_of_its_own_keeps_kubeadms_conntrack_defaults() -> None:
    program = shared_program(ssh_config(), secrets=SSH_SECRETS)
    ssh, containers = config_of(program, "tenant-a")[0], config_of(program, "tenant-b")[0]
    assert "conntrack" not in ssh, "an SSH worker's kube-proxy may set the host's nf_conntrack_max, as kubeadm's does"
    assert containers["conntrack"] == {"maxPerCore": 0}


def test_the_daemon_set_runs_the_tenants_kube_proxy_on_its_config(program) -> None:
    spec = program.named("tenant-b-kube-proxy-daemonset").inputs["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-proxy:v1.36.4"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == [
        "/usr/local/bin/kube-proxy",
        f"--config={CONFIG_DIR}/{CONFIG_KEY}",
        "--hostname-override=$(NODE_NAME)",
    ]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["kube-proxy"] == CONFIG_DIR and volumes["kube-proxy"]["configMap"] == {"name": "kube-proxy"}
    assert pod["serviceAccountName"] == "kube-proxy" and pod["hostNetwork"] is True
    assert pod["tolerations"] == [{"operator": "Exists"}], "it must run on a node that is not Ready yet"
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"] == {"k8s-app": "kube-proxy"}


def test_kube_proxy_is_made_after_kamajis_clean_up_and_before_the_cni(program) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        handover = program.named(f"{tenant}-kube-proxy-handover")
        assert handover.inputs["create"] == "bash scripts/wait-kube-proxy-handover.sh"
        assert program.depends_on(handover, program.named(f"{tenant}-tcp")), "after the TCP lost the addon"
        assert program.depends_on(handover, program.named(f"{tenant}-api-ready"))
        found = objects(program, tenant)
        for resource in found.values():
            assert program.depends_on(resource, handover)
            assert resource.deleted_with == program.named(f"{tenant}-tcp").urn
        daemon_set = found["daemonset"]
        assert program.depends_on(daemon_set, found["config"]) and program.depends_on(daemon_set, found["sa"])
        calico = program.named(f"{tenant}-worker-calico")
        assert program.depends_on(calico, daemon_set), "calico-node reaches the API server through a Service"
