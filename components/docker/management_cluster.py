"""ManagementCluster: the kind cluster that hosts cert-manager, MetalLB and Kamaji.

Order on `pulumi up` (each arrow is a real dependency, so Pulumi also destroys in reverse):
kind cluster -> cert-manager -> cert-manager API accepts objects -> Kamaji -> Kamaji webhooks and
DataStore ready; kind cluster -> MetalLB ready -> pool + L2 advertisement. Tenants wait for both.
With `mode: existing` the kind cluster is replaced by a given kubeconfig, and each of cert-manager,
MetalLB and Kamaji is installed only where the config asks (a real cluster may have them already).
"""

from __future__ import annotations

import re

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.docker.image_cache import ImageCache
from components.docker.sources import manifest_file, release_chart, sources
from components.shell import script, script_command
from model.config import LabConfig, secret
from model.docker_lab.kamaji import webhook_probe
from model.docker_lab.pull_policy import pull_policy_objects
from model.image_ref import ImageRef
from model.names import (  # re-exported: the program reads them here
    CERT_MANAGER_NAMESPACE,
    KAMAJI_DATASTORE,
    KAMAJI_NAMESPACE,
    METALLB_NAMESPACE,
    POOL_NAME,
    control_plane_namespace,
)
from model.network import PoolError, metallb_range

# Kamaji's CRDs carry `cert-manager.io/inject-ca-from: kamaji-system/kamaji-serving-cert` and its
# conversion webhook points at kamaji-system, so release name and namespace are fixed
# (Kamaji 26.8.2-edge charts/kamaji/crds/*.yaml, charts/kamaji/controller-gen/crd-conversion.yaml).
KAMAJI_RELEASE = "kamaji"
KAMAJI_VALUES_FILE = "components/docker/values/kamaji.yaml"


