"""`make diagnose`: verdicts on constructed objects, redaction, bounded calls, and end to end through
recorded fakes of docker, kind, kubectl and pulumi (tests/fakes/lab) describing broken labs.

Objects are shaped as the API server sends them: quantities in canonical form ("49152", "200"),
events with involvedObject and lastTimestamp, EndpointSlice endpoints whose `ready` may be absent
(nil means ready), TenantControlPlane status at .status.kubernetesResources.version.status.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT, lab_config
from shared_data import ROOT

from diagnose import analyze, card_findings, cluster_findings, host_findings
from diagnose.analyze import Cluster
from diagnose.collect import Collected, read_sysctls
from diagnose.redact import HIDDEN, redact, scrub_text
from diagnose.runner import Runner
from model.catalog import totals
from model.config import load_stack_file, parse_config
from model.wings import WINGS

FAKE = ROOT / "tests" / "fakes" / "lab"
LAB = load_stack_file(LAB_PROJECT / "Pulumi.dev.yaml")
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

# --- constructed objects -----------------------------------------------------------------------


def stamp(seconds_ago: float = 60) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, ready: str = "True", reason: str = "KubeletReady", message: str = "", **extra) -> dict:
    # The labels every kubelet gives its node (k8s.io/kubernetes pkg/kubelet/kubelet_node_status.go initialNode).
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    labels |= {"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "annotations": extra.get("annotations", {}), "labels": labels},
        "status": {
            "capacity": extra.get("capacity", {"cpu": "8"}),
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": ready, "reason": reason, "message": message},
            ],
        },
    }


def container_status(name: str, ready: bool = True, waiting: tuple[str, str] | None = None, restarts: int = 0) -> dict:
    state = {"waiting": {"reason": waiting[0], "message": waiting[1]}} if waiting else {"running": {}}
    return {"name": name, "ready": ready, "state": state, "restartCount": restarts}


def pod(
    namespace: str,
    name: str,
    owner: tuple[str, str] | None = None,
    statuses: list[dict] | None = None,
    phase: str = "Running",
    labels: dict | None = None,
    gpu: bool = False,
    conditions: list[dict] | None = None,
    env: list[dict] | None = None,
    annotations: dict | None = None,
) -> dict:
    labels = dict(labels or {})
    refs = []
    if owner:
        kind, owner_name = owner
        if kind == "Deployment":
            labels["pod-template-hash"] = "6d8f9c7b5"
            refs = [{"kind": "ReplicaSet", "name": f"{owner_name}-6d8f9c7b5"}]
        else:
            refs = [{"kind": kind, "name": owner_name}]
    container = {"name": "main", "image": "docker.io/library/busybox:1.37.0", "env": env or []}
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpumem": "20k", "nvidia.com/gpucores": "30"}}
    statuses = [container_status("main")] if statuses is None else statuses
    return {
        "kind": "Pod",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "labels": labels,
            "ownerReferences": refs,
            "annotations": annotations or {},
        },
        "spec": {"containers": [container]},
        "status": {"phase": phase, "containerStatuses": statuses, "conditions": conditions or []},
    }


def event(kind: str, namespace: str | None, name: str, reason: str, message: str, type_: str = "Warning", ago=30):
    return {
        "kind": "Event",
        "metadata": {"namespace": namespace or "default", "name": f"{name}.{reason}"},
        "involvedObject": {"kind": kind, "namespace": namespace, "name": name},
        "reason": reason,
        "message": message,
        "type": type_,
        "lastTimestamp": stamp(ago),
    }


def workload(
    kind: str, namespace: str, name: str, desired: int = 1, ready: int = 1, node_selector: dict | None = None
) -> dict:
    if kind == "DaemonSet":
        # As the API server returns it (tests/real/test_diagnose_daemonsets.py): the counts without omitempty always
        # (k8s.io/api apps/v1 DaemonSetStatus), the others only when not 0.
        status = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired, "numberMisscheduled": 0}
        status |= {"numberReady": ready, "observedGeneration": 1}
        status |= {
            key: value for key, value in (("numberAvailable", ready), ("updatedNumberScheduled", desired)) if value
        }
        if desired > ready:
            status["numberUnavailable"] = desired - ready
        template = {"spec": {"nodeSelector": node_selector}} if node_selector else {"spec": {}}
        return {
            "kind": kind,
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"template": template},
            "status": status,
        }
    return {
        "kind": kind,
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"replicas": desired},
        "status": {"readyReplicas": ready},
    }


def webhook(name: str, service: str, namespace: str = "kube-system", policy: str = "Ignore") -> dict:
    return {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "vgpu.hami.io",
                "failurePolicy": policy,
                "clientConfig": {"service": {"namespace": namespace, "name": service, "path": "/webhook"}},
            }
        ],
    }


def endpoint_slice(namespace: str, service: str, ready: list[bool | None]) -> dict:
    endpoints = []
    for value in ready:
        endpoints.append({"addresses": ["10.244.0.7"], "conditions": {} if value is None else {"ready": value}})
    return {
        "kind": "EndpointSlice",
        "metadata": {"namespace": namespace, "name": f"{service}-1", "labels": {"kubernetes.io/service-name": service}},
        "endpoints": endpoints,
    }


def tcp(tenant: str, state: str = "Ready", address: str | None = "172.18.255.240") -> dict:
    ingress = [{"ip": address}] if address else []
    return {
        "kind": "TenantControlPlane",
        "metadata": {"namespace": f"gpulab-{tenant}", "name": tenant},
        "status": {
            "kubernetesResources": {
                "version": {"status": state, "version": "v1.36.4"},
                "service": {"loadBalancer": {"ingress": ingress}},
            },
            "kubeconfig": {"admin": {"secretName": f"{tenant}-admin-kubeconfig"}},
        },
    }


def gpu_node(tenant_name: str) -> dict:
    tenant = next(t for t in LAB.tenants if t.name == tenant_name)
    capacity = {key: str(value) for key, value in totals(tenant.cards()).items()}
    return node(
        tenant.gpu_node_name(),
        annotations={"hami.io/node-nvidia-register": '[{"id":"GPU-MOCK-0"}]'},
        capacity={"cpu": "8", **capacity},
    )


def healthy_tenant(name: str) -> dict[str, list[dict]]:
    pods = [
        pod("kube-system", f"{component}-abc", (kind, component))
        for kind, component in [*analyze.TENANT_COMPONENTS, analyze.MOCK_PLUGIN]
    ]
    pods.append(pod("gpu-workloads", "trainer-1", gpu=True))
    return {
        "nodes": [gpu_node(name)],
        "pods": pods,
        "events": [event("Pod", "kube-system", "coredns-abc", "Pulled", "Container image already present", "Normal")],
        "workloads": [
            *(workload(kind, "kube-system", name) for kind, name in [*analyze.TENANT_COMPONENTS, analyze.MOCK_PLUGIN]),
            # HAMi's NVIDIA plugin waits for nodes labelled gpu=on, which mock mode never labels: nothing to run.
            workload("DaemonSet", "kube-system", "hami-device-plugin", 0, 0, node_selector={"gpu": "on"}),
        ],
        "webhooks": [webhook("hami-webhook", "hami-scheduler")],
        "endpointslices": [endpoint_slice("kube-system", "hami-scheduler", [None])],
        "admission": [
            {"kind": kind, "metadata": {"name": policy}}
            for policy in ("gpulab-gpu-requests", "gpulab-gpu-requests-advice")
            for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        ],
    }


def healthy_management() -> dict[str, list[dict]]:
    components = [
        ("Deployment", "cert-manager", "cert-manager"),
        ("Deployment", "cert-manager", "cert-manager-webhook"),
        ("Deployment", "metallb-system", "controller"),
        ("DaemonSet", "metallb-system", "speaker"),
        ("Deployment", "kamaji-system", "kamaji"),
        ("StatefulSet", "kamaji-system", "kamaji-etcd"),
    ]
    pods = [pod(ns, f"{name}-abc", (kind, name)) for kind, ns, name in components]
    for tenant in ("tenant-a", "tenant-b"):
        labels = {analyze.TCP_POD_LABEL: tenant}
        pods.append(pod(f"gpulab-{tenant}", f"{tenant}-abc", ("Deployment", tenant), labels=labels))
    return {
        "nodes": [node("gpulab-control-plane")],
        "pods": pods,
        "events": [],
        "workloads": [workload(kind, ns, name) for kind, ns, name in components],
        "webhooks": [webhook("kamaji-mutating", "kamaji-webhook-service", "kamaji-system", "Fail")],
        "endpointslices": [endpoint_slice("kamaji-system", "kamaji-webhook-service", [True])],
        "tcps": [tcp("tenant-a"), tcp("tenant-b", address="172.18.255.241")],
        "datastores": [{"kind": "DataStore", "metadata": {"name": "default"}, "status": {"ready": True}}],
        "metallb": [
            {"kind": "IPAddressPool", "metadata": {"namespace": "metallb-system", "name": "gpulab"}},
            {"kind": "L2Advertisement", "metadata": {"namespace": "metallb-system", "name": "gpulab"}},
        ],
    }


def tenant_verdicts(objects: dict, logs: dict | None = None, name: str = "tenant-a") -> list[analyze.Finding]:
    from diagnose.collect import tenant_expectations

    return cluster_findings.tenant_findings(
        Cluster(name, objects=objects, logs=logs or {}),
        **tenant_expectations(LAB, name),
        now=NOW,
        lock_timeout_seconds=2,
    )


INSTALLS = {"cert_manager": True, "metallb": True, "kamaji": True}

# --- verdicts ----------------------------------------------------------------------------------


def test_a_healthy_lab_has_no_findings() -> None:
    assert tenant_verdicts(healthy_tenant("tenant-a")) == []
    assert tenant_verdicts(healthy_tenant("tenant-b"), name="tenant-b") == []
    assert (
        cluster_findings.management_cluster_findings(Cluster("management", objects=healthy_management()), INSTALLS)
        == []
    )


RATE_LIMITED = (
    'Failed to pull image "docker.io/projecthami/hami:v2.8.3": failed to pull and unpack image '
    '"docker.io/projecthami/hami:v2.8.3": failed to copy: httpReadSeeker: failed open: unexpected status code '
    "https://registry-1.docker.io/v2/projecthami/hami/manifests/sha256:5e1f: 429 Too Many Requests - Server "
    "message: toomanyrequests: You have reached your unauthenticated pull rate limit."
)


def test_image_pull_with_429_is_named_as_the_registry_rate_limit_with_docker_login() -> None:
    objects = healthy_tenant("tenant-a")
    objects["pods"][5] = pod(
        "kube-system",
        "hami-scheduler-6d8f9c7b5-x2x",
        ("Deployment", "hami-scheduler"),
        [container_status("vgpu-scheduler-extender", False, ("ImagePullBackOff", 'Back-off pulling image "hami"'))],
        phase="Pending",
    )
    objects["events"].append(event("Pod", "kube-system", "hami-scheduler-6d8f9c7b5-x2x", "Failed", RATE_LIMITED))
    objects["workloads"][5] = workload("Deployment", "kube-system", "hami-scheduler", 1, 0)
    findings = tenant_verdicts(objects)
    [found] = [f for f in findings if "hami-scheduler" in f.component and "webhook" not in f.component.lower()]
    assert found.component == "kube-system/hami-scheduler (pod hami-scheduler-6d8f9c7b5-x2x)"
    assert found.reason == "ImagePullBackOff in vgpu-scheduler-extender"
    assert found.cause == "registry rate limit (429)"
    assert "docker login" in found.fix and "429 Too Many Requests" in found.last
    # the Deployment is not reported a second time
    assert not [f for f in findings if f.component == "kube-system/hami-scheduler"]


def test_a_failed_job_try_is_no_finding_once_a_retry_succeeded() -> None:
    objects = healthy_tenant("tenant-a")
    failed = pod("kube-system", "hami-admission-create-a", ("Job", "hami-admission-create"), statuses=[])
    failed["status"]["phase"] = "Failed"
    objects["pods"].append(failed)
    assert [f.component for f in tenant_verdicts(objects)] == [
        "kube-system/hami-admission-create (pod hami-admission-create-a)"
    ]
    retried = pod("kube-system", "hami-admission-create-b", ("Job", "hami-admission-create"), phase="Succeeded")
    objects["pods"].append(retried)
    assert tenant_verdicts(objects) == []


def test_image_pull_without_429_is_image_pull_back_off() -> None:
    cause, fix = analyze.known_cause("ImagePullBackOff", ['Back-off pulling image "quay.io/calico/node:v3.31.6"'])
    assert cause == "ImagePullBackOff" and "docker pull" in fix
    digest = 'Failed to pull image "kindest/node@sha256:0994293a429f": not found'  # 429 inside a digest
    assert analyze.known_cause("ErrImagePull", [digest])[0] == "ImagePullBackOff"


def test_crash_loop_shows_the_last_log_line_of_the_previous_run() -> None:
    objects = healthy_tenant("tenant-a")
    objects["pods"][3] = pod(
        "kube-system",
        "kube-proxy-q7",
        ("DaemonSet", "kube-proxy"),
        [container_status("kube-proxy", False, ("CrashLoopBackOff", "back-off 5m0s restarting"), restarts=7)],
    )
    logs = {
        "kube-system/kube-proxy-q7/kube-proxy/previous": "I1130 started\n"
        "E1130 run: open /proc/sys/net/netfilter/nf_conntrack_max: permission denied\n"
    }
    [found] = [f for f in tenant_verdicts(objects, logs) if "kube-proxy" in f.component]
    assert found.reason == "CrashLoopBackOff in kube-proxy"
    assert found.last == "log: E1130 run: open /proc/sys/net/netfilter/nf_conntrack_max: permission denied"
    assert found.cause == "missing host kernel setting: nf_conntrack_max" and "sysctl" in found.fix


def test_known_causes_by_name() -> None:
    assert analyze.known_cause("CrashLoopBackOff", ["boom"])[0] == "CrashLoopBackOff"
    assert analyze.known_cause("Error", ["failed to create fsnotify watcher: too many open files"])[0] == (
        "missing host kernel setting: inotify limits"
    )
    assert analyze.known_cause("Unschedulable", ["0/1 nodes are available: 1 CardInsufficientCore"])[0] == (
        "GPU request does not fit (CardInsufficientCore)"
    )
    assert analyze.known_cause("SchedulerError", ["node tenant-a-worker has been locked within 5m0s"])[0] == (
        "HAMi node lock held"
    )
    assert analyze.known_cause("Running", ["all good"]) == ("", "")


def test_a_not_ready_worker_is_named_with_its_condition() -> None:
    objects = healthy_tenant("tenant-b")
    message = (
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
        "message:Network plugin returns error: cni plugin not initialized"
    )
    objects["nodes"][0]["status"]["conditions"][1] = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": message,
    }
    [found] = [f for f in tenant_verdicts(objects, name="tenant-b") if f.component.startswith("node ")]
    assert found.component == "node tenant-b-worker" and found.reason == "NotReady (KubeletNotReady)"
    assert found.cause == "node NotReady" and found.last == message and "calico-node" in found.fix


def test_a_tenant_with_no_node_says_the_worker_never_joined() -> None:
    objects = healthy_tenant("tenant-a")
    objects["nodes"] = []
    found = tenant_verdicts(objects)
    assert any(f.reason == "no node has joined" for f in found)


def test_webhook_without_ready_endpoints() -> None:
    objects = healthy_tenant("tenant-a")
    objects["endpointslices"] = [endpoint_slice("kube-system", "hami-scheduler", [False])]
    [found] = [f for f in tenant_verdicts(objects) if f.cause == "webhook without ready endpoints"]
    assert found.component == "MutatingWebhookConfiguration hami-webhook (vgpu.hami.io)"
    assert "kube-system/hami-scheduler" in found.reason and "bypass" in found.fix
    objects["endpointslices"] = []  # no slice at all: the same
    assert [f for f in tenant_verdicts(objects) if f.cause == "webhook without ready endpoints"]
    objects["endpointslices"] = [endpoint_slice("kube-system", "hami-scheduler", [False, None])]  # nil = ready
    assert not [f for f in tenant_verdicts(objects) if f.cause == "webhook without ready endpoints"]


def test_missing_tenant_components_and_policies_are_named() -> None:
    objects = healthy_tenant("tenant-a")
    objects["workloads"] = [w for w in objects["workloads"] if w["metadata"]["name"] != "konnectivity-agent"]
    objects["admission"] = objects["admission"][:3]
    found = {(f.component, f.reason) for f in tenant_verdicts(objects)}
    assert ("kube-system/konnectivity-agent", "DaemonSet not found") in found
    assert ("ValidatingAdmissionPolicyBinding gpulab-gpu-requests-advice", "not found") in found


def test_a_daemonset_with_no_pod_scheduled_is_not_ready() -> None:
    objects = healthy_tenant("tenant-a")
    objects["pods"] = [p for p in objects["pods"] if "konnectivity" not in p["metadata"]["name"]]
    objects["workloads"][2] = workload("DaemonSet", "kube-system", "konnectivity-agent", 0, 0)
    [found] = [f for f in tenant_verdicts(objects) if "konnectivity" in f.component]
    assert found.reason == "DaemonSet 0 pods scheduled, though its nodeSelector matches tenant-a-worker"


def test_a_healthy_mock_tenant_has_no_finding() -> None:
    """Boundary: the DaemonSets as the API server returns them (0 desired: numberAvailable absent), HAMi's NVIDIA
    plugin among them with its gpu=on selector that no node of the lab matches."""
    assert tenant_verdicts(healthy_tenant("tenant-a")) == []


@pytest.mark.parametrize(
    ("name", "selector"),
    [("kube-proxy", {"kubernetes.io/os": "linux"}), ("hami-mock-device-plugin", None), ("calico-node", {"x": "y"})],
)
def test_a_daemonset_that_should_run_and_has_0_desired_is_a_finding(name: str, selector: dict | None) -> None:
    """One whose nodeSelector matches a node (kube-proxy's), or one the lab must run (the mock plugin; Calico even
    with a selector nothing matches): 0 desired is a real finding."""
    objects = healthy_tenant("tenant-a")
    objects["pods"] = [p for p in objects["pods"] if name not in p["metadata"]["name"]]
    objects["workloads"] = [w for w in objects["workloads"] if w["metadata"]["name"] != name]
    objects["workloads"].append(workload("DaemonSet", "kube-system", name, 0, 0, node_selector=selector))
    [found] = [f for f in tenant_verdicts(objects) if f.component == f"kube-system/{name}"]
    assert found.reason.startswith("DaemonSet 0 pods scheduled")


def test_a_gpu_deployment_whose_pods_cannot_be_created() -> None:
    objects = healthy_tenant("tenant-a")
    blocked = workload("Deployment", "gpu-workloads", "inference", 2, 0)
    message = (
        'pods "inference-7c9-" is forbidden: exceeded quota: gpulab-gpu-quota, requested: requests.nvidia.com/gpu=1'
    )
    blocked["status"]["conditions"] = [
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "no"},
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": message},
    ]
    objects["workloads"].append(blocked)
    [found] = tenant_verdicts(objects)
    assert (found.component, found.reason) == ("gpu-workloads/inference", "Deployment 0/2 ready")
    assert found.last.endswith("exceeded quota: gpulab-gpu-quota, requested: requests.nvidia.com/gpu=1")


def test_gpu_node_without_register_annotation_or_declared_capacity() -> None:
    objects = healthy_tenant("tenant-b")
    objects["nodes"][0]["metadata"]["annotations"] = {}
    objects["nodes"][0]["status"]["capacity"]["nvidia.com/gpumem"] = "24576"  # one card of two
    found = {f.reason for f in tenant_verdicts(objects, name="tenant-b")}
    assert "no hami.io/node-nvidia-register annotation" in found
    assert "nvidia.com/gpumem capacity 24576, declared 49152" in found


def test_gpu_capacity_is_read_in_the_canonical_form_the_api_server_sends() -> None:
    objects = healthy_tenant("tenant-b")
    status = objects["nodes"][0]["status"]
    # 10 cards of 100 % cores: 1000 arrives as "1k"; 20000 MB as "20k"
    status["allocatable"] = {"nvidia.com/gpu": "100", "nvidia.com/gpumem": "20k", "nvidia.com/gpucores": "1k"}
    expected = {"nvidia.com/gpu": 100, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 1000}
    cluster = Cluster("tenant-b", objects=objects)
    assert card_findings.gpu_node_findings(cluster, "tenant-b-worker", expected) == []
    status["allocatable"]["nvidia.com/gpucores"] = "900"
    [found] = card_findings.gpu_node_findings(cluster, "tenant-b-worker", expected)
    assert found.reason == "nvidia.com/gpucores capacity 900, declared 1000"


def test_gpu_pod_refused_by_hami_names_its_filtering_failed_reason() -> None:
    objects = healthy_tenant("tenant-a")
    objects["pods"].append(
        pod(
            "gpu-workloads",
            "trainer-4",
            statuses=[],
            phase="Pending",
            gpu=True,
            conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        )
    )
    objects["events"].append(
        event("Pod", "gpu-workloads", "trainer-4", "FilteringFailed", "1 nodes CardInsufficientCore(tenant-a-worker)")
    )
    [found] = [f for f in tenant_verdicts(objects) if "trainer-4" in f.component]
    assert found.component == "GPU pod gpu-workloads/trainer-4" and found.reason == "Unschedulable"
    assert found.cause == "GPU request does not fit (CardInsufficientCore)"


def test_hami_node_lock_held() -> None:
    objects = healthy_tenant("tenant-a")
    annotations = objects["nodes"][0]["metadata"]["annotations"]
    annotations["hami.io/mutex.lock"] = f"{stamp(400)},gpu-workloads,trainer-1"
    waiting = pod("gpu-workloads", "trainer-2", statuses=[], phase="Pending", gpu=True)
    objects["pods"].append(waiting)
    [found] = [f for f in tenant_verdicts(objects) if f.cause == "HAMi node lock held"]
    assert found.reason == "HAMi node lock held 400s by gpu-workloads/trainer-1"
    assert "hami.io/mutex.lock-" in found.fix
    # A fresh lock with nothing waiting on it is normal in mock mode (it expires after nodeLockTimeout).
    annotations["hami.io/mutex.lock"] = f"{stamp(1)},gpu-workloads,trainer-1"
    objects["pods"].remove(waiting)
    assert not [f for f in tenant_verdicts(objects) if f.cause == "HAMi node lock held"]
    # ... unless a bind failed on it.
    objects["events"].append(
        event("Pod", "gpu-workloads", "trainer-2", "FailedScheduling", "node tenant-a-worker has been locked within 5m")
    )
    assert [f for f in tenant_verdicts(objects) if f.cause == "HAMi node lock held"]


def test_a_lock_hami_cannot_read_is_held_for_good() -> None:
    """HAMi reads the lock as hami/annotations.py `parse_node_lock` does; one it cannot read fails every Bind on the
    node and never expires, so it is a finding while GPU pods wait, whatever its age. A time without a zone (Go's
    RFC 3339 refuses it) once stopped diagnose with a TypeError."""
    objects = healthy_tenant("tenant-a")
    annotations = objects["nodes"][0]["metadata"]["annotations"]
    objects["pods"].append(pod("gpu-workloads", "trainer-2", statuses=[], phase="Pending", gpu=True))
    for value, problem in (
        (f"{stamp(1)[:-1]},gpu-workloads,trainer-1", f"{stamp(1)[:-1]!r} is no RFC 3339 time"),
        (f"{stamp(1)},trainer-1", "2 comma-separated parts"),
    ):
        annotations["hami.io/mutex.lock"] = value
        [found] = [f for f in tenant_verdicts(objects) if f.cause == "HAMi node lock held"]
        assert found.reason == f"HAMi node lock held, unreadable: {problem}"
        assert "hami.io/mutex.lock-" in found.fix
    # The older form, the time alone, is HAMi's too.
    annotations["hami.io/mutex.lock"] = stamp(400)
    [found] = [f for f in tenant_verdicts(objects) if f.cause == "HAMi node lock held"]
    assert found.reason == "HAMi node lock held 400s by an unknown pod"


def test_every_reason_hami_gives_for_a_pod_that_does_not_fit_is_known() -> None:
    """hami/reasons.py's HAMI_REASONS, v2.10.0's too (CardMigTopologyInfeasible, ModeNotFit, CardCordoned), but not
    NodeFitPod: HAMi logs it for a node that fits."""
    from hami import reasons

    for name in reasons.HAMI_REASONS:
        cause = analyze.known_cause("Unschedulable", [f"0/1 nodes are available: 1 nodes {name}(tenant-a-worker)"])[0]
        assert cause == ("" if name == reasons.NODE_FIT_POD else f"GPU request does not fit ({name})"), name
    assert analyze.known_cause("Unschedulable", ["1 nodes CardCordonedX"]) == ("", "")


def test_a_tenant_api_that_does_not_answer_is_one_finding() -> None:
    cluster = Cluster("tenant-b", answered=False, error="no answer within 20s (stopped)")
    [found] = cluster_findings.tenant_findings(
        cluster, gpu_node="tenant-b-worker", mock=True, expected_capacity=None, policies=[], now=NOW,
        lock_timeout_seconds=2,
    )  # fmt: skip
    assert found.cause == "tenant API not answering" and found.last == "no answer within 20s (stopped)"


def test_tenant_control_plane_not_ready_with_its_pod_and_address() -> None:
    objects = healthy_management()
    objects["tcps"][0] = tcp("tenant-a", "NotReady", address=None)
    objects["pods"][-2] = pod(
        "gpulab-tenant-a",
        "tenant-a-6d8f9c7b5-abc",
        ("Deployment", "tenant-a"),
        [container_status("kube-apiserver", False, ("CrashLoopBackOff", "back-off"), restarts=3)],
        labels={analyze.TCP_POD_LABEL: "tenant-a"},
    )
    found = cluster_findings.management_cluster_findings(Cluster("management", objects=objects), INSTALLS)
    [control_plane] = [f for f in found if f.cause == "TenantControlPlane not Ready"]
    assert control_plane.component == "TenantControlPlane gpulab-tenant-a/tenant-a"
    assert control_plane.reason == "NotReady" and "CrashLoopBackOff in kube-apiserver" in control_plane.last
    assert "MetalLB" in control_plane.fix
    objects["tcps"][0] = tcp("tenant-a", "Ready")  # a Ready one with the same pod is the pod's finding only
    found = cluster_findings.management_cluster_findings(Cluster("management", objects=objects), INSTALLS)
    assert not [f for f in found if f.cause == "TenantControlPlane not Ready"]


def test_management_datastore_and_metallb_objects() -> None:
    objects = healthy_management()
    objects["datastores"][0]["status"] = {
        "ready": False,
        "conditions": [{"type": "Ready", "status": "False", "reason": "Unreachable", "message": "dial tcp: refused"}],
    }
    objects["metallb"] = objects["metallb"][:1]
    found = {(f.component, f.reason, f.last) for f in cluster_findings.management_cluster_findings(
        Cluster("management", objects=objects), INSTALLS
    )}  # fmt: skip
    assert ("DataStore default", "not ready", "Unreachable: dial tcp: refused") in found
    assert ("metallb-system/gpulab", "L2Advertisement not found", "") in found
    # existing mode that installs nothing: neither is expected
    none = dict.fromkeys(INSTALLS, False)
    assert not cluster_findings.management_cluster_findings(
        Cluster("management", objects={**objects, "datastores": []}), none
    )


def test_kernel_settings_from_docker_info_and_proc() -> None:
    info = {"Warnings": ["WARNING: bridge-nf-call-iptables is disabled", "WARNING: No swap limit support"]}
    sysctls = {"fs.inotify.max_user_instances": 128, "fs.inotify.max_user_watches": 524288}
    sysctls["net.netfilter.nf_conntrack_max"] = 131072
    found = host_findings.kernel_findings(info, sysctls, cpus=8)  # 8 CPUs need 262144 conntrack entries
    assert [f.cause for f in found] == [
        "missing host kernel setting: br_netfilter",
        "missing host kernel setting: inotify limits",
        "missing host kernel setting: nf_conntrack_max",
    ]
    assert "modprobe br_netfilter" in found[0].fix and "bridge-nf-call-iptables=1" in found[0].fix
    assert host_findings.kernel_findings({"Warnings": []}, {**sysctls, "fs.inotify.max_user_instances": 512}, 4) == []


@pytest.mark.parametrize(
    ("shape", "fix"),
    [
        ({"bridge-nf-call-iptables": "0\n"}, "sudo sysctl -w net.bridge.bridge-nf-call-iptables=1 on the Docker host"),
        ({}, "if /proc/sys/net/bridge/bridge-nf-call-iptables is missing, sudo modprobe br_netfilter"),
    ],
    ids=["built in and switched off", "neither built in nor loaded"],
)
def test_the_br_netfilter_fix_fits_the_kernel(tmp_path: Path, shape: dict[str, str], fix: str) -> None:
    """Boundary: Docker's warning (`bridge-nf-call-iptables is disabled`) is the same whether the sysctl is 0 or
    missing; /proc/sys of this host tells them apart. A kernel with br_netfilter built in has no module to load."""
    bridge = tmp_path / "sys/net/bridge"
    bridge.mkdir(parents=True)
    for name, value in shape.items():
        (bridge / name).write_text(value)
    info = {"Warnings": ["WARNING: bridge-nf-call-iptables is disabled"]}
    [found] = host_findings.kernel_findings(info, read_sysctls(tmp_path), cpus=1)
    assert fix in found.fix
    if shape:
        assert "modprobe" not in found.fix


def test_docker_containers_and_network() -> None:
    containers = [
        {"Names": "gpulab-control-plane", "State": "running", "Status": "Up 2 hours"},
        {"Names": "tenant-a-worker", "State": "exited", "Status": "Exited (137) 5 minutes ago"},
    ]
    expected = ["gpulab-control-plane", "tenant-a-worker", "tenant-b-worker"]
    found = host_findings.docker_findings(containers, expected, "gpulab", False)
    assert [(f.component, f.reason) for f in found] == [
        ("container tenant-a-worker", "Exited (137) 5 minutes ago"),
        ("container tenant-b-worker", "not found"),
        ("network gpulab", "not found"),
    ]


def test_kind_cluster_gone() -> None:
    assert host_findings.kind_findings(["gpulab"], "gpulab") == []
    assert host_findings.kind_findings(None, "gpulab") == []  # kind itself did not answer: nothing concluded
    [found] = host_findings.kind_findings([], "gpulab")
    assert found.cause == "kind cluster gone" and "make down" in found.fix


# --- redaction ---------------------------------------------------------------------------------

DIGEST = "sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed"  # public, must stay
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAPLANTEDpem\nPLANTEDpem==\n-----END RSA PRIVATE KEY-----"


def test_redaction_of_objects() -> None:
    token = secrets.token_urlsafe(36)
    obj = {
        "kind": "Pod",
        "metadata": {
            "name": "app",
            "annotations": {
                "example.com/api-token": "hunter2",
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    {"spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": "hunter3"}]}]}}
                ),
                "hami.io/node-nvidia-register": '[{"id":"GPU-MOCK-tenant-a-0"}]',
            },
        },
        "spec": {
            "containers": [
                {
                    "image": f"kindest/node:v1.36.4@{DIGEST}",
                    "args": ["--token=abcd1234", f"--other={token}", "--node-name=tenant-a-worker"],
                    "env": [{"name": "API_KEY", "value": "hunter4"}, {"name": "LOG_LEVEL", "value": "debug"}],
                    "volumeMounts": [{"name": "certs", "mountPath": "/var/lib/kubelet/device-plugins"}],
                }
            ],
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        },
    }
    text = json.dumps(redact(obj))
    for planted in ("hunter2", "hunter3", "hunter4", "abcd1234", token):
        assert planted not in text
    for public in (
        DIGEST,
        "GPU-MOCK-tenant-a-0",
        "debug",
        "CriticalAddonsOnly",
        "/var/lib/kubelet/device-plugins",
        "--node-name=tenant-a-worker",
    ):
        assert public in text
    secret = {"kind": "Secret", "metadata": {"name": "s", "namespace": "n"}, "data": {"tls.key": "c2VjcmV0"}}
    assert redact({"items": [secret]}) == {"items": [{"kind": "Secret", "metadata": {"name": "s", "namespace": "n"}}]}
    assert redact({"gpulab:sshPrivateKey": {"secure": "v1:abc"}}) == {"gpulab:sshPrivateKey": {"secure": HIDDEN}}
    # `pulumi config --json` of a kubeconfig set without --secret: hidden by the key's name, whole
    config = {"gpulab:managementKubeconfig": {"value": "apiVersion: v1\nusers: []", "secret": False}}
    assert redact(config) == {"gpulab:managementKubeconfig": {"value": HIDDEN, "secret": False}}
    # Kamaji's status names the Secrets that hold kubeconfigs: names, kept
    status = {"kubeconfig": {"admin": {"secretName": "tenant-a-admin-kubeconfig", "checksum": "f00d"}}}
    assert redact(status) == status


def test_every_file_of_the_archive_gets_the_object_redaction(tmp_path: Path) -> None:
    """Boundary: the archive on disk, whatever a call wrote to whichever file name. An API that answers
    /readyz (readyz.txt) with objects, or a log of JSON lines, gets the field-by-field redaction the .json
    files get: an env value under a secret-looking name is hidden, which text scrubbing alone would keep."""
    from diagnose.__main__ import write_archive

    pod = {"kind": "Pod", "spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": "hunter5"}]}]}}
    assert "hunter5" in scrub_text(json.dumps(pod)), "text scrubbing alone keeps it: the object redaction is needed"
    collected = Collected(
        files={
            "tenants/tenant-a/readyz.txt": json.dumps({"kind": "List", "items": [pod]}, indent=1),
            "tenants/tenant-b/readyz.txt": yaml.safe_dump(
                {
                    **pod,
                    "apiVersion": "v1",
                    "spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": "hunter7"}]}]},
                }
            ),  # objects in YAML
            "management/logs/app.txt": "plain start\n" + json.dumps(pod) + "\n",
            "stack/Pulumi.dev.yaml": "config:\n  gpulab:env:\n    - {name: API_KEY, value: hunter6}\n",
        }
    )
    archive = write_archive(tmp_path / "diagnose-dev-x.tar.gz", collected, "summary\n")
    with tarfile.open(archive) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode() for m in tar.getmembers()}
    for value in ("hunter5", "hunter6", "hunter7"):
        assert value not in "".join(files.values()), value
    assert json.loads(files["tenants/tenant-a/readyz.txt"])["items"][0]["kind"] == "Pod", "still readable"
    assert files["management/logs/app.txt"].startswith("plain start\n")


def test_redaction_of_text() -> None:
    jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJl"
    log = (
        f"I1130 join with --token abcdef.0123456789abcdef\nAuthorization: Bearer {jwt}\n{PEM}\n"
        "client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=\n"
        "password: hunter5\nE1130 pulling docker.io/projecthami/hami:v2.8.3 from registry.k8s.io/kas-network-proxy/"
        "proxy-agent: 429 Too Many Requests"
    )
    text = scrub_text(log, known={"extra-known-value"}) + scrub_text("see extra-known-value", {"extra-known-value"})
    for planted in ("0123456789abcdef", jwt[:20], "MIIEowIBAAKCAQEA", "LS0tLS1CRUdJTi", "hunter5", "extra-known-value"):
        assert planted not in text
    assert "docker.io/projecthami/hami:v2.8.3" in text and "429 Too Many Requests" in text
    assert "registry.k8s.io/kas-network-proxy/proxy-agent" in text


# --- bounded calls -----------------------------------------------------------------------------


@pytest.mark.integration
def test_a_call_that_hangs_and_ignores_term_is_killed_within_its_bound(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_LAB", str(tmp_path))  # marks the child, so that it can be found below
    script = tmp_path / "stubborn"
    script.write_text("#!/usr/bin/env bash\ntrap '' TERM INT HUP\necho started\nexec sleep 3600\n")
    script.chmod(0o755)
    runner = Runner(timeout=1, kill_after=0.5, budget=30)
    started = time.monotonic()
    result = runner.run([str(script)])
    assert time.monotonic() - started < 20  # 1.5 s promised against sleep 3600; the margin of a loaded machine
    left = fake_processes(tmp_path)
    for pid in left:  # only when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, "the call outlived its bound"
    assert result.returncode is None and result.problem == "no answer within 1s (stopped)"
    assert "started" in result.stdout


@pytest.mark.integration
def test_a_call_sees_the_signals_diagnose_blocks_while_starting_it() -> None:
    result = Runner().run(["grep", "SigBlk", "/proc/self/status"])
    assert result.ok and result.stdout.split() == ["SigBlk:", "0000000000000000"]


def test_a_run_past_its_budget_starts_nothing_more() -> None:
    clock = iter([0.0, 100.0, 100.0]).__next__
    runner = Runner(timeout=5, budget=10, clock=clock)
    result = runner.run(["true"])
    assert result.returncode is None and "budget" in result.problem
    assert Runner().run(["gpulab-no-such-tool"]).problem == "gpulab-no-such-tool not found on PATH"


# --- end to end through the fakes --------------------------------------------------------------

SERVERS = {"management": "127.0.0.1:41234", "tenant-a": "172.18.255.240:6443", "tenant-b": "172.18.255.241:6443"}


def key(args: list[str]) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", " ".join(args))


class FakeLab:
    """Writes the answers tests/fakes/lab gives, from the constructed objects above, with secrets planted
    in every source: kubeconfigs, object fields, annotations, env values, event messages, logs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        for tool in ("docker", "kind", "kubectl", "pulumi"):
            (self.bin / tool).symlink_to(FAKE)
        self.planted: list[str] = []
        self.management = healthy_management()
        self.tenants = {name: healthy_tenant(name) for name in ("tenant-a", "tenant-b")}
        self.logs: dict[str, dict[str, str]] = {}
        self.kind_clusters = "gpulab\n"
        self.dropped_outputs: set[str] = set()
        self.containers = [
            {"Names": "gpulab-control-plane", "State": "running", "Status": "Up 1 hour", "Labels": ""},
            {"Names": "tenant-a-worker", "State": "running", "Status": "Up 1 hour", "Labels": ""},
            {"Names": "tenant-b-worker", "State": "running", "Status": "Up 1 hour", "Labels": ""},
        ]
        self.plant_everywhere()
        self.tokens: dict[str, str] = {}
        self.kubeconfigs = {name: self.kubeconfig(name) for name in SERVERS}

    def secret(self, label: str, long: bool = True) -> str:
        value = f"PLANTED{label}{secrets.token_urlsafe(30)}" if long else f"PLANTED{label}"
        self.planted.append(value)
        return value

    def kubeconfig(self, cluster: str) -> str:
        return (
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
            f"    certificate-authority-data: {self.secret('ca')}\n    server: https://{SERVERS[cluster]}\n"
            "  name: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
            f"users:\n- name: u\n  user:\n    client-key-data: {self.secret('key')}\n"
            f"    client-certificate-data: {self.secret('cert')}\n    token: {self.token(cluster)}\n"
        )

    def token(self, cluster: str) -> str:
        self.tokens[cluster] = self.secret(f"tok{cluster}", long=False)
        return self.tokens[cluster]

    def plant_everywhere(self) -> None:
        for objects in (self.management, *self.tenants.values()):
            first = objects["pods"][0]
            container = first["spec"]["containers"][0]
            container["env"] = [{"name": "DB_PASSWORD", "value": self.secret("env", long=False)}]
            container["args"] = [f"--token={self.secret('arg', long=False)}"]
            first["metadata"]["annotations"]["example.com/api-token"] = self.secret("anno", long=False)
            first["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(
                {"spec": {"containers": [{"env": [{"name": "SECRET_KEY", "value": self.secret("applied", False)}]}]}}
            )
            objects["events"].append(
                event("Pod", "kube-system", "x", "Info", f"bearer used: Bearer {self.secret('event')}", "Normal")
            )
        self.containers[1]["Labels"] = f"gpulab.io/tenant=tenant-a,token={self.secret('label', long=False)}"

    def answer(self, where: str, args: list[str], stdout: str = "", rc: int = 0, stderr: str = "") -> None:
        folder = self.root / where
        folder.mkdir(parents=True, exist_ok=True)
        (folder / key(args)).write_text(stdout)
        (folder / f"{key(args)}.rc").write_text(str(rc))
        if stderr:
            (folder / f"{key(args)}.err").write_text(stderr)

    def mark(self, cluster: str, how: str) -> None:
        folder = self.root / "kubectl" / SERVERS[cluster].replace(":", "_")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / how).write_text("")

    def write(self) -> None:
        kubeconfigs = self.kubeconfigs
        outputs = {
            "management_kubeconfig": kubeconfigs["management"],
            "tenant_a_kubeconfig": kubeconfigs["tenant-a"],
            "tenant_b_kubeconfig": kubeconfigs["tenant-b"],
            "tenant_a_endpoint": "172.18.255.240",
            "metallb_pool": "172.18.255.239-172.18.255.254",
        }
        outputs = {k: v for k, v in outputs.items() if k not in self.dropped_outputs}
        plain = {k: ("[secret]" if k.endswith("kubeconfig") else v) for k, v in outputs.items()}
        stack = ["stack", "output", "--json", "--stack", "dev"]
        self.answer("pulumi", stack, json.dumps(plain))
        self.answer("pulumi", [*stack[:3], "--show-secrets", *stack[3:]], json.dumps(outputs))
        self.answer("pulumi", ["config", "--json", "--stack", "dev"], json.dumps({"gpulab:sshKey": {"secret": True}}))
        self.answer("pulumi", ["version"], "v3.272.0\n")
        self.answer("kind", ["version"], "kind v0.33.0 go1.24 linux/amd64\n")
        none = "" if self.kind_clusters else "No kind clusters found.\n"  # kind says so on stderr, exit 0
        self.answer("kind", ["get", "clusters"], self.kind_clusters, stderr=none)
        self.answer("docker", ["version", "--format", "{{json .}}"], '{"Server": {"Version": "28.1.1"}}')
        info = {"ServerVersion": "28.1.1", "NCPU": 4, "Warnings": [], "RegistryConfig": {"x": self.secret("info")}}
        self.answer("docker", ["info", "--format", "{{json .}}"], json.dumps(info))
        lines = "".join(json.dumps(c) + "\n" for c in self.containers)
        for selector in ("label=io.x-k8s.kind.cluster=gpulab", "label=gpulab.io/tenant"):
            chosen = [c for c in self.containers if ("control-plane" in c["Names"]) == ("kind" in selector)]
            lines = "".join(json.dumps(c) + "\n" for c in chosen)
            self.answer("docker", ["ps", "-a", "--filter", selector, "--format", "{{json .}}"], lines)
        self.answer("docker", ["network", "inspect", "gpulab"], '[{"Name": "gpulab"}]')
        queries = {
            "nodes": ["get", "nodes"],
            "pods": ["get", "pods", "-A"],
            "events": ["get", "events", "-A"],
            "workloads": ["get", "deployments,daemonsets,statefulsets", "-A"],
            "webhooks": ["get", "mutatingwebhookconfigurations,validatingwebhookconfigurations"],
            "endpointslices": ["get", "endpointslices", "-A"],
            "admission": ["get", "validatingadmissionpolicies,validatingadmissionpolicybindings"],
            "tcps": ["get", "tenantcontrolplanes.kamaji.clastix.io", "-A"],
            "datastores": ["get", "datastores.kamaji.clastix.io"],
            "metallb": ["get", "ipaddresspools.metallb.io,l2advertisements.metallb.io", "-A"],
        }
        for cluster, objects in (("management", self.management), *self.tenants.items()):
            where = f"kubectl/{SERVERS[cluster].replace(':', '_')}"
            for name, args in queries.items():
                if name in objects:
                    self.answer(where, [*args, "-o", "json"], json.dumps({"kind": "List", "items": objects[name]}))
            for log_key, text in self.logs.get(cluster, {}).items():
                namespace, pod_name, container, *previous = log_key.split("/")
                args = ["logs", "-n", namespace, pod_name, "-c", container, "--tail=50"]
                self.answer(where, args + (["--previous"] if previous else []), text)

    def run(self, tmp: Path, *extra: str, timeout: float = 60, make: bool = False) -> subprocess.CompletedProcess:
        self.write()
        env = {
            **os.environ,
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "FAKE_LAB": str(self.root),
            "TMPDIR": str(tmp / "tmp"),
            "HOME": str(tmp / "home"),
            "GPULAB_DIAGNOSE_PROC": str(tmp / "proc"),
        }
        env.pop("DOCKER_HOST", None)
        (tmp / "tmp").mkdir(exist_ok=True)
        options = ["--reports", str(tmp / "reports"), "--project-dir", str(LAB_PROJECT), *extra]
        argv = [sys.executable, "-m", "diagnose", "--stack", "dev", *options]
        if make:  # the target itself; PATH on the command line, or the Makefile would put ./bin (real tools) first
            argv = ["make", "--no-print-directory", "-C", str(ROOT), "diagnose", "STACK=dev", f"PATH={env['PATH']}"]
            argv.append(f"DIAGNOSE_ARGS={' '.join(options)}")
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            cwd=tmp,
            env=env,
            timeout=timeout,
        )


