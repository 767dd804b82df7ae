"""Refuse an empty Pulumi passphrase when a stack holds secrets a person typed in.

`make` defaults PULUMI_CONFIG_PASSPHRASE to empty so the one-host lab runs with no setup: its only
secrets are ones gpulab generates (tenant kubeconfigs) for a lab on the same machine. Secrets a
user typed in (`pulumi config set --secret`: SSH private keys, an existing cluster's kubeconfig)
are another matter: encrypted with an empty passphrase they are readable by anyone with
Pulumi.<stack>.yaml. Stdlib only: runs before anything is installed.

The passphrase is found as the Pulumi CLI finds it (pulumi pkg/secrets/passphrase, readPassphrase):
PULUMI_CONFIG_PASSPHRASE when it is in the environment at all, even empty; otherwise the contents of
PULUMI_CONFIG_PASSPHRASE_FILE, surrounding whitespace trimmed, and an error if it cannot be read.

usage: python3 scripts/secrets_check.py STACK [PROJECT_DIR]; exit 0 fine, 2 refused (one line why).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# `secure` as a mapping key in block or flow style, bare or quoted: `secure: v1:...`, `{secure: ...}`,
# `"secure": ...`, `{ 'secure' : ...}`. A false match only asks for a passphrase; a miss would not.
SECURE = re.compile(r"""(?:^|[\s{,\[])(?:secure|"secure"|'secure')\s*:(?:\s|$)""")
# A top-level config key (`  gpulab:sshKey:`, quoted or not), which every secret below it belongs to.
KEY = re.compile(r"""^ {1,4}(["']?)([A-Za-z0-9_.-]+:[A-Za-z0-9_.\-\[\]]+)\1\s*:""")
PROVIDER = re.compile(r"^secretsprovider:\s*[\"']?([^\s\"']+)")
COMMENT = re.compile(r"(?:^|\s)#.*$")

PASSPHRASE, PASSPHRASE_FILE = "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"
HOW = (
    f"export {PASSPHRASE}='<a passphrase>' (or {PASSPHRASE_FILE}=<path of a file holding it>, with {PASSPHRASE} unset)"
)


def typed_secrets(stack_file: Path) -> tuple[list[str], str]:
    """The config keys holding typed-in secrets in a stack file, and its secrets provider."""
    keys: list[str] = []
    provider, current = "passphrase", "a config value"
    for line in stack_file.read_text(errors="replace").splitlines():
        if match := PROVIDER.match(line):
            provider = match.group(1)
        if match := KEY.match(line):
            current = match.group(2)
        if SECURE.search(COMMENT.sub("", line)) and current not in keys:
            keys.append(current)
    return keys, provider


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
    keys, provider = typed_secrets(stack_file)
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
