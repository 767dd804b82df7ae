"""Refuse an empty Pulumi passphrase when a stack holds secrets a person typed in.

`make` defaults PULUMI_CONFIG_PASSPHRASE to empty so the one-host lab runs with no setup: its only
secrets are ones gpulab generates (tenant kubeconfigs) for a lab on the same machine. Secrets a
user typed in (`pulumi config set --secret`: SSH private keys, an existing cluster's kubeconfig)
are another matter: encrypted with an empty passphrase they are readable by anyone with
Pulumi.<stack>.yaml. Stdlib only: runs before anything is installed.

usage: python3 scripts/secrets_check.py STACK [PROJECT_DIR]; exit 0 fine, 2 refused (one line why).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SECURE = re.compile(r"^\s+secure:\s*\S")
KEY = re.compile(r"^\s+([A-Za-z0-9_-]+:[A-Za-z0-9_-]+):\s*$")
PROVIDER = re.compile(r"^secretsprovider:\s*(\S+)")


def typed_secrets(stack_file: Path) -> tuple[list[str], str]:
    """The secret config keys in a stack file, and its secrets provider (passphrase by default)."""
    keys, provider, previous = [], "passphrase", ""
    for line in stack_file.read_text(errors="replace").splitlines():
        if match := PROVIDER.match(line):
            provider = match.group(1)
        if SECURE.match(line) and (key := KEY.match(previous)):
            keys.append(key.group(1))
        previous = line
    return keys, provider


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    project = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    stack_file = project / f"Pulumi.{argv[0]}.yaml"
    if not stack_file.is_file():
        return 0  # nothing typed in yet; the commands that need the file say so themselves
    keys, provider = typed_secrets(stack_file)
    passphrase_set = os.environ.get("PULUMI_CONFIG_PASSPHRASE") or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if not keys or passphrase_set or not provider.startswith("passphrase"):
        return 0
    print(
        f"[gpulab] refusing to run: {stack_file.name} holds secrets you set ({', '.join(keys)}), and "
        "PULUMI_CONFIG_PASSPHRASE is empty, so they are encrypted with an empty passphrase (readable by anyone "
        "with the file). Set a passphrase: export PULUMI_CONFIG_PASSPHRASE='...' (or PULUMI_CONFIG_PASSPHRASE_FILE), "
        f"run `pulumi stack change-secrets-provider passphrase --stack {argv[0]}` to re-encrypt them, then retry.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
