"""One tenant of the process lab, for the real tier's tests and the benchmarks: control plane, admission,
namespaces and quotas, GPU nodes, HAMi, in one process's lifetime.

It drives the same building blocks as process mode's dynamic resources (components/process/):
hami_scheduler.prepare and serve, gpu_nodes.apply_nodes, and the objects of model/ (admission_policy,
tenant_objects), applied with the real kubectl. Only the order differs where a test needs it: GPU nodes carry
their cards from their create, so HAMi takes them in on their add event.
"""

from __future__ import annotations

from pathlib import Path

from model.config import LabConfig, Tenant
from model.kube_objects.admission_policy import policy_objects
from model.kube_objects.tenant_objects import tenant_objects
from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane
from process_lab.device_plugin import BindTimeRole
from process_lab.gpu_nodes import apply_nodes
from process_lab.hami_scheduler import HamiScheduler, HamiSettings, prepare, serve


class TenantLab:
    """Without `hami_binary`, kube-scheduler alone places GPU pods (as scheduling.scheduler: kube-scheduler), with
    `scheduler_config` if given (a KubeSchedulerConfiguration file), else kwokctl's defaults."""

    def __init__(
        self,
        tenant: Tenant,
        lab: LabConfig,
        bin_dir: Path,
        folder: Path,
        hami_binary: Path | None,
        scheduler_config: Path | None = None,
    ) -> None:
        if hami_binary and scheduler_config:
            raise ProcessLabError("a scheduler configuration is for a tenant without HAMi: HAMi's names its extender")
        self.tenant, self.lab, self.folder, self.hami_binary = tenant, lab, folder, hami_binary
        self.scheduler_config = scheduler_config
        self.control_plane = ControlPlane(f"gpulab-{tenant.name}", bin_dir, folder / "kwok")
        self.hami: HamiScheduler | None = None  # made by up(), on the ports it chooses
        self.bind_time = BindTimeRole(self.control_plane) if hami_binary else None
        self.renewals = 0

    def up(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        scheduler_config = self.scheduler_config
        if self.hami_binary:
            # HAMi's HTTPS and metrics ports, fixed in kube-scheduler's configuration.
            scheduler_config, *self.ports = prepare(self.folder)
            self.hami = HamiScheduler(self.hami_binary, self.folder, *self.ports)
        self.control_plane.create(scheduler_config)
        if self.bind_time:
            self.bind_time.start()
        self._tenant_up()

    def _tenant_up(self) -> None:
        """The tenant's objects, then HAMi, then the GPU nodes (so that HAMi takes them in on their add
        event, within about 2 s, instead of on its 15 s tick: HamiScheduler.wait_ready)."""
        nodes = self.tenant.gpu_nodes()
        all_cards = [card for node in nodes for card in node.cards]
        namespaces, quotas, inventory = tenant_objects(self.tenant, self.lab, all_cards, nodes[0].name)
        # Without HAMi no rule asks GPU pods for HAMi's schedulerName (its webhook is not there to set it).
        policies = policy_objects(self.tenant, hami=self.hami_binary is not None)
        self.control_plane.apply([*policies, *namespaces, *quotas.values(), inventory])
        if self.hami:
            serve(self.hami, self.control_plane, HamiSettings.of(self.lab, self.tenant), self.folder / "tls")
        # With their capacity from the start: HAMi's node-add event takes in only a node whose allocatable
        # nvidia.com/gpu is above 0, and it has no node-update handler (pkg/scheduler/scheduler.go), so a
        # capacity patched in afterwards waits for its 15 s tick.
        apply_nodes(self.control_plane, {node.name: node.cards for node in nodes})
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
