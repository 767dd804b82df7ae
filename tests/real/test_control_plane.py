"""The control plane itself, and what the program puts in it before any workload: the boundaries are
kwokctl's binary runtime (loopback only, nothing left after delete: the session fixture asserts that),
the API server's compile-time type checking of our policies (cel-python checks none of it), the quota
controller reading our ResourceQuota, and a KWOK node carrying the inventory the program's script writes."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

from model.catalog import GPU_RESOURCE, REGISTER_ANNOTATION, gpu_capacity, register_annotation
from model.kube_objects.admission_policy import policy_objects
from model.kube_objects.tenant_objects import quota_hard, quota_initialised
from model.quantity import canonical_whole
from tests.acceptance.helpers import wait_until
from tests.real.cluster import POLL, listening


def test_every_program_of_the_cluster_listens_on_loopback_only(cluster) -> None:
    pids = cluster.pids()
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}
    addresses = listening(pids.values())
    assert addresses, "the control plane listens somewhere (else this test would see nothing)"
    outside = sorted(a for a in addresses if not ipaddress.ip_address(a.rsplit(":", 1)[0].strip("[]")).is_loopback)
    assert not outside, f"listening outside loopback: {outside}"


def test_kwokctl_and_kubectl_keep_their_state_in_the_runs_folder(cluster) -> None:
    """Nothing in ~/.kwok or ~/.kube: the cluster, its pids and logs, and kubectl's discovery cache are here."""
    workdir = cluster.plane.workdir
    assert cluster.plane.cluster_dir.is_relative_to(workdir) and (cluster.plane.cluster_dir / "pids").is_dir()
    assert cluster.env()["KUBECACHEDIR"] == str(workdir / "kube-cache")
    assert any((workdir / "kube-cache").iterdir()), "kubectl cached its discovery there"


def test_every_program_of_the_cluster_runs_with_the_labs_gc_target(cluster) -> None:
    """Boundary: kwokctl's binary runtime starting each component with its own environment, GOGC included (the
    lab's smaller heaps, process_lab/control_plane.py GO_GC, reach the programs only so)."""
    import os

    from process_lab.control_plane import GO_GC

    expected = os.environ.get("GOGC", GO_GC)
    for program, pid in cluster.pids().items():
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"GOGC={expected}".encode() in environ, f"{program} (pid {pid}) runs without GOGC={expected}"


