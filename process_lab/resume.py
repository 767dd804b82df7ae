"""Start again, on their own data, the control planes of a process-mode stack whose processes stopped.

`make up STACK=NAME` runs this before `pulumi up`: a process killed by hand, by the OOM killer or by a reboot
leaves its tenant's folder, etcd's data included, under .state/process/NAME/<tenant>/. The Pulumi engine
configures a tenant's Kubernetes provider from the state before it reads anything, and pulumi-kubernetes
marks a cluster that does not answer then as unreachable for the whole run (provider.go, Configure:
clusterUnreachable; with deleteUnreachable a refresh drops every object of it from the state). So the
API servers must answer before `pulumi up` starts; the providers' own refresh then finds them running (and
still starts HAMi and anything else stopped). A tenant whose data is gone is left to `pulumi up`, which says
so and makes it anew. One line per tenant started; nothing for a lab that runs or does not exist.
Usage: python -m process_lab.resume STACK (exit 0; 1 when a control plane does not come back).
"""

from __future__ import annotations

import sys
from pathlib import Path

from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane
from process_lab.preflight import bin_dir

ROOT = Path(__file__).resolve().parents[1]


def stopped_control_planes(stack_folder: Path, bin_dir: Path) -> list[tuple[str, ControlPlane]]:
    """(tenant, control plane) for every tenant folder whose cluster has its data and a stopped component."""
    found = []
    for clusters in sorted(stack_folder.glob("*/kwok/clusters")):
        tenant = clusters.parent.parent.name
        for cluster in sorted(path for path in clusters.iterdir() if path.is_dir()):
            control_plane = ControlPlane(cluster.name, bin_dir, clusters.parent)
            if control_plane.has_data() and control_plane.stopped_components():
                found.append((tenant, control_plane))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m process_lab.resume STACK", file=sys.stderr)
        return 2
    failed = 0
    for tenant, control_plane in stopped_control_planes(ROOT / ".state" / "process" / argv[0], bin_dir()):
        try:
            started = control_plane.start()
        except ProcessLabError as error:
            print(f"[gpulab] tenant {tenant}: its control plane did not start again: {error}", file=sys.stderr)
            failed = 1
            continue
        print(f"[gpulab] tenant {tenant}: started {', '.join(started)} again on its data", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
