"""ManagementCluster: the kind cluster that hosts cert-manager, MetalLB and Kamaji.

Order on `pulumi up` (each arrow is a real dependency, so Pulumi also destroys in reverse):
kind cluster -> cert-manager -> cert-manager API accepts objects -> Kamaji -> Kamaji webhooks and
DataStore ready; kind cluster -> MetalLB ready -> pool + L2 advertisement. Tenants wait for both.
"""

from __future__ import annotations

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.config import LabConfig
from components.network import PoolError, metallb_range
from components.shell import script, script_command

CERT_MANAGER_NAMESPACE = "cert-manager"
METALLB_NAMESPACE = "metallb-system"
# Kamaji's CRDs carry `cert-manager.io/inject-ca-from: kamaji-system/kamaji-serving-cert` and its
# conversion webhook points at kamaji-system, so release name and namespace are fixed
# (../shared/notes/kamaji.md section 0 item 4).
KAMAJI_RELEASE = "kamaji"
KAMAJI_NAMESPACE = "kamaji-system"
KAMAJI_DATASTORE = "default"  # the chart's kamaji-etcd DataStore (defaultDatastoreName)
KAMAJI_VALUES_FILE = "components/values/kamaji.yaml"
POOL_NAME = "gpulab"


def metallb_pool_spec(address_range: pulumi.Input[str]) -> dict:
    # autoAssign: LoadBalancer Services (the tenant control planes) get addresses without annotations.
    return {"addresses": [address_range], "autoAssign": True}


def l2_advertisement_spec() -> dict:
    return {"ipAddressPools": [POOL_NAME]}


def kamaji_values(image_tag: str) -> dict:
    """Values set inline; `resources: null` lives in KAMAJI_VALUES_FILE because a Python None is dropped."""
    return {
        # The chart's appVersion is `latest` with pullPolicy Always; pin the controller image instead.
        "image": {"tag": image_tag, "pullPolicy": "IfNotPresent"},
        "telemetry": {"disabled": True},
    }


