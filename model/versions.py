"""Everything gpulab pulls from outside, pinned in one place.

Every field can be overridden from stack config (`gpulab:versions`), for example to move to a newer
Calico without touching code. `make up` reads the CLI pins from here too (`python -m model.versions`),
so there is no second list to keep in step.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from model.image_ref import TAG, image_problem

# Each pin's grammar, matched whole and in ASCII. Numbers without leading zeros: `v1.036.4` is no release.
_NUMBER = r"(0|[1-9][0-9]{0,2})"
KUBERNETES_VERSION = re.compile(rf"v{_NUMBER}\.{_NUMBER}\.{_NUMBER}", re.ASCII)
KUBERNETES_MINOR = re.compile(rf"v{_NUMBER}\.{_NUMBER}", re.ASCII)
# SemVer 2.0 (semver.org), optionally with a leading `v`: Helm chart versions and CLI releases.
SEMVER = re.compile(
    r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?",
    re.ASCII,
)
SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
# An https URL of plain characters: no plain http (anyone on the path could swap a manifest or chart), and
# nothing a YAML value, a Helm flag or a shell line could read as syntax (quotes, spaces, `$`, newlines).
HTTPS_URL = re.compile(
    r"https://[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?(/[A-Za-z0-9._~%+/-]*)?", re.ASCII
)
CHART_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


def _grammar(pattern: re.Pattern[str], what: str, example: str):
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"is not {what}, e.g. {example}")
        return value

    return AfterValidator(check)


HttpsUrl = Annotated[str, _grammar(HTTPS_URL, "an https:// URL (plain characters, no http://)", "https://host/path")]
ChartVersion = Annotated[str, _grammar(SEMVER, "a chart version (SemVer, no leading zeros)", "2.8.3 or v1.21.2")]
ImageTag = Annotated[str, _grammar(TAG, "an image tag (letters, digits, '_', '.', '-')", "26.8.2-edge")]
KubernetesMinor = Annotated[str, _grammar(KUBERNETES_MINOR, "a Kubernetes minor version", "v1.36")]


def parse_kubernetes_version(version: str) -> tuple[int, int, int]:
    """`v1.36.4` -> (1, 36, 4); raises ValueError naming the expected shape."""
    match = KUBERNETES_VERSION.fullmatch(version) if isinstance(version, str) else None
    if not match:
        raise ValueError(f"{version!r} is not a Kubernetes version; write it as vMAJOR.MINOR.PATCH, e.g. v1.36.4")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def image_tag(image: str) -> str:
    """The tag of an image reference, ignoring any registry port and digest."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


