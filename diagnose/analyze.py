"""Verdicts from what diagnose collected: pure functions over parsed kubectl/docker JSON.

Nothing here runs a program or reads a file, so every rule is tested on constructed objects
(tests/test_diagnose.py). Names the lab uses come from components/ (names, namespaces, labels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from components.hami import HAMI_NAMESPACE
from components.management_cluster import (
    CERT_MANAGER_NAMESPACE,
    KAMAJI_DATASTORE,
    KAMAJI_NAMESPACE,
    METALLB_NAMESPACE,
    POOL_NAME,
)
from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_RESOURCE, REGISTER_ANNOTATION
from model.quantity import QuantityError, parse_quantity

NODE_LOCK_ANNOTATION = "hami.io/mutex.lock"  # value `<RFC3339>,<ns>,<pod>` (notes/hami.md section 3)
TCP_POD_LABEL = "kamaji.clastix.io/name"  # pods of a TenantControlPlane (notes/kamaji.md)
HAMI_REASONS = re.compile(
    r"\b(CardNotHealth|CardCordoned|CardTypeMismatch|NumaNotFit|CardUuidMismatch|CardTimeSlicingExhausted|"
    r"ExclusiveDeviceAllocateConflict|ResourceQuotaNotFit|CardInsufficientMemory|CardInsufficientCore|"
    r"CardComputeUnitsExhausted|AllocatedCardsInsufficientRequest|NodeInsufficientDevice|NodeUnfitPod)\b"
)
# What every tenant runs (kube-system): Kamaji's soot addons, the Calico manifest, the HAMi chart.
TENANT_COMPONENTS = [
    ("DaemonSet", "calico-node"),
    ("Deployment", "calico-kube-controllers"),
    ("DaemonSet", "konnectivity-agent"),
    ("DaemonSet", "kube-proxy"),
    ("Deployment", "coredns"),
    ("Deployment", "hami-scheduler"),
]
MOCK_PLUGIN = ("DaemonSet", "hami-mock-device-plugin")
# Management namespaces whose every workload must be ready, by what gpulab installs there.
MANAGEMENT_NAMESPACES = {
    "cert_manager": CERT_MANAGER_NAMESPACE,
    "metallb": METALLB_NAMESPACE,
    "kamaji": KAMAJI_NAMESPACE,
}


@dataclass(frozen=True)
class Finding:
    where: str  # "management", "tenant tenant-a", "docker", "host", "stack"
    component: str  # e.g. "kube-system/hami-scheduler"
    reason: str  # e.g. "ImagePullBackOff"
    last: str = ""  # the last event or log line behind it
    fix: str = ""
    cause: str = ""  # a known cause by name, e.g. "registry rate limit (429)"


@dataclass
class Cluster:
    """One API server's objects as collected ("nodes", "pods", "events", "workloads", ...)."""

    name: str  # "management" or the tenant's name
    answered: bool = True
    error: str = ""
    objects: dict[str, list[dict]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)  # "ns/pod/container[/previous]" -> text

    @property
    def where(self) -> str:
        return self.name if self.name == "management" else f"tenant {self.name}"

    def items(self, kind: str) -> list[dict]:
        return self.objects.get(kind) or []


# --- known causes ------------------------------------------------------------------------------

# A whole 429, not three digits of an image digest.
RATE_LIMIT = re.compile(r"\b429\b|toomanyrequests|too many requests|pull rate limit", re.IGNORECASE)
CONNTRACK = re.compile(r"nf_conntrack_max.*permission denied", re.IGNORECASE)
INOTIFY = re.compile(r"too many open files|inotify", re.IGNORECASE)
BR_NETFILTER = re.compile(r"br_netfilter|bridge-nf-call-ip6?tables", re.IGNORECASE)
NODE_LOCKED = re.compile(r"has been locked within")

FIX_LOGIN = (
    "run `docker login` on this host (Docker Hub allows 10 anonymous pulls per hour), then `make up` again: "
    "images are pulled once on the host with your login and loaded into the nodes"
)
FIX_CONNTRACK = "sudo sysctl -w net.netfilter.nf_conntrack_max=<max(131072, 32768 x CPUs)> on the Docker host"
FIX_INOTIFY = "sudo sysctl -w fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288 on the Docker host"
FIX_BR_NETFILTER = "sudo modprobe br_netfilter on the Docker host"


