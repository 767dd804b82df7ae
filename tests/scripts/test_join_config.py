"""Join material made on the Pulumi host for every worker (SSH machines, node containers): the CA pin, the
token and its Secret."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from shared_data import ROOT

from scripts.join_config import ca_cert_hash, join_configuration, new_token, token_secret
from tests.scripts.test_scripts import FAKES

# kubeadm's own test vector (kubernetes/kubernetes cmd/kubeadm/app/util/pubkeypin/pubkeypin_test.go,
# testCertPEM and expectedHash): a certificate and the discovery pin kubeadm computes for it.
KUBEADM_TEST_CERT = """-----BEGIN CERTIFICATE-----
MIIDRDCCAiygAwIBAgIJAJgVaCXvC6HkMA0GCSqGSIb3DQEBBQUAMB8xHTAbBgNV
BAMTFGt1YmVhZG0ta2V5cGlucy10ZXN0MCAXDTE3MDcwNTE3NDMxMFoYDzIxMTcw
NjExMTc0MzEwWjAfMR0wGwYDVQQDExRrdWJlYWRtLWtleXBpbnMtdGVzdDCCASIw
DQYJKoZIhvcNAQEBBQADggEPADCCAQoCggEBAK0ba8mHU9UtYlzM1Own2Fk/XGjR
J4uJQvSeGLtz1hID1IA0dLwruvgLCPadXEOw/f/IWIWcmT+ZmvIHZKa/woq2iHi5
+HLhXs7aG4tjKGLYhag1hLjBI7icqV7ovkjdGAt9pWkxEzhIYClFMXDjKpMSynu+
YX6nZ9tic1cOkHmx2yiZdMkuriRQnpTOa7bb03OC1VfGl7gHlOAIYaj4539WCOr8
+ACTUMJUFEHcRZ2o8a/v6F9GMK+7SC8SJUI+GuroXqlMAdhEv4lX5Co52enYaClN
+D9FJLRpBv2YfiCQdJRaiTvCBSxEFz6BN+PtP5l2Hs703ZWEkOqCByM6HV8CAwEA
AaOBgDB+MB0GA1UdDgQWBBRQgUX8MhK2rWBWQiPHWcKzoWDH5DBPBgNVHSMESDBG
gBRQgUX8MhK2rWBWQiPHWcKzoWDH5KEjpCEwHzEdMBsGA1UEAxMUa3ViZWFkbS1r
ZXlwaW5zLXRlc3SCCQCYFWgl7wuh5DAMBgNVHRMEBTADAQH/MA0GCSqGSIb3DQEB
BQUAA4IBAQCaAUif7Pfx3X0F08cxhx8/Hdx4jcJw6MCq6iq6rsXM32ge43t8OHKC
pJW08dk58a3O1YQSMMvD6GJDAiAfXzfwcwY6j258b1ZlI9Ag0VokvhMl/XfdCsdh
AWImnL1t4hvU5jLaImUUMlYxMcSfHBGAm7WJIZ2LdEfg6YWfZh+WGbg1W7uxLxk6
y4h5rWdNnzBHWAGf7zJ0oEDV6W6RSwNXtC0JNnLaeIUm/6xdSddJlQPwUv8YH4jX
c1vuFqTnJBPcb7W//R/GI2Paicm1cmns9NLnPR35exHxFTy+D1yxmGokpoPMdife
aH+sfuxT8xeTPb3kjzF9eJTlnEquUDLM
-----END CERTIFICATE-----
"""
KUBEADM_EXPECTED_HASH = "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3"
KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [
            {
                "name": "t",
                "cluster": {
                    "server": "https://172.30.255.201:6443",
                    "certificate-authority-data": base64.b64encode(KUBEADM_TEST_CERT.encode()).decode(),
                },
            }
        ],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "admin"}}],
        "users": [{"name": "admin", "user": {"client-key-data": "c2VjcmV0"}}],
    }
)


def test_ca_pin_matches_kubeadms_test_vector() -> None:
    assert ca_cert_hash(KUBEADM_TEST_CERT) == KUBEADM_EXPECTED_HASH


def test_token_is_kubeadm_shaped_and_random() -> None:
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50
    for token_id, secret in tokens:
        assert re.fullmatch(r"[a-z0-9]{6}", token_id) and re.fullmatch(r"[a-z0-9]{16}", secret)


def test_token_secret_is_what_kubeadm_creates() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    secret = token_secret("abcdef", "0123456789abcdef", timedelta(minutes=15), now)
    assert secret["metadata"] == {"name": "bootstrap-token-abcdef", "namespace": "kube-system"}
    assert secret["type"] == "bootstrap.kubernetes.io/token"
    data = secret["stringData"]
    assert data["expiration"] == "2026-11-30T12:15:00Z"
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubeadm:default-node-token"


def test_join_configuration() -> None:
    config = join_configuration("10.0.0.5:6443", "abcdef", "0123456789abcdef", "sha256:5e1f", "gpu-1", ["Swap"])
    assert config["apiVersion"] == "kubeadm.k8s.io/v1beta4" and config["kind"] == "JoinConfiguration"
    assert config["discovery"]["bootstrapToken"] == {
        "apiServerEndpoint": "10.0.0.5:6443",
        "token": "abcdef.0123456789abcdef",
        "caCertHashes": ["sha256:5e1f"],
    }
    assert config["nodeRegistration"] == {"ignorePreflightErrors": ["Swap"], "name": "gpu-1"}


def run_join_config(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """join-config.sh as a worker's `<prefix>-join-config` Command runs it, against the fake kubectl (the tenant)."""
    environment = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "NODE_NAME": "gpu-1",
        "TENANT": "tenant-a",
        "IGNORE_PREFLIGHT": "Swap",
        "PYTHONPATH": str(ROOT),
        "GPULAB_POLL_INTERVAL": "0.05",
        **env,
    }
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "join-config.sh")],
        input=KUBECONFIG,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


