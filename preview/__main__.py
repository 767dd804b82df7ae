"""`make plan` (`python -m preview [--stack NAME]`): what `pulumi up` would build, offline.

Validates `Pulumi.<STACK>.yaml` with the validation `pulumi up` uses, runs the real `__main__.py`
under the project's Pulumi mocks, and prints per component and per tenant the resources it would
create, the outputs it would export (secret ones as [secret]), the MetalLB pool it would carve from
an assumed kind network, and the policy pack's verdicts. No Docker, no Pulumi CLI, no network.

Exit codes: 0 the stack would deploy, 1 a mandatory policy refuses it, 2 no such stack or invalid configuration.
`--validate` only validates the stack file and prints the CLIs it needs (`make up`, before any download).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from model.config import CONFIG_KEYS, ConfigError, check_secrets, parse_config, stack_file_config
from model.stack_file import stack_problem
from model.wings import DEFAULT_WING, WINGS, Wing

ROOT = Path(__file__).resolve().parent.parent
# What Docker typically gives a new bridge network on a fresh host (kind's own defaults: the first free
# 172.x/16, plus an IPv6 ULA). The real pool is carved the same way from whatever the network gets.
ASSUMED_KIND_IPAM = [
    {"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"},
    {"subnet": "fc00:f853:ccd:e793::/64", "gateway": "fc00:f853:ccd:e793::1"},
]
# Outputs whose value only a live lab knows (the mocks answer them with made-up values).
LIVE_ONLY = ("_endpoint",)


class PlanError(Exception):
    """Invalid input: exit 2 with this message."""


def stack_config(stack: str, project_dir: Path = ROOT) -> tuple[dict[str, Any], dict[str, str]]:
    """(`gpulab:*` config without the prefix, secret keys -> placeholder) from a stack's file."""
    if problem := stack_problem(stack, project_dir):
        raise PlanError(problem)
    path = project_dir / f"Pulumi.{stack}.yaml"
    try:
        return stack_file_config(path)  # as the Pulumi CLI reads it (YAML 1.2, duplicate keys refused)
    except ConfigError as error:
        raise PlanError(f"{path.name}: {error}") from None


def validate(plain: dict[str, Any], secrets: dict[str, str], source: str = "the stack file"):
    try:
        # With the assumed kind network, so that a tenant range inside it is reported with every other problem.
        lab = parse_config(
            plain,
            source=source,
            kind_subnet=ASSUMED_KIND_IPAM[0]["subnet"],
        )
        check_secrets(
            lab,
            is_set=lambda key: key in secrets or key in plain,
            is_secret=lambda key: key in secrets,
            secret_keys=secrets,
        )
    except ConfigError as error:
        raise PlanError(str(error)) from None
    return lab


def gpu_summary(tenant) -> tuple[str, list[str]]:
    """A tenant's cards for its header line (`2x L4`); with several GPU nodes, `N GPU nodes` and a line
    per node with its cards."""

    def models(entries) -> str:
        return ", ".join(f"{entry.count}x {entry.model}" for entry in entries)

    if tenant.gpus is not None:
        return models(tenant.gpus), []
    per_node = (
        [node.gpus for node in tenant.nodes]
        if tenant.nodes is not None
        else [worker.gpus for worker in tenant.workers if worker.gpus is not None]
    )
    names = [node.name for node in tenant.gpu_nodes()]
    lines = [f"  GPU node {name}: {models(entries)}" for name, entries in zip(names, per_node, strict=True)]
    return f"{len(names)} GPU node{'s' if len(names) > 1 else ''}", lines


def tree(program, lab) -> list[str]:
    """Resources grouped by top-level component: the management cluster, then each tenant's. Siblings by name
    (then type): the mocks see registrations in whatever order the program's outputs resolve, and two plans of
    one stack must diff clean."""
    children: dict[str, list] = {}
    tops = []
    for registration in sorted(program.registrations.values(), key=lambda r: (r.name, r.type)):
        if registration.type == "pulumi:pulumi:Stack":
            continue
        parent = program.registrations.get(registration.parent)
        if parent is None or parent.type == "pulumi:pulumi:Stack":
            tops.append(registration)
        else:
            children.setdefault(parent.urn, []).append(registration)

    def lines_of(registration, depth: int) -> list[str]:
        kind = "component" if not registration.custom else "read" if registration.read_id else ""
        line = f"{'  ' * depth}{registration.type}  {registration.name}" + (f"  ({kind})" if kind else "")
        found = [line]
        for child in children.get(registration.urn, []):
            found.extend(lines_of(child, depth + 1))
        return found

    def belongs(registration, tenant: str) -> bool:
        return registration.name == tenant or registration.name.startswith(f"{tenant}-")

    tenant_names = [tenant.name for tenant in lab.tenants]
    shared = [top for top in tops if not any(belongs(top, name) for name in tenant_names)]
    if shared or lab.wing.management_cluster:
        out = ["management cluster"]
    else:  # no kind, cert-manager, MetalLB or Kamaji: each tenant's control plane is local processes
        out = ["management cluster: none in process mode (each tenant's control plane runs as local processes)"]
    for top in shared:
        out.extend(lines_of(top, 1))
    for tenant in lab.tenants:
        cards, node_lines = gpu_summary(tenant)
        out.append(f"tenant {tenant.name} (Kubernetes {tenant.kubernetes_version}; {cards}; {tenant.gpu_mode} GPUs)")
        out.extend(node_lines)
        for top in tops:
            if belongs(top, tenant.name) and not any(
                other != tenant.name and len(other) > len(tenant.name) and belongs(top, other) for other in tenant_names
            ):
                out.extend(lines_of(top, 1))
    count = sum(1 for r in program.registrations.values() if r.custom and not r.type.startswith("pulumi:"))
    out.append(f"{count} resources in {len(tops)} top-level components")
    return out