def owner_label() -> str:
    """This stack's mark on what it creates outside Pulumi's own resources: `<project>.<stack>`,
    made a valid Kubernetes label value (alphanumerics, '-', '_', '.'; at most 63; alphanumeric ends)."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{pulumi.get_project()}.{pulumi.get_stack()}")[:63]
    return value.strip("-_.") or "gpulab"


def metallb_pool_spec(addresses: list[pulumi.Input[str]]) -> dict:
    # autoAssign: LoadBalancer Services (the tenant control planes) get addresses without annotations.
    return {"addresses": addresses, "autoAssign": True}


def l2_advertisement_spec() -> dict:
    return {"ipAddressPools": [POOL_NAME]}


def kamaji_values(image_tag: str, etcd_kubectl_image: str) -> dict:
    """Values set inline; `resources: null` lives in KAMAJI_VALUES_FILE because a Python None is dropped."""
    kubectl = ImageRef.parse(etcd_kubectl_image)
    return {
        # The chart's appVersion is `latest` with pullPolicy Always; pin the controller image instead.
        "image": {"tag": image_tag, "pullPolicy": "IfNotPresent"},
        "telemetry": {"disabled": True},
        # kamaji-etcd's hook jobs run `printf "%s:%s" image tag`, with the tag derived from the cluster's minor
        # when empty (charts/kamaji-etcd/templates/_helpers.tpl, etcd.jobsTagKubeVersion): set it explicitly.
        # The node finds it by tag (pre-loaded, or pulled); the digest is checked where the host pulls it.
        "kamaji-etcd": {"jobs": {"kubectl": {"image": kubectl.name, "tag": kubectl.tag}}},
    }


class ManagementCluster(pulumi.ComponentResource):
    """The management cluster: kind (created here) or an existing cluster (mode: existing), with
    cert-manager, MetalLB (and its pool) and Kamaji installed where gpulab is asked to."""

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    network_name: str | None
    metallb_pool: pulumi.Output[str] | None
    kind_subnet: pulumi.Output[str] | None
    cluster: command.local.Command | None
    kamaji: k8s.helm.v3.Release | None
    kamaji_ready: command.local.Command
    l2_advertisement: k8s.apiextensions.CustomResource | None
    pull_policy_binding: k8s.admissionregistration.v1.MutatingAdmissionPolicyBinding | None

    def __init__(
        self, name: str, lab: LabConfig, images: ImageCache, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpulab:index:ManagementCluster", name, None, opts)
        self._name, self._lab, self._sources = name, lab, sources(lab)
        management = lab.management
        self.cluster = self.kamaji = self.l2_advertisement = self.images_loaded = self.pull_policy_binding = None
        self.metallb_pool = self.kind_subnet = None
        self.network_name = management.network_name if management.mode == "kind" else None

        if management.mode == "kind":
            self.cluster = self._kind_cluster(images)
            self.kubeconfig = pulumi.Output.secret(self._kind_kubeconfig(self.cluster).stdout)
            # kind names its single node <cluster>-control-plane; it runs everything installed below.
            self.images_loaded = images.load(
                f"{name}-images",
                "management",
                node=f"{management.name}-control-plane",
                node_id=self.cluster.id,
                parent=self,
                after=[self.cluster],
            )
        else:
            self.kubeconfig = pulumi.Output.secret(secret(management.kubeconfig_secret))
        # A kind cluster deleted by hand takes its objects with it, so destroy may drop them from the state;
        # an existing cluster that does not answer is left to the user (its objects may still be there).
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self.kubeconfig,
            delete_unreachable=management.mode == "kind",
            opts=pulumi.ResourceOptions(parent=self),
        )

        if management.mode == "kind":
            # The kind node holds every image its pods run (images.load above): Kamaji's pods must not pull them.
            self.pull_policy_binding = self._pull_policy()
        cert_manager = self._cert_manager() if management.installs("cert_manager") else None
        if management.installs("metallb"):
            self.l2_advertisement = self._metallb()
        kamaji_after: list[pulumi.Resource] = []
        if management.installs("kamaji"):
            # Kamaji's chart creates cert-manager Issuers and Certificates: cert-manager must admit them,
            # whether gpulab installed it or it was there already.
            cert_manager_ready = script_command(
                f"{name}-cert-manager-ready",
                "wait-cert-manager.sh",
                stdin=self.kubeconfig,
                environment={"NAMESPACE": CERT_MANAGER_NAMESPACE, "TIMEOUT": "300"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cert_manager] if cert_manager else []),
            )
            self.kamaji = self._kamaji(cert_manager_ready)
            kamaji_after = [self.kamaji]
        # Installed here or already there: tenants wait until Kamaji really admits TenantControlPlanes.
        self.kamaji_ready = script_command(
            f"{name}-kamaji-ready",
            "wait-kamaji.sh",
            stdin=self.kubeconfig,
            environment={
                "NAMESPACE": KAMAJI_NAMESPACE,
                "DATASTORE": KAMAJI_DATASTORE,
                # The tenants' TenantControlPlanes as they will be created, for a server-side dry run.
                "PROBE_JSON": webhook_probe(
                    lab.tenants, KAMAJI_NAMESPACE, lab.management.control_plane_startup_seconds
                ),
                "TIMEOUT": "600",
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=kamaji_after),
        )

        outputs: dict[str, object] = {"kubeconfig": self.kubeconfig, "mode": management.mode}
        if self.metallb_pool is not None:
            outputs["metallbPool"] = self.metallb_pool
        if self.kind_subnet is not None:
            outputs |= {"kindSubnet": self.kind_subnet, "networkName": self.network_name}
        self.register_outputs(outputs)

    def _in_cluster(self, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        """Options of an object in the cluster: after the images its pods run are on the node."""
        loaded = [self.images_loaded] if self.images_loaded is not None else []
        return pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[*loaded, *(depends_on or [])])

    def _kind_cluster(self, images: ImageCache) -> command.local.Command:
        """The kind cluster. `environment` changes (name, image, network) replace it, deleting the old one
        first because kind cluster and network names are singletons. Its stdout is kind-create.sh's record
        of what gpulab owns (the node container's id, whether the network was there before): not secret, and
        handed to the next update and the delete, which act only on what it names."""
        management, versions = self._lab.management, self._lab.versions
        internal = "INTERNAL_NETWORK=yes " if management.internal_network else ""
        node_image, loaded = images.node_image(versions.management_node_image)
        return command.local.Command(
            f"{self._name}-kind",
            environment={
                "CLUSTER_NAME": management.name,
                "NODE_IMAGE": node_image,
                "NETWORK": management.network_name,
            },
            # Who owns the cluster (a node label): set on the command line, not in `environment`, so that
            # labs deployed before owners were recorded, and renamed stacks, are updated in place, not replaced.
            # OUTPUT=record changes the command line of states whose stdout was still the kubeconfig: their next
            # `pulumi up` updates (re-runs) the create once, which then prints the record.
            # INTERNAL_NETWORK too: on the command line only when asked, so that other labs' commands stay as they were.
            create=f"OWNER={owner_label()} OUTPUT=record {internal}{script('kind-create.sh')}",
            delete=f"OWNER={owner_label()} {script('kind-delete.sh')}",
            logging=command.local.Logging.STDERR,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=loaded, delete_before_replace=True, replace_on_changes=["environment"]
            ),
        )

    def _kind_kubeconfig(self, cluster: command.local.Command) -> command.local.Command:
        """The kind cluster's kubeconfig, read by a Command of its own: its stdout is a secret, so it runs
        without the previous output in its environment, and a new record (a new cluster) replaces it."""
        return command.local.Command(
            f"{self._name}-kind-kubeconfig",
            create=script("kind-kubeconfig.sh"),
            environment={"CLUSTER_NAME": self._lab.management.name, "RECORD": cluster.stdout},
            add_previous_output_in_env=False,
            logging=command.local.Logging.STDERR,  # stdout is the kubeconfig
            opts=pulumi.ResourceOptions(
                parent=self, additional_secret_outputs=["stdout"], replace_on_changes=["*"], depends_on=[cluster]
            ),
        )

    def _cert_manager(self) -> k8s.helm.v3.Release:
        chart = self._lab.versions.cert_manager
        return k8s.helm.v3.Release(
            f"{self._name}-cert-manager",
            name="cert-manager",
            **release_chart(chart, self._sources),
            namespace=CERT_MANAGER_NAMESPACE,
            create_namespace=True,
            values={"crds": {"enabled": True}},
            timeout=600,
            opts=pulumi.ResourceOptions.merge(self._in_cluster(), self._dropped_with_the_cluster()),
        )

    def _metallb(self) -> k8s.apiextensions.CustomResource:
        """MetalLB and its pool; the ConfigFile awaits the controller (which serves the webhook) first.
        kind mode carves the pool from the kind network's IPv4 subnet; existing mode takes it from config."""
        lab = self._lab
        metallb = k8s.yaml.v2.ConfigFile(
            f"{self._name}-metallb",
            file=manifest_file(lab.versions.metallb_manifest, self._sources),
            opts=self._in_cluster(),
        )
        if self.cluster is not None:
            # Read once kind has made the network: the invoke runs from the cluster's record, which a preview of a
            # new lab does not know. (depends_on alone is not enough: an engine that runs the invoke anyway, as
            # CLI v3.274.0 did in a first preview here, fails on a network that does not exist yet.)
            network_name = self.network_name
            network = self.cluster.stdout.apply(
                lambda _: docker.get_network_output(name=network_name, opts=pulumi.InvokeOutputOptions(parent=self))
            )
            avoid = {
                f"tenants[{i}].{key}": cidr
                for i, tenant in enumerate(lab.tenants)
                for key, cidr in (("podCidr", tenant.pod_cidr), ("serviceCidr", tenant.service_cidr))
            }
            pool = network.ipam_configs.apply(lambda configs: _pool(configs, lab.management.metallb_pool_size, avoid))
            self.metallb_pool = pool.apply(lambda found: found[0])
            self.kind_subnet = pool.apply(lambda found: found[1])
            addresses: list[pulumi.Input[str]] = [self.metallb_pool]
        else:
            addresses = list(lab.management.metallb_addresses)
            self.metallb_pool = pulumi.Output.from_input(",".join(lab.management.metallb_addresses))
        pool = {
            "apiVersion": "metallb.io/v1beta1",
            "kind": "IPAddressPool",
            "metadata": {"name": POOL_NAME, "namespace": METALLB_NAMESPACE},
            "spec": metallb_pool_spec(addresses),
        }
        # MetalLB's webhook serves a while after its Deployment is Ready: the pool waits until it is admitted.
        webhook_ready = script_command(
            f"{self._name}-metallb-ready",
            "wait-metallb.sh",
            stdin=self.kubeconfig,
            environment={"PROBE_JSON": pulumi.Output.json_dumps(pool), "TIMEOUT": "300"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[metallb]),
        )
        ip_pool = k8s.apiextensions.CustomResource(
            f"{self._name}-metallb-pool",
            api_version=pool["apiVersion"],
            kind=pool["kind"],
            metadata=pool["metadata"],
            spec=pool["spec"],
            opts=self._in_cluster([metallb, webhook_ready]),
        )
        return k8s.apiextensions.CustomResource(
            f"{self._name}-metallb-l2",
            api_version="metallb.io/v1beta1",
            kind="L2Advertisement",
            metadata={"name": POOL_NAME, "namespace": METALLB_NAMESPACE},
            spec=l2_advertisement_spec(),
            opts=self._in_cluster([ip_pool]),
        )

    def _kamaji(self, cert_manager_ready: pulumi.Resource) -> k8s.helm.v3.Release:
        """Kamaji with its etcd DataStore. helm.v3.Release (not Chart v4) so the kamaji-etcd hooks run:
        they enable etcd auth, which per-tenant datastore isolation relies on (kamaji-etcd v0.17.0
        templates/etcd_job_preinstall_2.yaml; Kamaji internal/datastore/etcd.go)."""
        versions = self._lab.versions
        return k8s.helm.v3.Release(
            f"{self._name}-kamaji",
            name=KAMAJI_RELEASE,
            **release_chart(versions.kamaji, self._sources),
            namespace=KAMAJI_NAMESPACE,
            create_namespace=True,
            value_yaml_files=[pulumi.FileAsset(KAMAJI_VALUES_FILE)],
            values=kamaji_values(versions.kamaji_image_tag, versions.kamaji_etcd_kubectl_image),
            timeout=900,  # the etcd setup hook alone may take 5 minutes
            opts=pulumi.ResourceOptions.merge(self._in_cluster([cert_manager_ready]), self._dropped_with_the_cluster()),
        )

    def _pull_policy(self) -> k8s.admissionregistration.v1.MutatingAdmissionPolicyBinding:
        """Kamaji's control-plane pods in the tenants' namespaces start from the images on the node
        (model/docker_lab/pull_policy.py). The kind node's Kubernetes serves MutatingAdmissionPolicy v1 (LabConfig
        checks it)."""
        namespaces = [control_plane_namespace(tenant.name) for tenant in self._lab.tenants]
        policy_object, binding_object = pull_policy_objects(namespaces)
        policy = k8s.admissionregistration.v1.MutatingAdmissionPolicy(
            f"{self._name}-kamaji-pull-policy",
            metadata=policy_object["metadata"],
            spec=policy_object["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider, deleted_with=self.cluster),
        )
        return k8s.admissionregistration.v1.MutatingAdmissionPolicyBinding(
            f"{self._name}-kamaji-pull-policy-binding",
            metadata=binding_object["metadata"],
            spec=binding_object["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, provider=self.provider, depends_on=[policy], deleted_with=self.cluster
            ),
        )

    def _dropped_with_the_cluster(self) -> pulumi.ResourceOptions:
        """A Release in the kind cluster is not uninstalled when the cluster goes too: deleting the cluster
        removes it. The provider refuses to delete a helm.v3.Release on an unreachable cluster whatever
        deleteUnreachable says (pulumi-kubernetes provider/pkg/provider/provider.go, kubeProvider.Delete checks
        isHelmRelease before the flag; pulumi/pulumi-kubernetes#2675), which would stop a destroy after the
        cluster was deleted by hand. With deletedWith the engine skips the provider's Delete when the cluster's
        Command is deleted in the same operation (pulumi pkg/resource/deploy/step.go, DeleteStep.Apply,
        isDeletedWith); removed on its own, the Release is uninstalled. In an existing cluster gpulab
        uninstalls what it installed."""
        return pulumi.ResourceOptions(deleted_with=self.cluster)

    @property
    def ready_for_tenants(self) -> list[pulumi.Resource]:
        """What a TenantControlPlane must wait for: Kamaji admitting TCPs, where gpulab runs MetalLB its pool being
        advertised, and in kind the policy that keeps the TCP's pods from pulling (bound before its first pod)."""
        optional = [self.l2_advertisement, self.pull_policy_binding]
        return [self.kamaji_ready, *(resource for resource in optional if resource is not None)]


def _pool(ipam_configs: list, size: int, avoid: dict[str, str]) -> tuple[str, str]:
    entries = [{"subnet": entry.subnet, "ip_range": entry.ip_range} for entry in ipam_configs or []]
    try:
        return metallb_range(entries, size, avoid)
    except PoolError as error:
        raise pulumi.RunError(f"gpulab:{error.key}: {error}") from None
