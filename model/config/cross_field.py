"""Cross-field rules: between tenants, and between tenants and the management cluster or the pinned
versions. Also run on the parts that validated when a field failed, so every problem shows at once."""

from __future__ import annotations

import ipaddress
import typing

from model.config.errors import NO_VALUE
from model.network import ranges_overlap
from model.versions import Versions, image_tag, parse_kubernetes_version

if typing.TYPE_CHECKING:
    from model.config.lab import Management
    from model.config.tenant import Tenant


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
            for node in tenant.worker_node_names():
                if node in owner:
                    key = f"tenants[{i}].nodes" if tenant.nodes is not None else f"tenants[{i}].name"
                    problems.append(
                        (
                            key,
                            NO_VALUE,
                            f"gives the container {node}, which {owner[node]} already uses; rename the tenant or node",
                        )
                    )
                owner.setdefault(node, f"tenant {tenant.name}")
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
