"""Every image the lab runs, for a given config: one inventory, per part (management, each tenant).

`python -m model.docker_lab.images [--stack NAME]` prints it, one fully qualified reference per line, sorted.
`ImageCache` (components/docker/image_cache.py) pulls the images that need a pull into the host's Docker
once and loads them into the nodes that run them; the tests render the pinned charts and manifests
and fail if anything they would run is missing here (tests/model/test_images.py).

Where each list comes from:
- pins: model/versions.py (node images, Kamaji, the kamaji-etcd kubectl job, the tenant's device plugin: HAMi's
  mock or gpulab's, which `make lab-images` builds; workloads);
- charts and manifests: what the pinned cert-manager, MetalLB, Kamaji (+ kamaji-etcd v0.17.0), Calico and
  HAMi releases run with the values gpulab passes (their images, rendered offline; proven by render in tests);
- Kamaji itself: per TenantControlPlane, kube-apiserver/controller-manager/scheduler at the tenant version and
  konnectivity `v0.<minor>.0` (Kamaji 26.8.2-edge internal/builders/controlplane/konnectivity_server.go);
  the konnectivity agent in the tenant;
- gpulab's kube-proxy in each tenant (model/docker_lab/kube_proxy.py, in place of Kamaji's addon), at the tenant
  version.
Images a kindest/node already carries (kind pre-loads its version's control-plane images) are listed as
`preloaded` and never pulled. CoreDNS and pause are left out: their tags are kubeadm's own choice for the
version, and kind pre-loads exactly kubeadm's list.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from model.config import LabConfig, Tenant
from model.config.hami import device_plugin
from model.docker_lab.kube_proxy import kube_proxy_image
from model.image_ref import ImageRef
from model.versions import image_tag, parse_kubernetes_version

PROJECT = Path(__file__).resolve().parents[2]  # model/docker_lab/ is two folders down
MANAGEMENT = "management"
# kamaji-etcd v0.17.0 (bundled with Kamaji 26.8.2-edge): the StatefulSet's etcd and the setup job's etcd
# (charts/kamaji-etcd/values.yaml `image.tag` default and `jobs.etcd.tag`; proven by the chart render test).
KAMAJI_ETCD_IMAGES = ("quay.io/coreos/etcd:v3.6.12", "quay.io/coreos/etcd:v3.5.6")
# HAMi charts 2.8.3 and 2.10.0 alike: the scheduler extender and device plugin image is the chart's appVersion,
# its webhook certificates come from this hook-job image (charts/hami/values.yaml of both tags).
HAMI_CERTGEN_IMAGE = "docker.io/liangjw/kube-webhook-certgen:v1.1.1"
_RELEASE_IN_URL = re.compile(r"/(v\d+\.\d+\.\d+)/")


@dataclass(frozen=True, order=True)
class ImageUse:
    part: str  # "management" or a tenant name: the node(s) that run it
    ref: ImageRef
    source: str  # where the reference comes from
    preloaded: bool = False  # already inside the node image: never pulled

    @property
    def needs_pull(self) -> bool:
        return not self.preloaded


def release_of(url: str, what: str) -> str:
    """`v0.16.1` from a manifest URL pinned at a release tag."""
    match = _RELEASE_IN_URL.search(url)
    if not match:
        raise ValueError(
            f"versions.{what} = {url!r}: cannot tell which images it runs; point it at a release tag "
            "(…/vX.Y.Z/…) so the image inventory and pre-loading know them"
        )
    return match.group(1)


def _use(part: str, text: str, source: str, preloaded: bool = False) -> ImageUse:
    return ImageUse(part, ImageRef.parse(text), source, preloaded)


def konnectivity_tag(kubernetes_version: str) -> str:
    _, minor, _ = parse_kubernetes_version(kubernetes_version)
    return f"v0.{minor}.0"


def management_images(lab: LabConfig) -> list[ImageUse]:
    versions, management = lab.versions, lab.management
    uses: list[ImageUse] = []
    node_version = None
    if management.mode == "kind":
        uses.append(_use(MANAGEMENT, versions.management_node_image, "pin versions.managementNodeImage"))
        node_version = image_tag(versions.management_node_image)
    if management.installs("cert_manager"):
        chart = f"chart cert-manager {versions.cert_manager.version}"
        uses += [
            _use(MANAGEMENT, f"quay.io/jetstack/cert-manager-{part}:{versions.cert_manager.version}", chart)
            for part in ("controller", "cainjector", "webhook", "startupapicheck")
        ]
    if management.installs("metallb"):
        release = release_of(versions.metallb_manifest, "metallbManifest")
        uses += [
            _use(MANAGEMENT, f"quay.io/metallb/{part}:{release}", f"manifest metallb {release}")
            for part in ("controller", "speaker")
        ]
    if management.installs("kamaji"):
        uses.append(_use(MANAGEMENT, f"docker.io/clastix/kamaji:{versions.kamaji_image_tag}", "pin kamajiImageTag"))
        uses += [_use(MANAGEMENT, image, "chart kamaji (kamaji-etcd v0.17.0)") for image in KAMAJI_ETCD_IMAGES]
        uses.append(_use(MANAGEMENT, versions.kamaji_etcd_kubectl_image, "pin versions.kamajiEtcdKubectlImage"))
    # Each TenantControlPlane's pod runs in the management cluster.
    for tenant in lab.tenants:
        version = tenant.kubernetes_version
        for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            uses.append(
                _use(
                    MANAGEMENT,
                    f"registry.k8s.io/{component}:{version}",
                    "Kamaji TenantControlPlane",
                    version == node_version,
                )
            )
        uses.append(
            _use(
                MANAGEMENT,
                f"registry.k8s.io/kas-network-proxy/proxy-server:{konnectivity_tag(version)}",
                "Kamaji konnectivity-server",
            )
        )
    return uses


def tenant_images(lab: LabConfig, tenant: Tenant) -> list[ImageUse]:
    versions, part, version = lab.versions, tenant.name, tenant.kubernetes_version
    hami_chart = lab.hami_chart(tenant).version  # the tenant's HAMi release's chart (hamiVersion)
    container = tenant.worker_mode == "container"  # a kindest/node of the tenant's version carries its images
    uses: list[ImageUse] = []
    if container:
        image = lab.worker_image(tenant)
        assert image is not None  # LabConfig guarantees it
        uses.append(_use(part, image, "pin versions.workerNodeImages / tenants[].workerImage"))
    if lab.pod_network == "calico":
        calico = release_of(versions.calico_manifest, "calicoManifest")
        uses += [
            _use(part, f"quay.io/calico/{name}:{calico}", f"manifest calico {calico}")
            for name in ("cni", "node", "kube-controllers")
        ]
    uses += [
        _use(part, kube_proxy_image(version), "gpulab kube-proxy (model/docker_lab/kube_proxy.py)", container),
        _use(part, f"registry.k8s.io/kas-network-proxy/proxy-agent:{konnectivity_tag(version)}", "Kamaji konnectivity"),
        _use(part, f"docker.io/projecthami/hami:v{hami_chart}", f"chart hami {hami_chart}"),
        _use(part, HAMI_CERTGEN_IMAGE, f"chart hami {hami_chart}"),
        _use(part, f"registry.k8s.io/kube-scheduler:{version}", "HAMi scheduler (tenant version)", container),
    ]
    plugin = device_plugin(lab, tenant)
    if plugin == "mock":
        uses.append(_use(part, versions.mock_device_plugin_image, "pin versions.mockDevicePluginImage"))
    elif plugin == "gpulab":  # built by `make lab-images`, loaded from the host's engine like any other
        uses.append(_use(part, versions.hami_device_plugin_image, "pin versions.hamiDevicePluginImage (lab-images)"))
    if tenant.workloads or container:  # also the image of `make verify`'s and users' first pods on a node
        uses.append(_use(part, versions.workload_image, "pin versions.workloadImage"))
    return uses


def inventory(lab: LabConfig) -> list[ImageUse]:
    """Every image the lab runs, per part, sorted."""
    uses = management_images(lab)
    for tenant in lab.tenants:
        uses += tenant_images(lab, tenant)
    return sorted(set(uses))


def node_images(lab: LabConfig) -> set[str]:
    """The kindest/node images themselves: run by Docker on the host, never loaded into a node."""
    found = {ImageRef.parse(lab.versions.management_node_image).full} if lab.management.mode == "kind" else set()
    return found | {
        ImageRef.parse(image).full
        for tenant in lab.tenants
        if tenant.worker_mode == "container" and (image := lab.worker_image(tenant))
    }


def to_load(lab: LabConfig, part: str) -> list[ImageRef]:
    """What a part's node needs pre-loaded: what it runs, less what its node image carries."""
    skip = node_images(lab)
    return sorted(
        {use.ref for use in inventory(lab) if use.part == part and use.needs_pull and use.ref.full not in skip}
    )


def main(argv: list[str] | None = None) -> int:
    from model.config import ConfigError, load_stack_file

    parser = argparse.ArgumentParser(
        prog="python -m model.docker_lab.images", description="Print every image the lab runs for a stack."
    )
    parser.add_argument("--stack", default="dev", help="stack whose Pulumi.<STACK>.yaml to read (dev)")
    parser.add_argument("--project-dir", type=Path, default=PROJECT)
    args = parser.parse_args(argv)
    path = args.project_dir / f"Pulumi.{args.stack}.yaml"
    try:
        lab = load_stack_file(path)
        uses = inventory(lab)
    except (OSError, ConfigError, ValueError) as error:
        print(f"error: {path.name}: {error}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(f"{ref}\n" for ref in sorted({use.ref.full for use in uses})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
