"""A deployed lab's stack outputs and config (through the pulumi CLI), for the report, the offline
checker, `make diagnose` and the acceptance suite."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from boundary.bounded_run import run_bounded
from model.config import ConfigError, LabConfig, load_stack_file
from model.stack_file import make_up

ROOT = Path(__file__).resolve().parent.parent


class StackError(RuntimeError):
    """No live stack to read; the message is one line saying why and what to do."""


def stack_name(stack: str | None = None) -> str:
    return stack or os.environ.get("GPULAB_STACK") or "dev"


def stack_outputs(stack: str | None = None) -> dict[str, Any]:
    name = stack_name(stack)
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise StackError(
            f"the Pulumi CLI is not on PATH: run `{make_up(name)}` (make tools first for a process-mode stack)"
        )
    result = run_bounded([pulumi, "stack", "output", "--json", "--show-secrets", "--stack", name], 120, cwd=ROOT)
    if result.timed_out:
        raise StackError(f"`pulumi stack output --stack {name}` did not answer in {result.waited:.0f} s")
    if result.returncode != 0:
        reason = (result.stderr.decode(errors="replace").strip().splitlines() or ["unknown error"])[-1]
        raise StackError(f"cannot read outputs of stack {name!r} ({reason}): run `{make_up(name)}` first")
    outputs = json.loads(result.stdout or b"{}")
    if not any(key.endswith("_kubeconfig") for key in outputs):  # process mode has no management_kubeconfig
        raise StackError(f"stack {name!r} has no lab outputs (never deployed, or destroyed): run `{make_up(name)}`")
    return outputs


def stack_config(stack: str | None = None, project: Path | None = None) -> LabConfig:
    """The stack's config from Pulumi.<stack>.yaml in `project` (this checkout by default)."""
    path = (project or ROOT) / f"Pulumi.{stack_name(stack)}.yaml"
    try:
        return load_stack_file(path)
    except (OSError, ConfigError) as error:
        raise StackError(f"cannot load {path.name}: {str(error).splitlines()[0]}") from None


def tenant_kubeconfigs(stack: str | None = None) -> dict[str, dict[str, Any]]:
    """Tenant name -> parsed admin kubeconfig, for every tenant of the stack's config."""
    outputs = stack_outputs(stack)
    lab = stack_config(stack)
    found = {}
    for tenant in lab.tenants:
        key = f"{tenant.output_stem}_kubeconfig"
        if key not in outputs:
            raise StackError(
                f"stack output {key} is missing: run `{make_up(stack_name(stack))}` so the stack matches its config"
            )
        found[tenant.name] = yaml.safe_load(outputs[key])
    return found


def main(argv: list[str]) -> int:
    """`make verify`'s first step: exit 1 with one line unless a deployed lab answers for the stack."""
    import sys

    try:
        tenant_kubeconfigs(argv[0] if argv else None)
    except StackError as error:
        print(f"[gpulab] verify: no lab to verify: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
