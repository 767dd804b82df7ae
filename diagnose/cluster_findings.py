"""Findings about a cluster (the management cluster or a tenant's): pods, nodes, workloads, webhooks,
Kamaji's control planes, GPU nodes, HAMi's node lock and the admission policy. Pure functions over
what diagnose collected (diagnose/analyze.py's Cluster)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from diagnose.analyze import (
    MANAGEMENT_NAMESPACES,
    MOCK_PLUGIN,
    NODE_LOCKED,
    TCP_POD_LABEL,
    Cluster,
    Finding,
    _event_line,
    _meta,
    _ref,
    _requests_gpu,
    events_about,
    known_cause,
    last_event,
    last_line,
    node_selector,
    nodes_selected,
    pod_owner,
    pod_ready,
    pod_state,
    tenant_components,
)
from diagnose.card_findings import gpu_node_findings
from diagnose.dra_findings import dra_findings
from hami.annotations import NODE_LOCK, AnnotationError, parse_node_lock
from model.kube_objects.hami_device_plugin import NAME as GPULAB_PLUGIN_NAME
from model.names import HAMI_NAMESPACE, KAMAJI_DATASTORE, METALLB_NAMESPACE, POOL_NAME
from model.stack_file import make_up
from model.wings import DEFAULT_WING, WINGS, Wing

GPULAB_PLUGIN = ("DaemonSet", GPULAB_PLUGIN_NAME)  # devicePlugin: gpulab (components/docker/hami_device_plugin.py)


def pod_findings(cluster: Cluster) -> list[Finding]:
    """One finding per not-ready pod (Jobs that finished are ready), with its last event and log line."""
    findings = []
    events = cluster.items("events")
    # A Job retries in a new pod: a failed try is no finding once a later one succeeded (Helm hooks, etcd setup).
    succeeded = {pod_owner(p) for p in cluster.items("pods") if (p.get("status") or {}).get("phase") == "Succeeded"}
    for pod in cluster.items("pods"):
        if pod_ready(pod) or (_meta(pod).get("deletionTimestamp")):
            continue
        if (pod.get("status") or {}).get("phase") == "Failed" and pod_owner(pod) in succeeded:
            continue
        meta = _meta(pod)
        reason, message, container = pod_state(pod)
        pod_events = events_about(events, "Pod", meta.get("namespace"), meta.get("name", ""))
        key = f"{meta.get('namespace')}/{meta.get('name')}/{container}"
        log = last_line(cluster.logs.get(key + "/previous", "")) or last_line(cluster.logs.get(key, ""))
        texts = [message, *(_event_line(e) for e in pod_events), log]
        cause, fix = known_cause(reason, texts)
        last = last_event(pod_events) or message
        if log and (reason == "CrashLoopBackOff" or not last):
            last = f"log: {log}"
        what = "GPU pod" if _requests_gpu(pod) else "pod"
        component = pod_owner(pod)
        if component != _ref(pod):
            component += f" ({what} {meta.get('name')})"
        else:
            component = f"{what} {component}"
        findings.append(
            Finding(cluster.where, component, reason + (f" in {container}" if container else ""), last, fix, cause)
        )
    return findings


def node_findings(cluster: Cluster, expect_nodes: bool = True) -> list[Finding]:
    nodes = cluster.items("nodes")
    if not nodes and expect_nodes:
        return [
            Finding(
                cluster.where,
                "nodes",
                "no node has joined",
                "",
                "the worker never joined: see `pulumi up`'s worker-join output and the worker container below",
                "node NotReady",
            )
        ]
    findings = []
    for node in nodes:
        name = _meta(node).get("name", "?")
        conditions = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
        ready = conditions.get("Ready") or {}
        if ready.get("status") != "True":
            message = ready.get("message") or ""
            if ready.get("status") == "Unknown":
                fix = (
                    "its kubelet stopped reporting: is the container running (`docker ps -a`)? "
                    f"`docker exec {name} journalctl -u kubelet`"
                )
            elif re.search(r"cni|network", message, re.IGNORECASE):
                fix = "the pod network is not up on it: see calico-node (and kube-proxy) in this tenant"
            else:
                fix = f"`docker exec {name} journalctl -u kubelet` (or on the machine) says why"
            node_events = events_about(cluster.items("events"), "Node", None, name)
            last = message or last_event(node_events)
            cause, cause_fix = known_cause("NodeNotReady", [message, *(_event_line(e) for e in node_events)])
            findings.append(
                Finding(
                    cluster.where,
                    f"node {name}",
                    f"NotReady ({ready.get('reason') or ready.get('status') or 'no Ready condition'})",
                    last,
                    cause_fix if cause.startswith("missing host") else fix,
                    cause if cause.startswith("missing host") else "node NotReady",
                )
            )
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            if (conditions.get(kind) or {}).get("status") == "True":
                findings.append(
                    Finding(
                        cluster.where,
                        f"node {name}",
                        kind,
                        conditions[kind].get("message", ""),
                        "free memory/disk on the Docker host",
                    )
                )
    return findings


def _workload_ready(obj: dict, nodes: list[dict], expected: bool = False) -> tuple[bool, str]:
    """Whether a Deployment, DaemonSet or StatefulSet is ready, and how far. `nodes`: the cluster's, `expected`: one
    the lab must run (a tenant component, the mock plugin)."""
    kind, spec, status = obj.get("kind"), obj.get("spec") or {}, obj.get("status") or {}
    if kind == "DaemonSet":
        # The API server omits zero counts the type marks omitempty (numberAvailable, updatedNumberScheduled;
        # k8s.io/api apps/v1 DaemonSetStatus): absent is 0.
        desired, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
        if desired == 0:
            selector = node_selector(obj)
            if selected := nodes_selected(selector, nodes):
                return False, f"0 pods scheduled, though its nodeSelector matches {', '.join(selected)}"
            if nodes and selector and not expected:  # by its own choice: HAMi's NVIDIA plugin waits for gpu=on
                return True, f"0 desired: no node matches its nodeSelector {selector}"
            return False, "0 pods scheduled (no node it may run on)"
        return ready >= desired, f"{ready}/{desired} ready"
    wanted = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    return ready >= wanted, f"{ready}/{wanted} ready"


def workload_findings(
    cluster: Cluster, namespaces: set[str], expected: list[tuple[str, str, str]], covered: set[str]
) -> list[Finding]:
    """Workloads in `namespaces` that are not ready, and `expected` (kind, namespace, name) that are missing.
    `covered`: components already named by a pod finding."""
    findings = []
    present = {(w.get("kind"), _meta(w).get("namespace"), _meta(w).get("name")) for w in cluster.items("workloads")}
    nodes = cluster.items("nodes")
    for kind, namespace, name in expected:
        if (kind, namespace, name) not in present:
            findings.append(
                Finding(
                    cluster.where,
                    f"{namespace}/{name}",
                    f"{kind} not found",
                    "",
                    "never installed: `pulumi up` stopped before it (its output says where); run `make up` again",
                )
            )
    for workload in cluster.items("workloads"):
        meta = _meta(workload)
        if meta.get("namespace") not in namespaces:
            continue
        ref = _ref(workload)
        key = (workload.get("kind"), meta.get("namespace"), meta.get("name"))
        ready, detail = _workload_ready(workload, nodes, expected=key in expected)
        if ready or ref in covered:
            continue
        events = events_about(cluster.items("events"), workload.get("kind", ""), meta.get("namespace"), meta["name"])
        # A Deployment whose ReplicaSet cannot create pods (quota, admission) says so in its conditions.
        conditions = sorted(
            (c for c in (workload.get("status") or {}).get("conditions") or [] if c.get("message")),
            key=lambda c: c.get("type") != "ReplicaFailure",
        )
        conditions = [
            f"{c.get('reason')}: {c['message']}"
            for c in conditions
            if (c.get("type") == "ReplicaFailure") == (c.get("status") == "True")
        ]
        last = last_event(events) or (conditions[0] if conditions else "")
        cause, fix = known_cause("", [last])
        findings.append(
            Finding(cluster.where, ref, f"{workload.get('kind')} {detail}", last, fix or "see its pods' state", cause)
        )
    return findings


def webhook_findings(cluster: Cluster) -> list[Finding]:
    """Admission webhooks backed by a Service that has no ready endpoint (EndpointSlices)."""
    ready: dict[tuple[str, str], int] = {}
    for slice_ in cluster.items("endpointslices"):
        meta = _meta(slice_)
        service = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not service:
            continue
        count = sum(1 for e in slice_.get("endpoints") or [] if (e.get("conditions") or {}).get("ready") is not False)
        key = (meta.get("namespace"), service)
        ready[key] = ready.get(key, 0) + count
    findings = []
    for config in cluster.items("webhooks"):
        for hook in config.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service")
            if not service or ready.get((service.get("namespace"), service.get("name")), 0) > 0:
                continue
            policy = hook.get("failurePolicy", "Fail")
            if policy == "Ignore":
                effect = (
                    "matching requests pass without it (HAMi: GPU pods created now bypass its scheduler; "
                    "recreate them once it is back)"
                )
            else:
                effect = "matching requests are refused until it is back"
            findings.append(
                Finding(
                    cluster.where,
                    f"{config.get('kind')} {_meta(config).get('name')} ({hook.get('name')})",
                    f"webhook without ready endpoints (Service {service.get('namespace')}/{service.get('name')})",
                    "",
                    f"make the pods behind the Service ready (see them above); {effect}",
                    "webhook without ready endpoints",
                )
            )
    return findings


def tcp_findings(cluster: Cluster) -> list[Finding]:
    """TenantControlPlanes that are not Ready, with the reason their pods or events give."""
    findings = []
    pods = cluster.items("pods")
    events = cluster.items("events")
    for tcp in cluster.items("tcps"):
        meta = _meta(tcp)
        status = tcp.get("status") or {}
        resources = status.get("kubernetesResources") or {}
        state = (resources.get("version") or {}).get("status") or "no status yet"
        if state == "Ready":
            continue
        detail = last_event(events_about(events, "TenantControlPlane", meta.get("namespace"), meta.get("name", "")))
        for pod in pods:
            if (_meta(pod).get("labels") or {}).get(TCP_POD_LABEL) == meta.get("name") and not pod_ready(pod):
                reason, message, container = pod_state(pod)
                detail = detail or f"pod {_meta(pod).get('name')}: {reason} in {container} {message}".strip()
        ingress = ((resources.get("service") or {}).get("loadBalancer") or {}).get("ingress") or []
        fix = "see the pods of its namespace above and Kamaji's log (kamaji-system)"
        if not ingress:
            fix = "its Service has no LoadBalancer address: check MetalLB's pool and speaker above; " + fix
        findings.append(
            Finding(
                cluster.where, f"TenantControlPlane {_ref(tcp)}", state, detail, fix, "TenantControlPlane not Ready"
            )
        )
    return findings


def management_findings(cluster: Cluster, installs: dict[str, bool]) -> list[Finding]:
    """MetalLB pool and advertisement, Kamaji's DataStore; the rest is pods, workloads and TCPs."""
    findings = []
    if installs.get("metallb"):
        findings += _missing(
            cluster, "metallb", [("IPAddressPool", POOL_NAME), ("L2Advertisement", POOL_NAME)],
            lambda kind, _: (f"{METALLB_NAMESPACE}/{POOL_NAME}", f"{kind} not found"),
            "tenant control planes get no address without it: run `make up` again once MetalLB is ready",
        )  # fmt: skip
    if installs.get("kamaji"):
        stores = {_meta(d).get("name"): d for d in cluster.items("datastores")}
        store = stores.get(KAMAJI_DATASTORE)
        if store is None:
            findings.append(
                Finding(
                    cluster.where,
                    f"DataStore {KAMAJI_DATASTORE}",
                    "not found",
                    "",
                    "Kamaji's chart creates it with kamaji-etcd: see kamaji-system above",
                )
            )
        elif not (store.get("status") or {}).get("ready"):
            conditions = (store.get("status") or {}).get("conditions") or []
            last = next((f"{c.get('reason')}: {c.get('message')}" for c in conditions if c.get("status") != "True"), "")
            findings.append(
                Finding(
                    cluster.where,
                    f"DataStore {KAMAJI_DATASTORE}",
                    "not ready",
                    last,
                    "its etcd (kamaji-system/kamaji-etcd) must be ready",
                )
            )
    return findings