def archive_files(tmp: Path) -> dict[str, str]:
    [path] = list((tmp / "reports").glob("diagnose-dev-*.tar.gz"))
    assert path.stat().st_mode & 0o777 == 0o600
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def assert_nothing_leaked(lab: FakeLab, tmp: Path, result: subprocess.CompletedProcess) -> dict[str, str]:
    files = archive_files(tmp)
    everything = result.stdout + result.stderr + "".join(files.values())
    assert lab.planted and "PLANTED" not in everything, [p for p in lab.planted if p[:12] in everything]
    # nothing else written: the archive under reports/, no private directory left, TMPDIR and HOME untouched
    written = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    assert written == [str(next((tmp / "reports").glob("*.tar.gz")).relative_to(tmp))]
    assert not list((tmp / "reports").glob(".diagnose-*"))
    assert not fake_processes(lab.root), "a call was left running"
    return files


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[FakeLab]:
    (tmp_path / "proc").mkdir()
    fake = FakeLab(tmp_path / "fake")
    yield fake
    for pid in fake_processes(fake.root):  # only after a failure: a hung fake call left behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@dataclass
class HealthyRun:
    lab: FakeLab
    work: Path
    stale: Path
    result: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def healthy_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HealthyRun]:
    """One run on the healthy lab, shared by the tests that only read it (a diagnose process costs about
    1.3 CPU-seconds to start). Its reports folder holds a directory a run killed with KILL left behind."""
    tmp = tmp_path_factory.mktemp("healthy")
    (tmp / "proc").mkdir()
    fake = FakeLab(tmp / "fake")
    work = tmp / "work"
    stale = work / "reports" / ".diagnose-999999999-abc"
    stale.mkdir(parents=True)
    (stale / "management.kubeconfig").write_text("x")
    yield HealthyRun(fake, work, stale, fake.run(work))
    for pid in fake_processes(fake.root):  # only after a failure: a hung fake call left behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.integration
