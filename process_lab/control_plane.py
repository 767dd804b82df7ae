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

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from process_lab.commands import ProcessLabError, free_port, run

# kwokctl reads `kube-apiserver --version` to choose the API server's flags: `make tools` sets it.
PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "etcd", "kwokctl", "kubectl")
LOOPBACK_ONLY = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
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
    """Loopback only, on ports chosen free now."""
    return LOOPBACK_ONLY + "".join(f"  {option}: {free_port()}\n" for option in PORT_OPTIONS)


def missing_programs(bin_dir: Path) -> list[str]:
    return [name for name in PROGRAMS if not os.access(bin_dir / name, os.X_OK)]


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
        return {
            **os.environ,
            "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}",
            "KWOK_WORKDIR": str(self.workdir),
            "KUBECACHEDIR": str(self.workdir / "kube-cache"),
        }

    @property
    def cluster_dir(self) -> Path:
        return self.workdir / "clusters" / self.name

    def create(self, scheduler_config: Path | None = None, timeout: float = 120) -> None:
        missing = missing_programs(self.bin_dir)
        if missing:
            raise ProcessLabError(f"{', '.join(missing)} not in {self.bin_dir}: run `make tools` first")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / f"{self.name}.kwokctl.yaml"
        config.write_text(kwokctl_configuration())
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
            detach=True,
        )

    def delete(self, timeout: float = 60) -> None:
        """Stop every process of the cluster and remove its folder and kubeconfig; a cluster already gone is fine."""
        if self.cluster_dir.exists():
            argv = [self.bin_dir / "kwokctl", "delete", "cluster", "--name", self.name, "--kubeconfig", self.kubeconfig]
            run(argv, env=self.env, what=f"deleting control plane {self.name}", timeout=timeout)
        self.kubeconfig.unlink(missing_ok=True)
        (self.workdir / f"{self.name}.kwokctl.yaml").unlink(missing_ok=True)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 30):
        argv = [self.bin_dir / "kubectl", "--kubeconfig", self.kubeconfig, "--request-timeout", f"{int(timeout)}s"]
        return run(
            [*argv, *args],
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