def known_cause(reason: str, texts: list[str]) -> tuple[str, str]:
    """(cause, fix) for a not-ready reason and the messages/log lines behind it; most specific first."""
    text = "\n".join(texts)
    if RATE_LIMIT.search(text) and ("pull" in text.lower() or "Image" in reason or "registry" in text.lower()):
        return "registry rate limit (429)", FIX_LOGIN
    if CONNTRACK.search(text):
        return "missing host kernel setting: nf_conntrack_max", FIX_CONNTRACK + ", then delete the pod"
    if BR_NETFILTER.search(text):
        return "missing host kernel setting: br_netfilter", FIX_BR_NETFILTER
    if INOTIFY.search(text):
        return "missing host kernel setting: inotify limits", FIX_INOTIFY
    if NODE_LOCKED.search(text):
        return "HAMi node lock held", "see the node lock finding for this tenant"
    if reason in ("ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName"):
        return "ImagePullBackOff", (
            "the node could not get the image: `make up` pre-loads every image from the host's Docker; "
            "check that `docker pull IMAGE` works on the host (registry, proxy, `docker login`), then `make up`"
        )
    if reason == "CrashLoopBackOff":
        return "CrashLoopBackOff", "the container keeps exiting; its last log line says why (logs in the archive)"
    hami = HAMI_REASONS.findall(text)
    if hami:
        return f"GPU request does not fit ({', '.join(sorted(set(hami)))})", (
            "free card capacity or ask for less; `make report` shows what each card holds"
        )
    if "node.kubernetes.io/not-ready" in text or "untolerated taint" in text:
        return "node NotReady", "the node is not Ready: see the node finding"
    return "", ""


# --- helpers over objects ----------------------------------------------------------------------


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _ref(obj: dict) -> str:
    meta = _meta(obj)
    return f"{meta['namespace']}/{meta.get('name', '?')}" if meta.get("namespace") else str(meta.get("name", "?"))