def test_end_to_end_a_healthy_lab(healthy_run: HealthyRun) -> None:
    lab, work, result = healthy_run.lab, healthy_run.work, healthy_run.result
    assert result.returncode == 0, result.stdout + result.stderr
    assert "everything checked is ready" in result.stdout
    files = assert_nothing_leaked(lab, work, result)
    for name in ("management/pods.json", "tenants/tenant-a/nodes.json", "tenants/tenant-b/admission.json"):
        assert name in files
    assert "tools/docker-info.json" in files and "RegistryConfig" not in files["tools/docker-info.json"]
    assert "hami.io/node-nvidia-register" in files["tenants/tenant-a/nodes.json"]
    calls = (lab.root / "calls").read_text()
    assert "secret" not in calls.lower().replace("--show-secrets", "")  # no Secret asked for, ever


@pytest.mark.integration
def test_end_to_end_broken_lab(lab: FakeLab, tmp_path: Path) -> None:
    """TCP not Ready, worker NotReady, HAMi scheduler ImagePullBackOff with a 429, webhook without endpoints."""
    lab.management["tcps"][1] = tcp("tenant-b", "NotReady")
    a = lab.tenants["tenant-a"]
    a["pods"][5] = pod(
        "kube-system",
        "hami-scheduler-6d8f9c7b5-x2x",
        ("Deployment", "hami-scheduler"),
        [container_status("vgpu-scheduler-extender", False, ("ImagePullBackOff", "Back-off pulling image"))],
        phase="Pending",
    )
    a["events"].append(event("Pod", "kube-system", "hami-scheduler-6d8f9c7b5-x2x", "Failed", RATE_LIMITED))
    a["endpointslices"] = []
    b = lab.tenants["tenant-b"]
    b["nodes"][0]["status"]["conditions"][1] = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
    }
    b["pods"][0]["status"]["containerStatuses"] = [
        container_status("calico-node", False, ("CrashLoopBackOff", "back-off"), restarts=4)
    ]
    # a token-shaped value, a PEM key, and the tenant's own kubeconfig token with nothing around it that says so
    leaked_log = (
        f"E1130 token: {lab.secret('log', long=False)}\n{PEM}\nW1130 retry with {lab.tokens['tenant-b']} now\n"
        "fatal: could not reach 10.96.0.1:443\n"
    )
    lab.logs["tenant-b"] = {"kube-system/calico-node-abc/calico-node/previous": leaked_log}
    work = tmp_path / "work"
    work.mkdir()
    result = lab.run(work)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "management: TenantControlPlane gpulab-tenant-b/tenant-b: NotReady  [TenantControlPlane not Ready]" in out
    assert (
        "tenant tenant-a: kube-system/hami-scheduler (pod hami-scheduler-6d8f9c7b5-x2x): ImagePullBackOff in "
        "vgpu-scheduler-extender  [registry rate limit (429)]"
    ) in out
    assert "docker login" in out
    assert "tenant tenant-a: MutatingWebhookConfiguration hami-webhook (vgpu.hami.io)" in out
    assert "tenant tenant-b: node tenant-b-worker: NotReady (NodeStatusUnknown)  [node NotReady]" in out
    assert "log: fatal: could not reach 10.96.0.1:443" in out
    assert "known causes: " in out and "registry rate limit (429) (1)" in out
    files = assert_nothing_leaked(lab, work, result)
    assert "tenants/tenant-b/logs/kube-system_calico-node-abc_calico-node.previous.log" in files
    assert "summary.txt" in files and "registry rate limit (429)" in files["findings.json"]