class HelmChart(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    repo: HttpsUrl
    chart: Annotated[str, _grammar(CHART_NAME, "a chart name (lowercase DNS label)", "hami")]
    version: ChartVersion


class CliTool(BaseModel):
    """A binary `make up` installs into ./bin when missing (linux-amd64 checksum where upstream publishes one)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    version: Annotated[str, _grammar(SEMVER, "a release version", "v0.33.0")]
    sha256_linux_amd64: str = Field(default="", alias="sha256LinuxAmd64", pattern=SHA256.pattern)


# gpulab-hami-plugin (tools/gpulab-hami-plugin) as an image, which `make lab-images` builds from make tools' static
# binary (node-image/hami-plugin-image.sh reads this line): no registry serves it, and `localhost/` keeps a missing
# image from being looked for on Docker Hub. Its tag is the k8s.io/kubelet device plugin API it is built with (its
# go.mod's pin; the binary's --version line names it), as gpulab/kind-node's is its Kubernetes version.
HAMI_DEVICE_PLUGIN_IMAGE = "localhost/gpulab/hami-device-plugin:v0.36.4"

# make up installs these into ./bin from the pins here (hack/prereqs.sh, before any stack is read), and
# the Pulumi CLI must match the SDK in requirements.txt: a stack cannot change them, so it may not set them.
HOST_TOOLS = ("kind", "kubectl", "pulumi")


class Versions(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _no_host_tools(cls, data: object) -> object:
        if isinstance(data, dict) and (named := [key for key in HOST_TOOLS if key in data]):
            raise ValueError(
                f"{', '.join(named)}: `make up` installs the host tools from model/versions.py before it reads "
                "any stack, for every stack alike; remove them here and change the pin there"
            )
        return data

    # Host tools. kind v0.33.0 is the release that ships the v1.36.4 node image below.
    kind: CliTool = CliTool(
        version="v0.33.0", sha256_linux_amd64="aee6151561422756b764a4ae28e7f44cda5af5a9eead3cc9985112b1de8d8e0d"
    )
    kubectl: CliTool = CliTool(
        version="v1.36.4", sha256_linux_amd64="8b8f088da2dab964f853b38464033b1be15ede2839eca751482357c45abdd05a"
    )
    # Same version as the `pulumi` SDK in requirements.txt; the CLI tarball's checksum comes from its release file.
    pulumi: CliTool = CliTool(version="3.272.0")

    # Management cluster node (kind v0.33.0 release notes list this digest).
    management_node_image: str = Field(
        default="kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed",
        alias="managementNodeImage",
    )
    # Tenant worker images by Kubernetes version; a tenant's worker must run its control plane's version
    # (kubelet never newer than the API server: Kubernetes' version skew policy).
    worker_node_images: dict[str, str] = Field(
        default={
            "v1.36.4": "kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed",
        },
        alias="workerNodeImages",
    )

    cert_manager: HelmChart = Field(
        default=HelmChart(repo="https://charts.jetstack.io", chart="cert-manager", version="v1.21.2"),
        alias="certManager",
    )
    metallb_manifest: HttpsUrl = Field(
        default="https://raw.githubusercontent.com/metallb/metallb/v0.16.1/config/manifests/metallb-native.yaml",
        alias="metallbManifest",
    )
    # Kamaji publishes only the moving chart `0.0.0+latest` (its versioning.md); the controller image is what
    # we can pin. 26.8.2-edge is the newest tag in clastix/kamaji (commit ddbabd87) and supports Kubernetes
    # v1.36 (KubeadmVersion v1.36.0); the chart archive the tests render is that commit (shared SOURCES.md).
    kamaji: HelmChart = HelmChart(repo="https://clastix.github.io/charts", chart="kamaji", version="0.0.0+latest")
    kamaji_image_tag: ImageTag = Field(default="26.8.2-edge", alias="kamajiImageTag")
    # kamaji-etcd derives its hook jobs' kubectl image from the cluster's minor (clastix/kubectl:v1.36), a tag
    # with no public trace that has been missing for new minors before (kamaji-etcd#5, kamaji#401). Pin one
    # that exists: v1.35 is within kubectl's one-minor skew of a v1.36 API server; the digest is the one a
    # public image-mirror config records for docker.io/clastix/kubectl:v1.35.
    kamaji_etcd_kubectl_image: str = Field(
        default="docker.io/clastix/kubectl:v1.35@sha256:245d1a9020b8b1369918cede56087e1ea42f69d3bf05c2ebd37afead56c0300c",
        alias="kamajiEtcdKubectlImage",
    )
    # Highest tenant minor the pinned Kamaji accepts (KubeadmVersion v1.36.0; patch is ignored by its webhook).
    kamaji_max_kubernetes: KubernetesMinor = Field(default="v1.36", alias="kamajiMaxKubernetes")

    calico_manifest: HttpsUrl = Field(
        default="https://raw.githubusercontent.com/projectcalico/calico/v3.31.6/manifests/calico.yaml",
        alias="calicoManifest",
    )
    # HAMi's chart repository and name. The version is each tenant's HAMi release's chart (hamiVersion,
    # model/hami_releases.py: 2.10.0 or 2.8.3); a stack that sets versions.hami pins that chart for every tenant.
    # 2.8.3 reads the JSON register annotation (>= 2.8.0) and still uses the list form of `vnpus` that
    # mock-device-plugin 1.0.1 parses (its internal/pkg/config/config.go `VNPUs []VNPUConfig`; the chart makes
    # `vnpus` a mapping from 2.9.0, and the mock plugin then exits on the YAML error).
    hami: HelmChart = HelmChart(repo="https://project-hami.github.io/HAMi/", chart="hami", version="2.8.3")
    mock_device_plugin_image: str = Field(
        default="docker.io/projecthami/mock-device-plugin:1.0.1", alias="mockDevicePluginImage"
    )
    # gpulab's own HAMi device plugin for the Docker lab's `devicePlugin: gpulab` tenants (HAMI_DEVICE_PLUGIN_IMAGE).
    hami_device_plugin_image: str = Field(default=HAMI_DEVICE_PLUGIN_IMAGE, alias="hamiDevicePluginImage")
    # Image for the GPU workloads declared in config (they only sleep: the mock has no CUDA).
    workload_image: str = Field(default="docker.io/library/busybox:1.37.0", alias="workloadImage")

    def kamaji_max_minor(self) -> tuple[int, int]:
        major, minor = self.kamaji_max_kubernetes.lstrip("v").split(".")[:2]
        return int(major), int(minor)

    @model_validator(mode="after")
    def _images_are_references(self) -> Versions:
        """Every image (pinned or overridden) parses as a reference, so a typo is a config error."""
        for version in self.worker_node_images:
            if not KUBERNETES_VERSION.fullmatch(version):
                raise ValueError(f"workerNodeImages: {version!r} is not a Kubernetes version such as v1.36.4")
        if len(self.worker_node_images) > 100:
            raise ValueError("workerNodeImages: at most 100 entries")
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            images = value.values() if name.endswith("_images") and isinstance(value, dict) else [value]
            if name.endswith(("_image", "_images")):
                for image in images:
                    if problem := image_problem(image):
                        raise ValueError(f"{field.alias or name}: {problem}")
        return self


# The sha256 upstream publishes for a pinned chart or manifest, by what the lab asks for (a chart's
# `repo|chart|version`, a manifest's URL): the source cache holds its copy to it (model/docker_lab/sources.py). Pins
# without an entry have no published checksum: Kamaji publishes only the moving chart 0.0.0+latest (its versioning.md),
# and no checksum of cert-manager's chart archive was found published; the cache records what it fetched for those.
CHECKSUMS = {
    # HAMi's chart repository index (gh-pages index.yaml) lists this digest for charts/hami-2.8.3.tgz.
    "https://project-hami.github.io/HAMi|hami|2.8.3": (
        "57835bd9da24eec5916e528ded7fcfbc4c05fa60020efd16370c1c2f4050f4f6"
    ),
    # The same index (gh-pages commit 556683576e4e, 2026-08-21) lists this digest for charts/hami-2.10.0.tgz; the
    # archive in that branch hashes to it, and its values.yaml is tag v2.10.0's (shared/upstream SOURCES.md).
    "https://project-hami.github.io/HAMi|hami|2.10.0": (
        "e1d8429b2270da1a5c26343d6d6fd2a0099ba7b944cf0f52eb20d6b9f14e5099"
    ),
    # The files at these release tags (raw.githubusercontent.com serves the tag's blob as it is).
    "https://raw.githubusercontent.com/metallb/metallb/v0.16.1/config/manifests/metallb-native.yaml": (
        "bf25feebb7582ca7df845efd52ffbc2960d6cbf4cfc972f47fded9f788b67f0b"
    ),
    "https://raw.githubusercontent.com/projectcalico/calico/v3.31.6/manifests/calico.yaml": (
        "34012557637766d4367f0e7d2ea8b6507fca6df68e08b87fcdcd527f689e2637"
    ),
}


def shell_exports(versions: Versions) -> str:
    """KEY=value lines for hack/prereqs.sh."""
    lines = {
        "KIND_VERSION": versions.kind.version,
        "KIND_SHA256": versions.kind.sha256_linux_amd64,
        "KUBECTL_VERSION": versions.kubectl.version,
        "KUBECTL_SHA256": versions.kubectl.sha256_linux_amd64,
        "PULUMI_VERSION": versions.pulumi.version,
    }
    # The script evaluates these lines: every value is checked against its grammar above, and quoted anyway.
    return "".join(f"{key}={shlex.quote(value)}\n" for key, value in lines.items())


if __name__ == "__main__":  # pragma: no cover - exercised by hack/prereqs.sh
    sys.stdout.write(shell_exports(Versions()))
