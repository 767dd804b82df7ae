"""A tenant's control plane as local processes: `kwokctl create cluster --runtime binary` with ./bin's programs.

kwokctl starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok-controller on ports
it picks free, each with its log under the cluster's folder in KWOK_WORKDIR, and writes an admin kubeconfig.
It binds them all to 0.0.0.0 unless its configuration says otherwise (KwokctlConfiguration
`options.bindAddress`, default "0.0.0.0": kwok pkg/apis/config/v1alpha1/kwokctl_configuration_types.go), so
every cluster is created with a configuration that says 127.0.0.1 (tests/real checks every listening
socket). Its binary runtime takes a local path for every program (kwokctl create cluster --help: a value
that is not an http URL is a file), so nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from boundary.kube_client import self_contained
from hami.annotations import ALLOCATING, BIND_PHASE
from process_lab.commands import ProcessLabError, free_port, is_ours, lasting, run, zombie

# kwokctl reads `kube-apiserver --version` to choose the API server's flags: `make tools` sets it.
PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "etcd", "kwokctl", "kubectl")
# Loopback only; and without the request limits a shared API server needs, as KWOK's own option for simulated
# clusters sets them (kwok v0.8.0 pkg/kwokctl/components: kube-apiserver with --max-requests-inflight=0,
# --max-mutating-requests-inflight=0 and --enable-priority-and-fairness=false, kube-controller-manager with
# --kube-api-qps=5000 --kube-api-burst=10000, kube-scheduler with the same). A tenant's API server has one user's
# few clients, all gpulab's, so nothing needs its fairness; the client limits held a DRA tenant's claim pods at 10
# pods/s, and 42 without them (docs/performance.md, 2026-12-05). kube-scheduler ignores the flags beside a
# configuration file (kubernetes v1.36.4 cmd/kube-scheduler/app/options/options.go: ApplyDeprecated only without
# --config), so a HAMi tenant's keeps its file's rate (50 QPS / burst 100 by default; 5000 gained it nothing).
LAB_OPTIONS = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
  disableQPSLimits: true
"""
# Every port of the binary runtime (KwokctlConfiguration options, kwok v0.8.0
# pkg/apis/config/v1alpha1/kwokctl_configuration_types.go). Left to kwokctl, two clusters created at the
# same moment get the same ports: it takes the highest free one below 32767 for each.
PORT_OPTIONS = (
    "kubeApiserverPort",
    "etcdPort",
    "etcdPeerPort",
    "kubeControllerManagerPort",
    "kubeSchedulerPort",
    "kwokControllerPort",
)


def kwokctl_configuration() -> str:
    """The lab's options (LAB_OPTIONS), on ports chosen free now."""
    return LAB_OPTIONS + "".join(f"  {option}: {free_port()}\n" for option in PORT_OPTIONS)


# What a kubelet's `kubeadm join` needs of a control plane beyond kwokctl's defaults, as a Kamaji
# TenantControlPlane gives it (Kamaji internal/builders/controlplane/deployment.go): kwok v0.8.0
# KwokctlConfiguration componentsPatches (pkg/apis/config/v1alpha1/kwokctl_configuration_types.go).
JOINABLE_PATCHES = {
    "kube-apiserver": [
        ("enable-bootstrap-token-auth", "true"),  # kubeadm's TLS bootstrap authenticates with a bootstrap token
        ("kubelet-preferred-address-types", "InternalIP"),  # logs and exec reach the kubelet by its address
        # ... and authenticate to it (kwokctl sets no client certificate for kubelets: KWOK nodes have none).
        ("kubelet-client-certificate", "{pki}/admin.crt"),
        ("kubelet-client-key", "{pki}/admin.key"),
    ],
    "kube-controller-manager": [
        ("cluster-signing-cert-file", "{pki}/ca.crt"),
        ("cluster-signing-key-file", "{pki}/ca.key"),
        ("use-service-account-credentials", "true"),
    ],
    # kwokctl runs it with --manage-all-nodes=true: real nodes are their kubelets', only KWOK's own are its
    # (pkg/kwokctl/components/kwok_controller.go; process_lab/gpu_nodes.py annotates KWOK nodes so).
    "kwok-controller": [
        ("manage-all-nodes", "false"),
        ("manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake"),
    ],
}