def outputs(program, wing: Wing = WINGS[DEFAULT_WING]) -> list[str]:
    """Each export as the plan knows it; an endpoint said as the wing makes it."""
    endpoint = (
        "(127.0.0.1:<port>: the tenant API server's port, chosen free at pulumi up)"
        if wing.local_processes
        else "(an address of the MetalLB pool, assigned at pulumi up)"
    )
    width = max((len(name) for name in program.exports), default=0)
    lines = []
    for name in sorted(program.exports):
        if name in program.secret_exports:
            value = "[secret]"
        elif name.endswith(LIVE_ONLY):
            value = endpoint
        else:
            value = program.exports[name]
            value = json.dumps(value) if isinstance(value, dict | list) else value
        lines.append(f"  {name.ljust(width)}  {value}")
    return lines


def plan(stack: str, project_dir: Path = ROOT) -> tuple[int, list[str]]:
    from policies.rules import SUBJECT_TYPES
    from preview.harness import LabMocks, run_program
    from preview.pack import is_mandatory, run_pack

    plain, secrets = stack_config(stack, project_dir)
    lab = validate(plain, secrets, f"Pulumi.{stack}.yaml")
    import pulumi

    os.environ["GPULAB_PLAN"] = "1"  # a plan starts no process: the programs `make up` needs are listed below
    try:
        program = run_program(
            {key: value for key, value in plain.items() if key in CONFIG_KEYS},
            mocks=LabMocks(ipam=ASSUMED_KIND_IPAM),
            secrets=secrets,
            plain={key: value for key, value in plain.items() if key not in CONFIG_KEYS and isinstance(value, str)},
        )
    except pulumi.RunError as error:  # a problem only the program's own checks see (e.g. the kind network)
        raise PlanError(f"invalid gpulab configuration (nothing was created):\n  {error}") from None
    finally:
        del os.environ["GPULAB_PLAN"]
    lines = [
        f"gpulab plan for stack {stack!r}: offline (Pulumi mocks; no Docker, no Pulumi CLI); nothing is created",
        "",
    ]
    if lab.wing.programs_from_bin:
        from process_lab.preflight import bin_dir, hami_missing, programs_missing

        if missing := programs_missing(bin_dir()) + hami_missing(bin_dir(), lab.hami_versions):
            lines += [
                f"make up STACK={stack} will need {', '.join(missing)}: `make tools` builds all but "
                "hami-scheduler, which GPULAB_HAMI_SCHEDULER_<RELEASE> names (docs/process-lab.md)",
                "",
            ]
    if lab.management.mode == "kind" and lab.wing.kind_management:  # else no kind network, no MetalLB (process mode)
        pool = program.exports.get("metallb_pool", "?")
        lines += [
            f"kind network {lab.management.network_name!r}, assumed {ASSUMED_KIND_IPAM[0]['subnet']} "
            f"(+ IPv6 {ASSUMED_KIND_IPAM[1]['subnet']}): MetalLB pool {pool}",
            "  (pulumi up carves the same top-of-subnet range from whatever subnet Docker gives the network)",
            "",
        ]
    lines += [*tree(program, lab), "", "outputs", *outputs(program, lab.wing), "", "policy pack"]
    refused = False
    registered_types = {registration.type for registration in program.registrations.values()}
    for policy_name, messages in run_pack(program).items():
        level = "mandatory" if is_mandatory(policy_name) else "advisory"
        subject = SUBJECT_TYPES.get(policy_name)
        if not messages and subject and subject not in registered_types:
            lines.append(f"  {policy_name} ({level}): nothing to judge (no {subject} in this stack)")
            continue
        if not messages:
            lines.append(f"  {policy_name} ({level}): ok")
            continue
        refused = refused or level == "mandatory"
        lines.extend(f"  {policy_name} ({level}): {message}" for message in messages)
    lines += ["", "verdict: a mandatory policy refuses this stack" if refused else "verdict: ready for `make up`"]
    return (1 if refused else 0), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="dev", help="stack whose Pulumi.<STACK>.yaml to preview (dev)")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="only validate the stack file, as `make up` does before it downloads anything; print the CLIs it "
        "needs (kind only for a kind management cluster)",
    )
    parser.add_argument("--project-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if problem := stack_problem(args.stack, args.project_dir):
        print(f"[gpulab] {problem}", file=sys.stderr)
        return 2
    try:
        if args.validate:
            lab = validate(*stack_config(args.stack, args.project_dir), f"Pulumi.{args.stack}.yaml")
            # Process mode downloads nothing: its programs are the ones `make tools` built.
            kind = lab.management.mode == "kind" and lab.wing.kind_management
            clis = ["kind"] * kind + ["kubectl", "pulumi"] if lab.wing.downloads else []
            print(" ".join(clis))
            return 0
        code, lines = plan(args.stack, args.project_dir)
    except PlanError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main())
