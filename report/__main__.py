"""`python -m report [--stack dev] [--png reports/allocation.png]`: per-card GPU use of every tenant.

Reads the tenant kubeconfigs from the stack outputs (the Pulumi CLI), then each tenant's nodes and
pods with the Kubernetes Python client; each tenant's HAMi release (its hamiVersion) from the stack's config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.stack import StackError, stack_config, tenant_kubeconfigs
from report.dra import dra_report
from report.model import tenant_report
from report.render import render_png, render_text


def dra_objects(api_client: object) -> tuple[list[dict], list[dict]]:
    """The tenant's ResourceSlices and ResourceClaims; none where the API serves no resource.k8s.io/v1."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api_client)
    try:
        slices = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
        claims = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceclaims")["items"]
    except ApiException as error:
        if error.status == 404:
            return [], []
        raise
    return slices, claims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default=None, help="Pulumi stack (default: $GPULAB_STACK or dev)")
    parser.add_argument("--png", type=Path, default=None, help="also save the chart to this PNG file")
    args = parser.parse_args(argv)
    try:
        kubeconfigs = tenant_kubeconfigs(args.stack)
        # Each tenant's pods are counted as its HAMi release counts them (report/model.py).
        releases = {tenant.name: tenant.hami_version for tenant in stack_config(args.stack).tenants}
    except StackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    from kubernetes import client

    from boundary.kube_client import api_client

    reports = []
    for tenant, kubeconfig in kubeconfigs.items():
        api = client.CoreV1Api(api_client(kubeconfig))  # the tenant's key stays in memory
        as_api_object = api.api_client.sanitize_for_serialization  # camelCase, as kubectl -o json shows
        pods = [as_api_object(pod) for pod in api.list_pod_for_all_namespaces().items]
        shared = dra_report(tenant, *dra_objects(api.api_client), pods)
        if shared is not None:  # a DRA tenant (gpuSharing: dra): its slices and claims, not HAMi's annotations
            reports.append(shared)
            continue
        nodes = [as_api_object(node) for node in api.list_node().items]
        reports.append(tenant_report(tenant, nodes, pods, releases[tenant]))
    print(render_text(reports))
    if args.png:
        print(f"chart saved to {render_png(reports, args.png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
