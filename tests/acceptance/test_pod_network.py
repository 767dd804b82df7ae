"""TC-20..TC-22: each tenant's pod network, as its workloads meet it (`make verify`).

Pods get addresses from the tenant's podCidr (the seed's `CALICO_IPV4POOL_CIDR`), a Service answers by its
ClusterIP and its DNS name, and, where Calico is the pod network, a NetworkPolicy denies what it says. Every
probe runs in a pod of the lab's own workload image (busybox: `httpd`, `nc`, `nslookup`), so nothing is pulled.
Docker lab only: KWOK nodes run no pod, and real nodes run the bridge plugin of gpulab's node image.
"""

from __future__ import annotations

import ipaddress

import pytest
from kubernetes import client

from tests.acceptance.helpers import SUITE_LABEL, disposable_namespace, image_pull_problem, wait_until

PORT = 8080
PAGE = "gpulab-pod-network"
# Kamaji's TenantControlPlane default (networkProfile.clusterDomain: `default: cluster.local` in its CRD,
# shared/upstream/kamaji/tenantcontrolplanes.crd.yaml); gpulab does not set another.
CLUSTER_DOMAIN = "cluster.local"


def server_pod(image: str) -> dict:
    """busybox httpd serving one page on PORT."""
    script = f"mkdir -p /www && echo {PAGE} > /www/index.html && exec httpd -f -p {PORT} -h /www"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "server", "labels": {SUITE_LABEL: "true", "app": "server"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "httpd", "image": image, "command": ["sh", "-c", script], "ports": [{"containerPort": PORT}]}
            ],
        },
    }


def probe_pod(name: str, image: str, script: str, labels: dict[str, str] | None = None) -> dict:
    """A pod that runs `script` once: Succeeded when it exits 0."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {SUITE_LABEL: "true", **(labels or {})}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "probe", "image": image, "command": ["sh", "-c", script]}],
        },
    }


def run_probe(api: client.CoreV1Api, namespace: str, pod: dict, timeout: float = 120) -> tuple[str, str]:
    """Creates the probe pod and waits until it has ended: its phase and its log."""
    api.create_namespaced_pod(namespace, pod)
    name = pod["metadata"]["name"]

    def ended():
        current = api.read_namespaced_pod(name, namespace)
        problem = image_pull_problem(current)
        assert problem is None, problem
        return current.status.phase if current.status.phase in ("Succeeded", "Failed") else None

    phase = wait_until(ended, timeout, f"probe pod {namespace}/{name} to end")
    return phase, api.read_namespaced_pod_log(name, namespace)


def serve(api: client.CoreV1Api, namespace: str, image: str) -> tuple[str, str]:
    """The server pod Running and its Service: (pod IP, Service ClusterIP)."""
    api.create_namespaced_pod(namespace, server_pod(image))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "server", "labels": {SUITE_LABEL: "true"}},
        "spec": {"selector": {"app": "server"}, "ports": [{"port": PORT, "targetPort": PORT}]},
    }
    cluster_ip = api.create_namespaced_service(namespace, service).spec.cluster_ip

    def running():
        pod = api.read_namespaced_pod("server", namespace)
        problem = image_pull_problem(pod)
        assert problem is None, problem
        return pod.status.pod_ip if pod.status.phase == "Running" and pod.status.pod_ip else None

    pod_ip = wait_until(running, 180, f"pod {namespace}/server to be Running with an address")
    return pod_ip, cluster_ip


def get(target: str, timeout: int) -> str:
    """A shell command that fetches the page from `target` with busybox `nc` and succeeds on it. Not busybox `wget`:
    Debian's static busybox (the lab's stand-in image and real nodes' localhost/gpulab/busybox) segfaults in it."""
    request = "printf 'GET / HTTP/1.0\\r\\n\\r\\n'"
    return f"{request} | nc -w {timeout} {target} {PORT} | grep -qx {PAGE}"