def node_lock_findings(cluster: Cluster, now: datetime, timeout_seconds: float) -> list[Finding]:
    """HAMi's node lock (hami.io/mutex.lock) held past its timeout, or unreadable, while GPU pods wait, or named by a
    bind failure (`node X has been locked within 5m0s`)."""
    findings = []
    waiting = [p for p in cluster.items("pods") if _requests_gpu(p) and not pod_ready(p)]
    lock_events = [e for e in cluster.items("events") if NODE_LOCKED.search(e.get("message") or "")]
    for node in cluster.items("nodes"):
        name = _meta(node).get("name", "?")
        value = (_meta(node).get("annotations") or {}).get(NODE_LOCK)
        if not value:
            continue
        try:
            lock = parse_node_lock(value)
        except AnnotationError as error:
            # HAMi cannot read it either: every Bind on the node fails, and it never expires (v2.8.3 and v2.10.0
            # pkg/util/nodelock/nodelock.go LockNode returns ParseNodeLock's error).
            age, holder = None, f", unreadable: {error.problem}"
        else:
            age = (now - lock.taken).total_seconds()
            holder = f" by {lock.namespace}/{lock.pod}" if lock.namespace or lock.pod else " by an unknown pod"
        mentioned = [e for e in lock_events if name in (e.get("message") or "")]
        if not mentioned and not (waiting and (age is None or age > timeout_seconds)):
            continue
        held = f"held {age:.0f}s" if age is not None else "held"
        findings.append(
            Finding(
                cluster.where,
                f"node {name}",
                f"HAMi node lock {held}{holder}",
                _event_line(mentioned[-1]) if mentioned else f"{len(waiting)} GPU pod(s) waiting",
                f"the mock device plugin never releases it; gpulab sets --node-lock-timeout (nodeLockTimeout). "
                f"If it stays: kubectl annotate node {name} {NODE_LOCK}-",
                "HAMi node lock held",
            )
        )
    return findings


