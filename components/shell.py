"""Commands that run gpulab's shell scripts (in scripts/, each linted by shellcheck).

Scripts take their settings from the environment, and secrets (kubeconfigs) on standard input:
never as arguments or environment variables, which show up in `ps` and in Pulumi's diffs, and a
Command's secret stdout never comes back as PULUMI_COMMAND_STDOUT (addPreviousOutputInEnv off).
Only stderr is logged; stdout is a Command's output and may be a secret.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path

import pulumi
import pulumi_command as command

SCRIPT_DIR = "scripts"
SCRIPTS = Path(__file__).resolve().parent.parent / SCRIPT_DIR


def script(name: str) -> str:
    """The command line for scripts/NAME, relative to the project directory Pulumi runs in."""
    return f"bash {SCRIPT_DIR}/{name}"


def script_command(
    resource_name: str,
    create: str | None,
    *,
    environment: Mapping[str, pulumi.Input[str]] | None = None,
    stdin: pulumi.Input[str] | None = None,
    delete: str | None = None,
    opts: pulumi.ResourceOptions,
) -> command.local.Command:
    """A local Command running scripts/CREATE (and scripts/DELETE on destroy), stdout kept secret.
    Either may be None: a Command with only a delete script acts on destroy alone."""
    return command.local.Command(
        resource_name,
        create=script(create) if create else None,
        delete=script(delete) if delete else None,
        environment=environment,
        stdin=stdin,
        # pulumi-command would put the previous stdout (secret for some) into the environment of an update or
        # the delete, and so of every program the script starts; none of these scripts reads it.
        add_previous_output_in_env=False,
        logging=command.local.Logging.STDERR,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["stdout"])),
    )


_SOURCE_LIB = re.compile(r'^(# shellcheck source=lib\.sh|source "\$\{BASH_SOURCE\[0\]%/\*\}/lib\.sh".*)$', re.MULTILINE)


def remote_script(name: str, environment: Mapping[str, str], sudo: bool) -> str:
    """A command line that runs scripts/NAME on a remote machine over SSH: lib.sh inlined (no second
    file to copy), settings as `env` assignments (sshd usually refuses forwarded variables), and root
    through sudo unless the SSH user is root. Standard input reaches the script as it does locally."""
    body = _SOURCE_LIB.sub("", (SCRIPTS / name).read_text())
    text = (SCRIPTS / "lib.sh").read_text() + "\n" + body
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in environment.items())
    return f"{'sudo -n ' if sudo else ''}env {assignments} bash -c {shlex.quote(text)} gpulab-{name}"