# What every cluster's kwok-controller needs: a KWOK node's pod that HAMi bound and no device plugin has allocated
# yet (`hami.io/bind-phase=allocating`) stays Pending. A kubelet starts a pod's containers only after its device
# manager's Allocate (kubernetes pkg/kubelet/cm/devicemanager/manager.go), and HAMi's device plugin marks the pod and
# releases the node lock inside Allocate (HAMi v2.8.3 pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go,
# util.go PodAllocationTrySuccess). Without it KWOK runs the pod at its bind (kwok v0.8.0 kustomize/stage/pod/fast,
# pod-ready) with the lock still held, and the next GPU pod's bind fails on it (`node ... has been locked within`,
# a warning and kube-scheduler's back-off). The flag is kwok v0.8.0's (pkg/kwok/cmd/root.go; deprecated for the
# Stage API, whose stages would replace every default one); BindTimeRole writes `success` after the release.
#
# And no leader election: one instance each, so no lease to lose. kube-controller-manager and kube-scheduler exit
# when they cannot renew theirs within its renew deadline (client-go tools/leaderelection, 10 s by default), which an
# API server starved of CPU misses (seen: 11 of 20 tenants' kube-controller-managers gone after `make up` of 20
# tenants beside other work, and nothing started them again). `--leader-elect` is honoured with or without a
# scheduler configuration file (kubernetes v1.36.4 cmd/kube-scheduler/app/options/options.go ApplyLeaderElectionTo).
KWOK_PATCHES = {
    "kwok-controller": [("disregard-status-with-annotation-selector", f"{BIND_PHASE}={ALLOCATING}")],
    "kube-controller-manager": [("leader-elect", "false")],
    "kube-scheduler": [("leader-elect", "false")],
}
# Of the patches' arguments, those kwokctl v0.8.0 itself passes (pkg/kwokctl/components/kwok_controller.go).
KWOKCTL_SETS = {"manage-all-nodes"}


# kube-controller-manager's controllers. A joinable cluster adds kubeadm's own set (cmd/kubeadm/app/phases/controlplane/
# manifests.go): the bootstrap signer signs cluster-info for discovery, the token cleaner deletes expired tokens
# (csrsigning, on by default, signs the kubelet's certificate).
JOINABLE_CONTROLLERS = ("bootstrapsigner", "tokencleaner")
# And the lab's tenants run without the controller that writes each ValidatingAdmissionPolicy's `status.typeChecking`
# (kubernetes v1.36.4 pkg/controller/validatingadmissionpolicystatus): it type-checks every expression of every
# policy against every kind the policy matches, which for gpulab's two policies was half the CPU a tenant's
# controller manager spent in its first 45 s (5.3 of 10.4 s; most of the rest its garbage collection), measured with
# its pprof endpoint on 2026-12-04 (docs/process-lab.md). The status is advice only: the API server compiles and
# enforces a policy whatever it says (k8s.io/apiserver pkg/admission/plugin/policy/validating). The judge cluster of
# tests/real keeps it, to read what the API server's type checker says of gpulab's policies.
POLICY_STATUS_CONTROLLER = "validatingadmissionpolicy-status-controller"


def controllers(joinable: bool, policy_status: bool) -> str:
    """kube-controller-manager's --controllers: every default one, kubeadm's for a joinable cluster, and the policy
    status controller only when asked for."""
    names = ["*", *(JOINABLE_CONTROLLERS if joinable else ())]
    if not policy_status:
        names.append(f"-{POLICY_STATUS_CONTROLLER}")
    return ",".join(names)


def components_patches(patches: dict[str, list[tuple[str, str]]], pki: Path) -> str:
    """kwokctl's componentsPatches for `patches`: one entry a component, its arguments in order."""
    lines = ["componentsPatches:"]
    for component, args in patches.items():
        lines += [f"- name: {component}", "  extraArgs:"]
        for key, value in args:
            # `override` replaces an argument kwokctl sets and drops one it does not: only for those it sets.
            override = "true" if key in KWOKCTL_SETS else "false"
            lines += [f"  - key: {key}", f"    value: {json.dumps(value.format(pki=pki))}", f"    override: {override}"]
    return "\n".join(lines) + "\n"


