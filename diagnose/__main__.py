"""`make diagnose` (python -m diagnose --stack NAME): why the lab is not ready.

Writes reports/diagnose-<stack>-<time>.tar.gz (redacted) and prints one entry per not-ready
component: its reason, last event or log line, likely fix and, where known, the cause by name.
Exit 0: everything checked is ready; 1: something is not (or could not be reached); 2: bad usage.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from diagnose import cluster_findings, host_findings
from diagnose.analyze import Finding
from diagnose.collect import Collected, Collector, duration_seconds, read_sysctls, tenant_expectations
from diagnose.redact import redact, scrub_text
from diagnose.runner import STOP_SIGNALS, Runner
from model.stack import ROOT, StackError, stack_config, stack_name
from model.stack_file import stack_problem
from model.wings import DEFAULT_WING, WINGS
from process_lab.preflight import bin_dir


def _remove_stale(reports: Path) -> None:
    """Private directories of runs killed with KILL (their pid is gone): nobody else removes them."""
    for path in reports.glob(".diagnose-*"):
        match = re.match(r"\.diagnose-([0-9]+)-", path.name)
        if not match or not path.is_dir():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue


def collect(args: argparse.Namespace, runner: Runner, stack: str, private: Path) -> Collected:
    lab = None
    config_problem = ""
    try:
        lab = stack_config(stack, args.project_dir)
    except StackError as error:
        config_problem = str(error)
    collector = Collector(runner, stack, lab, private, request_timeout=max(1.0, args.call_timeout - 2))
    out = collector.out
    if config_problem:
        out.findings.append(Finding("stack", f"stack {stack}", "config not readable", config_problem, "fix it"))
    stack_file = args.project_dir / f"Pulumi.{stack}.yaml"
    if stack_file.is_file():
        out.files[f"stack/Pulumi.{stack}.yaml"] = stack_file.read_text(errors="replace")

    docker_info = collector.tools()
    outputs = collector.stack_outputs()

    wing = lab.wing if lab is not None else WINGS[DEFAULT_WING]  # process mode: no kind, Docker or host sysctls
    kind_mode = (lab is None or lab.management.mode == "kind") and wing.kind_management
    name = lab.management.name if lab else "gpulab"
    clusters = collector.kind_clusters() if kind_mode else None
    out.findings += host_findings.kind_findings(clusters, name)
    gone = clusters is not None and name not in clusters

    management_kubeconfig = outputs.get("management_kubeconfig")
    if not management_kubeconfig and kind_mode and not gone:
        result = runner.run(["kind", "get", "kubeconfig", "--name", name])
        out.calls.append({"argv": ["kind", "get", "kubeconfig", "--name", name], "exit": result.returncode})
        management_kubeconfig = result.stdout if result.ok else None
    if management_kubeconfig and not gone:
        installs = {key: lab.management.installs(key) if lab else True for key in ("cert_manager", "metallb", "kamaji")}
        management = collector.cluster("management", management_kubeconfig, tenant=False)
        out.findings += cluster_findings.management_cluster_findings(management, installs)

    if lab is not None:
        lock_timeout = duration_seconds(lab.scheduling.node_lock_timeout)
        for tenant in lab.tenants:
            kubeconfig = outputs.get(f"{tenant.output_stem}_kubeconfig")
            if not kubeconfig:
                if outputs:  # with none at all, the stack finding says so once
                    out.findings.append(
                        Finding(
                            f"tenant {tenant.name}",
                            "kubeconfig",
                            f"no {tenant.output_stem}_kubeconfig stack output yet: its own checks are skipped",
                            "",
                            cluster_findings.unfinished_tenant_fix(stack, tenant.name, wing),
                        )
                    )
                continue
            cluster = collector.cluster(tenant.name, kubeconfig, tenant=True, dra=tenant.gpu_sharing == "dra")
            out.findings += cluster_findings.tenant_findings(
                cluster,
                **tenant_expectations(lab, tenant.name),
                stack=stack,
                now=host_findings.now_utc(),
                lock_timeout_seconds=lock_timeout,
            )
        expected = [f"{name}-control-plane"] if kind_mode else []
        expected += [n for t in lab.tenants if t.worker_mode == "container" for n in t.worker_node_names()]
        if docker_info is not None and wing.docker_host:
            out.findings += collector.docker(expected, lab.management.network_name)
        if wing.local_processes:
            state = args.project_dir / ".state" / "process" / stack
            out.findings += host_findings.process_findings(state, stack, bin_dir())
            collector.process_logs(state)
        if not wing.docker_host:  # the host's kernel settings are no node's
            return out

    # Host kernel settings: /proc/sys is the Docker host's only when the daemon runs here.
    local = os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")
    proc = Path(os.environ.get("GPULAB_DIAGNOSE_PROC", "/proc"))  # tests point it at a fake /proc
    sysctls = read_sysctls(proc) if local else {}
    cpus = int((docker_info or {}).get("NCPU") or os.cpu_count() or 1)
    out.findings += host_findings.kernel_findings(docker_info, sysctls, cpus)
    out.files["host/sysctls.json"] = json.dumps(sysctls, indent=2)
    return out


def _safe(path: str, text: str, known: set[str]) -> str:
    """A file of the archive as it may be written, whatever its name: parsed and redacted field by field where
    it is JSON as a whole or YAML (a .yaml file, or an API object in YAML); otherwise scrubbed as text, and
    each line that is JSON (a structured log, `docker ps --format json`) redacted field by field as well. An
    API that answers with objects where text was expected (/readyz) gets the redaction of `kubectl get -o json`."""
    try:
        parsed = json.loads(text)
    except ValueError:
        pass
    else:
        if isinstance(parsed, dict | list):
            return json.dumps(redact(parsed, known), indent=2)
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        document = None
    # A .yaml file, or API objects in YAML whatever the file's name (/readyz answering with a Pod's manifest).
    if path.endswith(".yaml") or (isinstance(document, dict) and {"kind", "apiVersion"} & set(document)):
        return yaml.safe_dump(redact(document, known), sort_keys=False)
    lines = []
    for line in scrub_text(text, known).split("\n"):  # as a whole first: a PEM block spans lines
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        lines.append(json.dumps(redact(parsed, known)) if isinstance(parsed, dict | list) else line)
    return "\n".join(lines)


def finding_lines(finding: Finding, known: set[str]) -> list[str]:
    cause = f"  [{finding.cause}]" if finding.cause else ""
    lines = [f"NOT READY  {finding.where}: {finding.component}: {finding.reason}{cause}"]
    if finding.last:
        last = finding.last if len(finding.last) <= 300 else f"{finding.last[:120]} ... {finding.last[-170:]}"
        lines.append(f"    last: {last}")
    if finding.fix:
        lines.append(f"    fix:  {finding.fix}")
    return [scrub_text(line, known) for line in lines]


MAX_SHOWN = 30  # findings printed; all of them are in the archive's findings.json


def summary(stack: str, findings: list[Finding], archive: str, known: set[str]) -> str:
    lines = []
    for finding in findings[:MAX_SHOWN]:
        lines += finding_lines(finding, known)
    if len(findings) > MAX_SHOWN:
        lines.append(f"... and {len(findings) - MAX_SHOWN} more: findings.json in the archive")
    causes: dict[str, int] = {}
    for finding in findings:
        if finding.cause:
            causes[finding.cause] = causes.get(finding.cause, 0) + 1
    if findings:
        lines.append(f"[gpulab] diagnose {stack}: {len(findings)} not ready")
        if causes:
            lines.append("[gpulab] known causes: " + "; ".join(f"{c} ({n})" for c, n in causes.items()))
    else:
        lines.append(f"[gpulab] diagnose {stack}: everything checked is ready")
    lines.append(f"[gpulab] archive: {archive}")
    return "\n".join(lines) + "\n"


def write_archive(path: Path, collected: Collected, text: str) -> Path:
    base = path.name.removesuffix(".tar.gz")
    written = {
        **collected.files,
        "summary.txt": text,
        "findings.json": json.dumps([f.__dict__ for f in collected.findings]),
        "calls.json": json.dumps(collected.calls),
    }
    files = {name: _safe(name, content, collected.secrets) for name, content in written.items()}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, content in sorted(files.items()):
            data = content.encode()
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m diagnose", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", help="stack name (default: $GPULAB_STACK or dev)")
    parser.add_argument("--reports", default=str(ROOT / "reports"), help="where the archive goes (reports/)")
    parser.add_argument("--call-timeout", type=float, default=20.0, help="seconds for one call (20)")
    parser.add_argument("--kill-after", type=float, default=5.0, help="seconds from TERM to KILL (5)")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run (600)")
    parser.add_argument("--project-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)  # the tests' own stacks
    args = parser.parse_args(argv)
    stack = stack_name(args.stack)
    if problem := stack_problem(stack, args.project_dir):
        print(f"[gpulab] {problem}", file=sys.stderr)
        return 2
    if min(args.call_timeout, args.kill_after, args.budget) <= 0:
        print("[gpulab] diagnose: --call-timeout, --kill-after and --budget must be positive", file=sys.stderr)
        return 2
    reports = Path(args.reports)
    reports.mkdir(parents=True, exist_ok=True)
    _remove_stale(reports)
    runner = Runner(args.call_timeout, args.kill_after, args.budget)

    def stop(signum: int, _frame: object) -> None:
        runner.abort()
        raise SystemExit(128 + signum)  # unwinds through the `finally` that removes the private directory

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    # Kubeconfigs for kubectl live here, 0700/0600, removed on exit and on INT/TERM/HUP.
    private = Path(tempfile.mkdtemp(prefix=f".diagnose-{os.getpid()}-", dir=reports))
    try:
        print(f"[gpulab] diagnose {stack}: collecting (each call bounded to {args.call_timeout:.0f}s)", file=sys.stderr)
        collected = collect(args, runner, stack, private)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    archive = reports / f"diagnose-{stack}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.tar.gz"
    text = summary(stack, collected.findings, str(archive), collected.secrets)
    write_archive(archive, collected, text)
    sys.stdout.write(text)
    return 1 if collected.findings else 0


if __name__ == "__main__":
    sys.exit(main())