def admission_findings(cluster: Cluster, policies: list[str]) -> list[Finding]:
    """gpulab's in-tenant ValidatingAdmissionPolicies and their bindings exist."""
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    return _missing(
        cluster, "admission", [(kind, name) for name in policies for kind in kinds],
        lambda kind, name: (f"{kind} {name}", "not found"),
        "GPU requests are not checked at admission in this tenant: run `make up` again",
    )  # fmt: skip


def _missing(
    cluster: Cluster,
    collected: str,
    wanted: list[tuple[str, str]],
    named: Callable[[str, str], tuple[str, str]],
    fix: str,
) -> list[Finding]:
    """A finding for each (kind, name) of `wanted` absent from the cluster's `collected` objects; `named` gives
    the finding's component and reason."""
    present = {(o.get("kind"), _meta(o).get("name")) for o in cluster.items(collected)}
    return [Finding(cluster.where, *named(kind, name), "", fix) for kind, name in wanted if (kind, name) not in present]


def process_logs(stack: str, tenant: str) -> str:
    """Process mode: where a tenant's processes (kwokctl's control plane, hami-scheduler, the bind-time role)
    write their logs (process_lab/stack.py), which diagnose puts in its archive."""
    return f".state/process/{stack}/{tenant}/ (process/{tenant}/ in this archive)"