@pytest.mark.integration
def test_make_diagnose_names_the_stuck_component(lab: FakeLab, tmp_path: Path) -> None:
    lab.tenants["tenant-b"]["pods"][5] = pod(
        "kube-system",
        "hami-scheduler-6d8f9c7b5-x2x",
        ("Deployment", "hami-scheduler"),
        [container_status("vgpu-scheduler-extender", False, ("ImagePullBackOff", "Back-off pulling image"))],
        phase="Pending",
    )
    lab.tenants["tenant-b"]["events"].append(
        event("Pod", "kube-system", "hami-scheduler-6d8f9c7b5-x2x", "Failed", RATE_LIMITED)
    )
    work = tmp_path / "work"
    work.mkdir()
    result = lab.run(work, make=True, timeout=120)
    assert result.returncode != 0
    assert "tenant tenant-b: kube-system/hami-scheduler (pod hami-scheduler-6d8f9c7b5-x2x)" in result.stdout
    assert "[registry rate limit (429)]" in result.stdout
    [line] = [line for line in result.stdout.splitlines() if line.startswith("[gpulab] archive: ")]
    assert Path(line.removeprefix("[gpulab] archive: ")).parent == work / "reports"
    assert_nothing_leaked(lab, work, result)


@pytest.mark.integration
def test_end_to_end_a_hanging_tenant_api_is_bounded(lab: FakeLab, tmp_path: Path) -> None:
    lab.mark("tenant-b", "hang")  # accepts, never answers, ignores TERM and --request-timeout
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    result = lab.run(work, "--call-timeout", "1", "--kill-after", "0.5")
    assert time.monotonic() - started < 20  # one probe: 1 s, TERM ignored, KILL 0.5 s later
    assert result.returncode == 1
    assert "tenant tenant-b: API server: tenant API not answering  [tenant API not answering]" in result.stdout
    assert "last: no answer within 1s (stopped)" in result.stdout
    assert "tenant tenant-a" not in result.stdout  # the other tenant was still examined, and is fine
    calls = (lab.root / "calls").read_text()
    assert "kubectl --kubeconfig" in calls and calls.count("/readyz") == 3
    assert_nothing_leaked(lab, work, result)


