"""A local HTTPS server standing in for upstream's download sites (its own certificate, which a test hands to
Python's default TLS context through SSL_CERT_FILE, as a user's own CA would be), and a host that accepts a
connection and never answers."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import threading
from pathlib import Path


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (cert.pem, key.pem)."""
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


class Site:
    """A local HTTPS server: `files` maps a path (/<host>/<path>, as GPULAB_SOURCE_MIRROR lays upstream out) to
    its bytes; anything else is a 404."""

    def __init__(self, certificate: tuple[Path, Path]) -> None:
        self.files: dict[str, bytes] = {}
        self.asked: list[str] = []  # every path asked for, in order
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.asked.append(self.path)
                body = site.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"not here")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*certificate)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, url: str, body: bytes) -> None:
        self.files["/" + url.removeprefix("https://")] = body


class SilentHost:
    """A TCP port that accepts connections and never says a word (a hung server, not a refused connection)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.url = f"https://127.0.0.1:{self.socket.getsockname()[1]}"

    def close(self) -> None:
        self.socket.close()