def cluster_configuration(pki: Path, address: str | None = None, policy_status: bool = False) -> str:
    """What to append under kwokctl_configuration's `options:`: KWOK_PATCHES and the controllers for every cluster
    and, with `address`, what makes it joinable by real kubelets reaching its API server there (its serving
    certificate names it). `policy_status`: run the policy status controller (POLICY_STATUS_CONTROLLER)."""
    patches = {component: list(args) for component, args in KWOK_PATCHES.items()}
    patches["kube-controller-manager"].append(("controllers", controllers(address is not None, policy_status)))
    if address is None:
        return components_patches(patches, pki)
    for component, args in JOINABLE_PATCHES.items():
        patches.setdefault(component, []).extend(args)
    return f"  kubeApiserverCertSANs: [{json.dumps(address)}]\n" + components_patches(patches, pki)


# The processes of a binary-runtime cluster, each with a pid file `pids/<name>.pid` in the cluster's folder
# (kwok v0.8.0 pkg/kwokctl/runtime/exec.go, ForkExec / ForkExecIsRunning).
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")
# The Go runtime's garbage-collection target for the control plane's programs (GOGC, Go's runtime package: the heap
# may grow GOGC % over the live heap before a collection; default 100). At 25 a tenant's programs took 416-438 MB
# PSS instead of 531-575, for a start about 3 s slower (benchmarks/process_lab.py, docs/performance.md).
GO_GC = "25"
# Leader-elected in clusters made before KWOK_PATCHES turned it off: they exit when the lease is lost.
LEASE_HOLDERS = ("kube-controller-manager", "kube-scheduler")


def missing_programs(bin_dir: Path) -> list[str]:
    return [name for name in PROGRAMS if not os.access(bin_dir / name, os.X_OK)]


def lost_data(tenant: str, control_plane: ControlPlane, recorded: bool) -> str | None:
    """One line for a control plane the state records whose data is gone (its folder removed, etcd's files
    deleted): it is about to be made anew, empty. None when there is nothing lost (a first run, or data kept)."""
    if not recorded or control_plane.has_data():
        return None
    return (
        f"tenant {tenant}: its control plane's data is gone ({control_plane.data_dir} has no etcd member): it is "
        f"made anew and empty; every object made in {tenant} since it was created (by kubectl or anyone) is lost"
    )