class ManagementCluster(pulumi.ComponentResource):
    """kind + cert-manager + MetalLB (pool from the kind network's IPv4 subnet) + Kamaji."""

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    network_name: str
    metallb_pool: pulumi.Output[str]
    kind_subnet: pulumi.Output[str]
    cluster: command.local.Command
    kamaji: k8s.helm.v3.Release
    kamaji_ready: command.local.Command
    l2_advertisement: k8s.apiextensions.CustomResource

    def __init__(self, name: str, lab: LabConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpulab:index:ManagementCluster", name, None, opts)
        management, versions = lab.management, lab.versions
        self.network_name = management.network_name

        # The cluster itself. `environment` changes (name, image, network) replace it, deleting the old
        # one first because kind cluster and network names are singletons.
        self.cluster = command.local.Command(
            f"{name}-kind",
            create=script("kind-create.sh"),
            delete=script("kind-delete.sh"),
            environment={
                "CLUSTER_NAME": management.name,
                "NODE_IMAGE": versions.management_node_image,
                "NETWORK": self.network_name,
            },
            logging=command.local.Logging.STDERR,  # stdout is the kubeconfig
            opts=pulumi.ResourceOptions(
                parent=self,
                additional_secret_outputs=["stdout"],
                delete_before_replace=True,
                replace_on_changes=["environment"],
            ),
        )
        self.kubeconfig = pulumi.Output.secret(self.cluster.stdout)
        self.provider = k8s.Provider(
            f"{name}-provider", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )
        in_cluster = pulumi.ResourceOptions(parent=self, provider=self.provider)

        # cert-manager, then a real check that its webhook admits objects.
        cert_manager = k8s.helm.v3.Release(
            f"{name}-cert-manager",
            name="cert-manager",
            chart=versions.cert_manager.chart,
            version=versions.cert_manager.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.cert_manager.repo),
            namespace=CERT_MANAGER_NAMESPACE,
            create_namespace=True,
            values={"crds": {"enabled": True}},
            timeout=600,
            opts=in_cluster,
        )
        cert_manager_ready = script_command(
            f"{name}-cert-manager-ready",
            "wait-cert-manager.sh",
            stdin=self.kubeconfig,
            environment={"NAMESPACE": CERT_MANAGER_NAMESPACE, "TIMEOUT": "300"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cert_manager]),
        )

        # MetalLB: the ConfigFile awaits its controller (which serves the webhook) before the pool.
        metallb = k8s.yaml.v2.ConfigFile(f"{name}-metallb", file=versions.metallb_manifest, opts=in_cluster)
        network = docker.get_network_output(
            name=self.network_name,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[self.cluster]),
        )
        avoid = [cidr for tenant in lab.tenants for cidr in (tenant.pod_cidr, tenant.service_cidr)]
        pool = network.ipam_configs.apply(lambda configs: _pool(configs, management.metallb_pool_size, avoid))
        self.metallb_pool = pool.apply(lambda found: found[0])
        self.kind_subnet = pool.apply(lambda found: found[1])
        ip_pool = k8s.apiextensions.CustomResource(
            f"{name}-metallb-pool",
            api_version="metallb.io/v1beta1",
            kind="IPAddressPool",
            metadata={"name": POOL_NAME, "namespace": METALLB_NAMESPACE},
            spec=metallb_pool_spec(self.metallb_pool),
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[metallb])),
        )
        self.l2_advertisement = k8s.apiextensions.CustomResource(
            f"{name}-metallb-l2",
            api_version="metallb.io/v1beta1",
            kind="L2Advertisement",
            metadata={"name": POOL_NAME, "namespace": METALLB_NAMESPACE},
            spec=l2_advertisement_spec(),
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[ip_pool])),
        )

        # Kamaji with its etcd DataStore. helm.v3.Release (not Chart v4) so the kamaji-etcd hooks run:
        # they enable etcd auth, which per-tenant datastore isolation relies on (notes/kamaji.md section 4).
        self.kamaji = k8s.helm.v3.Release(
            f"{name}-kamaji",
            name=KAMAJI_RELEASE,
            chart=versions.kamaji.chart,
            version=versions.kamaji.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.kamaji.repo),
            namespace=KAMAJI_NAMESPACE,
            create_namespace=True,
            value_yaml_files=[pulumi.FileAsset(KAMAJI_VALUES_FILE)],
            values=kamaji_values(versions.kamaji_image_tag),
            timeout=900,  # the etcd setup hook alone may take 5 minutes
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[cert_manager_ready])),
        )
        self.kamaji_ready = script_command(
            f"{name}-kamaji-ready",
            "wait-kamaji.sh",
            stdin=self.kubeconfig,
            environment={
                "NAMESPACE": KAMAJI_NAMESPACE,
                "DATASTORE": KAMAJI_DATASTORE,
                "PROBE_VERSION": lab.tenants[0].kubernetes_version,
                "TIMEOUT": "600",
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.kamaji]),
        )

        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "metallbPool": self.metallb_pool,
                "kindSubnet": self.kind_subnet,
                "networkName": self.network_name,
            }
        )

    @property
    def ready_for_tenants(self) -> list[pulumi.Resource]:
        """What a TenantControlPlane must wait for: Kamaji admitting TCPs and MetalLB handing out IPs."""
        return [self.kamaji_ready, self.l2_advertisement]


def _pool(ipam_configs: list, size: int, avoid: list[str]) -> tuple[str, str]:
    entries = [{"subnet": entry.subnet, "ip_range": entry.ip_range} for entry in ipam_configs or []]
    try:
        return metallb_range(entries, size, avoid)
    except PoolError as error:
        raise pulumi.RunError(f"gpulab:management.metallbPoolSize: {error}") from None
