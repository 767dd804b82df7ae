"""Verdicts from what diagnose collected: pure functions over parsed kubectl/docker JSON.

Nothing here runs a program or reads a file, so every rule is tested on constructed objects
(tests/diagnose/test_diagnose.py). Names the lab uses come from model/names.py (namespaces, labels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hami import reasons
from model.names import CERT_MANAGER_NAMESPACE, KAMAJI_NAMESPACE, METALLB_NAMESPACE

# pods of a TenantControlPlane (Kamaji internal/builders/controlplane/deployment.go)
TCP_POD_LABEL = "kamaji.clastix.io/name"
# HAMi's reasons why a pod does not fit (hami/reasons.py), found in its FilteringFailed events and its scheduler's
# log: every one but NodeFitPod, which HAMi logs for a node that fits (v2.8.3 and v2.10.0 pkg/scheduler/score.go).
UNFIT_REASONS = re.compile(
    r"\b(" + "|".join(re.escape(name) for name in reasons.HAMI_REASONS if name != reasons.NODE_FIT_POD) + r")\b"
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


def tenant_components(pod_network: str) -> list[tuple[str, str]]:
    """What a tenant runs: Calico's workloads only where Calico is its pod network (the bridge plugin is a file)."""
    return [(kind, name) for kind, name in TENANT_COMPONENTS if pod_network == "calico" or "calico" not in name]


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
# Docker warns `bridge-nf-call-iptables is disabled` whether the sysctl is missing or 0. Missing: br_netfilter is
# neither built into the kernel nor loaded, and the module may help; 0: the hooks are there (often built in, with
# no module to load) and only the sysctl is off.
FIX_BRIDGE_NF_SYSCTL = "sudo sysctl -w net.bridge.bridge-nf-call-iptables=1 on the Docker host"
FIX_BR_NETFILTER = (
    "on the Docker host: if /proc/sys/net/bridge/bridge-nf-call-iptables is missing, sudo modprobe br_netfilter; "
    f"if it reads 0, {FIX_BRIDGE_NF_SYSCTL.removesuffix(' on the Docker host')}"
)


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
    hami = UNFIT_REASONS.findall(text)
    if hami:
        return f"GPU request does not fit ({', '.join(sorted(set(hami)))})", (
            "free card capacity or ask for less; `make report` shows what each card holds"
        )
    if "node.kubernetes.io/not-ready" in text or "untolerated taint" in text:
        return "node NotReady", "the node is not Ready: see the node finding"
    return "", ""


# --- helpers over objects ----------------------------------------------------------------------


def node_selector(workload: dict) -> dict[str, str]:
    """The nodeSelector of a workload's pods."""
    return ((workload.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector") or {}


def nodes_selected(selector: dict[str, str], nodes: list[dict]) -> list[str]:
    """The names of the nodes whose labels match `selector` (every node, for an empty one)."""
    labels = {_meta(node).get("name", "?"): _meta(node).get("labels") or {} for node in nodes}
    return [name for name, found in labels.items() if all(found.get(k) == v for k, v in selector.items())]


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
