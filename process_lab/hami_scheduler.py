"""HAMi's scheduler extender and webhook (`hami-scheduler`, HAMi's cmd/scheduler) as a local process.

The wiring follows HAMi v2.8.3's chart (charts/hami/templates/scheduler/): one binary serves the extender (`/filter`,
`/bind`) and the mutating webhook (`/webhook`) over TLS on `--http_bind`; the tenant's kube-scheduler gets a
`hami-scheduler` profile and an extender at that address, with every HAMi resource `ignoredByScheduler`
(`templates/scheduler/configmapnew.yaml`); the webhook is a MutatingWebhookConfiguration by URL with the
chart's settings (`templates/scheduler/webhook.yaml`). TLS is made per tenant with openssl: a CA, and a
server certificate for 127.0.0.1 that the API server checks against the webhook's caBundle.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE
from model.config import LabConfig, Tenant
from model.config.lab import hami_client_flags
from model.hami_releases import DEFAULT_VERSION as DEFAULT_HAMI_VERSION
from process_lab import hami_binary
from process_lab.commands import ProcessLabError, free_port, lasting, run
from process_lab.control_plane import ControlPlane

SCHEDULER_NAME = "hami-scheduler"
MANAGED_RESOURCES = (
    GPU_RESOURCE,
    GPUMEM_RESOURCE,
    GPUCORES_RESOURCE,
    GPUMEM_PERCENTAGE_RESOURCE,
    "nvidia.com/priority",
)
# HAMi v2.8.3 pkg/scheduler/scheduler.go: logged when the registration loop takes a node's devices in.
NODE_ADDED = re.compile(r'"Node device added" nodeName="([^"]+)"')


def find_hami_scheduler(bin_dir: Path, version: str = DEFAULT_HAMI_VERSION) -> Path | None:
    """HAMi `version`'s scheduler binary (process_lab/hami_binary.py says where it is looked for); None when there
    is none (the Go module proxy refuses HAMi, so `make tools` cannot build it: tools/README.md)."""
    return hami_binary.find(bin_dir, version).path


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a 127.0.0.1 server certificate (EC P-256, 2 days): (ca.crt, tls.crt, tls.key)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    ca_key, ca_crt = folder / "ca.key", folder / "ca.crt"
    key, csr, crt, ext = folder / "tls.key", folder / "tls.csr", folder / "tls.crt", folder / "san.ext"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    env = dict(os.environ)
    run(
        [
            "openssl",
            "req",
            "-x509",
            *ec,
            "-keyout",
            ca_key,
            "-out",
            ca_crt,
            "-days",
            "2",
            "-subj",
            "/CN=gpulab-hami-ca",
        ],
        env=env,
        what="making HAMi's CA (openssl)",
    )
    run(
        ["openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        env=env,
        what="making HAMi's server key (openssl)",
    )
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            ca_crt,
            "-CAkey",
            ca_key,
            "-CAcreateserial",
            "-out",
            crt,
            "-days",
            "2",
            "-extfile",
            ext,
        ],
        env=env,
        what="signing HAMi's server certificate (openssl)",
    )
    return ca_crt, crt, key


POD_MAX_BACKOFF_SECONDS = 1  # scheduler_config says why


def scheduler_config(port: int) -> str:
    """kube-scheduler's config: the default profile, and `hami-scheduler` with HAMi as extender. The extender
    is interested only in pods that ask a managed resource, so other pods are scheduled as usual.

    A pod's backoff stays at 1 s (POD_MAX_BACKOFF_SECONDS; kube-scheduler's default doubles it from 1 s to 10 s,
    k8s.io/kube-scheduler config/v1 types.go PodMaxBackoffSeconds): HAMi refuses a bind while another pod's bind
    holds the node's lock (HAMi v2.8.3 pkg/scheduler/scheduler.go Bind, pkg/util/nodelock), which the lab's
    bind-time role releases within milliseconds, so a pod refused so is worth trying again at once. Binpack packs
    every pod onto the same node: 1.5 pods/s at the default, 3.3 at 1 s (docs/performance.md). The cost: a pod that
    keeps failing is tried every second, not every ten."""
    managed = "\n".join(f"  - {{name: {name}, ignoredByScheduler: true}}" for name in MANAGED_RESOURCES)
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: {POD_MAX_BACKOFF_SECONDS}
profiles:
- schedulerName: default-scheduler
- schedulerName: {SCHEDULER_NAME}
extenders:
- urlPrefix: https://127.0.0.1:{port}
  filterVerb: filter
  bindVerb: bind
  enableHTTPS: true
  tlsConfig:
    insecure: true
  nodeCacheCapable: true
  weight: 1
  httpTimeout: 30s
  managedResources:
{managed}
"""


