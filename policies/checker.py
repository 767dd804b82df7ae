"""`python -m policies check --tenant NAME [--stack STACK] FILE...|-`: the pack's GPU rules on manifests.

For teams that deploy with kubectl. The GPU workloads the stack declares for that tenant already run
there: HAMi has placed them, one at a time in their declared order, and the manifests are judged after
them, in their own order, against the tenant's cards, per-pod limits and quota from `Pulumi.<STACK>.yaml`.

With --live (or --usage-from a recorded PodList) the manifests are judged against what the tenant's
cards hold *now* (HAMi's allocation annotations on its pods) instead of the stack's declared workloads.
When everything fits, a `place:` line per pod says where HAMi would put it.

Exit codes: 0 everything fits (warnings may be printed), 1 something does not, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boundary import safe_yaml
from model.config import ConfigError, LabConfig, Tenant, load_stack_file
from model.kube_objects.workload_manifests import workload_manifest
from model.names import TENANT_LABEL
from placement.findings import Finding, printable
from placement.inventory import TenantInventory, from_lab_config
from placement.live import LiveError, fetch_claim_list, fetch_pod_list, live_usage
from placement.replay import Replay, replay
from placement.wording import evaluate_tenant
from placement.workloads import Workload, WorkloadError, read_workload, unit_suffix_notes
from policies import dra_check
from policies.check_output import describe_usage, placement_lines, placements
from policies.check_output import document as json_document

PROJECT_DIR = Path(__file__).resolve().parent.parent
STDIN = Path("-")


class BadInput(Exception):
    """Exit code 2: the input could not be read."""


def read_text(path: Path) -> str:
    try:
        if path == STDIN:
            return safe_yaml.decode(sys.stdin.buffer.read(safe_yaml.MAX_BYTES + 1), "<stdin>")
        return safe_yaml.read_text(path)
    except safe_yaml.YamlError as error:
        raise BadInput(str(error)) from None


def manifest_objects(path: Path, text: str) -> list[tuple[str, dict]]:
    """The Kubernetes objects of one manifest file (a List's items each), with where each is in it."""
    name = "<stdin>" if path == STDIN else str(path)
    try:
        documents = [document for document in safe_yaml.load_all(text, name) if document is not None]
    except safe_yaml.YamlError as error:
        raise BadInput(str(error)) from None
    if not documents:
        raise BadInput(f"{name}: holds no Kubernetes objects (empty, or only comments)")
    found = []
    for number, document in enumerate(documents, start=1):
        kind = document.get("kind") if isinstance(document, dict) else None
        if not isinstance(kind, str) or not kind:
            raise BadInput(f"{name}: document {number} is not a Kubernetes object (`kind` must be a string)")
        items = document.get("items") if kind.endswith("List") else [document]
        if not isinstance(items, list):
            raise BadInput(f"{name}: document {number}: {kind}.items must be a list")
        for position, item in enumerate(items):
            where = f"{name}: document {number}" + (f" item {position}" if kind.endswith("List") else "")
            if not isinstance(item, dict):
                raise BadInput(f"{where}: not a Kubernetes object")
            found.append((where, item))
    return found


def manifest_workloads(path: Path, text: str) -> tuple[list[Workload], list[str]]:
    """The GPU workloads of one manifest file, and notes on what HAMi will make of its quantities."""
    workloads, notes = [], []
    for where, item in manifest_objects(path, text):
        notes.extend(f"note: {where}: {note}" for note in unit_suffix_notes(item))
        try:
            workload = read_workload(item.get("kind"), item)
        except WorkloadError as error:
            raise BadInput(f"{where}: {error}") from None
        if workload is not None and workload.pods:
            workloads.append(workload)
    return workloads, notes


@dataclass(frozen=True)
class Live:
    """Where current usage comes from: a recorded PodList, a kubeconfig file, or the stack's outputs."""

    usage_file: Path | None = None
    kubeconfig: Path | None = None
    from_stack: bool = False


def _live_list(live: Live, tenant: Tenant, stack: str, fetch: Callable[[dict], dict]) -> dict:
    """What runs now: the recorded list (--usage-from), or `fetch` through the tenant's kubeconfig (--live)."""
    if live.usage_file is not None:
        try:
            document = safe_yaml.load(read_text(live.usage_file), str(live.usage_file))
        except safe_yaml.YamlError as error:
            raise BadInput(str(error)) from None
        return document if isinstance(document, dict) else {}
    if live.kubeconfig is not None:
        try:
            kubeconfig = safe_yaml.load(read_text(live.kubeconfig), str(live.kubeconfig))
        except safe_yaml.YamlError as error:
            raise BadInput(str(error)) from None
    else:
        from model.stack import StackError, tenant_kubeconfigs

        try:
            kubeconfig = tenant_kubeconfigs(stack)[tenant.name]
        except StackError as error:
            raise BadInput(
                f"--live: {error} (or pass --kubeconfig FILE; `make check` sets the state backend)"
            ) from None
    if not isinstance(kubeconfig, dict):
        raise BadInput("--live: the kubeconfig is not a YAML mapping")
    try:
        return fetch(kubeconfig)
    except LiveError as error:
        raise BadInput(f"--live: {error}") from None


@dataclass
class CheckResult:
    code: int
    notes: list[str]  # quantity notes, current usage, label warnings
    findings: list[Finding]
    placements: list[dict]  # where HAMi would put the submitted pods (when everything fits)
    several_nodes: bool

    def lines(self) -> list[str]:
        return [
            *self.notes,
            *(finding.line() for finding in self.findings),
            *placement_lines(self.placements, self.several_nodes),
        ]


def _declared_workloads(lab: LabConfig, tenant: Tenant) -> list[Workload]:
    """The GPU workloads the stack declares for the tenant, read from the manifests the stack creates."""
    return [
        workload
        for manifest in (workload_manifest(tenant, w, lab.versions.workload_image) for w in tenant.workloads)
        if (workload := read_workload(manifest["kind"], manifest)) is not None
    ]


def run(tenant_name: str, stack: str, files: list[Path], project_dir: Path, live: Live | None = None) -> CheckResult:
    stack_file = project_dir / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        raise BadInput(f"{stack_file} does not exist; pass --stack NAME (or --project-dir DIR) of an existing stack")
    try:
        lab = load_stack_file(stack_file)
    except ConfigError as error:
        raise BadInput(f"{stack_file}: {error}") from None
    inventories = from_lab_config(lab)
    if tenant_name not in inventories:
        raise BadInput(f"unknown tenant {tenant_name!r}; {stack_file.name} declares: {', '.join(sorted(inventories))}")
    tenant = next(t for t in lab.tenants if t.name == tenant_name)
    if tenant.gpu_sharing == "dra":
        return _run_dra(tenant, files, live, stack)
    inventory = inventories[tenant_name]
    if files.count(STDIN) > 1:
        raise BadInput("`-` (standard input) may be given once")
    submitted, lines = [], []
    for path in files:
        workloads, notes = manifest_workloads(path, read_text(path))
        submitted.extend(workloads)
        lines.extend(notes)

    for workload in submitted:
        labelled = workload.labels.get(TENANT_LABEL)
        if labelled and labelled != tenant_name:
            lines.append(
                f"warning: {workload.label} is labelled {TENANT_LABEL}={labelled} but is checked as {tenant_name}"
            )
    inventory, findings, running = _running_now(lab, tenant, inventory, live, stack, stack_file.name)
    lines.extend(running)
    verdicts, submitted_run = _judged_run(inventory, submitted, tenant.gpu_node_name())
    findings += verdicts
    failed = any(finding.severity == "error" for finding in findings)
    placed = [] if failed else placements(submitted_run, submitted)
    return CheckResult(1 if failed else 0, lines, findings, placed, bool(inventory.nodes))


def _running_now(
    lab: LabConfig, tenant: Tenant, inventory: TenantInventory, live: Live | None, stack: str, stack_file: str
) -> tuple[TenantInventory, list[Finding], list[str]]:
    """What runs before the manifests, the findings on it and the lines that say what the cards hold: the stack's
    workloads, judged as the pack judges them and placed as HAMi places them, in order (not wherever would suit the
    manifests best); or, with --live, the cluster's own pods."""
    if live is None:
        declared = _declared_workloads(lab, tenant)
        if not declared:
            return inventory, [], []
        findings, running = _judged_run(inventory, declared, tenant.gpu_node_name())
        said = (
            f"running: {', '.join(w.label for w in declared)} (declared in {stack_file}; placed by HAMi, in this order)"
        )
        return running.inventory, findings, [said, *describe_usage(running.inventory, "running")]
    try:
        now = live_usage(inventory, _live_list(live, tenant, stack, fetch_pod_list))
    except LiveError as error:
        raise BadInput(f"live usage: {error}") from None
    return now.inventory, [], [*describe_usage(now.inventory, "now"), *now.notes]


def _judged_run(inventory: TenantInventory, workloads: list[Workload], node_name: str) -> tuple[list[Finding], Replay]:
    """What `make check` learns of a set of workloads on the tenant as it stands: the engine's findings, worded,
    and HAMi's one run over their pods in order (where each lands, and what the cards hold after)."""
    return evaluate_tenant(inventory, workloads), replay(inventory, workloads, one_node=node_name)


def _run_dra(tenant: Tenant, files: list[Path], live: Live | None, stack: str) -> CheckResult:
    """A DRA tenant (gpuSharing: dra): its claims through the allocator model (policies/dra_check.py), after the
    stack's declared claims, or with --live (--usage-from a recorded `kubectl get resourceclaims -A -o json`) after
    the claims allocated now."""
    if files.count(STDIN) > 1:
        raise BadInput("`-` (standard input) may be given once")
    claims = None
    if live is not None:
        listed = _live_list(live, tenant, stack, fetch_claim_list)
        claims = listed.get("items")
        # What `kubectl get resourceclaims -A -o json` prints (a List of ResourceClaims) or the API server's own
        # ResourceClaimList (whose items carry no kind); a PodList, or anything else, is not it.
        if (
            listed.get("kind") not in ("List", "ResourceClaimList")
            or not isinstance(claims, list)
            or any(
                not isinstance(item, dict) or item.get("kind", "ResourceClaim") != "ResourceClaim" for item in claims
            )
        ):
            source = live.usage_file or "the tenant's API server"
            raise BadInput(
                f"--usage-from {source}: for {tenant.name}, which shares its cards through DRA, give a recorded "
                "`kubectl get resourceclaims -A -o json` (a list of ResourceClaims)"
            )
    objects = [item for path in files for _, item in manifest_objects(path, read_text(path))]
    try:
        lines, findings = dra_check.judge(tenant, objects, claims)
    except dra_check.DraInputError as error:
        raise BadInput(str(error)) from None
    failed = any(finding.severity == "error" for finding in findings)
    return CheckResult(1 if failed else 0, lines, findings, [], False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m policies check",
        description="Check GPU workload manifests against a gpulab tenant's cards, limits and quota.",
    )
    parser.add_argument("--tenant", required=True, help="tenant name, as in the stack config")
    parser.add_argument("--stack", default="dev", help="stack whose Pulumi.<STACK>.yaml declares the tenant (dev)")
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=PROJECT_DIR,
        help=f"where Pulumi.<STACK>.yaml is (default: this gpulab checkout, {PROJECT_DIR})",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--live",
        action="store_true",
        help="judge against what the tenant's cards hold now (HAMi's allocations, or a DRA tenant's allocated claims, "
        "read through the tenant kubeconfig from the stack's outputs, or --kubeconfig)",
    )
    source.add_argument(
        "--usage-from",
        type=Path,
        metavar="PODLIST",
        help="like --live, from a recorded `kubectl get pods -A -o json` of the tenant (of a DRA tenant: "
        "`kubectl get resourceclaims -A -o json`)",
    )
    parser.add_argument("--kubeconfig", type=Path, help="with --live: the tenant's kubeconfig file")
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text (default), or one JSON document with the findings and placements (exit codes unchanged)",
    )
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="Kubernetes manifests (multi-document YAML); - for stdin"
    )
    args = parser.parse_args(argv)
    if args.kubeconfig is not None and not args.live:
        parser.error("--kubeconfig is used with --live")
    live = None
    if args.live or args.usage_from is not None:
        live = Live(usage_file=args.usage_from, kubeconfig=args.kubeconfig, from_stack=args.live)
    try:
        result = run(args.tenant, args.stack, args.files, args.project_dir, live)
    except BadInput as error:
        print(printable(f"error: {error}"), file=sys.stderr)
        if args.output == "json":
            print(json_document(args.tenant, error=str(error)))
        return 2
    code = result.code
    if args.output == "json":
        print(json_document(args.tenant, result.findings, result.placements, result.notes))
        return code
    for line in result.lines():
        print(printable(line))
    if code == 0:
        now = " as they are now" if live else ""
        print(f"ok: everything fits tenant {args.tenant}'s cards{now}, limits and quota")
    return code