@pytest.mark.integration
def test_end_to_end_an_api_that_stops_answering_is_left_after_two_calls(lab: FakeLab, tmp_path: Path) -> None:
    folder = lab.root / "kubectl" / SERVERS["tenant-a"].replace(":", "_")
    folder.mkdir(parents=True)
    for args in (["get", "nodes", "-o", "json"], ["get", "pods", "-A", "-o", "json"]):
        (folder / f"{key(args)}.hang").write_text("")
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    result = lab.run(work, "--call-timeout", "1", "--kill-after", "0.5")
    assert time.monotonic() - started < 25
    assert "tenant tenant-a: API server: tenant API not answering" in result.stdout
    assert "answered /readyz, then stopped answering (no answer within 1s (stopped))" in result.stdout
    calls = [line for line in (lab.root / "calls").read_text().splitlines() if "tenant-a.kubeconfig" in line]
    assert len(calls) == 4  # readyz, version, nodes, pods; nothing after the second silence
    assert "tenant tenant-b" not in result.stdout
    assert_nothing_leaked(lab, work, result)


@pytest.mark.integration
def test_end_to_end_a_tenant_not_yet_in_the_outputs(lab: FakeLab, tmp_path: Path) -> None:
    lab.dropped_outputs = {"tenant_b_kubeconfig"}
    lab.management["tcps"][1] = tcp("tenant-b", "Provisioning", address=None)
    work = tmp_path / "work"
    work.mkdir()
    result = lab.run(work)
    assert result.returncode == 1
    out = result.stdout
    assert "tenant tenant-b: kubeconfig: no tenant_b_kubeconfig stack output yet: its own checks are skipped" in out
    assert "management: TenantControlPlane gpulab-tenant-b/tenant-b: Provisioning" in out
    assert "tenant tenant-a" not in out
    assert_nothing_leaked(lab, work, result)


