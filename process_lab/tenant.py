"""One tenant of the process lab: control plane, admission, namespaces and quotas, GPU nodes, HAMi.

The objects are the Docker lab's own (components.gpu_admission.policy_objects,
components.tenant_namespaces.tenant_objects, model.catalog), applied here with the real kubectl.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from components.gpu_admission import policy_objects
from components.tenant_namespaces import tenant_objects
from model.config import LabConfig, Tenant
from process_lab.control_plane import ControlPlane
from process_lab.device_plugin import BindTimeRole
from process_lab.gpu_nodes import node_object, node_status
from process_lab.hami import HamiScheduler, make_tls, scheduler_config, webhook_object


def free_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's choice), for HAMi's HTTPS server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TenantLab:
    def __init__(self, tenant: Tenant, lab: LabConfig, bin_dir: Path, folder: Path, hami_binary: Path | None) -> None:
        self.tenant, self.lab, self.folder = tenant, lab, folder
        self.control_plane = ControlPlane(f"gpulab-{tenant.name}", bin_dir, folder / "kwok")
        self.hami = HamiScheduler(hami_binary, folder, free_port(), free_port()) if hami_binary else None
        self.bind_time = BindTimeRole(self.control_plane) if hami_binary else None

    def up(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        sched_config = None
        if self.hami:
            ca_crt, crt, key = make_tls(self.folder / "tls")
            sched_config = self.folder / "kube-scheduler.yaml"
            sched_config.write_text(scheduler_config(self.hami.port))
        self.control_plane.create(sched_config)
        nodes = self.tenant.gpu_nodes()
        all_cards = [card for node in nodes for card in node.cards]
        namespaces, quotas, inventory = tenant_objects(self.tenant, self.lab, all_cards, nodes[0].name)
        objects = [*policy_objects(self.tenant), *namespaces, *quotas.values(), inventory]
        if self.hami:
            objects.append(webhook_object(self.hami.port, ca_crt.read_bytes()))
        self.control_plane.apply(objects)
        # HAMi first, then the nodes: it takes a node in on the node's add event when its allocatable
        # nvidia.com/gpu is already above 0 (about 2 s); otherwise only on its 15 s registration tick.
        if self.hami:
            self.hami.start(self.control_plane.kubeconfig, self.lab, self.tenant.split_count, ca_crt, crt, key)
            self.bind_time.start()
        # A Node keeps the status it is created with (kubelets create theirs so), so HAMi's add event already
        # sees the cards; the status patch covers a node that existed before (apply leaves status alone).
        self.control_plane.apply([{**node_object(node.name, node.cards), **node_status(node.cards)} for node in nodes])
        for node in nodes:
            status = json.dumps(node_status(node.cards))
            self.control_plane.kubectl("patch", "node", node.name, "--subresource=status", "--type=merge", "-p", status)
        if self.hami:
            self.hami.wait_for_nodes([node.name for node in nodes])

    def down(self) -> None:
        """Everything this tenant started, in reverse; each step runs even when an earlier one failed."""
        try:
            if self.bind_time:
                self.bind_time.stop()
            if self.hami:
                self.hami.stop()
        finally:
            self.control_plane.delete()
