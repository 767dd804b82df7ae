"""Tenant keys stay in memory: `policies check --live`, `make report` and `make verify` build their Kubernetes
clients with boundary.kube_client, never letting the client write a key to $TMPDIR (where TERM or KILL would
leave it)."""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from shared_data import ROOT

KEY_MARK = b"-----BEGIN PRIVATE KEY-----\nGPULABTESTKEY"


def kubeconfig(ca: bytes, cert: bytes, key: bytes, server: str = "https://127.0.0.1:6443") -> dict:
    b64 = lambda data: base64.standard_b64encode(data).decode()  # noqa: E731
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "admin"}}],
        "users": [{"name": "admin", "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
    }


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import tempfile

    import boundary.kube_client as kube_client

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(kube_client, "_private_dir", None)
    return tmp_path


def test_the_kubernetes_client_alone_writes_the_key_to_tmpdir(private_tmp: Path) -> None:
    """The boundary this module exists for (kubernetes/config/kube_config.py, _create_temp_file_with_content)."""
    from kubernetes import config as kube_config

    kube_config.new_client_from_config_dict(kubeconfig(b"CA", b"CERT", KEY_MARK))
    assert any(KEY_MARK in path.read_bytes() for path in files_under(private_tmp))
    kube_config.kube_config._cleanup_temp_files()


def test_api_client_keeps_keys_in_memory(private_tmp: Path) -> None:
    from boundary.kube_client import api_client

    client = api_client(kubeconfig(b"CA", b"CERT", KEY_MARK))
    configuration = client.configuration
    for path in (configuration.key_file, configuration.cert_file, configuration.ssl_ca_cert):
        assert path.startswith("/proc/self/fd/"), path
    assert Path(configuration.key_file).read_bytes() == KEY_MARK
    assert files_under(private_tmp) == [], "a key or certificate was written to $TMPDIR"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI to make test certificates")
def test_mutual_tls_works_with_keys_in_memory(private_tmp: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """An API server that demands a client certificate answers a client whose key is only in memory."""
    pki = tmp_path_factory.mktemp("pki")
    # The client's key is RSA, as kubeadm and kind write it; the CA's and the server's are EC (an RSA key
    # takes 0.2 CPU-s to generate).
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    openssl("req", "-x509", *ec, "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
            "-subj", "/CN=gpulab-test-ca", cwd=pki)  # fmt: skip
    for name, key, extra in (
        ("server", ec, ["-addext", "subjectAltName=IP:127.0.0.1"]),
        ("client", ["-newkey", "rsa:2048"], []),
    ):
        openssl("req", *key, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}", *extra, cwd=pki)  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "1", "-copy_extensions", "copy", cwd=pki)  # fmt: skip

    class Version(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fields = ("buildDate", "compiler", "gitCommit", "gitTreeState", "goVersion", "platform")
            body = json.dumps({"major": "1", "minor": "36", "gitVersion": "v1.36.4", **dict.fromkeys(fields, "")})
            body = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Version)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    context.load_verify_locations(pki / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no answer
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from kubernetes import client

        from boundary.kube_client import api_client

        config = kubeconfig(
            (pki / "ca.crt").read_bytes(),
            (pki / "client.crt").read_bytes(),
            (pki / "client.key").read_bytes(),
            server=f"https://127.0.0.1:{server.server_address[1]}",
        )
        version = client.VersionApi(api_client(config)).get_code(_request_timeout=10)
        assert version.git_version == "v1.36.4"
        assert files_under(private_tmp) == []
    finally:
        server.shutdown()


@pytest.mark.integration
def test_nothing_is_left_on_term_and_a_killed_runs_directory_goes_next_time(tmp_path: Path) -> None:
    script = (
        "import sys, time; import yaml\n"
        "from boundary.kube_client import api_client\n"
        "api_client(yaml.safe_load(sys.stdin.read()))\n"
        "print('ready', flush=True); time.sleep(60)\n"
    )
    import yaml

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        process = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=ROOT,  # python -c finds gpulab's packages in the current folder
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        process.stdin.write(yaml.safe_dump(kubeconfig(b"CA", b"CERT", KEY_MARK)))
        process.stdin.close()
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(sig)
        process.wait(timeout=10)
        assert not any(KEY_MARK in path.read_bytes() for path in files_under(tmp_path)), sig
        left = list(tmp_path.glob("gpulab-kube.*"))
        assert left == [] if sig == signal.SIGTERM else len(left) == 1, (sig, left)
    quick = script.replace("time.sleep(60)", "pass")
    stdin = yaml.safe_dump(kubeconfig(b"CA", b"CERT", KEY_MARK))
    subprocess.run([sys.executable, "-c", quick], cwd=ROOT, input=stdin, env=env, text=True, timeout=60, check=True)
    assert list(tmp_path.glob("gpulab-kube.*")) == [], "the KILLed run's directory outlived the next run"