@pytest.mark.integration
def test_end_to_end_a_hanging_docker_daemon_is_bounded(lab: FakeLab, tmp_path: Path) -> None:
    (lab.root / "docker").mkdir(parents=True)
    (lab.root / "docker" / "hang").write_text("")
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    result = lab.run(work, "--call-timeout", "1", "--kill-after", "0.5")
    assert time.monotonic() - started < 20
    assert "docker: Docker daemon: not answering" in result.stdout and "no answer within 1s" in result.stdout
    calls = (lab.root / "calls").read_text()
    assert calls.count("docker ") == 2  # version and info; nothing more is asked of a daemon that hangs
    assert "tenant tenant-a" not in result.stdout  # the clusters were still examined
    assert_nothing_leaked(lab, work, result)


@pytest.mark.integration
def test_end_to_end_kind_cluster_gone(lab: FakeLab, tmp_path: Path) -> None:
    lab.kind_clusters = ""
    lab.containers = lab.containers[1:]
    for cluster in SERVERS:
        lab.mark(cluster, "refused")
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    result = lab.run(work, "--call-timeout", "1", "--kill-after", "0.5")
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    out = result.stdout
    assert "management: kind cluster gpulab: kind cluster gone  [kind cluster gone]" in out
    assert "docker: container gpulab-control-plane: not found" in out
    assert "tenant tenant-a: API server: tenant API not answering" in out
    assert "was refused" in out
    calls = (lab.root / "calls").read_text()
    assert "127.0.0.1" not in calls and calls.count("/readyz") == 2  # the management API is not asked
    assert_nothing_leaked(lab, work, result)


