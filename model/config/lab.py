"""The whole lab: the management cluster, the tenants, scheduling and versions (the root model), and the
rules between its parts: between tenants, and between tenants and the management cluster or the pinned
versions (across_tenants). Those also run on the parts that validated when a field failed, so every problem
shows at once."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from model.catalog import MAX_TENANTS
from model.config.errors import NO_VALUE, KeyedError, at
from model.config.fields import DURATION, ConfigModel, WingName
from model.config.hami import docker_lab_hami_problems, real_node_plugin_problems
from model.config.management import Management
from model.config.tenant import Tenant
from model.hami_releases import (
    RELEASES as HAMI_RELEASES,
)
from model.hami_releases import HamiRelease, default_version
from model.image_ref import ImageRef
from model.network import ranges_overlap
from model.node_contract import gpulab_node
from model.versions import HelmChart, Versions, image_tag, parse_kubernetes_version
from model.wings import DEFAULT_WING, WINGS, Wing

# kind's published node image, which carries no CNI bridge plugin (kind images/base/Dockerfile).
KINDEST_NODE = "docker.io/kindest/node"
# The v1 API of MutatingAdmissionPolicy, which the management cluster's pull policy needs
# (model/docker_lab/pull_policy.py).
MINIMUM_KUBERNETES = (1, 36)


def hami_client_flags(qps: float, burst: int, verbosity: int) -> list[str]:
    """hami-scheduler's client rate and verbosity (HAMi v2.8.3 cmd/scheduler/main.go: --kube-qps, --kube-burst;
    klog's -v): the same flags in both runtimes, the chart's extraArgs and the local process's."""
    return [f"--kube-qps={qps:g}", f"--kube-burst={burst}", f"-v={verbosity}"]


