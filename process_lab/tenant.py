"""One tenant of the process lab: control plane, admission, namespaces and quotas, GPU nodes, HAMi.

The objects are the Docker lab's own (components.gpu_admission.policy_objects,
components.tenant_namespaces.tenant_objects, model.catalog), applied here with the real kubectl.
"""

from __future__ import annotations

import json
from pathlib import Path

from components.gpu_admission import policy_objects
from components.tenant_namespaces import tenant_objects
from model.config import LabConfig, Tenant
from process_lab.commands import ProcessLabError, free_port
from process_lab.control_plane import ControlPlane
from process_lab.device_plugin import BindTimeRole
from process_lab.gpu_nodes import node_object, node_status
from process_lab.hami import HamiScheduler, make_tls, scheduler_config, webhook_object


class TenantLab:
    def __init__(self, tenant: Tenant, lab: LabConfig, bin_dir: Path, folder: Path, hami_binary: Path | None) -> None:
        self.tenant, self.lab, self.folder, self.hami_binary = tenant, lab, folder, hami_binary
        self.control_plane = ControlPlane(f"gpulab-{tenant.name}", bin_dir, folder / "kwok")
        self.ports = (free_port(), free_port())  # HAMi's HTTPS and metrics, fixed in kube-scheduler's config
        self.hami = HamiScheduler(hami_binary, folder, *self.ports) if hami_binary else None
        self.bind_time = BindTimeRole(self.control_plane) if hami_binary else None
        self.renewals = 0

    def up(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        sched_config = None
        if self.hami:
            self.tls = make_tls(self.folder / "tls")
            sched_config = self.folder / "kube-scheduler.yaml"
            sched_config.write_text(scheduler_config(self.hami.port))
        self.control_plane.create(sched_config)
        if self.hami:
            self.control_plane.apply([webhook_object(self.hami.port, self.tls[0].read_bytes())])
            self.bind_time.start()
        self._tenant_up()

    def _tenant_up(self) -> None:
        """The tenant's objects, then HAMi, then the GPU nodes (so that HAMi takes them in on their add
        event, within about 2 s, instead of on its 15 s tick: HamiScheduler.wait_ready)."""
        nodes = self.tenant.gpu_nodes()
        all_cards = [card for node in nodes for card in node.cards]
        namespaces, quotas, inventory = tenant_objects(self.tenant, self.lab, all_cards, nodes[0].name)
        self.control_plane.apply([*policy_objects(self.tenant), *namespaces, *quotas.values(), inventory])
        if self.hami:
            ca_crt, crt, key = self.tls
            self.hami.start(self.control_plane.kubeconfig, self.lab, self.tenant.split_count, ca_crt, crt, key)
            self.hami.wait_ready()
        # With their capacity from the start: HAMi's node-add event takes in only a node whose allocatable
        # nvidia.com/gpu is above 0, and it has no node-update handler (pkg/scheduler/scheduler.go), so a
        # capacity patched in afterwards waits for its 15 s tick. A Node's create keeps status (as the
        # kubelet registers); the status patch then only makes sure.
        self.control_plane.apply([{**node_object(node.name, node.cards), **node_status(node.cards)} for node in nodes])
        for node in nodes:
            status = json.dumps(node_status(node.cards))
            self.control_plane.kubectl("patch", "node", node.name, "--subresource=status", "--type=merge", "-p", status)
        if self.hami:
            self.hami.wait_for_nodes([node.name for node in nodes])

    def renew(self, tenant: Tenant, lab: LabConfig) -> None:
        """The same control plane for another configuration of this tenant (same name): its pods, GPU nodes
        and quotas deleted, a fresh HAMi (no in-memory usage left) with its own log, then as in `up`."""
        if tenant.name != self.tenant.name:
            raise ProcessLabError(f"renew keeps the tenant's name ({self.tenant.name}), not {tenant.name}")
        if self.hami:
            self.hami.stop()
        kubectl = self.control_plane.kubectl
        for namespace in self.tenant.namespaces:
            kubectl("delete", "pods", "--all", "-n", namespace, "--force", "--grace-period=0", timeout=60)
            kubectl("delete", "resourcequotas", "--all", "-n", namespace)
        kubectl("delete", "nodes", "--all", timeout=60)
        self.tenant, self.lab = tenant, lab
        self.renewals += 1
        if self.hami_binary:
            self.hami = HamiScheduler(self.hami_binary, self.folder / f"hami-{self.renewals}", *self.ports)
            self.hami.folder.mkdir(parents=True, exist_ok=True)
        self._tenant_up()

    def down(self) -> None:
        """Everything this tenant started, in reverse; each step runs even when an earlier one failed."""
        try:
            if self.bind_time:
                self.bind_time.stop()
            if self.hami:
                self.hami.stop()
        finally:
            self.control_plane.delete()
