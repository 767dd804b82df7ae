"""Commands that run gpulab's shell scripts (in scripts/, each linted by shellcheck).

Scripts take their settings from the environment and secrets (kubeconfigs) on standard input,
never as arguments: arguments and environments show up in `ps` and in Pulumi's diff output.
Only stderr is logged; stdout is a Command's output and may be a secret.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_command as command

SCRIPT_DIR = "scripts"


def script(name: str) -> str:
    """The command line for scripts/NAME, relative to the project directory Pulumi runs in."""
    return f"bash {SCRIPT_DIR}/{name}"


def script_command(
    resource_name: str,
    create: str,
    *,
    environment: Mapping[str, pulumi.Input[str]] | None = None,
    stdin: pulumi.Input[str] | None = None,
    delete: str | None = None,
    opts: pulumi.ResourceOptions,
) -> command.local.Command:
    """A local Command running scripts/CREATE (and scripts/DELETE on destroy), stdout kept secret."""
    return command.local.Command(
        resource_name,
        create=script(create),
        delete=script(delete) if delete else None,
        environment=environment,
        stdin=stdin,
        logging=command.local.Logging.STDERR,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["stdout"])),
    )
