"""Entry point of the policy pack, and of the offline checker.

The Pulumi CLI starts a Python policy pack as `python -u -m pulumi.policy ENGINE_ADDRESS .` in the
pack's directory (pulumi/pulumi sdk/python/dist/pulumi-analyzer-policy-python), and that module runs
this file with `runpy.run_path`. Only then is the analyzer started: constructing `PolicyPack` serves
gRPC until the engine stops it, which is not what a person typing `python -m policies` wants.
Anything else is the command line: `check` runs the same rules on plain manifests; no arguments,
`--help` or an unknown subcommand print usage and exit (0 for help, 2 for misuse).
"""

import sys
from pathlib import Path

# Kept: the Pulumi CLI runs this file from policies/ in policies/venv, where gpulab's packages are on no path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

USAGE = """\
usage: python -m policies check --tenant NAME [--stack STACK] [--project-dir DIR] FILE... | -

gpulab's GPU policy pack. `pulumi preview/up --policy-pack policies` runs it on a stack; this
command runs the same rules on plain Kubernetes manifests (`-` reads standard input): per-pod
limits, fit on the tenant's simulated cards with HAMi's reason names, and quota.

subcommands:
  check    check manifests against a tenant of Pulumi.<STACK>.yaml (python -m policies check --help)

exit codes: 0 fits, 1 does not fit, 2 bad input or usage
"""


def started_by_pulumi() -> bool:
    """True when pulumi.policy's runner (the CLI's way in) is executing this file."""
    frame = sys._getframe(1)
    while frame is not None:
        if Path(frame.f_code.co_filename).parts[-3:] == ("pulumi", "policy", "__main__.py"):
            return True
        frame = frame.f_back
    return False


def command_line(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        from policies.checker import main

        return main(argv[1:])
    if argv[:1] in (["-h"], ["--help"], ["help"]):
        sys.stdout.write(USAGE)
        return 0
    problem = f"unknown subcommand {argv[0]!r}" if argv else "a subcommand is required"
    sys.stderr.write(f"{USAGE}\nerror: {problem}\n")
    return 2


if started_by_pulumi():
    from pulumi_policy import EnforcementLevel, PolicyPack

    from policies.rules import ALL_POLICIES

    PolicyPack(name="gpulab-gpu-policies", policies=ALL_POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
else:
    sys.exit(command_line(sys.argv[1:]))