def unfinished_tenant_fix(stack: str, tenant: str, wing: Wing) -> str:
    """A tenant with no kubeconfig output yet: `make up` stopped before it. Where its control plane is local processes
    (process mode) there is no TenantControlPlane to look at; a rerun starts stopped processes on their data
    (process_lab/resume.py)."""
    if not wing.local_processes:
        return "`make up` did not finish for it: see its TenantControlPlane in the management findings"
    return (
        f"`{make_up(stack)}` did not finish for it: the logs of the tenant's processes, if any started, are under "
        f"{process_logs(stack, tenant)}; `{make_up(stack)}` again makes what is missing and starts stopped ones "
        "on their data"
    )


def tenant_findings(
    cluster: Cluster,
    *,
    gpu_node: str,
    mock: bool,
    expected_capacity: dict[str, int] | None,
    policies: list[str],
    now: datetime,
    lock_timeout_seconds: float,
    namespaces: tuple[str, ...] = (),
    wing: Wing = WINGS[DEFAULT_WING],
    stack: str = "dev",
    pod_network: str = "calico",
    dra_nodes: tuple[str, ...] = (),
    cards_from: str = "docker-mock",
) -> list[Finding]:
    """`namespaces`: the tenant's GPU workload namespaces (a Deployment there may have no pod at all). `wing`: what
    the lab's wing is like (its control plane local processes, with logs in the archive; its system parts workloads in
    the tenant or not). `dra_nodes`: a DRA tenant's GPU nodes."""
    if not cluster.answered:
        where = (
            f"its API server is a local process (kwokctl's, on 127.0.0.1): the logs of the tenant's processes are "
            f"under {process_logs(stack, cluster.name)}; `{make_up(stack)}` again starts stopped ones on their data"
            if wing.local_processes
            else "check its TenantControlPlane and its MetalLB address in the management findings"
        )
        return [
            Finding(
                cluster.where,
                "API server",
                "tenant API not answering",
                cluster.error,
                f"{where}; from this host: kubectl --kubeconfig <tenant kubeconfig> get --raw /readyz",
                "tenant API not answering",
            )
        ]
    pods = pod_findings(cluster)
    covered = {f.component.split(" (")[0] for f in pods}
    expected = [(kind, HAMI_NAMESPACE, name) for kind, name in tenant_components(pod_network)]
    expected = expected if wing.system_workloads else []  # process mode: local processes, or none (KWOK nodes)
    # The Docker lab's device plugin: HAMi's chart's mock, or gpulab's (devicePlugin).
    if mock and wing.system_workloads:
        plugin = GPULAB_PLUGIN if cards_from == "plugin-daemonset" else MOCK_PLUGIN
        expected.append((plugin[0], HAMI_NAMESPACE, plugin[1]))
    found = node_findings(cluster)
    found += pods
    found += workload_findings(cluster, {HAMI_NAMESPACE, *namespaces}, expected, covered)
    found += webhook_findings(cluster)
    if mock:
        found += gpu_node_findings(cluster, gpu_node, expected_capacity, cards_from)
    found += node_lock_findings(cluster, now, lock_timeout_seconds)
    found += admission_findings(cluster, policies)
    found += dra_findings(cluster, dra_nodes)
    return found


def management_cluster_findings(cluster: Cluster, installs: dict[str, bool]) -> list[Finding]:
    if not cluster.answered:
        return [
            Finding(
                "management",
                "API server",
                "management API not answering",
                cluster.error,
                "is the kind node container running (`docker ps -a`)? `make down` then `make up` recreates the lab",
            )
        ]
    pods = pod_findings(cluster)
    covered = {f.component.split(" (")[0] for f in pods}
    namespaces = {ns for key, ns in MANAGEMENT_NAMESPACES.items() if installs.get(key)}
    found = node_findings(cluster)
    found += pods
    found += workload_findings(cluster, namespaces, [], covered)
    found += webhook_findings(cluster)
    found += management_findings(cluster, installs)
    found += tcp_findings(cluster)
    return found
