"""What diagnose collects, every call bounded (runner.py), carrying on past whatever does not answer.

Everything collected stays in memory until __main__ writes it, redacted, into one archive. Secret
Kubernetes data is never asked for: no Secrets, no `cluster-info dump`. Kubeconfigs (secret stack
outputs) are read with `pulumi stack output --show-secrets --json` into memory, as model/stack.py
does, and handed to kubectl as 0600 files in a private directory under reports/ that __main__
removes on exit and on signals.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from diagnose import analyze, host_findings
from diagnose.analyze import Cluster, Finding
from diagnose.runner import Result, Runner
from model.catalog import totals
from model.config import LabConfig, Tenant
from model.config.hami import device_plugin
from model.names import DENY_POLICY, WARN_POLICY
from model.stack import make_up

PROJECT = Path(__file__).resolve().parent.parent

LOG_TAIL = 50
MAX_LOGGED_PODS = 15  # per cluster: the logs of this many not-ready pods
SECRET_OUTPUT = "[secret]"


@dataclass
class Collected:
    files: dict[str, str] = field(default_factory=dict)  # archive path -> raw text (redacted when written)
    calls: list[dict[str, Any]] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)  # values known to be secret, cut out wherever they appear
    findings: list[Finding] = field(default_factory=list)


def json_items(text: str) -> list[dict]:
    """`items` of a kubectl List (or the object itself), [] for anything unparsable."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if isinstance(data, dict):
        return [i for i in data.get("items", [data] if "kind" in data else []) if isinstance(i, dict)]
    return []


def json_lines(text: str) -> list[dict]:
    """`docker ... --format '{{json .}}'`: one object per line."""
    found = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            found.append(item)
    return found


def kubeconfig_secrets(text: str) -> set[str]:
    """The kubeconfig itself and each credential in it, to be cut out of anything collected."""
    found = {text.strip()} if text.strip() else set()
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return found
    for user in (config or {}).get("users") or [] if isinstance(config, dict) else []:
        for value in ((user or {}).get("user") or {}).values():
            if isinstance(value, str) and len(value) >= 8:
                found.add(value)
    return found


