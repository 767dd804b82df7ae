"""`python -m report [--stack dev] [--png reports/allocation.png]`: per-card GPU use of every tenant.

Reads the tenant kubeconfigs from the stack outputs (the Pulumi CLI), then each tenant's nodes and
pods with the Kubernetes Python client.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.stack import StackError, tenant_kubeconfigs
from report.model import tenant_report
from report.render import render_png, render_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default=None, help="Pulumi stack (default: $GPULAB_STACK or dev)")
    parser.add_argument("--png", type=Path, default=None, help="also save the chart to this PNG file")
    args = parser.parse_args(argv)
    try:
        kubeconfigs = tenant_kubeconfigs(args.stack)
    except StackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    from kubernetes import client

    from model.kube_client import api_client

    reports = []
    for tenant, kubeconfig in kubeconfigs.items():
        api = client.CoreV1Api(api_client(kubeconfig))  # the tenant's key stays in memory
        as_api_object = api.api_client.sanitize_for_serialization  # camelCase, as kubectl -o json shows
        nodes = [as_api_object(node) for node in api.list_node().items]
        pods = [as_api_object(pod) for pod in api.list_pod_for_all_namespaces().items]
        reports.append(tenant_report(tenant, nodes, pods))
    print(render_text(reports))
    if args.png:
        print(f"chart saved to {render_png(reports, args.png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
