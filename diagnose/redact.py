"""Redaction of everything `make diagnose` writes or prints.

Built on the config errors' secret detection (boundary/redact.py: secret-looking key names, PEM
and kubeconfig markers, long token-like strings; imported, not copied) and adds what objects and
logs carry besides: bootstrap tokens, JWTs, `--token X` / `Bearer X` / `password=X`, env values
and annotations under secret-looking names, JSON inside strings (last-applied-configuration), and
any value known to be secret (the kubeconfigs diagnose holds in memory), wherever it shows up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from boundary.redact import LONG_TOKEN as _LONG_TOKEN
from boundary.redact import SECRET_MARKERS as _SECRET_TEXT
from boundary.redact import SECRET_NAME as _SECRET_NAME
from boundary.redact import TOKEN_FORMATS

HIDDEN = "<redacted>"

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", re.DOTALL)
# kubeadm bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16} (k8s.io/cluster-bootstrap/token/api BootstrapTokenPattern).
_BOOTSTRAP_TOKEN = re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_BASE64_PEM = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]*")  # base64 of "-----BEGIN"
# A secret after its name: `token: X`, `"password":"X"`, `--token=X`, `--token X`, `Bearer X`.
_ASSIGNED = re.compile(
    r"(?i)((?:token|password|passwd|passphrase|secret|api[-_]?key|private[-_]?key|client-key-data|"
    r"client-certificate-data|authorization)[\"']?\s*[:=]\s*[\"']?|--(?:token|password|passphrase)[= ]\s*|"
    r"\b(?:Bearer|Basic)\s+)"
    r"([^\s,;\"'}]+)"
)
# Object fields whose names look secret to _SECRET_NAME but hold names or structure, never secrets.
_SAFE_FIELDS = {
    "key",
    "keys",
    "secretName",
    "secretRef",
    "secretKeyRef",
    "configMapKeyRef",
    "tokenRequests",
    "automountServiceAccountToken",
    "serviceAccountToken",
    "certManager",
    "certificates",
    "kubeconfig",  # Kamaji status: names of the Secrets holding kubeconfigs; leaves below are still scanned
    "dataStoreSchema",
}
# `secure: v1:...` in a stack file is Pulumi's ciphertext of a secret config value: hidden too.
# Lower-case names and paths (`registry.k8s.io/kas-network-proxy/proxy-agent`) are long but public.
_NAME_LIKE = re.compile(r"[a-z0-9]+(?:[-./_][a-z0-9]+)+")


def _long_token(match: re.Match[str]) -> str:
    text = match.group(0)
    if re.fullmatch(r"[0-9a-f]{64}", text):  # sha256 digests, as config's scrubbing keeps them
        return text
    if _NAME_LIKE.fullmatch(text) and all(len(part) <= 24 for part in re.split(r"[-./_]", text)):
        return text
    return HIDDEN


def _cut_after_marker(line: str) -> str:
    match = _SECRET_TEXT.search(line)
    if match is None:
        return line
    rest = line[match.end() :].strip()
    return line if rest in ("", HIDDEN) else line[: match.end()] + " " + HIDDEN


def scrub_text(text: str, known: Iterable[str] = ()) -> str:
    """Text (a log, an event message, a command's output) with everything token-like cut out."""
    for value in known:
        if value:
            text = text.replace(value, HIDDEN)
    text = _PEM.sub(HIDDEN, text)
    text = _BASE64_PEM.sub(HIDDEN, text)
    text = _JWT.sub(HIDDEN, text)
    text = _ASSIGNED.sub(lambda m: m.group(1) + HIDDEN, text)
    text = _BOOTSTRAP_TOKEN.sub(HIDDEN, text)
    text = TOKEN_FORMATS.sub(HIDDEN, text)  # Docker Hub, GitLab and GitHub tokens (config errors' list)
    # A line with a PEM or kubeconfig marker (config's _SECRET_TEXT) loses everything after it.
    text = "\n".join(_cut_after_marker(line) for line in text.split("\n"))
    return _LONG_TOKEN.sub(_long_token, text)


def secret_name(name: str) -> bool:
    """A field, env variable or annotation name under which a value may be a secret."""
    if name in _SAFE_FIELDS:
        return False
    return bool(_SECRET_NAME.search(name.rsplit("/", 1)[-1]))


def redact(value: Any, known: Iterable[str] = (), hidden: bool = False) -> Any:
    """A copy of a parsed object (kubectl/docker/pulumi JSON) that is safe to write anywhere. Below a
    secret-looking name (`gpulab:managementKubeconfig: {value: ...}`) every value is hidden (`hidden`)."""
    known = tuple(known)
    if isinstance(value, dict):
        if value.get("kind") == "Secret":  # never collected; dropped whole if one slips into a list
            meta = value.get("metadata") or {}
            return {"kind": "Secret", "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}}
        out: dict[str, Any] = {}
        # env entries and similar {name, value} pairs: the name says whether the value is secret.
        pair_secret = isinstance(value.get("name"), str) and "value" in value and secret_name(value["name"])
        for key, item in value.items():
            leaf = not isinstance(item, dict | list)
            secret_key = secret_name(str(key))
            if key == "secure" or (pair_secret and key == "value") or (leaf and (secret_key or hidden)):
                out[key] = HIDDEN if item not in (None, "", True, False) else item
            elif key in ("annotations", "labels") and isinstance(item, dict):
                out[key] = {k: (HIDDEN if secret_name(k) and v else redact(v, known)) for k, v in item.items()}
            else:
                out[key] = redact(item, known, hidden or secret_key)
        return out
    if isinstance(value, list):
        return [redact(item, known, hidden) for item in value]
    if hidden and value not in (None, "", True, False):
        return HIDDEN
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "{[" and len(stripped) > 1:  # JSON inside a string: last-applied-configuration
            try:
                inner = json.loads(stripped)
            except ValueError:
                pass
            else:
                return json.dumps(redact(inner, known), separators=(",", ":"))
        return scrub_text(value, known)
    return value
