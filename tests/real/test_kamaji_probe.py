"""wait-kamaji.sh's probe before the real API server v1.36.4 with Kamaji 26.8.2-edge's CRDs installed.

Boundary: the API server's own judgement of a TenantControlPlane, the CRD's OpenAPI schema and its
x-kubernetes-validations (charts/kamaji/crds/kamaji.clastix.io_tenantcontrolplanes.yaml), and its words as the
real kubectl prints them; no Kamaji webhook runs here (the unit tier's fake kubectl answers for those). The
probe the script used to send, written by hand, is refused by the CRD's rule on spec; the one the program hands
it (webhook_probe: each tenant's spec as created) passes a server-side dry run; and wait-kamaji.sh stops at once
on the refusal instead of waiting out its deadline.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from shared_data import ROOT, upstream_path

from model.config.loading import load_stack_file
from model.docker_lab.kamaji import webhook_probe
from model.names import KAMAJI_DATASTORE, KAMAJI_NAMESPACE
from tests.acceptance.helpers import wait_until
from tests.real.cluster import POLL, Cluster

pytestmark = pytest.mark.real

# What wait-kamaji.sh dry-ran before the probe came from the program (its here-document, PROBE_VERSION v1.36.4).
HAND_WRITTEN_PROBE = f"""apiVersion: kamaji.clastix.io/v1alpha1
kind: TenantControlPlane
metadata: {{name: gpulab-webhook-probe, namespace: {KAMAJI_NAMESPACE}}}
spec:
  dataStore: {KAMAJI_DATASTORE}
  controlPlane: {{service: {{serviceType: ClusterIP}}}}
  kubernetes: {{version: v1.36.4, kubelet: {{}}}}
"""
DRY_RUN = ("create", "--dry-run=server", "-o", "name", "-f", "-")


@pytest.fixture(scope="module")
def kamaji_api(cluster: Cluster) -> Cluster:
    """The real cluster with Kamaji's CRDs established, its namespace, and a DataStore reporting ready (what
    wait-kamaji.sh waits for first; Kamaji's controller sets it, here the test does)."""
    for crd in ("kamaji/tenantcontrolplanes.crd.yaml", "kamaji/datastores.crd.yaml"):
        document = yaml.safe_load(upstream_path(crd).read_text())
        # Server-side: the TenantControlPlane CRD (700 kB) is too large for client-side apply's annotation.
        cluster.ok("apply", "--server-side", "--field-manager=gpulab-test", "-f", "-", stdin=document)
        name = document["metadata"]["name"]
        wait_until(lambda name=name: established(cluster, name), 60, f"CRD {name} established", interval=POLL)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KAMAJI_NAMESPACE}}
    cluster.ok("apply", "--server-side", "--field-manager=gpulab-test", "-f", "-", stdin=namespace)
    pem = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="  # the schema asks base64 bytes; nothing reads them here
    pair = {"certificate": {"content": pem}, "privateKey": {"content": pem}}
    datastore = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "DataStore",
        "metadata": {"name": KAMAJI_DATASTORE},
        "spec": {
            "driver": "etcd",
            "endpoints": ["kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local:2379"],
            "tlsConfig": {"certificateAuthority": pair, "clientCertificate": pair},
        },
    }
    cluster.ok("apply", "--server-side", "--field-manager=gpulab-test", "-f", "-", stdin=datastore)
    cluster.ok(
        "patch",
        "datastore",
        KAMAJI_DATASTORE,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"ready":true}}',
    )
    return cluster


def established(cluster: Cluster, name: str) -> bool:
    """The CRD's Established condition (its conditions are null until the API server has judged its names)."""
    conditions = ((cluster.get("crd", name) or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def reference_probe() -> str:
    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    return webhook_probe(lab.tenants, KAMAJI_NAMESPACE, lab.management.control_plane_startup_seconds)


def test_the_hand_written_probe_is_refused_by_the_crds_rule(kamaji_api: Cluster) -> None:
    result = kamaji_api.kubectl(*DRY_RUN, stdin=yaml.safe_load(HAND_WRITTEN_PROBE))
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'The TenantControlPlane "gpulab-webhook-probe" is invalid: ' in result.stderr, result.stderr
    assert "no such key: networkProfile" in result.stderr, result.stderr


def test_the_programs_probe_passes_a_server_side_dry_run(kamaji_api: Cluster) -> None:
    probe = json.loads(reference_probe())
    result = kamaji_api.kubectl(*DRY_RUN, stdin=probe)
    assert result.returncode == 0, result.stderr
    names = sorted(result.stdout.split())
    assert names == [f"tenantcontrolplane.kamaji.clastix.io/{item['metadata']['name']}" for item in probe["items"]]


def wait_kamaji(cluster: Cluster, probe: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """scripts/wait-kamaji.sh as the program runs it: the kubeconfig on stdin, its settings in the environment."""
    environment = {**cluster.env(), "PROBE_JSON": probe, "TIMEOUT": "60", "TMPDIR": str(tmp_path)}
    environment.pop("KUBECONFIG")
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "wait-kamaji.sh")],
        input=cluster.kubeconfig.read_text(),
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def test_wait_kamaji_admits_the_programs_probe(kamaji_api: Cluster, tmp_path: Path) -> None:
    result = wait_kamaji(kamaji_api, reference_probe(), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ready: Kamaji's webhooks and CRD to admit the tenants' TenantControlPlanes" in result.stderr


def test_wait_kamaji_stops_at_once_on_the_crds_refusal(kamaji_api: Cluster, tmp_path: Path) -> None:
    """The real API server's words for a CRD rule's refusal (the hand-written probe's) end the wait at its first
    attempt (the unit tier counts the attempts; here the words are the API server's own)."""
    probe = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(HAND_WRITTEN_PROBE)]}
    result = wait_kamaji(kamaji_api, json.dumps(probe), tmp_path)
    assert result.returncode == 1
    assert "stopped waiting for Kamaji's webhooks and CRD to admit the tenants' TenantControlPlanes" in result.stderr
    assert "the API server's validation refuses the object" in result.stderr, result.stderr
    assert "is invalid: " in result.stderr and "timed out" not in result.stderr, result.stderr
