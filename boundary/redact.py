"""What an error message may echo of user input: never a secret, never unbounded.

Used by the config validation and by the YAML reader (a syntax error must not print the offending
line: it may be a pasted key). Standard library only.
"""

from __future__ import annotations

import re

# Key names whose values are secret whatever they look like.
SECRET_NAME = re.compile(r"(key|secret|token|password|passphrase|kubeconfig|credential|cert)", re.IGNORECASE)
# Words that only secrets (keys, kubeconfigs, credentials) contain.
SECRET_MARKERS = re.compile(
    r"-----BEGIN|PRIVATE KEY|client-key-data|client-certificate-data|certificate-authority-data|token:|password:",
    re.IGNORECASE,
)
# Token formats, recognised wherever they appear (even short, even inside other text).
TOKEN_FORMATS = re.compile(
    # kubeadm bootstrap tokens (kubeadm's BootstrapTokenPattern, cmd/kubeadm/app/apis/bootstraptoken)
    r"(?<![a-z0-9])[a-z0-9]{6}\.[a-z0-9]{16}(?![a-z0-9])"
    # Docker Hub personal access tokens, GitLab personal access tokens
    r"|dckr_pat_[A-Za-z0-9_-]{8,}|glpat-[A-Za-z0-9_-]{8,}"
    # GitHub tokens: classic PAT, OAuth, user-to-server, server-to-server, refresh; fine-grained PAT
    r"|(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}",
    re.IGNORECASE,
)
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{40,}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")  # image digests are long but public
MAX_ECHO = 60


def looks_secret(text: str) -> bool:
    """Whether `text` holds something shaped like a key, token or kubeconfig."""
    return bool(SECRET_MARKERS.search(text) or TOKEN_FORMATS.search(text) or LONG_TOKEN.search(DIGEST.sub("", text)))


def hidden(text: str) -> str:
    return f"<hidden: {len(text)} characters that may be a secret>"


def shown(value: object, secret_name: bool = False) -> str:
    """How a value may be echoed: hidden if it (or its key's name) looks secret, else repr'd and truncated."""
    text = repr(value)
    if secret_name or looks_secret(text):
        return hidden(str(value))
    return text if len(text) <= MAX_ECHO else f"{text[: MAX_ECHO - 3]}... ({len(text)} characters)"


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def scrub(message: str, limit: int = 400) -> str:
    """A message with quoted values that look secret (or are long) cut out, and any remaining
    secret-shaped token replaced: some messages quote the offending value."""

    def quoted(match: re.Match[str]) -> str:
        text = match.group(0)
        if looks_secret(text):
            return "<hidden>"
        return text if len(text) <= MAX_ECHO else f"{text[: MAX_ECHO - 3]}..."

    message = _QUOTED.sub(quoted, message)
    message = TOKEN_FORMATS.sub("<hidden>", message)
    message = LONG_TOKEN.sub(lambda m: m.group(0) if re.fullmatch("[0-9a-f]{64}", m.group(0)) else "<hidden>", message)
    return message if len(message) <= limit else message[: limit - 3] + "..."


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,39}", re.ASCII)


def key_part(part: str) -> str:
    """A mapping key as it may appear in a key path: plain names as they are; anything else (a pasted
    token, a newline, a long string) quoted and truncated, or hidden."""
    if _PLAIN_KEY.fullmatch(part) and not looks_secret(part):
        return part
    if looks_secret(part):
        return f"<hidden key: {len(part)} characters>"
    text = repr(part)
    return text if len(text) <= 42 else f"{text[:39]}...({len(part)} characters)"
