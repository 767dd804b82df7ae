"""Refuse an empty Pulumi passphrase when a stack holds secrets a person typed in.

`make` defaults PULUMI_CONFIG_PASSPHRASE to empty so the one-host lab runs with no setup: its only
secrets are ones gpulab generates (tenant kubeconfigs) for a lab on the same machine. Secrets a
user typed in (`pulumi config set --secret`: SSH private keys, an existing cluster's kubeconfig)
are another matter: encrypted with an empty passphrase they are readable by anyone with
Pulumi.<stack>.yaml.

The stack file is read by gpulab's own reader (model.config.read_stack_file, as the Pulumi CLI reads it),
so every YAML spelling of a `secure:` value the config sees is seen here too. That reader needs ./venv: the
host's python3 (`make up` runs this before ./venv exists) hands over to ./venv's python when there is one;
without one this check waits for the run of it that `make up` and `make down` make once ./venv exists, before
any pulumi command.

The passphrase is found as the Pulumi CLI finds it (pulumi pkg/secrets/passphrase, readPassphrase):
PULUMI_CONFIG_PASSPHRASE when it is in the environment at all, even empty; otherwise the contents of
PULUMI_CONFIG_PASSPHRASE_FILE, surrounding whitespace trimmed, and an error if it cannot be read.

usage: python3 -m hack.secrets_check STACK [PROJECT_DIR]; exit 0 fine, 2 refused (one line why).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / "venv" / "bin" / "python"

PASSPHRASE, PASSPHRASE_FILE = "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"
HOW = (
    f"export {PASSPHRASE}='<a passphrase>' (or {PASSPHRASE_FILE}=<path of a file holding it>, with {PASSPHRASE} unset)"
)


def typed_secrets(stack_file: Path) -> tuple[list[str], str]:
    """The config keys holding typed-in secrets in a stack file (a `secure:` value, or one inside the key's
    value), and its secrets provider. Raises model.config.ConfigError for a file the loader cannot read."""
    from boundary import redact
    from model.config.loading import PROJECT, holds_secure, read_stack_file

    document, config = read_stack_file(stack_file)
    keys = []
    for key, value in config.items():
        if holds_secure(value):
            namespace, _, name = key.rpartition(":")
            keys.append(f"{redact.key_part(namespace or PROJECT)}:{redact.key_part(name)}")
    return keys, str(document.get("secretsprovider") or "passphrase")


def passphrase(environ: dict[str, str]) -> tuple[str, str | None]:
    """(the passphrase Pulumi would use, a problem with how it is given or None)."""
    if PASSPHRASE in environ:
        if not environ[PASSPHRASE] and environ.get(PASSPHRASE_FILE):
            return "", (
                f"{PASSPHRASE} is set but empty, and the Pulumi CLI uses it before {PASSPHRASE_FILE} "
                f"(so the file is ignored); unset {PASSPHRASE}"
            )
        return environ[PASSPHRASE], None
    path = environ.get(PASSPHRASE_FILE)
    if not path:
        return "", None
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
        return "", f"{PASSPHRASE_FILE}={path} cannot be read ({reason}); point it at a readable file"
    if not text.strip():
        return "", f"{PASSPHRASE_FILE}={path} is empty, which is an empty passphrase; write the passphrase into it"
    return text.strip(), None


def main(argv: list[str], environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    project = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    stack_file = project / f"Pulumi.{argv[0]}.yaml"
    phrase, problem = passphrase(environ)
    if problem:
        print(f"[gpulab] refusing to run: {problem}.", file=sys.stderr)
        return 2
    if not stack_file.is_file():
        return 0  # nothing typed in yet; the commands that need the file say so themselves
    try:
        from model.config import ConfigError
    except ImportError:  # the host's python3, without gpulab's packages
        if VENV_PYTHON.is_file() and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
            # The same module from the same folder (`-m` finds it there), with the same arguments.
            os.execv(VENV_PYTHON, [str(VENV_PYTHON), "-m", "hack.secrets_check", *argv])
        return 0  # no ./venv yet: make up and make down check again once it exists, before any pulumi command
    try:
        keys, provider = typed_secrets(stack_file)
    except ConfigError as error:
        print(f"[gpulab] refusing to run: {stack_file.name}: {error}", file=sys.stderr)
        return 2
    if not keys or phrase or not provider.startswith("passphrase"):
        return 0
    print(
        f"[gpulab] refusing to run: {stack_file.name} holds secrets you set ({', '.join(keys)}), and the "
        "passphrase is empty, so they are encrypted with an empty passphrase (readable by anyone with the "
        f"file). Set one: {HOW}; run `pulumi stack change-secrets-provider passphrase --stack {argv[0]}` to "
        "re-encrypt them with it, then retry.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