@dataclass
class ControlPlane:
    """One tenant's API server and its companions, under `workdir` (KWOK_WORKDIR)."""

    name: str
    bin_dir: Path
    workdir: Path
    kubeconfig: Path = field(init=False)

    def __post_init__(self) -> None:
        self.kubeconfig = self.workdir / f"{self.name}.kubeconfig"

    @property
    def env(self) -> dict[str, str]:
        # kubectl (which kwokctl also calls) from ./bin; kwokctl's state and kubectl's discovery cache in our
        # folder, never ~/.kwok or ~/.kube/cache.
        # GOGC reaches every program kwokctl starts (they inherit its environment); one the user set is kept.
        return {
            "GOGC": GO_GC,
            **lasting(os.environ),  # kwokctl's programs outlive the run
            "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}",
            "KWOK_WORKDIR": str(self.workdir),
            "KUBECACHEDIR": str(self.workdir / "kube-cache"),
        }

    @property
    def cluster_dir(self) -> Path:
        return self.workdir / "clusters" / self.name

    def create(
        self,
        scheduler_config: Path | None = None,
        timeout: float = 120,
        bind_address: str | None = None,
        policy_status: bool = False,
    ) -> None:
        """kwokctl's cluster on loopback; with `bind_address`, joinable by real kubelets that reach its API server
        there (through process_lab.forward, started by the caller); with `policy_status`, its controller manager
        writes each admission policy's type checking (POLICY_STATUS_CONTROLLER)."""
        missing = missing_programs(self.bin_dir)
        if missing:
            raise ProcessLabError(f"{', '.join(missing)} not in {self.bin_dir}: run `make tools` first")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / f"{self.name}.kwokctl.yaml"
        pki = self.cluster_dir / "pki"
        config.write_text(kwokctl_configuration() + cluster_configuration(pki, bind_address, policy_status))
        argv: list[str | Path] = [self.bin_dir / "kwokctl", "-c", config, "create", "cluster", "--name", self.name]
        argv += ["--runtime", "binary", "--kubeconfig", self.kubeconfig, "--wait", f"{int(timeout)}s"]
        for flag, program in (
            ("--kube-apiserver-binary", "kube-apiserver"),
            ("--kube-controller-manager-binary", "kube-controller-manager"),
            ("--kube-scheduler-binary", "kube-scheduler"),
            ("--kwok-controller-binary", "kwok"),
            ("--etcd-binary", "etcd"),
        ):
            argv += [flag, self.bin_dir / program]
        if scheduler_config is not None:
            argv += ["--kube-scheduler-config", scheduler_config]
        run(
            argv,
            env=self.env,
            what=f"starting control plane {self.name} (kwokctl create cluster)",
            timeout=timeout + 30,
        )
        self.wait_controllers(timeout)

    def wait_controllers(self, timeout: float) -> list[str]:
        """Until the controller manager is at work: its service-account controller gave namespace `default` its
        account, which every Pod create needs, and every component runs.

        kwokctl starts the components together, and kube-controller-manager exits when the API server is not
        healthy within its own fixed wait (kubernetes v1.36.4 cmd/kube-controller-manager/app/controllermanager.go,
        WaitForAPIServer: "failed to wait for apiserver being healthy"), which a loaded host misses: seen on 2 of 20
        tenants of one `make up STACK=many`, whose quotas then never got a status. A component that stopped so is
        started again on the cluster's data. Returns the components it started again."""
        deadline = time.monotonic() + timeout
        restarted: list[str] = []
        while time.monotonic() < deadline:
            if self.stopped_components():
                restarted += self._start_stopped(max(deadline - time.monotonic(), 1))
                continue
            try:
                account = self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False, timeout=10)
            except ProcessLabError:  # no answer within its bound: a loaded host, the case this wait is for
                account = None
            if account is not None and account.returncode == 0:
                return restarted
            time.sleep(0.5)
        again = f" (started again: {', '.join(restarted)})" if restarted else ""
        raise ProcessLabError(
            f"control plane {self.name}: kube-controller-manager gave namespace default no service account within "
            f"{timeout:.0f} s{again}; its log: {self.cluster_dir / 'logs' / 'kube-controller-manager.log'}"
        )

    @property
    def data_dir(self) -> Path:
        """etcd's data: every object of the tenant (kwok pkg/kwokctl/runtime/binary/cluster.go, EtcdDataDirName)."""
        return self.cluster_dir / "etcd"

    def has_data(self) -> bool:
        """Whether the cluster can be started again on its own objects: its configuration (kwok.yaml, which
        `kwokctl start cluster` reads) and etcd's member folder (snapshots and WAL) are there."""
        return (self.cluster_dir / "kwok.yaml").is_file() and (self.data_dir / "member" / "wal").is_dir()

    def stopped_components(self) -> list[str]:
        """The components that do not run: no pid file, or one naming a process that is gone, a zombie, or
        another program (a pid the kernel handed out again after a reboot)."""
        return [name for name in COMPONENTS if self._running_pid(name) is None]

    def _running_pid(self, component: str) -> int | None:
        try:
            pid = int((self.cluster_dir / "pids" / f"{component}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if is_ours(pid, str(self.cluster_dir)) and not zombie(pid) else None

    def start(self, timeout: float = 120) -> list[str]:
        """Start the stopped components again on the cluster's own data, until the controller manager is at work
        (`wait_controllers`); the ones it started."""
        deadline = time.monotonic() + timeout
        started = self._start_stopped(timeout)
        return started + self.wait_controllers(max(deadline - time.monotonic(), 1))

    def _start_stopped(self, timeout: float) -> list[str]:
        """Start the stopped components again on the cluster's own data; the ones it started.

        `kwokctl start cluster` starts every component whose pid file names a process that answers signal 0
        (kwok pkg/kwokctl/runtime/binary/cluster_operation.go, startComponent; pkg/utils/exec/cmd_other.go,
        isRunning). A killed process whose parent never reaps it stays a zombie and answers signal 0, and after a
        reboot a pid file may name someone else's process: kwokctl would start nothing. So the pid files of
        stopped components go first; the running ones are left alone."""
        stopped = self.stopped_components()
        if {"etcd", "kube-apiserver"} & set(stopped):
            # kube-controller-manager and kube-scheduler hold a leader lease in the API server and exit once they
            # cannot renew it (client-go leaderelection: renew deadline 10 s), which may be after this start:
            # restarted with the API server, they take the lease afresh (seen: kube-controller-manager gone
            # seconds after kube-apiserver came back).
            for component in LEASE_HOLDERS:
                if component not in stopped:
                    self._stop(component)
                    stopped.append(component)
        for component in stopped:
            (self.cluster_dir / "pids" / f"{component}.pid").unlink(missing_ok=True)
        if stopped:
            run(
                [self.bin_dir / "kwokctl", "start", "cluster", "--name", self.name],
                env=self.env,
                what=f"starting control plane {self.name} again on its data (kwokctl start cluster)",
                timeout=timeout + 30,
            )
        self.wait_ready(timeout)
        return stopped

    def _stop(self, component: str, timeout: float = 10) -> None:
        """TERM to a running component of this cluster (its pid file, checked against its command line), then
        KILL once `timeout` has passed; until it is gone or a zombie."""
        pid = self._running_pid(component)
        if pid is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not is_ours(pid, str(self.cluster_dir)) or zombie(pid):
                    return
                time.sleep(0.05)
        raise ProcessLabError(f"{component} of {self.name} (pid {pid}) did not stop within {2 * timeout:.0f} s")

    def answers(self) -> bool:
        """Whether the API server answers /readyz now (false when its processes are gone: killed by hand, or a
        reboot)."""
        if not self.kubeconfig.exists():
            return False
        try:
            return self.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
        except ProcessLabError:  # no answer within the bound
            return False

    def wait_ready(self, timeout: float) -> None:
        """Poll /readyz until the API server says ready (its etcd, informers and post-start hooks), or fail
        naming what was awaited and the last answer."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                answer = self.kubectl("get", "--raw", "/readyz", check=False, timeout=10)
            except ProcessLabError as error:
                last = str(error)
            else:
                if answer.returncode == 0:
                    return
                last = (answer.stderr or answer.stdout).strip()[-300:]
            time.sleep(0.5)
        raise ProcessLabError(f"control plane {self.name}: /readyz not ready within {timeout:.0f} s; last: {last}")

    def delete(self, timeout: float = 60) -> None:
        """Stop every process of the cluster and remove its folder and kubeconfig; a cluster already gone is fine."""
        if self.cluster_dir.exists():
            argv = [self.bin_dir / "kwokctl", "delete", "cluster", "--name", self.name, "--kubeconfig", self.kubeconfig]
            run(argv, env=self.env, what=f"deleting control plane {self.name}", timeout=timeout)
        self.kubeconfig.unlink(missing_ok=True)
        (self.workdir / f"{self.name}.kwokctl.yaml").unlink(missing_ok=True)

    def admin_kubeconfig(self) -> str:
        """The admin kubeconfig kwokctl wrote, self-contained (certificates inline): a user's copy works anywhere,
        and after `make down` removed the folder. Secret: kept in memory."""
        return self_contained(self.kubeconfig.read_text(), self.kubeconfig.parent)

    def kubectl_argv(self, timeout: float) -> list[str | Path]:
        """kubectl on this cluster, every request given up after `timeout` seconds (a watch's stream too)."""
        # Whole seconds, rounded up: kubectl reads 0 as no timeout at all.
        seconds = max(1, math.ceil(timeout))
        return [self.bin_dir / "kubectl", "--kubeconfig", self.kubeconfig, "--request-timeout", f"{seconds}s"]

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 30):
        return run(
            [*self.kubectl_argv(timeout), *args],
            env=self.env,
            what=f"kubectl {args[0]} on {self.name}",
            stdin=stdin,
            check=check,
            timeout=timeout + 5,
        )

    def apply(self, objects: list[dict]) -> None:
        """Server-side apply, as the Pulumi provider does (field manager `gpulab`)."""
        document = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        self.kubectl("apply", "--server-side", "--field-manager=gpulab", "-f", "-", stdin=document)

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)
