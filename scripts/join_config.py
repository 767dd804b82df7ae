"""Join material for a worker (an SSH machine or a node container), made on the Pulumi host: the worker
receives only a kubeadm JoinConfiguration, never the tenant's admin kubeconfig.

- a bootstrap token (random id and secret, `secrets` module) as the Secret kubeadm itself would
  create (`kube-system/bootstrap-token-<id>`, type bootstrap.kubernetes.io/token, usages
  authentication and signing, group system:bootstrappers:kubeadm:default-node-token), expiring;
- the CA pin kubeadm checks during discovery: sha256 over the DER SubjectPublicKeyInfo of the
  tenant's CA certificate (kubeadm `pubkeypin.Hash`; RFC 7469), taken from the admin kubeconfig;
- the JoinConfiguration (kubeadm.k8s.io/v1beta4) with endpoint, token, pin, node name and preflight
  exceptions.

`python -m scripts.join_config --kubeconfig F --secret OUT --join OUT [--node-name N]
[--ignore-preflight A,B] [--ttl-minutes 15]` writes both files with mode 0600; the token is never on
a command line or in a log.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import secrets
import string
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

TOKEN_GROUP = "system:bootstrappers:kubeadm:default-node-token"
_ALPHABET = string.ascii_lowercase + string.digits  # kubeadm's token charset: [a-z0-9]
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.DOTALL)


class JoinConfigError(ValueError):
    pass


def _der_element(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of content, end of element) of the DER element at `offset`."""
    if offset + 2 > len(data):
        raise JoinConfigError("truncated certificate")
    tag, length = data[offset], data[offset + 1]
    offset += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or offset + count > len(data):
            raise JoinConfigError("unsupported DER length in certificate")
        length = int.from_bytes(data[offset : offset + count], "big")
        offset += count
    if offset + length > len(data):
        raise JoinConfigError("truncated certificate")
    return tag, offset, offset + length


def subject_public_key_info(der: bytes) -> bytes:
    """The DER SubjectPublicKeyInfo of an X.509 certificate (RFC 5280 4.1: the 7th field of
    tbsCertificate, counting the optional [0] version)."""
    tag, start, _ = _der_element(der, 0)  # Certificate ::= SEQUENCE
    if tag != 0x30:
        raise JoinConfigError("not an X.509 certificate")
    tag, start, end = _der_element(der, start)  # tbsCertificate ::= SEQUENCE
    if tag != 0x30:
        raise JoinConfigError("not an X.509 certificate")
    position = start
    first, _, first_end = _der_element(der, position)
    if first == 0xA0:  # [0] EXPLICIT version
        position = first_end
    # serialNumber, signature, issuer, validity, subject, then subjectPublicKeyInfo
    for _ in range(5):
        _, _, position = _der_element(der, position)
    tag, _, spki_end = _der_element(der, position)
    if tag != 0x30 or spki_end > end:
        raise JoinConfigError("certificate has no SubjectPublicKeyInfo where X.509 puts it")
    return der[position:spki_end]


def ca_cert_hash(pem: str) -> str:
    """kubeadm's discovery pin of a CA certificate: `sha256:<hex>` of its SubjectPublicKeyInfo."""
    match = _PEM.search(pem)
    if not match:
        raise JoinConfigError("no PEM certificate found")
    der = base64.b64decode("".join(match.group(1).split()))
    return "sha256:" + hashlib.sha256(subject_public_key_info(der)).hexdigest()


def tenant_endpoint_and_ca(kubeconfig: dict) -> tuple[str, str]:
    """(host:port of the API server, CA PEM) of a kubeconfig's current cluster."""
    try:
        contexts = {c["name"]: c["context"] for c in kubeconfig.get("contexts") or []}
        clusters = {c["name"]: c["cluster"] for c in kubeconfig["clusters"]}
        current = kubeconfig.get("current-context")
        cluster = clusters[contexts[current]["cluster"]] if current in contexts else next(iter(clusters.values()))
        server = cluster["server"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    except (KeyError, TypeError, StopIteration, ValueError) as error:
        raise JoinConfigError(f"the tenant kubeconfig lacks a cluster server or CA data ({error})") from None
    endpoint = re.sub(r"^https://", "", server).rstrip("/")
    return endpoint, ca


def new_token() -> tuple[str, str]:
    """(id, secret): 6 and 16 characters of [a-z0-9], as kubeadm generates them."""
    return (
        "".join(secrets.choice(_ALPHABET) for _ in range(6)),
        "".join(secrets.choice(_ALPHABET) for _ in range(16)),
    )


def token_secret(token_id: str, token: str, ttl: timedelta, now: datetime | None = None) -> dict:
    expires = (now or datetime.now(UTC)) + ttl
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "description": "gpulab: joins one worker; deleted after the join",
            "token-id": token_id,
            "token-secret": token,
            "expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": TOKEN_GROUP,
        },
    }


def join_configuration(
    endpoint: str, token_id: str, token: str, ca_hash: str, node_name: str | None, ignore: list[str]
) -> dict:
    registration: dict = {"ignorePreflightErrors": ignore}
    if node_name:
        registration["name"] = node_name
    return {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": endpoint,
                "token": f"{token_id}.{token}",
                "caCertHashes": [ca_hash],
            }
        },
        "nodeRegistration": registration,
    }


EXPIRY_COMMENT = "# gpulab: token expires "


def _write_private(path: Path, document: dict, header: str = "") -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(header)
        yaml.safe_dump(document, handle, sort_keys=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.join_config")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--secret", type=Path, required=True, help="where to write the token Secret manifest")
    parser.add_argument("--join", type=Path, required=True, help="where to write the JoinConfiguration")
    parser.add_argument("--node-name")
    parser.add_argument("--ignore-preflight", default="")
    parser.add_argument("--ttl-minutes", type=int, default=15)
    args = parser.parse_args(argv)
    try:
        kubeconfig = yaml.safe_load(args.kubeconfig.read_text())
        endpoint, ca = tenant_endpoint_and_ca(kubeconfig if isinstance(kubeconfig, dict) else {})
        pin = ca_cert_hash(ca)
    except (OSError, yaml.YAMLError, JoinConfigError) as error:
        print(f"[gpulab] ERROR: cannot make join material: {error}", file=sys.stderr)
        return 1
    token_id, token = new_token()
    ignore = [item for item in args.ignore_preflight.split(",") if item]
    secret = token_secret(token_id, token, timedelta(minutes=args.ttl_minutes))
    _write_private(args.secret, secret)
    # The machine checks this before joining: a retried join after the token expired says what to do.
    header = f"{EXPIRY_COMMENT}{secret['stringData']['expiration']}\n"
    _write_private(args.join, join_configuration(endpoint, token_id, token, pin, args.node_name, ignore), header)
    print(f"[gpulab] bootstrap token {token_id} made for {args.node_name or 'the worker'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