class Collector:
    def __init__(
        self, runner: Runner, stack: str, lab: LabConfig | None, private_dir: Path, request_timeout: float
    ) -> None:
        self.runner = runner
        self.stack = stack
        self.lab = lab
        self.private_dir = private_dir
        self.request_timeout = request_timeout
        self.out = Collected()

    # --- calls ---

    def call(self, path: str, argv: list[str], shown: list[str] | None = None, timeout: float | None = None) -> Result:
        result = self.runner.run(argv, timeout)
        self.out.calls.append(
            {
                "argv": shown or argv,
                "exit": result.returncode,
                "seconds": round(result.seconds, 2),
                "problem": result.problem,
                "file": path,
            }
        )
        if result.stdout:
            self.out.files[path] = result.stdout
        if not result.ok:
            self.out.files[path + ".error"] = f"{' '.join(shown or argv)}\n{result.why()}\n{result.stderr[-4000:]}"
        return result

    def kubectl(self, kubeconfig: Path, path: str, *args: str, timeout: float | None = None) -> Result:
        # kubectl caches API discovery under ~/.kube/cache unless told otherwise: keep it in the private dir.
        argv = ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(self.private_dir / "kube-cache")]
        argv += [f"--request-timeout={self.request_timeout:.0f}s", *args]
        shown = ["kubectl", "--kubeconfig", "<kubeconfig>", *argv[5:]]
        return self.call(path, argv, shown, timeout)

    def private_file(self, name: str, text: str) -> Path:
        path = self.private_dir / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        return path

    # --- sections ---

    def process_logs(self, folder: Path, limit: int = 256 * 1024) -> None:
        """Process mode: every log of the stack's processes (kwokctl's control plane, hami-scheduler, the
        bind-time role), the last `limit` bytes of each, under process/ in the archive (redacted like the rest)."""
        for log in sorted(folder.rglob("*.log")) if folder.is_dir() else []:
            with open(log, "rb") as handle:
                handle.seek(max(0, log.stat().st_size - limit))
                self.out.files[f"process/{log.relative_to(folder)}"] = handle.read().decode(errors="replace")

    def tools(self) -> dict[str, Any] | None:
        self.call("tools/kubectl-version.json", ["kubectl", "version", "--client", "-o", "json"])
        self.call("tools/pulumi-version.txt", ["pulumi", "version"])
        if self.lab and not (wing := self.lab.wing).docker_host:  # no Docker or kind: an error file would mislead
            where = (
                f"the lab is local processes (.state/process/{self.stack})"
                if wing.local_processes
                else "its nodes are on no Docker host here"
            )
            self.out.files["tools/runtime.txt"] = (
                f"{wing.name}: {where}; this runtime has no Docker or kind, so neither was asked\n"
            )
            return None
        self.call("tools/docker-version.json", ["docker", "version", "--format", "{{json .}}"])
        info = self.call("tools/docker-info.json", ["docker", "info", "--format", "{{json .}}"])
        self.call("tools/kind-version.txt", ["kind", "version"])
        docker_info = None
        if info.ok:
            try:
                docker_info = json.loads(info.stdout)
            except ValueError:
                docker_info = None
        if docker_info is not None:
            keep = (
                "ServerVersion",
                "OperatingSystem",
                "KernelVersion",
                "Architecture",
                "NCPU",
                "MemTotal",
                "Driver",
                "CgroupDriver",
                "CgroupVersion",
                "DockerRootDir",
                "Warnings",
                "SecurityOptions",
                "Containers",
                "ContainersRunning",
                "Images",
            )
            essentials = {key: docker_info.get(key) for key in keep if key in docker_info}
            self.out.files["tools/docker-info.json"] = json.dumps(essentials, indent=2)
        else:
            fix = "start Docker; `docker info` must work for your user"
            if info.problem.endswith("not found on PATH"):
                fix = "install Docker Engine (docs/setup.md: What you need)"
            self.out.findings.append(Finding("docker", "Docker daemon", "not answering", info.why(), fix))
        return docker_info

    def stack_outputs(self) -> dict[str, Any]:
        """Outputs with secrets (in memory only); the archive gets the plain ones (`[secret]`)."""
        base = ["pulumi", "stack", "output", "--json", "--stack", self.stack]
        self.call("stack/outputs.json", base)
        self.call("stack/config.json", ["pulumi", "config", "--json", "--stack", self.stack])
        result = self.runner.run([*base[:4], "--show-secrets", *base[4:]])
        self.out.calls.append(
            {"argv": [*base[:4], "--show-secrets", *base[4:]], "exit": result.returncode, "problem": result.problem}
        )
        outputs: dict[str, Any] = {}
        if result.ok:
            try:
                outputs = json.loads(result.stdout or "{}")
            except ValueError:
                outputs = {}
        plain = {}
        with contextlib.suppress(ValueError):
            plain = json.loads(self.out.files.get("stack/outputs.json", "{}"))
        for key, value in outputs.items():
            if isinstance(value, str) and (plain.get(key) == SECRET_OUTPUT or key.endswith("kubeconfig")):
                self.out.secrets |= kubeconfig_secrets(value)
        if not outputs:
            why = result.why() if not result.ok else "no outputs"
            fix = (
                f"`{make_up(self.stack)}` has not finished for this stack: the kubeconfigs come from its outputs; "
                "tenant checks are skipped"
            )
            if result.problem.endswith("not found on PATH"):
                fix = (
                    f"the pinned Pulumi CLI is in ./bin: run `{make_up(self.stack).replace('up', 'diagnose')}`, "
                    "which puts ./bin on PATH"
                    if (PROJECT / "bin" / "pulumi").is_file()
                    else "no Pulumi CLI on PATH or in ./bin, so `make up` never reached `pulumi up` in this folder: "
                    f"run `{make_up(self.stack)}`; its own output names what stops it (a preflight problem, a download)"
                )
            self.out.findings.append(Finding("stack", f"stack {self.stack}", "no lab outputs", why, fix))
        return outputs

    def kind_clusters(self) -> list[str] | None:
        result = self.call("management/kind-clusters.txt", ["kind", "get", "clusters"])
        if not result.ok:
            return None
        return [line.strip() for line in result.stdout.splitlines() if line.strip()]

    def cluster(self, name: str, kubeconfig_text: str, tenant: bool, dra: bool = False) -> Cluster:
        prefix = "management" if not tenant else f"tenants/{name}"
        self.out.secrets |= kubeconfig_secrets(kubeconfig_text)
        kubeconfig = self.private_file(re.sub(r"[^a-z0-9-]", "_", name) + ".kubeconfig", kubeconfig_text)
        cluster = Cluster(name)
        probe = self.kubectl(kubeconfig, f"{prefix}/readyz.txt", "get", "--raw", "/readyz")
        if not probe.ok:
            cluster.answered, cluster.error = False, probe.why()
            return cluster
        self.kubectl(kubeconfig, f"{prefix}/version.json", "version", "-o", "json")
        queries = {
            "nodes": ["get", "nodes", "-o", "json"],
            "pods": ["get", "pods", "-A", "-o", "json"],
            "events": ["get", "events", "-A", "-o", "json"],
            "workloads": ["get", "deployments,daemonsets,statefulsets", "-A", "-o", "json"],
            "webhooks": ["get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "json"],
            "endpointslices": ["get", "endpointslices", "-A", "-o", "json"],
        }
        if tenant:
            queries["admission"] = [
                "get",
                "validatingadmissionpolicies,validatingadmissionpolicybindings",
                "-o",
                "json",
            ]
            queries["quotas"] = ["get", "resourcequotas", "-A", "-o", "json"]
            if dra:  # a DRA tenant's cards (gpuSharing: dra)
                queries["resourceslices"] = ["get", "resourceslices", "-o", "json"]
        else:
            queries["tcps"] = ["get", "tenantcontrolplanes.kamaji.clastix.io", "-A", "-o", "json"]
            queries["datastores"] = ["get", "datastores.kamaji.clastix.io", "-o", "json"]
            queries["metallb"] = ["get", "ipaddresspools.metallb.io,l2advertisements.metallb.io", "-A", "-o", "json"]
            queries["services"] = ["get", "services", "-A", "-o", "json"]
        silent = 0  # calls in a row that got no answer: after two, the API is taken as not answering
        for key, args in queries.items():
            result = self.kubectl(kubeconfig, f"{prefix}/{key}.json", *args)
            cluster.objects[key] = json_items(result.stdout) if result.ok else []
            silent = silent + 1 if result.returncode is None else 0
            if silent >= 2:
                cluster.answered, cluster.error = False, f"answered /readyz, then stopped answering ({result.why()})"
                return cluster
        self._logs(cluster, kubeconfig, prefix)
        return cluster

    def _logs(self, cluster: Cluster, kubeconfig: Path, prefix: str) -> None:
        """Last log lines of the containers of not-ready pods (and of the previous run after a restart)."""
        logged = 0
        for pod in cluster.items("pods"):
            if analyze.pod_ready(pod) or logged >= MAX_LOGGED_PODS:
                continue
            logged += 1
            meta = pod.get("metadata") or {}
            status = pod.get("status") or {}
            for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                # Nothing to read from a ready container, or from one that never ran (image pull).
                if cs.get("ready") or ("waiting" in (cs.get("state") or {}) and not cs.get("restartCount")):
                    continue
                base = [
                    "logs",
                    "-n",
                    meta.get("namespace", ""),
                    meta.get("name", ""),
                    "-c",
                    cs.get("name", ""),
                    f"--tail={LOG_TAIL}",
                ]
                key = f"{meta.get('namespace')}/{meta.get('name')}/{cs.get('name')}"
                runs = [("", base)]
                if cs.get("restartCount"):
                    runs.append(("/previous", [*base, "--previous"]))
                for suffix, args in runs:
                    result = self.kubectl(
                        kubeconfig, f"{prefix}/logs/{key.replace('/', '_')}{suffix.replace('/', '.')}.log", *args
                    )
                    if result.ok:
                        cluster.logs[key + suffix] = result.stdout

    def docker(self, expected: list[str], network: str) -> list[Finding]:
        """gpulab's containers (the kind node, tenant workers) and its network."""
        selectors = [("docker/containers-workers.jsonl", "label=gpulab.io/tenant")]
        if self.lab is not None and self.lab.management.mode == "kind":
            kind_label = f"label=io.x-k8s.kind.cluster={self.lab.management.name}"
            selectors.insert(0, ("docker/containers-kind.jsonl", kind_label))
        containers: list[dict] = []
        for path, selector in selectors:
            result = self.call(path, ["docker", "ps", "-a", "--filter", selector, "--format", "{{json .}}"])
            if not result.ok:
                return []  # the daemon does not answer: the Docker finding says so, nothing to conclude here
            containers += json_lines(result.stdout)
        inspect = self.call("docker/network.json", ["docker", "network", "inspect", network])
        network_found = inspect.ok if inspect.returncode is not None else None
        return host_findings.docker_findings(containers, expected, network, network_found)


def tenant_expectations(lab: LabConfig, tenant_name: str) -> dict[str, Any]:
    tenant = next(t for t in lab.tenants if t.name == tenant_name)
    # HAMi's simulated cards: its register annotation and the nodes' extended resources (a DRA tenant has neither:
    # its cards are ResourceSlices).
    mock = tenant.gpu_mode == "mock" and tenant.gpu_sharing == "hami"
    dra = tenant.gpu_sharing == "dra"
    return {
        "gpu_node": tenant.gpu_node_name(),
        "mock": mock,
        "expected_capacity": totals(tenant.cards()) if mock else None,
        # A DRA tenant has no admission policy (its rules are on pods' nvidia.com limits): its slices instead.
        "policies": [] if dra else [DENY_POLICY, WARN_POLICY],
        "dra_nodes": tuple(node.name for node in tenant.gpu_nodes()) if dra else (),
        "namespaces": tuple(tenant.namespaces),
        "wing": lab.wing,
        "pod_network": lab.pod_network,
        "cards_from": cards_from(lab, tenant),
    }


def cards_from(lab: LabConfig, tenant: Tenant) -> str:
    """What puts a HAMi tenant's cards on its nodes (cluster_findings.CARD_FIXES)."""
    if lab.wing.system_workloads:  # a device plugin's DaemonSet in the tenant (the Docker lab)
        return "plugin-daemonset" if device_plugin(lab, tenant) == "gpulab" else "docker-mock"
    return "plugin-unit" if lab.real_nodes and lab.runs_hami(tenant) else "inventory"


def duration_seconds(text: str) -> float:
    """`2s`, `500ms`, `5m` (the config's DURATION shapes)."""
    match = re.fullmatch(r"([0-9]+)(ms|s|m)", text)
    if not match:
        return 300.0
    value, unit = int(match.group(1)), match.group(2)
    return value / 1000 if unit == "ms" else value * (60 if unit == "m" else 1)


def read_sysctls(proc: Path) -> dict[str, int]:
    """Host kernel settings, read-only, where the Docker daemon runs on this machine."""
    found = {}
    keys = ("fs.inotify.max_user_instances", "fs.inotify.max_user_watches", "net.netfilter.nf_conntrack_max")
    for key in (*keys, "net.bridge.bridge-nf-call-iptables"):  # the last: missing without br_netfilter
        try:
            found[key] = int((proc / "sys" / key.replace(".", "/")).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return found