class Scheduling(ConfigModel):
    gpu_scheduler_policy: Literal["spread", "binpack"] = "spread"
    node_scheduler_policy: Literal["spread", "binpack"] = "binpack"
    # Mock mode only: HAMi's node lock is released by the real device plugin, never by the mock one.
    node_lock_timeout: str = "2s"
    # hami-scheduler's client to the tenant's API server (its --kube-qps and --kube-burst). HAMi's chart leaves
    # client-go's 5 QPS / burst 10 there, which binds 0.5 GPU pods per second whatever the cluster size. HAMi makes
    # about ten requests a pod, so its rate bounds the binds: 100 / 200 bound 9.9 pods/s on 100 nodes once the
    # lab's own writes were cheap, 400 / 800 13.5-13.8 (docs/performance.md, 2026-12-04).
    hami_kube_qps: float = Field(default=400, ge=1, le=10000)
    hami_kube_burst: int = Field(default=800, ge=1, le=100000)
    # hami-scheduler's klog verbosity. The chart's -v=4 logs every node's fit for every pod (pkg/scheduler/score.go);
    # nothing the lab reads needs more than 0 (its registration line, the reasons in events); the cost of each is in
    # docs/performance.md.
    hami_log_verbosity: int = Field(default=2, ge=0, le=10)
    # Who places GPU pods: hami (HAMi's extender and webhook: cards, shares, HAMi's reasons) or kube-scheduler
    # alone (process mode only: the node's extended resources counted as a cluster without HAMi counts them; for
    # machines without a HAMi binary, such as CI, and the ceiling docs/performance.md compares HAMi with).
    scheduler: Literal["hami", "kube-scheduler"] = "hami"

    @property
    def hami(self) -> bool:
        return self.scheduler == "hami"

    @property
    def scheduler_name(self) -> str:
        """The schedulerName of the lab's GPU pods."""
        return "hami-scheduler" if self.hami else "default-scheduler"

    def hami_flags(self) -> list[str]:
        return hami_client_flags(self.hami_kube_qps, self.hami_kube_burst, self.hami_log_verbosity)

    @field_validator("node_lock_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not DURATION.fullmatch(value):
            raise ValueError("must be a Go duration such as 2s or 500ms")
        return value


class LabConfig(ConfigModel):
    # The lab's wing (model/wings.py). docker: the lab in containers (kind, Kamaji, kindest/node workers). process:
    # every tenant as local processes from `make tools` (kwokctl's control plane, KWOK nodes, hami-scheduler).
    runtime: WingName = DEFAULT_WING
    # Process mode's workers: kwok (KWOK nodes: no kubelet, no container) or containers (real nodes: a container of
    # gpulab's node image per tenant, `make node-image`, with a real kubelet joined by kubeadm): docs/real-nodes.md.
    workers: Literal["kwok", "containers"] = "kwok"
    # The pod network of each tenant's nodes: calico (the Docker lab's default: its images are loaded onto the
    # kindest/node workers) or bridge (the CNI bridge plugin of gpulab's node images: real nodes, which can pull no
    # Calico image, and Docker-lab workers of gpulab's kind node image, `make lab-images`; one node per tenant, as the
    # bridge gives no routes between nodes). Unset: the runtime's own.
    cni: Literal["calico", "bridge"] | None = None
    management: Management = Management()
    # The Docker lab's charts, manifests, images, tools and plugins from this folder instead of the network
    # (`make cache` fills it): model/docker_lab/sources.py, docs/offline.md.
    source_cache: str | None = Field(default=None, min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f]+$")
    tenants: list[Tenant] = Field(min_length=1, max_length=MAX_TENANTS)
    scheduling: Scheduling = Scheduling()
    versions: Versions = Versions()

    @model_validator(mode="before")
    @classmethod
    def _hami_version_by_default(cls, data: object) -> object:
        """A tenant that names no HAMi release runs the default (model/hami_releases.py default_version): filled in
        before the tenants are read, so every reader sees one concrete version."""
        if not isinstance(data, dict) or not isinstance(data.get("tenants"), list):
            return data
        scheduling = data.get("scheduling")
        lab_hami = not isinstance(scheduling, dict) or scheduling.get("scheduler", "hami") == "hami"

        def default(tenant: dict) -> str:
            sharing = tenant.get("gpuSharing", tenant.get("gpu_sharing", "hami"))
            return default_version(lab_hami and sharing == "hami")

        tenants = [
            {**tenant, "hamiVersion": default(tenant)}
            if isinstance(tenant, dict) and not {"hamiVersion", "hami_version"} & tenant.keys()
            else tenant
            for tenant in data["tenants"]
        ]
        return {**data, "tenants": tenants}

    @model_validator(mode="after")
    def _across_tenants(self, info: ValidationInfo) -> LabConfig:
        self._dra_runtime()  # first: where a DRA tenant cannot run, the other keys' fixes would not help
        if self.runtime == "process":  # first: the docker-mode rules' fixes (use workerMode: ssh) would mislead
            self._process_runtime()
        elif self.scheduling.scheduler != "hami":
            fix = "is for runtime: process; the Docker lab runs HAMi's chart in every tenant: remove it"
            raise at("scheduling.scheduler", fix, self.scheduling.scheduler)
        elif self.workers != "kwok":
            raise at(
                "workers", "is for runtime: process; in the Docker lab each tenant's workerMode chooses", self.workers
            )
        if self.source_cache is not None and self.runtime == "process":
            fix = "is for the Docker lab; process mode takes nothing from outside (its programs are make tools')"
            raise at("sourceCache", fix, self.source_cache)
        if self.cni not in (None, self.pod_network):
            raise at("cni", self._cni_fix(), self.cni)
        if self.pod_network == "bridge" and not self.process_mode:
            self._docker_bridge()
        if not self.process_mode:
            self._docker_lab_hami()
        elif problems := real_node_plugin_problems(self):
            raise KeyedError(problems)
        kind_subnet = info.context.get("kind_subnet") if info.context else None
        problems = across_tenants(self.management, list(enumerate(self.tenants)), self.versions, kind_subnet)
        if self.runtime == "docker" and self.management.mode == "kind":
            problems += _management_node(self.versions)
        if problems:
            raise KeyedError(problems)
        return self

    def _docker_lab_hami(self) -> None:
        if problems := docker_lab_hami_problems(self):
            raise KeyedError(problems)

    def hami_release(self, tenant: Tenant) -> HamiRelease:
        """The HAMi release a tenant runs (its hamiVersion, filled in by runtime when the stack names none)."""
        return HAMI_RELEASES[tenant.hami_version]

    @property
    def hami_versions(self) -> tuple[str, ...]:
        """The HAMi releases the lab's tenants run, sorted (none when no tenant runs HAMi)."""
        return tuple(sorted({tenant.hami_version for tenant in self.tenants if self.runs_hami(tenant)}))

    def hami_chart(self, tenant: Tenant) -> HelmChart:
        """The HAMi chart the Docker lab installs in a tenant: versions.hami's repository and name, at the chart
        version of the tenant's release."""
        return self.versions.hami.model_copy(update={"version": self.hami_release(tenant).chart})

    def _dra_runtime(self) -> None:
        """A DRA tenant's claims are allocated by its own kube-scheduler. KWOK nodes need nothing more; process
        mode's real nodes run gpulab's DRA kubelet plugin, which make node-image puts in gpulab's node image. The
        Docker lab's workers run kind's node image (or are machines over SSH), which has no such plugin."""
        if self.runtime != "docker":
            return
        fix = "the Docker lab's workers (kindest/node, SSH machines) have no DRA kubelet plugin for simulated cards: "
        fix += "use runtime: process (workers: kwok or containers)"
        problems = [
            (f"tenants[{i}].gpuSharing", tenant.gpu_sharing, f"{fix}, or gpuSharing: hami")
            for i, tenant in enumerate(self.tenants)
            if tenant.gpu_sharing == "dra"
        ]
        if problems:
            raise KeyedError(problems)

    def _process_runtime(self) -> None:
        """Process mode has no containers and no machines: only what runs as local processes."""
        fix = "set runtime: docker for it, or remove it from this stack"
        if self.management.mode != "kind":
            raise at(
                "management.mode",
                f"is for a cluster of yours; runtime: process needs no management cluster; {fix}",
                self.management.mode,
            )
        problems: list[tuple[str, object, str]] = []
        for i, tenant in enumerate(self.tenants):
            if self.workers == "containers" and len(tenant.worker_node_names()) != 1:
                # The bridge CNI of a real node gives no routes between nodes (process_lab/node_containers.py).
                problems.append(
                    (
                        f"tenants[{i}].nodes",
                        tenant.worker_node_names(),
                        "workers: containers runs one node per tenant; declare the tenant's cards under gpus",
                    )
                )
            if tenant.worker_mode != "container":
                problems.append(
                    (f"tenants[{i}].workerMode", tenant.worker_mode, f"runtime: process runs KWOK nodes only; {fix}")
                )
            if tenant.gpu_mode != "mock":
                problems.append(
                    (f"tenants[{i}].gpuMode", tenant.gpu_mode, f"runtime: process simulates every card; {fix}")
                )
        carried = gpulab_node().workload_image
        uses_node_image = any(tenant.worker_image is None for tenant in self.tenants)
        if self.workers == "containers" and uses_node_image and self.versions.workload_image != carried:
            # A real node on the lab's --internal network can pull nothing: its workloads run the image gpulab's
            # node image carries (node-image/build.sh), never pulled (workload_pull_policy).
            problems.append(
                (
                    "versions.workloadImage",
                    self.versions.workload_image,
                    f"is not in gpulab's node image, and a real node cannot pull it (its network is --internal): "
                    f"use {carried}, or give the tenants a workerImage of your own that holds it",
                )
            )
        if problems:
            raise KeyedError(problems)

    @property
    def pod_network(self) -> str:
        """The CNI of the tenants' nodes: in the Docker lab Calico, or the bridge plugin where the stack asks for it;
        the bridge plugin on real nodes; KWOK nodes run no pod and need none ("none")."""
        if self.real_nodes:
            return "bridge"
        if self.process_mode:
            return "none"
        return self.cni or "calico"

    def _docker_bridge(self) -> None:
        """The bridge plugin in the Docker lab: one container node per tenant, of an image that carries it."""
        problems: list[tuple[str, object, str]] = []
        for i, tenant in enumerate(self.tenants):
            if tenant.worker_mode != "container":
                problems.append(
                    (f"tenants[{i}].workerMode", tenant.worker_mode, "cni: bridge is for node containers; use calico")
                )
                continue
            if len(tenant.worker_node_names()) != 1:
                problems.append(
                    (
                        f"tenants[{i}].nodes",
                        tenant.worker_node_names(),
                        "cni: bridge runs one node per tenant (it gives no routes between nodes); declare the "
                        "tenant's cards under gpus, or use calico",
                    )
                )
            image = self.worker_image(tenant) or ""
            if ImageRef.parse(image).name == KINDEST_NODE:
                key = f"tenants[{i}].workerImage" if tenant.worker_image else "versions.workerNodeImages"
                problems.append(
                    (
                        key,
                        image,
                        # No apostrophe: the message formatter cuts long quoted text (boundary/redact.py scrub).
                        "kindest/node has no CNI bridge plugin (kind images/base has host-local, loopback, ptp, "
                        f"portmap); use gpulab/kind-node:{tenant.kubernetes_version} (make lab-images) or cni: calico",
                    )
                )
        if problems:
            raise KeyedError(problems)

    def _cni_fix(self) -> str:
        if self.real_nodes:
            return (
                "real nodes run the CNI bridge plugin of gpulab's node image: Calico's images (quay.io/calico/cni, "
                "node, kube-controllers) are not in it, and a node on the lab's --internal network cannot pull them; "
                "use bridge"
            )
        return "KWOK nodes run no pod and need no pod network; remove it (workers: containers runs bridge)"

    def real_node_images(self, tenant: Tenant) -> list[str]:
        """The images a tenant's real node runs, in its containerd before the join (the lab's loader checks them and
        loads from the host's engine any a node lacks): the sandbox image of gpulab's node image, unless the tenant
        runs a node image of its own, and the lab's workload image."""
        own = [] if tenant.worker_image else [gpulab_node(tenant.kubernetes_version).sandbox_image]
        return [*own, self.versions.workload_image]

    @property
    def workload_pull_policy(self) -> str | None:
        """The imagePullPolicy of the lab's own workloads: Never on real nodes, whose images are all in their
        containerd beforehand (a missing one is ErrImageNeverPull, naming it, never a pull); else Kubernetes's
        default."""
        return "Never" if self.real_nodes else None

    def runs_hami(self, tenant: Tenant) -> bool:
        """Whether HAMi places the tenant's GPU pods: the lab's scheduler is HAMi and the tenant shares its cards
        through HAMi, not DRA."""
        return self.scheduling.hami and tenant.gpu_sharing == "hami"

    @property
    def wing(self) -> Wing:  # what the tools ask of the stack's lab (model/wings.py), never which wing it is
        return WINGS[self.runtime]

    @property
    def process_mode(self) -> bool:  # the config's own rules only (tests/test_layout.py)
        return self.runtime == "process"

    @property
    def real_nodes(self) -> bool:
        """Process mode with node containers: real kubelets joined to control planes of local processes."""
        return self.process_mode and self.workers == "containers"

    def worker_image(self, tenant: Tenant) -> str | None:
        """The node image of a tenant's containers: its own, else gpulab's node image for real nodes in process
        mode (`make node-image` tags it with its kubelet's version), else the pinned kindest/node."""
        if tenant.worker_image:
            return tenant.worker_image
        if self.real_nodes:
            return f"gpulab/node:{tenant.kubernetes_version}"
        return self.versions.worker_node_images.get(tenant.kubernetes_version)


# --- Rules between the lab's parts ---------------------------------------------------------------------


def across_tenants(
    management: Management | None,
    tenants: list[tuple[int, Tenant]],
    versions: Versions | None,
    kind_subnet: str | None = None,
) -> list[tuple[str, object, str]]:
    """Every problem between tenants, and between tenants and the rest of the config, keyed from the root.

    Takes the parts that validated (with their index in `tenants`), so that parse_config can report these
    problems together with field errors elsewhere; a part that is None is not checked against."""
    problems: list[tuple[str, object, str]] = []
    names = [tenant.name for _, tenant in tenants]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        problems.append(("tenants", NO_VALUE, f"duplicate names {duplicates}; every tenant needs its own name"))
    stems = [tenant.output_stem for _, tenant in tenants]
    clashing = sorted({stem for stem in stems if stems.count(stem) > 1})
    if clashing and not duplicates:
        problems.append(
            ("tenants", NO_VALUE, f"names {names} give clashing stack outputs {clashing}_*; rename one of them")
        )
    # One machine, one tenant, by identity (canonical address and port): a second join would find kubelet.conf
    # and report success on the first tenant's node, and destroying either tenant would reset it.
    seen: dict[tuple[str, int], str] = {}
    for i, tenant in tenants:
        for j, worker in enumerate(tenant.workers):
            if worker.machine in seen and seen[worker.machine] != tenant.name:
                problems.append(
                    (
                        f"tenants[{i}].workers[{j}].host",
                        worker.host,
                        f"is already a worker of tenant {seen[worker.machine]}; a machine can join one tenant only",
                    )
                )
            seen.setdefault(worker.machine, tenant.name)
    # Container workers share the Docker host: their names (and hostnames) must differ across tenants and from
    # the kind node.
    if management is not None:
        owner: dict[str, str] = {f"{management.name}-control-plane": "the management cluster"}
        for i, tenant in tenants:
            if tenant.worker_mode != "container":
                continue
            for node in tenant.declared_nodes:
                if node.name in owner:
                    # A container of `nodes` is named by its entry, the one container of `gpus` by the tenant.
                    key = f"tenants[{i}].nodes" if node.declared_in == "nodes" else f"tenants[{i}].name"
                    problems.append(
                        (
                            key,
                            NO_VALUE,
                            f"gives the container {node.name}, which {owner[node.name]} already uses; rename the "
                            "tenant or node",
                        )
                    )
                owner.setdefault(node.name, f"tenant {tenant.name}")
    if management is not None:
        problems += _against_management(management, tenants, kind_subnet)
    if versions is not None:
        problems += _against_versions(versions, tenants)
    return problems


def _against_management(
    management: Management, tenants: list[tuple[int, Tenant]], kind_subnet: str | None
) -> list[tuple[str, object, str]]:
    problems: list[tuple[str, object, str]] = []
    if management.mode == "existing":
        problems += [
            (
                f"tenants[{i}].workerMode",
                "container",
                "container workers live on the kind management cluster's Docker network; with management.mode "
                "existing use workerMode: ssh",
            )
            for i, tenant in tenants
            if tenant.worker_mode == "container"
        ]
    pools = list(zip(management.metallb_addresses, management.metallb_ranges(), strict=True))
    kind_network = ipaddress.ip_network(kind_subnet) if kind_subnet and management.mode == "kind" else None
    for i, tenant in tenants:
        for key, cidr in (("podCidr", tenant.pod_cidr), ("serviceCidr", tenant.service_cidr)):
            network = ipaddress.ip_network(cidr)
            for j, (address, (first, last)) in enumerate(pools):
                if ranges_overlap(first, last, network):
                    problems.append(
                        (
                            f"management.metallbAddresses[{j}]",
                            address,
                            f"overlaps tenants[{i}].{key} {cidr}: the tenant would route these addresses to its pods "
                            "or services; use addresses outside every tenant's ranges",
                        )
                    )
            if kind_network is not None and network.overlaps(kind_network):
                # The same check the program makes on the real network (network.metallb_range), made here
                # too so that `make plan` reports it with every other problem.
                problems.append(
                    (
                        f"tenants[{i}].{key}",
                        cidr,
                        f"overlaps the kind network {kind_network} (it would shadow the node addresses); pick a "
                        "range outside it, e.g. 10.244.0.0/16",
                    )
                )
    return problems


def _management_node(versions: Versions) -> list[tuple[str, object, str]]:
    """The kind node's Kubernetes must serve MutatingAdmissionPolicy v1 (GA from v1.36), which keeps Kamaji's
    control-plane pods from pulling (model/docker_lab/pull_policy.py). A tag that names no version (an image built
    here) is taken as it is: the API server refuses the policy then, at `pulumi up`."""
    image = versions.management_node_image
    try:
        major, minor, _ = parse_kubernetes_version(image_tag(image))
    except ValueError:
        return []
    if (major, minor) >= MINIMUM_KUBERNETES:
        return []
    return [
        (
            "versions.managementNodeImage",
            image,
            f"runs Kubernetes v{major}.{minor}, whose API server has no admissionregistration.k8s.io/v1 "
            "MutatingAdmissionPolicy (v1.36 and newer): gpulab binds one that keeps Kamaji's control-plane pods from "
            "pulling their images (Kamaji sets imagePullPolicy Always); use a kindest/node of v1.36 or newer, e.g. "
            "leave the pin of model/versions.py",
        )
    ]


def _against_versions(versions: Versions, tenants: list[tuple[int, Tenant]]) -> list[tuple[str, object, str]]:
    problems: list[tuple[str, object, str]] = []
    max_major, max_minor = versions.kamaji_max_minor()
    for i, tenant in tenants:
        major, minor, _ = parse_kubernetes_version(tenant.kubernetes_version)
        if (major, minor) > (max_major, max_minor):
            problems.append(
                (
                    f"tenants[{i}].kubernetesVersion",
                    tenant.kubernetes_version,
                    f"the pinned Kamaji supports up to {versions.kamaji_max_kubernetes}.x; pick "
                    f"{versions.kamaji_max_kubernetes}.x or lower (or pin a newer Kamaji in versions)",
                )
            )
            continue
        if tenant.worker_mode != "container":
            continue  # ssh workers bring their own kubelet; the remote check compares its version
        image = tenant.worker_image or versions.worker_node_images.get(tenant.kubernetes_version)
        if image is None:
            problems.append(
                (
                    f"tenants[{i}].kubernetesVersion",
                    tenant.kubernetes_version,
                    f"no kindest/node image is pinned for it; add versions.workerNodeImages."
                    f"{tenant.kubernetes_version} (with its digest) or set tenants[{i}].workerImage",
                )
            )
        elif image_tag(image) != tenant.kubernetes_version:
            problems.append(
                (
                    f"tenants[{i}].workerImage",
                    image,
                    f"its tag does not match kubernetesVersion {tenant.kubernetes_version}; use "
                    f"kindest/node:{tenant.kubernetes_version}@sha256:...",
                )
            )
    return problems
