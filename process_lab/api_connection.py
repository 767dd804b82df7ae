"""One kept-alive connection to a tenant's API server, made from its kubeconfig, for a long-running role's writes.

kubectl costs a process, a kubeconfig read and a TLS handshake per call; the bind-time role
(process_lab/device_plugin.py) writes twice for every GPU pod HAMi binds, so at HAMi's pace its kubectl calls
were a share of the lab's CPU of their own. Here each write is one request on a connection that stays open.

What is read of the kubeconfig is what client-go reads for a current context (tools/clientcmd): the cluster's
`server` and its CA (`certificate-authority` or `-data`), the user's client certificate and key files or its
`token`; a relative path is taken from the kubeconfig's folder. An `http://` server is spoken to in
the clear, as client-go does. Every request has a deadline; a connection the server closed while idle is
opened again once (the writes are merge patches: sending one twice changes nothing more).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from process_lab.commands import ProcessLabError

MERGE_PATCH = "application/merge-patch+json"


def _pem(section: dict[str, Any], key: str, base: Path) -> bytes | None:
    """A PEM the kubeconfig gives inline (`KEY-data`) or as a path (`KEY`), relative to its folder."""
    if section.get(f"{key}-data"):
        return base64.standard_b64decode(section[f"{key}-data"])
    if section.get(key):
        return (base / section[key]).read_bytes()
    return None


def tls_context(cluster: dict[str, Any], user: dict[str, Any], base: Path) -> ssl.SSLContext:
    """The server verified against the kubeconfig's CA (else the system's), and the client's certificate and key
    from the files the kubeconfig names (kwokctl's does: `pki/admin.crt`, `pki/admin.key`). ssl loads a key from
    a file only, so an inline key is refused rather than copied to disk."""
    ca = _pem(cluster, "certificate-authority", base)
    context = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if user.get("client-certificate-data") or user.get("client-key-data"):
        raise ProcessLabError("an inline client key is not read here: a kubeconfig naming its key file is")
    if user.get("client-certificate") and user.get("client-key"):
        context.load_cert_chain(base / user["client-certificate"], base / user["client-key"])
    return context


class ApiConnection:
    """Requests to the API server a kubeconfig's current context names, on one kept-alive connection."""

    def __init__(self, kubeconfig: Path, timeout: float = 30) -> None:
        document = yaml.safe_load(kubeconfig.read_text()) or {}
        current = document.get("current-context")
        contexts = {c["name"]: c.get("context") or {} for c in document.get("contexts") or []}
        context = contexts.get(current) or next(iter(contexts.values()), {})
        cluster = next(
            (c.get("cluster") or {} for c in document.get("clusters") or [] if c["name"] == context.get("cluster")), {}
        )
        user = next((u.get("user") or {} for u in document.get("users") or [] if u["name"] == context.get("user")), {})
        self.server = str(cluster.get("server") or "")
        url = urllib.parse.urlsplit(self.server)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise ProcessLabError(f"{kubeconfig}: no API server (https://HOST:PORT) in its current context")
        self._host, self._port, self._timeout = url.hostname, url.port, timeout
        self._tls = tls_context(cluster, user, kubeconfig.parent) if url.scheme == "https" else None
        self._headers = {"Authorization": f"Bearer {user['token']}"} if user.get("token") else {}
        self._connection: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            if self._tls is not None:
                self._connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=self._tls
                )
            else:
                self._connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def merge_patch(self, path: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """PATCH `path` with a JSON merge patch: the answer's status and body (a Status on failure)."""
        body = json.dumps(patch).encode()
        headers = {**self._headers, "Content-Type": MERGE_PATCH, "Accept": "application/json"}
        for attempt in (1, 2):
            connection = self._connect()
            try:
                connection.request("PATCH", path, body=body, headers=headers)
                response = connection.getresponse()
                answer = response.read()
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if attempt == 2 or isinstance(error, TimeoutError):
                    raise ProcessLabError(f"PATCH {path} on {self.server}: {error or type(error).__name__}") from None
                continue
            try:
                return response.status, json.loads(answer) if answer else {}
            except ValueError:
                return response.status, {"message": answer[:200].decode(errors="replace")}
        raise AssertionError("unreachable")  # pragma: no cover