def webhook_object(port: int, ca_pem: bytes) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "hami-webhook"},
        "webhooks": [
            {
                "name": "vgpu.hami.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/webhook",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1beta1"],
                "reinvocationPolicy": "Never",
                "objectSelector": {
                    "matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]
                },
            }
        ],
    }


def device_config(split_count: int) -> str:
    """The chart's generated `nvidia:` device config (templates/scheduler/device-configmap.yaml); the scheduler
    reads the cards themselves from each node's register annotation."""
    values = {
        "resourceCountName": GPU_RESOURCE,
        "resourceMemoryName": GPUMEM_RESOURCE,
        "resourceMemoryPercentageName": GPUMEM_PERCENTAGE_RESOURCE,
        "resourceCoreName": GPUCORES_RESOURCE,
        "resourcePriorityName": "nvidia.com/priority",
        "overwriteEnv": False,
        "defaultMemory": 0,
        "defaultCores": 0,
        "defaultGPUNum": 1,
        "deviceSplitCount": split_count,
        "deviceMemoryScaling": 1,
        "deviceCoreScaling": 1,
    }
    return "nvidia:\n" + "".join(f"  {key}: {json.dumps(value)}\n" for key, value in values.items())


@dataclass(frozen=True)
class HamiSettings:
    """What a tenant's hami-scheduler is started with from the stack's config (its `scheduling` and the tenant's
    split count): one record for the process lab's tenants and the dynamic resource's props alike."""

    node_scheduler_policy: str
    gpu_scheduler_policy: str
    node_lock_timeout: str
    split_count: int
    kube_qps: float  # the defaults are model/config/lab.py Scheduling's
    kube_burst: int
    log_verbosity: int

    @classmethod
    def of(cls, lab: LabConfig, tenant: Tenant) -> HamiSettings:
        scheduling = lab.scheduling
        return cls(
            scheduling.node_scheduler_policy,
            scheduling.gpu_scheduler_policy,
            scheduling.node_lock_timeout,
            tenant.split_count,
            scheduling.hami_kube_qps,
            scheduling.hami_kube_burst,
            scheduling.hami_log_verbosity,
        )

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> HamiSettings:
        # An older state has no rate or verbosity: it ran at client-go's defaults and -v=4.
        return cls(
            str(props["node_scheduler_policy"]),
            str(props["gpu_scheduler_policy"]),
            str(props["node_lock_timeout"]),
            int(props["split_count"]),
            float(props.get("kube_qps", 5)),
            int(props.get("kube_burst", 10)),
            int(props.get("log_verbosity", 4)),
        )

    def props(self) -> dict[str, Any]:
        return asdict(self)


def wait_for_registered(log: Path, nodes: list[str], timeout: float = 60, exited: Any = None) -> None:
    """Until hami-scheduler's log says it took every GPU node's cards in (its registration loop runs on node add
    and every 15 s); `exited` () -> error or None ends the wait early when the process is gone."""
    deadline = time.monotonic() + timeout
    while True:
        if exited is not None and (error := exited()) is not None:
            raise error
        seen = set(NODE_ADDED.findall(log.read_text(errors="replace"))) if log.exists() else set()
        waiting = [node for node in nodes if node not in seen]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise ProcessLabError(
                f"hami-scheduler did not register GPU node(s) {', '.join(waiting)} within {timeout:.0f} s "
                f"(waited for 'Node device added' in {log})"
            )
        time.sleep(0.2)