def test_the_api_server_and_the_controller_manager_run_without_request_limits(cluster) -> None:
    """Boundary: kwokctl's `disableQPSLimits` as its binary runtime turns it into flags (process_lab/control_plane.py
    LAB_OPTIONS), and the API server as it then runs: no API Priority and Fairness, no in-flight limits; the
    controller manager's and the scheduler's clients unthrottled (this cluster's kube-scheduler has no
    configuration file, as a DRA tenant's)."""
    pids = cluster.pids()
    argv = {name: Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") for name, pid in pids.items()}
    limits = ("--enable-priority-and-fairness=false", "--max-requests-inflight=0", "--max-mutating-requests-inflight=0")
    assert set(limits) <= set(argv["kube-apiserver"]), argv["kube-apiserver"]
    for client in ("kube-controller-manager", "kube-scheduler"):
        assert {"--kube-api-qps=5000", "--kube-api-burst=10000"} <= set(argv[client]), argv[client]
    assert not any(arg.startswith("--config") for arg in argv["kube-scheduler"]), "beside a file it ignores them"
    # With APF, its consumer and filter hooks run and its debug endpoints answer (k8s.io/apiserver v0.36.4
    # pkg/server/config.go: `c.FlowControl != nil`); the producer of its default objects runs either way.
    checks = cluster.kubectl("get", "--raw", "/readyz?verbose").stdout
    assert "[+]poststarthook/priority-and-fairness-config-producer ok" in checks, checks  # the list is whole
    assert "priority-and-fairness-config-consumer" not in checks and "priority-and-fairness-filter" not in checks
    dump = cluster.kubectl("get", "--raw", "/debug/api_priority_and_fairness/dump_priority_levels")
    assert dump.returncode != 0 and "NotFound" in dump.stderr, dump.stdout + dump.stderr


def test_the_api_server_type_checks_the_policies_without_a_warning(cluster, tenant_lab) -> None:
    """Warnings land in status.typeChecking (per matched kind); the policies must type-check for every kind."""
    for policy in (tenant_lab.deny, tenant_lab.warn):
        status = cluster.get("validatingadmissionpolicy", policy["metadata"]["name"])["status"]
        assert status.get("observedGeneration") == 1
        assert not status.get("typeChecking", {}).get("expressionWarnings"), json.dumps(status, indent=1)[:3000]


def test_the_api_server_type_checks_the_v2_10_0_policies_without_a_warning(cluster, tenant_lab) -> None:
    """Tenant-a's policies as a HAMi v2.10.0 tenant has them (its webhook's rules; per-pod limits that count the largest
    init container, `([sum] + list).max()`), created under other names and unbound, so they judge nothing here: the
    API server compiles them within its cost budget and type-checks them for every kind without a warning."""
    tenant = tenant_lab.tenant.model_copy(update={"hami_version": "v2.10.0"})
    policies = [o for o in policy_objects(tenant) if o["kind"] == "ValidatingAdmissionPolicy"]
    names = [f"{policy['metadata']['name']}-v2-10-0" for policy in policies]
    for policy, name in zip(policies, names, strict=True):
        policy["metadata"]["name"] = name
    cluster.ok("apply", "--server-side", "--field-manager=gpulab", "-f", "-", stdin=policies)

    def checked(name: str) -> dict | None:
        status = (cluster.get("validatingadmissionpolicy", name) or {}).get("status") or {}
        return status if status.get("observedGeneration") == 1 else None

    try:
        for name in names:
            status = wait_until(lambda n=name: checked(n), 90, f"the API server to type-check {name}", interval=POLL)
            assert not status.get("typeChecking", {}).get("expressionWarnings"), json.dumps(status, indent=1)[:3000]
    finally:
        cluster.ok("delete", "validatingadmissionpolicy", *names)


def test_the_quota_controller_reads_the_tenants_quota(cluster, tenant_lab) -> None:
    name = tenant_lab.quota["metadata"]["name"]
    written = wait_until(
        lambda: (cluster.get("resourcequota", "-n", tenant_lab.namespace, name) or {}).get("status", {}).get("hard"),
        60,
        f"the quota controller to write status.hard of {name}",
        interval=POLL,
    )
    assert written == {key: canonical_whole(int(value)) for key, value in quota_hard(tenant_lab.tenant).items()}


def test_the_quota_wait_pulumi_is_given_holds_once_the_controller_has_written_the_status(cluster) -> None:
    """Boundary: the API server writing a quota's `status.hard` in its canonical form (20000 as `20k`), read by the
    conditions our ResourceQuota's `pulumi.com/waitFor` annotation names. A value the server writes otherwise would
    leave `pulumi up` waiting out its ten minutes; values here cover each way a number can come back."""
    hard = {
        "limits.nvidia.com/gpumem": "20000",
        "limits.nvidia.com/gpucores": "1500",
        "requests.nvidia.com/gpu": "1000000",
        "count/configmaps": "81920",
    }
    namespace = "gpulab-quota-values"  # its own: the quota must not judge other tests' requests
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpulab-canonical-values", "namespace": namespace},
        "spec": {"hard": hard},
    }
    made = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    cluster.ok("apply", "--server-side", "--field-manager=gpulab", "-f", "-", stdin=[made, quota])
    try:
        written = wait_until(
            lambda: (
                (cluster.get("resourcequota", "-n", namespace, "gpulab-canonical-values") or {})
                .get("status", {})
                .get("hard")
            ),
            60,
            "the quota controller to write status.hard of gpulab-canonical-values",
            interval=POLL,
        )
        awaited = {}
        for condition in json.loads(quota_initialised(hard)):
            match = re.fullmatch(r"jsonpath=\{\.status\.hard\['([^']+)'\]\}=(.+)", condition)
            assert match, condition
            awaited[match[1]] = match[2]
        assert awaited == written
        assert written["limits.nvidia.com/gpumem"] == "20k", "the canonical form this wait exists for"
    finally:
        cluster.ok("delete", "namespace", namespace, "--wait=false")


def test_the_gpu_node_is_ready_under_kwok_with_the_cards_the_program_wrote(cluster, tenant_lab) -> None:
    """KWOK's node stages take the node Ready and keep the annotation, capacity and allocatable given to it
    (HAMi reads the annotation, and registers the node while allocatable nvidia.com/gpu > 0)."""

    def ready() -> dict | None:
        node = cluster.get("node", tenant_lab.node)
        conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        return node if conditions.get("Ready") == "True" else None

    node = wait_until(ready, 60, f"KWOK to report node {tenant_lab.node} Ready", interval=POLL)
    [gpu_node] = tenant_lab.tenant.gpu_nodes()
    assert node["metadata"]["annotations"][REGISTER_ANNOTATION] == register_annotation(gpu_node.cards)
    count = str(gpu_capacity(gpu_node.cards))
    assert node["status"]["capacity"][GPU_RESOURCE] == count
    assert node["status"]["allocatable"][GPU_RESOURCE] == count


def test_a_controller_manager_gone_after_create_is_started_again_before_its_work_is_awaited(cluster) -> None:
    """Boundary: kube-controller-manager exiting after kwokctl started it (under load it gives up on an API server
    not yet healthy; seen on 2 of 20 tenants of one `make up STACK=many`), and its service-account controller, whose
    account every Pod create needs. `wait_controllers`, which `create` ends with, starts it again on the
    cluster's data and returns once the controller has done that work."""
    import os
    import signal

    plane = cluster.plane
    pid_file = plane.cluster_dir / "pids" / "kube-controller-manager.pid"
    before = int(pid_file.read_text())
    os.kill(before, signal.SIGKILL)
    wait_until(
        lambda: "kube-controller-manager" in plane.stopped_components(), 30, "the killed controller manager to stop"
    )
    cluster.ok("delete", "serviceaccount", "default", "-n", "default")
    plane.wait_controllers(120)
    assert plane.stopped_components() == []
    assert int(pid_file.read_text()) != before, "started again"
    assert cluster.get("serviceaccount", "default", "-n", "default") is not None, "made by the new one"