def fetch_script(target: str, attempts: int) -> str:
    """Fetches the page from `target` until it answers, `attempts` times at most (a new endpoint or policy takes
    a moment to be programmed): exit 0 on the page."""
    return (
        f"for i in $(seq {attempts}); do if {get(target, 3)}; then echo reached; exit 0; fi; sleep 1; done; "
        "echo unreachable; exit 1"
    )


def docker_lab_tenants(lab) -> list:
    lab.needs_containers("a pod network of node containers (KWOK nodes run no pod)")
    if lab.config.real_nodes:
        pytest.skip("Docker lab only: real nodes run the bridge plugin of gpulab's node image")
    return list(lab.config.tenants)


def test_tc20_pods_get_addresses_from_the_tenant_pod_cidr(lab) -> None:
    for tenant in docker_lab_tenants(lab):
        api = client.CoreV1Api(lab.tenants[tenant.name])
        with disposable_namespace(api) as namespace:
            pod_ip, _ = serve(api, namespace, lab.config.versions.workload_image)
            assert ipaddress.ip_address(pod_ip) in ipaddress.ip_network(tenant.pod_cidr), (tenant.name, pod_ip)


def test_tc21_service_answers_by_cluster_ip_and_dns_name(lab) -> None:
    image = lab.config.versions.workload_image
    for tenant in docker_lab_tenants(lab):
        api = client.CoreV1Api(lab.tenants[tenant.name])
        with disposable_namespace(api) as namespace:
            _, cluster_ip = serve(api, namespace, image)
            assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(tenant.service_cidr), cluster_ip
            phase, log = run_probe(api, namespace, probe_pod("by-ip", image, fetch_script(cluster_ip, 30)))
            assert phase == "Succeeded", f"{tenant.name}: the Service's ClusterIP {cluster_ip} did not answer: {log}"
            name = f"server.{namespace}.svc.{CLUSTER_DOMAIN}"
            # The tenant's DNS must answer the Service's name with its ClusterIP.
            lookup = f"for i in $(seq 30); do nslookup {name} && exit 0; sleep 1; done; exit 1"
            phase, log = run_probe(api, namespace, probe_pod("by-name", image, lookup))
            assert phase == "Succeeded" and cluster_ip in log, f"{tenant.name}: {name} did not resolve: {log}"


def test_tc22_network_policy_denies_what_it_says(lab) -> None:
    if lab.config.pod_network != "calico":
        pytest.skip("the bridge plugin enforces no NetworkPolicy (cni: bridge)")
    image = lab.config.versions.workload_image
    for tenant in docker_lab_tenants(lab):
        api = client.CoreV1Api(lab.tenants[tenant.name])
        with disposable_namespace(api) as namespace:
            pod_ip, _ = serve(api, namespace, image)
            policy = {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": "server-from-allowed", "labels": {SUITE_LABEL: "true"}},
                "spec": {
                    "podSelector": {"matchLabels": {"app": "server"}},
                    "policyTypes": ["Ingress"],
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "allowed"}}}]}],
                },
            }
            client.NetworkingV1Api(lab.tenants[tenant.name]).create_namespaced_network_policy(namespace, policy)
            allowed = probe_pod("allowed", image, fetch_script(pod_ip, 30), {"role": "allowed"})
            phase, log = run_probe(api, namespace, allowed)
            assert phase == "Succeeded", f"{tenant.name}: a pod the policy admits did not reach the server: {log}"
            # Denied once Calico has programmed the policy: the first refusal is awaited, then it must hold.
            denied = (
                f"for i in $(seq 30); do {get(pod_ip, 2)} || break; sleep 1; done; "
                f"for i in 1 2 3; do if {get(pod_ip, 2)}; then echo reached; exit 1; fi; done; echo denied"
            )
            phase, log = run_probe(api, namespace, probe_pod("denied", image, denied))
            assert phase == "Succeeded" and "denied" in log, f"{tenant.name}: the policy let an unlisted pod in: {log}"