class HamiScheduler:
    """One tenant's hami-scheduler process, its log in `folder`."""

    def __init__(self, binary: Path, folder: Path, port: int, metrics_port: int) -> None:
        self.binary, self.folder, self.port, self.metrics_port = binary, folder, port, metrics_port
        self.log = folder / "hami-scheduler.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, kubeconfig: Path, settings: HamiSettings, ca_crt: Path, crt: Path, key: Path) -> None:
        config = self.folder / "device-config.yaml"
        config.write_text(device_config(settings.split_count))
        argv = [
            str(self.binary),
            f"--http_bind=127.0.0.1:{self.port}",
            # Its default is :9395 on every interface: a second tenant could not start, and the lab listens
            # on loopback only.
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--cert_file={crt}",
            f"--key_file={key}",
            f"--scheduler-name={SCHEDULER_NAME}",
            f"--node-scheduler-policy={settings.node_scheduler_policy}",
            f"--gpu-scheduler-policy={settings.gpu_scheduler_policy}",
            f"--device-config-file={config}",
            "--leader-elect=false",
            # As the Docker lab's mock mode; on KWOK nodes BindTimeRole, on real nodes gpulab-hami-plugin's Allocate
            # releases the lock well before it expires.
            f"--node-lock-timeout={settings.node_lock_timeout}",
            *hami_client_flags(settings.kube_qps, settings.kube_burst, settings.log_verbosity),
        ]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                env={**lasting(os.environ), "KUBECONFIG": str(kubeconfig)},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _exited(self) -> ProcessLabError | None:
        if self.process is not None and self.process.poll() is not None:
            tail = self.log.read_text(errors="replace").splitlines()[-3:]
            return ProcessLabError(f"hami-scheduler exited ({self.process.returncode}): {' '.join(tail)[:600]}")
        return None

    def wait_ready(self, timeout: float = 30) -> None:
        """Until HAMi serves HTTPS: its cmd/scheduler/main.go listens only after its informers synced and
        it counts as started. A node added before then is taken in on the next 15 s registration tick,
        not on its add event (pkg/scheduler/scheduler.go RegisterFromNodeAnnotations skips the
        notification while not started), so create GPU nodes after this."""
        deadline = time.monotonic() + timeout
        while True:
            if (exited := self._exited()) is not None:
                raise exited
            with socket.socket() as probe:
                probe.settimeout(1)
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if time.monotonic() > deadline:
                raise ProcessLabError(f"hami-scheduler did not listen on 127.0.0.1:{self.port} within {timeout:.0f} s")
            time.sleep(0.1)

    def wait_for_nodes(self, nodes: list[str], timeout: float = 60) -> None:
        """Until HAMi has taken every GPU node's cards in, or its process exits."""
        wait_for_registered(self.log, nodes, timeout, exited=self._exited)

    def stop(self, timeout: float = 10) -> None:
        """TERM, then KILL after `timeout`: the process and anything it started (its own session)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, 15)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout)


def prepare(folder: Path) -> tuple[Path, int, int]:
    """Before a tenant's kube-scheduler starts: HAMi's TLS in `folder`/tls and the scheduler's configuration
    naming HAMi's extender on a free port. Returns (the configuration, HAMi's port, its metrics port)."""
    port, metrics_port = free_port(), free_port()
    make_tls(folder / "tls")
    config = folder / "kube-scheduler.yaml"
    config.write_text(scheduler_config(port))
    return config, port, metrics_port


def serve(hami: HamiScheduler, control_plane: ControlPlane, settings: HamiSettings, tls: Path) -> None:
    """HAMi's webhook registered by URL in the tenant, then hami-scheduler started on the tenant's API server
    with the TLS that `prepare` made in `tls`, until it serves."""
    control_plane.apply([webhook_object(hami.port, (tls / "ca.crt").read_bytes())])
    hami.start(control_plane.kubeconfig, settings, tls / "ca.crt", tls / "tls.crt", tls / "tls.key")
    hami.wait_ready()