@pytest.mark.integration
def test_join_config_script_makes_the_token_here_and_prints_only_the_join_configuration(tmp_path: Path) -> None:
    result = run_join_config(tmp_path)
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    token = config["discovery"]["bootstrapToken"]["token"]
    assert config["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "172.30.255.201:6443"
    assert config["discovery"]["bootstrapToken"]["caCertHashes"] == [KUBEADM_EXPECTED_HASH]
    applied = (tmp_path / "applied").read_text()
    assert f"bootstrap-token-{token.split('.')[0]}" in applied and token.split(".")[1] in applied
    calls = (tmp_path / "calls").read_text()
    assert token.split(".")[1] not in calls and "create -f" in calls, "the token goes through a file, not argv"
    # `kubectl apply` (or create --save-config) would copy the token into last-applied-configuration.
    assert " apply " not in calls and "--save-config" not in calls
    assert token.split(".")[1] not in result.stderr
    assert not list(tmp_path.glob("gpulab-run.*"))


@pytest.mark.integration
def test_join_config_waits_while_the_tenant_refuses_the_token(tmp_path: Path) -> None:
    """Kamaji's soot controller makes the kubeadm RBAC after the control plane turns Ready; until then creating
    the token is Forbidden, and join-config.sh retries."""
    result = run_join_config(tmp_path, FAKE_FORBIDDEN="3")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text().count(" create -f ") == 4
    assert yaml.safe_load(result.stdout)["kind"] == "JoinConfiguration"


@pytest.mark.integration
def test_join_config_gives_up_at_its_deadline_and_says_why(tmp_path: Path) -> None:
    result = run_join_config(tmp_path, FAKE_FORBIDDEN="100000", TIMEOUT="1")
    assert result.returncode == 1
    assert "timed out after 1s waiting for tenant tenant-a to accept a bootstrap token for gpu-1" in result.stderr
    assert "is forbidden" in result.stderr, "the last error must be shown"
    assert result.stdout == "", "no material for a token the tenant does not have"