def _event_time(event: dict) -> str:
    return str(
        event.get("lastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or _meta(event).get("creationTimestamp")
        or ""
    )


def _about(event: dict) -> dict:
    return event.get("involvedObject") or event.get("regarding") or {}  # core/v1 or events.k8s.io/v1


def events_about(events: list[dict], kind: str, namespace: str | None, name: str) -> list[dict]:
    """Events about one object, oldest first."""
    found = [
        e
        for e in events
        if _about(e).get("kind") == kind
        and _about(e).get("name") == name
        and (namespace is None or _about(e).get("namespace") == namespace)
    ]
    return sorted(found, key=_event_time)


def _event_line(event: dict) -> str:
    return f"{event.get('reason', '')}: {event.get('message') or event.get('note') or ''}".strip()


def last_event(events: list[dict]) -> str:
    """The most telling event line: the newest Warning, else the newest event."""
    chosen = [e for e in events if e.get("type") == "Warning"] or events
    return _event_line(chosen[-1]) if chosen else ""


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def pod_ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return True
    if status.get("phase") != "Running":
        return False
    return all(c.get("ready") for c in status.get("containerStatuses") or [])


def pod_state(pod: dict) -> tuple[str, str, str]:
    """(reason, message, container) of a pod that is not ready: the first init container that has
    not completed, else the first container that is not ready, else the failing pod condition."""
    status = pod.get("status") or {}
    for init in status.get("initContainerStatuses") or []:
        state = init.get("state") or {}
        terminated = state.get("terminated") or {}
        if terminated.get("reason") == "Completed" or terminated.get("exitCode") == 0:
            continue
        reason, message = _container_state(state)
        return (reason if reason != "Running" else "Init:Running"), message, init.get("name", "")
    for container in status.get("containerStatuses") or []:
        if not container.get("ready"):
            reason, message = _container_state(container.get("state") or {})
            return (reason if reason != "Running" else "ContainerNotReady"), message, container.get("name", "")
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True" and condition.get("type") in ("PodScheduled", "Ready"):
            return condition.get("reason") or f"{condition['type']}=False", condition.get("message") or "", ""
    return status.get("phase") or "Unknown", status.get("message") or "", ""


def _container_state(state: dict) -> tuple[str, str]:
    if "waiting" in state:
        waiting = state["waiting"] or {}
        return waiting.get("reason") or "Waiting", waiting.get("message") or ""
    if "terminated" in state:
        terminated = state["terminated"] or {}
        return terminated.get("reason") or f"exit {terminated.get('exitCode')}", terminated.get("message") or ""
    return "Running", ""


def pod_owner(pod: dict) -> str:
    """`ns/name` of the Deployment, DaemonSet, StatefulSet or Job that runs the pod (else the pod)."""
    meta = _meta(pod)
    for owner in meta.get("ownerReferences") or []:
        name = owner.get("name", "")
        if owner.get("kind") == "ReplicaSet":
            template_hash = (meta.get("labels") or {}).get("pod-template-hash")
            if template_hash and name.endswith("-" + template_hash):
                name = name[: -len(template_hash) - 1]
        return f"{meta.get('namespace')}/{name}"
    return _ref(pod)


def _requests_gpu(pod: dict) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        if any(key.startswith("nvidia.com/") for key in limits):
            return True
    return False


# --- findings ----------------------------------------------------------------------------------


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


def _workload_ready(obj: dict) -> tuple[bool, str]:
    kind, spec, status = obj.get("kind"), obj.get("spec") or {}, obj.get("status") or {}
    if kind == "DaemonSet":
        desired, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
        if desired == 0:
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
        ready, detail = _workload_ready(workload)
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
        kinds = {(o.get("kind"), _meta(o).get("name")) for o in cluster.items("metallb")}
        for kind in ("IPAddressPool", "L2Advertisement"):
            if (kind, POOL_NAME) not in kinds:
                findings.append(
                    Finding(
                        cluster.where,
                        f"{METALLB_NAMESPACE}/{POOL_NAME}",
                        f"{kind} not found",
                        "",
                        "tenant control planes get no address without it: run `make up` again once MetalLB is ready",
                    )
                )
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


def gpu_node_findings(cluster: Cluster, node_name: str, expected: dict[str, int] | None) -> list[Finding]:
    """The GPU node carries HAMi's register annotation and advertises the declared totals (mock mode)."""
    node = next((n for n in cluster.items("nodes") if _meta(n).get("name") == node_name), None)
    if node is None:
        if cluster.items("nodes"):
            return [Finding(cluster.where, f"node {node_name}", "GPU node not found", "", "its worker never joined")]
        return []
    findings = []
    annotations = _meta(node).get("annotations") or {}
    if not annotations.get(REGISTER_ANNOTATION):
        findings.append(
            Finding(
                cluster.where,
                f"node {node_name}",
                f"no {REGISTER_ANNOTATION} annotation",
                "",
                "HAMi sees no GPU on it: `make up` writes it once the node is Ready (apply-gpu-inventory); run it",
                "GPU inventory missing",
            )
        )
    # Allocatable is what the kubelet admits against and what HAMi 2.8 registers by (notes/hami.md section 2).
    status = node.get("status") or {}
    capacity = status.get("allocatable") or status.get("capacity") or {}
    for resource in (GPU_RESOURCE, GPUMEM_RESOURCE, GPUCORES_RESOURCE):
        want = (expected or {}).get(resource)
        have = capacity.get(resource)
        value = _quantity(have)
        if not value or (want is not None and value != want):
            source = "the capacity patch" if resource == GPU_RESOURCE else "the mock device plugin"
            findings.append(
                Finding(
                    cluster.where,
                    f"node {node_name}",
                    f"{resource} capacity {have or 'missing'}" + (f", declared {want}" if want is not None else ""),
                    "",
                    f"{source} sets it: see hami-mock-device-plugin above; `make up` re-applies the inventory",
                    "GPU capacity not advertised",
                )
            )
    return findings


def _quantity(value: object) -> Fraction | None:
    """The API server sends quantities in canonical form: 20000 MB arrives as "20k" (boundaries.md)."""
    try:
        return parse_quantity(str(value)) if value is not None else None
    except QuantityError:
        return None


def node_lock_findings(cluster: Cluster, now: datetime, timeout_seconds: float) -> list[Finding]:
    """HAMi's node lock (hami.io/mutex.lock) held past its timeout while GPU pods wait, or named by a
    bind failure (`node X has been locked within 5m0s`)."""
    findings = []
    waiting = [p for p in cluster.items("pods") if _requests_gpu(p) and not pod_ready(p)]
    lock_events = [e for e in cluster.items("events") if NODE_LOCKED.search(e.get("message") or "")]
    for node in cluster.items("nodes"):
        name = _meta(node).get("name", "?")
        value = (_meta(node).get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
        if not value:
            continue
        stamp, _, holder = value.partition(",")
        try:
            age = (now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()
        except ValueError:
            age = None
        mentioned = [e for e in lock_events if name in (e.get("message") or "")]
        if not mentioned and not (waiting and age is not None and age > timeout_seconds):
            continue
        held = f"held {age:.0f}s" if age is not None else "held"
        findings.append(
            Finding(
                cluster.where,
                f"node {name}",
                f"HAMi node lock {held} by {holder.replace(',', '/') or 'an unknown pod'}",
                _event_line(mentioned[-1]) if mentioned else f"{len(waiting)} GPU pod(s) waiting",
                f"the mock device plugin never releases it; gpulab sets --node-lock-timeout (nodeLockTimeout). "
                f"If it stays: kubectl annotate node {name} {NODE_LOCK_ANNOTATION}-",
                "HAMi node lock held",
            )
        )
    return findings


def admission_findings(cluster: Cluster, policies: list[str]) -> list[Finding]:
    """gpulab's in-tenant ValidatingAdmissionPolicies and their bindings exist."""
    present = {(o.get("kind"), _meta(o).get("name")) for o in cluster.items("admission")}
    findings = []
    for name in policies:
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            if (kind, name) not in present:
                findings.append(
                    Finding(
                        cluster.where,
                        f"{kind} {name}",
                        "not found",
                        "",
                        "GPU requests are not checked at admission in this tenant: run `make up` again",
                    )
                )
    return findings


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
) -> list[Finding]:
    """`namespaces`: the tenant's GPU workload namespaces (a Deployment there may have no pod at all)."""
    if not cluster.answered:
        return [
            Finding(
                cluster.where,
                "API server",
                "tenant API not answering",
                cluster.error,
                "check its TenantControlPlane and its MetalLB address in the management findings; "
                "from this host: kubectl --kubeconfig <tenant kubeconfig> get --raw /readyz",
                "tenant API not answering",
            )
        ]
    pods = pod_findings(cluster)
    covered = {f.component.split(" (")[0] for f in pods}
    expected = [(kind, HAMI_NAMESPACE, name) for kind, name in TENANT_COMPONENTS]
    if mock:
        expected.append((MOCK_PLUGIN[0], HAMI_NAMESPACE, MOCK_PLUGIN[1]))
    found = node_findings(cluster)
    found += pods
    found += workload_findings(cluster, {HAMI_NAMESPACE, *namespaces}, expected, covered)
    found += webhook_findings(cluster)
    if mock:
        found += gpu_node_findings(cluster, gpu_node, expected_capacity)
    found += node_lock_findings(cluster, now, lock_timeout_seconds)
    found += admission_findings(cluster, policies)
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


# --- the host and Docker -------------------------------------------------------------------------


def kernel_findings(docker_info: dict[str, Any] | None, sysctls: dict[str, int], cpus: int) -> list[Finding]:
    """Host kernel settings the node containers need (scripts/node-host-check.sh has the same limits):
    from `docker info` warnings, and from /proc/sys where the Docker host is this machine."""
    findings = []
    for warning in (docker_info or {}).get("Warnings") or []:
        if BR_NETFILTER.search(warning):
            findings.append(
                Finding(
                    "host",
                    "br_netfilter",
                    warning,
                    "",
                    FIX_BR_NETFILTER,
                    "missing host kernel setting: br_netfilter",
                )
            )
    minimum = {
        "fs.inotify.max_user_instances": 512,
        "fs.inotify.max_user_watches": 524288,
        "net.netfilter.nf_conntrack_max": max(131072, 32768 * cpus),
    }
    for key, want in minimum.items():
        have = sysctls.get(key)
        if have is not None and have < want:
            fix = FIX_CONNTRACK if "conntrack" in key else FIX_INOTIFY
            name = "nf_conntrack_max" if "conntrack" in key else "inotify limits"
            findings.append(
                Finding(
                    "host",
                    key,
                    f"{have}, below the {want} node containers need",
                    "",
                    fix,
                    f"missing host kernel setting: {name}",
                )
            )
    return findings


def docker_findings(
    containers: list[dict], expected: list[str], network: str, network_found: bool | None
) -> list[Finding]:
    """gpulab's containers (kind node, workers) running, and its network present. `containers` are
    `docker ps -a --format '{{json .}}'` lines parsed."""
    findings = []
    by_name = {c.get("Names", ""): c for c in containers}
    for name in expected:
        container = by_name.get(name)
        if container is None:
            findings.append(
                Finding(
                    "docker",
                    f"container {name}",
                    "not found",
                    "",
                    "deleted outside Pulumi, or never created: `make down` then `make up`",
                )
            )
        elif container.get("State") != "running":
            findings.append(
                Finding(
                    "docker",
                    f"container {name}",
                    container.get("Status") or container.get("State") or "not running",
                    "",
                    f"`docker logs {name}` says why; `docker start {name}`, or `make down` then `make up`",
                )
            )
    if network_found is False:
        findings.append(Finding("docker", f"network {network}", "not found", "", "`make down` then `make up`"))
    return findings


def kind_findings(clusters: list[str] | None, name: str) -> list[Finding]:
    if clusters is None or name in clusters:
        return []
    return [
        Finding(
            "management",
            f"kind cluster {name}",
            "kind cluster gone",
            "`kind get clusters` does not list it",
            "it was deleted outside Pulumi: `make down` (it finishes without it) then `make up`",
            "kind cluster gone",
        )
    ]


def now_utc() -> datetime:
    return datetime.now(UTC)