@pytest.mark.integration
def test_terminated_run_removes_its_kubeconfigs(lab: FakeLab, tmp_path: Path) -> None:
    lab.mark("management", "hang")
    lab.write()
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{lab.bin}:/usr/bin:/bin", "FAKE_LAB": str(lab.root), "TMPDIR": str(work / "tmp")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagnose", "--reports", str(work / "reports"), "--call-timeout", "30"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while not list((work / "reports").glob(".diagnose-*/*.kubeconfig")) and time.monotonic() < deadline:
        time.sleep(0.05)
    [kubeconfig] = list((work / "reports").glob(".diagnose-*/*.kubeconfig"))
    assert kubeconfig.stat().st_mode & 0o777 == 0o600 and kubeconfig.parent.stat().st_mode & 0o777 == 0o700
    # TERM while the call hangs: the fake kubectl has become `sleep`, ignoring TERM
    while not [p for p in fake_processes(lab.root) if is_sleep(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in fake_processes(lab.root) if is_sleep(p)]
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM
    assert not list((work / "reports").glob(".diagnose-*"))
    assert not fake_processes(lab.root), "the hung kubectl was left running"


def is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")
    except OSError:
        return False


def fake_processes(root: Path) -> list[int]:
    """Processes of this test's fake tools still running (found by their FAKE_LAB)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"FAKE_LAB={root}\0".encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.integration
def test_a_run_killed_with_kill_leaves_a_directory_the_next_run_removes(healthy_run: HealthyRun) -> None:
    assert healthy_run.result.returncode == 0, healthy_run.result.stderr
    assert not healthy_run.stale.exists()


@pytest.mark.integration
def test_bad_stack_name_is_usage_error(tmp_path: Path) -> None:
    """A name that could leave the project folder is refused before anything is written; a missing stack's
    message (the one every command gives) is tests/model/test_stack_names.py's."""
    result = subprocess.run(
        [sys.executable, "-m", "diagnose", "--stack", "../x", "--reports", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "stack name '../x' is not valid" in result.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.integration
def test_make_lists_diagnose() -> None:
    """`make help` lists diagnose. Where `make up` points at it (after `pulumi up` fails, not after a failed
    preflight or download): tests/model/test_stack_names.py."""
    assert "make diagnose" in subprocess.run(["make", "help"], capture_output=True, text=True, cwd=ROOT).stdout


@pytest.mark.integration
def test_archive_is_readable_as_a_tarball(healthy_run: HealthyRun) -> None:
    files = archive_files(healthy_run.work)
    assert json.loads(files["calls.json"]) and json.loads(files["findings.json"]) == []
    assert io.StringIO(files["summary.txt"]).read().endswith(".tar.gz\n")


def test_summary_is_short_and_counts_the_causes() -> None:
    from diagnose.__main__ import summary

    findings = [
        analyze.Finding("tenant t", f"pod p{i}", "CrashLoopBackOff", cause="CrashLoopBackOff") for i in range(35)
    ]
    text = summary("dev", findings, "reports/x.tar.gz", set()).splitlines()
    assert sum(line.startswith("NOT READY") for line in text) == 30
    assert "... and 5 more: findings.json in the archive" in text
    assert text[-3:] == [
        "[gpulab] diagnose dev: 35 not ready",
        "[gpulab] known causes: CrashLoopBackOff (35)",
        "[gpulab] archive: reports/x.tar.gz",
    ]


def test_pod_state_reads_init_containers_first() -> None:
    calico = pod("kube-system", "calico-node-z", ("DaemonSet", "calico-node"), [container_status("calico-node", False)])
    calico["status"]["phase"] = "Pending"
    calico["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    calico["status"]["initContainerStatuses"] = [
        {"name": "upgrade-ipam", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        {"name": "install-cni", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}},
    ]
    assert analyze.pod_state(calico) == ("CrashLoopBackOff", "back-off", "install-cni")
    calico["status"]["initContainerStatuses"][1]["state"] = {"running": {}}
    assert analyze.pod_state(calico) == ("Init:Running", "", "install-cni")
    # running, not ready: the readiness probe's event is the reason shown
    hami = pod("kube-system", "hami-scheduler-1", ("Deployment", "hami-scheduler"), [container_status("ext", False)])
    assert analyze.pod_state(hami) == ("ContainerNotReady", "", "ext")
    probe = event("Pod", "kube-system", "hami-scheduler-1", "Unhealthy", "Readiness probe failed: HTTP 500")
    cluster = Cluster("tenant-a", objects={"pods": [hami], "events": [probe]})
    [found] = cluster_findings.pod_findings(cluster)
    assert found.last == "Unhealthy: Readiness probe failed: HTTP 500"


@pytest.mark.parametrize(
    "token",
    ["ghp_" + "A1b2C3d4" * 4, "github_pat_" + "11ABCDEFG" * 3, "dckr_pat_" + "x9Y8z7W6", "glpat-" + "q1W2e3R4t5"],
)
def test_registry_and_forge_tokens_in_logs_are_hidden(token: str) -> None:
    """Short token formats (config errors' list, boundary/redact.py) are cut from logs too, not only
    the long ones the generic rule catches."""
    text = f"pull failed: auth {token} rejected"
    assert token not in scrub_text(text)


# --- process mode (runtime: process) ---------------------------------------------------------------------


def test_process_mode_expects_no_hami_or_node_agent_workloads_in_the_tenant() -> None:
    """HAMi, the device plugin's part and the node agents are local processes there, not workloads."""
    objects = healthy_tenant("tenant-a")
    objects["pods"] = [p for p in objects["pods"] if p["metadata"]["namespace"] != "kube-system"]
    objects["workloads"], objects["webhooks"], objects["endpointslices"] = [], [], []
    from diagnose.collect import tenant_expectations

    expectations = tenant_expectations(LAB, "tenant-a")
    docker = cluster_findings.tenant_findings(
        Cluster("tenant-a", objects=objects, logs={}), **expectations, now=NOW, lock_timeout_seconds=2
    )
    assert any(f.reason == "Deployment not found" for f in docker)
    expectations["wing"] = WINGS["process"]
    process = cluster_findings.tenant_findings(
        Cluster("tenant-a", objects=objects, logs={}), **expectations, now=NOW, lock_timeout_seconds=2
    )
    assert process == []


def test_process_mode_puts_the_tail_of_every_process_log_in_the_archive(tmp_path: Path) -> None:
    from diagnose.collect import Collector

    state = tmp_path / "process" / "sim"
    (state / "tenant-a" / "kwok" / "clusters" / "gpulab-tenant-a" / "logs").mkdir(parents=True)
    (state / "tenant-a" / "hami.log").write_text("start\n" + "x" * 100 + "\nlast line\n")
    (state / "tenant-a" / "kwok" / "clusters" / "gpulab-tenant-a" / "logs" / "kube-apiserver.log").write_text("up\n")
    (state / "tenant-a" / "tls.key").write_text("never archived")
    collector = Collector(Runner(5, 1, 30), "sim", None, tmp_path, request_timeout=3)
    collector.process_logs(state, limit=20)
    files = collector.out.files
    assert set(files) == {
        "process/tenant-a/hami.log",
        "process/tenant-a/kwok/clusters/gpulab-tenant-a/logs/kube-apiserver.log",
    }
    assert (
        files["process/tenant-a/hami.log"].endswith("last line\n") and "start" not in files["process/tenant-a/hami.log"]
    )


def test_process_mode_asks_for_no_docker_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen with `make diagnose STACK=sim` on a host without Docker: "Docker daemon: not answering" was its only
    finding, for a lab that runs no container."""
    from diagnose.collect import Collector

    monkeypatch.setenv("PATH", str(tmp_path))  # no docker, kind, kubectl or pulumi here
    sim = load_stack_file(LAB_PROJECT / "Pulumi.sim.yaml")
    for lab, expected in ((LAB, ["Docker daemon"]), (sim, [])):
        collector = Collector(Runner(5, 1, 30), "x", lab, tmp_path, request_timeout=3)
        collector.tools()
        assert [f.component for f in collector.out.findings] == expected


@pytest.mark.integration
def test_process_mode_points_at_the_tenant_s_processes_not_at_kamaji(lab: FakeLab, tmp_path: Path) -> None:
    """A process-mode tenant has no TenantControlPlane or MetalLB address. Its API server and
    the rest are local processes logging under .state/process/<stack>/<tenant>/, and `make up` starts stopped
    ones again on their data (process_lab/resume.py, docs/process-lab.md). Item 9: nothing of Docker or kind
    is asked for, and the archive says why instead of holding their error files."""
    stack = ["stack", "output", "--json", "--stack", "sim"]
    outputs = {"tenant_a_kubeconfig": lab.kubeconfigs["tenant-a"], "tenant_a_endpoint": "127.0.0.1:32766"}
    lab.answer("pulumi", stack, json.dumps({**outputs, "tenant_a_kubeconfig": "[secret]"}))
    lab.answer("pulumi", [*stack[:3], "--show-secrets", *stack[3:]], json.dumps(outputs))
    lab.answer("pulumi", ["config", "--json", "--stack", "sim"], "{}")
    lab.mark("tenant-a", "refused")
    work = tmp_path / "work"
    work.mkdir()
    result = lab.run(work, "--stack", "sim")
    assert result.returncode == 1, result.stderr
    fixes = [line for line in result.stdout.splitlines() if line.startswith("    fix:")]
    assert fixes == [
        "    fix:  its API server is a local process (kwokctl's, on 127.0.0.1): the logs of the tenant's processes are "
        "under .state/process/sim/tenant-a/ (process/tenant-a/ in this archive); `make up STACK=sim` again starts "
        "stopped ones on their data; from this host: kubectl --kubeconfig <tenant kubeconfig> get --raw /readyz",
        "    fix:  `make up STACK=sim` did not finish for it: the logs of the tenant's processes, if any started, are "
        "under .state/process/sim/tenant-b/ (process/tenant-b/ in this archive); `make up STACK=sim` again makes "
        "what is missing and starts stopped ones on their data",
    ]
    calls = (lab.root / "calls").read_text().splitlines()
    assert [c for c in calls if c.split()[0] in ("docker", "kind")] == []
    [archive] = list((work / "reports").glob("diagnose-sim-*.tar.gz"))
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if m.isfile()}
        runtime = tar.extractfile(names["tools/runtime.txt"]).read().decode()
    # (the fake's `kubectl version --client` prints nothing: no file for it)
    assert [name for name in names if name.startswith("tools/")] == ["tools/pulumi-version.txt", "tools/runtime.txt"]
    assert runtime == (
        "process: the lab is local processes (.state/process/sim); this runtime has no Docker or kind, so neither "
        "was asked\n"
    )


def test_a_bridge_tenant_without_calico_is_healthy_and_a_calico_one_is_not() -> None:
    """Boundary: the tenant's objects as the API server lists them on a node of gpulab's kind node image, whose pod
    network is the CNI bridge plugin (a file on the node, no workload): Calico's absence is no finding there, and
    still is where the stack runs Calico."""
    from diagnose.collect import tenant_expectations

    objects = healthy_tenant("tenant-a")
    objects["pods"] = [p for p in objects["pods"] if "calico" not in p["metadata"]["name"]]
    objects["workloads"] = [w for w in objects["workloads"] if "calico" not in w["metadata"]["name"]]
    node = "gpulab/kind-node:v1.36.4"
    bridge = parse_config(
        lab_config(cni="bridge", versions={"managementNodeImage": node, "workerNodeImages": {"v1.36.4": node}})
    )

    def verdicts(lab) -> list[str]:
        found = cluster_findings.tenant_findings(
            Cluster("tenant-a", objects=objects),
            **tenant_expectations(lab, "tenant-a"),
            now=NOW,
            lock_timeout_seconds=2,
        )
        return [f"{f.component}: {f.reason}" for f in found]

    assert verdicts(bridge) == []
    assert sorted(verdicts(LAB)) == [
        "kube-system/calico-kube-controllers: Deployment not found",
        "kube-system/calico-node: DaemonSet not found",
    ]


@pytest.mark.integration
def test_process_mode_names_a_tenants_control_plane_program_that_is_gone(tmp_path: Path) -> None:
    """Boundary: kwokctl's binary runtime keeps a pid file per component (kwok v0.8.0 pkg/kwokctl/runtime/exec.go);
    a component killed or crashed leaves one naming a process that is gone (here a kube-controller-manager that
    exited), the others name live processes whose command line carries the cluster's folder."""
    from diagnose.host_findings import process_findings
    from process_lab.control_plane import COMPONENTS

    project = tmp_path / "project"
    stack_folder = project / ".state" / "process" / "sim"
    cluster = stack_folder / "tenant-a" / "kwok" / "clusters" / "gpulab-tenant-a"
    (cluster / "etcd" / "member" / "wal").mkdir(parents=True)
    (cluster / "kwok.yaml").write_text("kind: KwokctlConfiguration\n")
    (cluster / "pids").mkdir()
    running = subprocess.Popen(
        ["bash", "-c", "sleep 60; :", str(cluster)]
    )  # no exec: its command line keeps the folder
    exited = subprocess.Popen(["true"])
    exited.wait()
    try:
        # Until bash has exec'd, the child's command line is still this worker's (seen beside two busy loops).
        deadline = time.monotonic() + 10
        cmdline = Path(f"/proc/{running.pid}/cmdline")
        while str(cluster).encode() not in cmdline.read_bytes():
            assert time.monotonic() < deadline, f"bash (pid {running.pid}) did not show {cluster} in 10 s"
            time.sleep(0.01)
        for component in COMPONENTS:
            pid = exited.pid if component == "kube-controller-manager" else running.pid
            (cluster / "pids" / f"{component}.pid").write_text(f"{pid}\n")
        [finding] = process_findings(stack_folder, "sim", tmp_path / "bin")
        assert (finding.where, finding.component, finding.reason) == (
            "tenant tenant-a",
            "control plane",
            "kube-controller-manager not running",
        )
        assert finding.fix == (
            "`make up STACK=sim` starts them again on the tenant's data; their logs are under "
            ".state/process/sim/tenant-a/ (process/tenant-a/ in this archive)"
        )
        (cluster / "pids" / "kube-controller-manager.pid").write_text(f"{running.pid}\n")
        assert process_findings(stack_folder, "sim", tmp_path / "bin") == []
    finally:
        running.kill()
        running.wait()


@pytest.mark.parametrize(
    ("stack", "names"),
    [
        # the Docker lab's stack: gpulab's device plugin, v2.10.0's default
        ("dev", "DaemonSet kube-system/gpulab-hami-device-plugin"),
        # the tests' reference stack, the Docker lab on v2.8.3: its inventory script and the mock device plugin
        ("tests/fixtures/lab/Pulumi.dev.yaml", "apply-gpu-inventory"),
        ("nodes", "docker exec tenant-a-worker systemctl status gpulab-hami-plugin"),  # the plugin's unit
        ("sim", "process mode's GPU inventory"),  # KWOK nodes: gpulab patches them
        ("nodes-without-hami", "process mode's GPU inventory"),  # real nodes without HAMi: no plugin runs
    ],
)
def test_a_gpu_node_without_its_cards_is_fixed_where_its_runtime_puts_them(stack: str, names: str) -> None:
    """The same missing register annotation, read from each stack file: the fix names what writes it there."""
    from diagnose.collect import tenant_expectations

    # the repository's stack files, or a path from its root
    lab = load_stack_file(LAB_PROJECT.parents[2] / (stack if "/" in stack else f"Pulumi.{stack}.yaml"))
    objects = healthy_tenant("tenant-a")
    node = objects["nodes"][0]
    node["metadata"]["name"] = lab.tenants[0].gpu_node_name()
    node["metadata"]["annotations"].pop("hami.io/node-nvidia-register")
    expectations = tenant_expectations(lab, "tenant-a")
    found = card_findings.gpu_node_findings(
        Cluster("tenant-a", objects=objects), expectations["gpu_node"], None, expectations["cards_from"]
    )
    [missing] = [f for f in found if f.reason == "no hami.io/node-nvidia-register annotation"]
    assert names in missing.fix, missing.fix


def test_a_tenant_of_gpulabs_plugin_needs_its_daemon_set_and_its_missing_cards_name_it() -> None:
    """devicePlugin: gpulab in the Docker lab: gpulab's DaemonSet is what must run (not the chart's mock), and a node
    without its cards is fixed at the pod of that plugin (it writes the annotation and registers the resources)."""
    from diagnose.collect import tenant_expectations

    config = lab_config()
    config["tenants"][0].update(hamiVersion="v2.10.0", devicePlugin="gpulab")
    lab = parse_config(config)
    expectations = tenant_expectations(lab, "tenant-a")
    assert expectations["cards_from"] == "plugin-daemonset"
    assert tenant_expectations(lab, "tenant-b")["cards_from"] == "docker-mock"
    objects = healthy_tenant("tenant-a")
    mock = analyze.MOCK_PLUGIN[1]
    objects["pods"] = [p for p in objects["pods"] if mock not in p["metadata"]["name"]]
    objects["workloads"] = [w for w in objects["workloads"] if w["metadata"]["name"] != mock]
    found = cluster_findings.tenant_findings(Cluster("tenant-a", objects=objects), **expectations, now=NOW,
                                             lock_timeout_seconds=2)  # fmt: skip
    [missing] = [f for f in found if f.component == "kube-system/gpulab-hami-device-plugin"]
    assert not [f for f in found if mock in f.component], "the chart's mock is not expected for this tenant"
    objects["workloads"].append(workload("DaemonSet", "kube-system", "gpulab-hami-device-plugin"))
    objects["pods"].append(
        pod("kube-system", "gpulab-hami-device-plugin-x2v9k", ("DaemonSet", "gpulab-hami-device-plugin"))
    )
    node = objects["nodes"][0]
    node["metadata"]["annotations"].pop("hami.io/node-nvidia-register")
    found = cluster_findings.tenant_findings(Cluster("tenant-a", objects=objects), **expectations, now=NOW,
                                             lock_timeout_seconds=2)  # fmt: skip
    assert not [f for f in found if f.component.removeprefix("kube-system/") == "gpulab-hami-device-plugin"]
    [annotation] = [f for f in found if f.reason == "no hami.io/node-nvidia-register annotation"]
    assert "DaemonSet kube-system/gpulab-hami-device-plugin" in annotation.fix and missing.reason
