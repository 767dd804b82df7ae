"""A differential of gpulab's checker (`python -m policies check --live`) against the real HAMi.

Three parts, each usable alone: `random_scenario` draws a tenant (GPU nodes with catalog cards, scheduler
policies, per-pod limits, a quota) and its GPU pods from a seed, now and then one that HAMi's webhook refuses at
create; `observe` and `denial` read what the real cluster did with one pod (the API server's refusal at create,
HAMi's FilteringFailed reasons, or the node and cards of `hami.io/vgpu-devices-allocated` once Running), through
hami/'s readers and names; `compare` says whether the checker's JSON answer agrees.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from hami.annotations import ALLOCATED, AnnotationError, parse_allocation
from hami.cards import NO_PERCENTAGE
from hami.reasons import EXCEEDED_QUOTA
from hami.releases import Rules, rules_for
from hami.webhook import refusal_reason
from model.catalog import GPU_CATALOG, GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE
from model.hami_releases import DEFAULT_VERSION
from placement.workloads import (
    GPU_POLICY_ANNOTATION,
    NODE_POLICY_ANNOTATION,
    NOUSE_GPUTYPE,
    USE_GPUTYPE,
    USE_GPUUUID,
)
from process_lab.control_plane import ControlPlane

TENANT = "tenant-d"
NAMESPACE = "gpu-workloads"
POLICIES = ("spread", "binpack")
# HAMi v2.8.3 pkg/scheduler/score.go: one FilteringFailed event per reason, "<k> nodes <Reason>(<n1>,<n2>)".
FILTER_REASON = re.compile(r"^\d+ nodes (\w+)\(")
# A ValidatingAdmissionPolicy's message starts with the reason name (model/kube_objects/admission_policy.py).
DENIED = re.compile(r"denied request: (\w+):")
# What HAMi v2.10.0's webhook refuses at create besides the quota (hami/webhook.py `webhook_denial`), made now and then
# (WEBHOOK_ODDS per scenario) as one more pod, `w-<case>`.
WEBHOOK_CASES = ("percentage", "privileged", "node-name")
WEBHOOK_ODDS = 0.2
# The differential's own outcome (no reason gpulab reports): a Running pod whose allocation hami/annotations.py refuses.
UNREADABLE_ALLOCATION = "UnreadableAllocation"


@dataclass
class Scenario:
    seed: int
    config: dict[str, Any]  # the `config:` of a Pulumi.<stack>.yaml
    pods: list[dict[str, Any]]

    def stack_file(self) -> str:
        return json.dumps({"config": self.config}, indent=1)


def _container(rng: random.Random, index: int, most_cards: int) -> dict[str, Any]:
    limits: dict[str, str] = {}
    if rng.random() < 0.8:
        # Now and then more cards than any node has (NodeInsufficientDevice), else at most that many.
        count = most_cards + 1 if rng.random() < 0.05 else rng.choice([n for n in (1, 1, 1, 2, 3) if n <= most_cards])
        limits[GPU_RESOURCE] = str(count)
    memory = rng.random()
    if memory < 0.45:
        limits[GPUMEM_RESOURCE] = str(rng.choice([1000, 2000, 4000, 8000, 12000, 16000, 20000, 30000, 45000]))
    elif memory < 0.65:
        limits[GPUMEM_PERCENTAGE_RESOURCE] = str(rng.choice([10, 25, 50, 75, 100]))
    if rng.random() < 0.6:
        limits[GPUCORES_RESOURCE] = str(rng.choice([0, 10, 20, 30, 50, 70, 100]))
    if not limits:
        limits[GPU_RESOURCE] = "1"
    return {"name": f"c{index}", "image": "busybox", "resources": {"limits": limits}}


def _annotations(rng: random.Random, models: list[str], card_ids: list[str]) -> dict[str, str]:
    annotations: dict[str, str] = {}
    if rng.random() < 0.2:
        annotations[NODE_POLICY_ANNOTATION] = rng.choice(POLICIES)
    if rng.random() < 0.2:
        annotations[GPU_POLICY_ANNOTATION] = rng.choice(POLICIES)
    if rng.random() < 0.1:
        annotations[USE_GPUTYPE] = rng.choice(models)
    elif rng.random() < 0.1:
        annotations[NOUSE_GPUTYPE] = rng.choice(models)
    if rng.random() < 0.05:
        annotations[USE_GPUUUID] = rng.choice(card_ids)
    return annotations


def _refused_at_create(
    seed: int, rules: Rules, most_cards: int, node_names: list[str], pods: int
) -> tuple[int, dict[str, Any]] | None:
    """Now and then a pod HAMi's webhook refuses at create, and its place among the scenario's `pods` (refused, it
    never exists: the pods after it meet the same cluster). Drawn from a stream of its own, so the scenario's other
    draws are those of the generator without it, and alike on every release. A GPU pod with a gpumem-percentage
    above 100, with a privileged container, or with spec.nodeName, made only where the release refuses it at create:
    v2.10.0 each (its webhook); v2.8.3 the nodeName (its webhook refuses it too) and a percentage above 101 (its
    webhook lets it through, gpulab's admission policy refuses it as CardInsufficientMemory; 101 is HAMi's "not
    given", the whole card), not the privileged container (its webhook mutates around it). A negative percentage
    is not made: gpulab's reader refuses it as bad input, not as the webhook's reason."""
    rng = random.Random(f"webhook-{seed}")
    if rng.random() >= WEBHOOK_ODDS:
        return None
    case = rng.choice(WEBHOOK_CASES)
    containers = [_container(rng, i, most_cards) for i in range(rng.choice([1, 1, 1, 2]))]
    target = rng.choice(containers)
    spec: dict[str, Any] = {"containers": containers}
    percentage = rng.choice([101, 150, 200])  # drawn whatever the case: one stream for every case
    if case == "percentage":
        limits = target["resources"]["limits"]
        limits.pop(GPUMEM_RESOURCE, None)  # v2.8.3 reads a gpumem before the percentage
        limits[GPUMEM_PERCENTAGE_RESOURCE] = str(percentage)
    elif case == "privileged":
        target["securityContext"] = {"privileged": True}
    else:
        spec["nodeName"] = rng.choice(node_names)
    position = rng.randint(0, pods)
    refused = {
        "percentage": rules.memory_percentage_range_checked or percentage > NO_PERCENTAGE,
        "privileged": rules.privileged_refused,
        "node-name": True,  # both releases refuse it (webhook.go Handle: v2.8.3 94-97, v2.10.0 104-112)
    }
    if not refused[case]:
        return None
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"w-{case}", "namespace": NAMESPACE}, "spec": spec}
    return position, pod


def random_scenario(seed: int, hami_version: str | None = None) -> Scenario:
    """One tenant with 1-4 GPU nodes and 1-12 GPU pods (1-2 containers each), all drawn from `seed`, and now and
    then one more that HAMi's webhook refuses at create (`_refused_at_create`); on HAMi `hami_version` (the
    tenant's hamiVersion; None: the process runtime's default). The release draws nothing from the seed, so one
    seed is the same scenario on either release, but for a refused pod of a kind only one release refuses."""
    rng = random.Random(seed)
    models = list(GPU_CATALOG)
    nodes = [
        [{"model": rng.choice(models), "count": rng.choice([1, 1, 2, 2, 3])} for _ in range(rng.choice([1, 1, 2]))]
        for _ in range(rng.randint(1, 4))
    ]
    tenant: dict[str, Any] = {"name": TENANT, "namespaces": [NAMESPACE]}
    if hami_version is not None:
        tenant["hamiVersion"] = hami_version
    if len(nodes) == 1 and rng.random() < 0.5:
        tenant["gpus"] = nodes[0]
        node_names = [f"{TENANT}-worker"]
        card_ids = [f"GPU-MOCK-{TENANT}-{i}" for i in range(sum(e["count"] for e in nodes[0]))]
    else:
        tenant["nodes"] = [{"gpus": gpus} for gpus in nodes]
        node_names = [f"{TENANT}-worker-{i}" for i in range(len(nodes))]
        card_ids = [
            f"GPU-MOCK-{name}-{i}"
            for name, gpus in zip(node_names, nodes, strict=True)
            for i in range(sum(e["count"] for e in gpus))
        ]
    if rng.random() < 0.3:
        tenant["splitCount"] = rng.choice([1, 2, 3, 4])
    if rng.random() < 0.3:
        tenant["limits"] = {
            key: value
            for key, value in (
                ("gpus", rng.choice([None, 1, 2, 4])),
                ("gpumem", rng.choice([None, 16000, 40000, 81920])),
                ("gpucores", rng.choice([None, 50, 100, 200])),
            )
            if value is not None
        }
    if rng.random() < 0.4:
        quota = {
            key: value
            for key, value in (
                ("gpumem", rng.choice([None, 20000, 40960, 100000])),
                ("gpucores", rng.choice([None, 60, 150, 300])),
                ("gpus", rng.choice([None, None, 4, 12])),
            )
            if value is not None
        }
        if quota:
            tenant["quota"] = quota
    config = {
        "gpulab:runtime": "process",  # the lab it runs on: local processes, KWOK nodes (process_lab/tenant.py)
        "gpulab:scheduling": {
            "gpuSchedulerPolicy": rng.choice(POLICIES),
            "nodeSchedulerPolicy": rng.choice(POLICIES),
        },
        "gpulab:tenants": [tenant],
    }
    most_cards = max(sum(e["count"] for e in gpus) for gpus in nodes)
    used_models = sorted({e["model"] for gpus in nodes for e in gpus})
    pods = []
    for number in range(rng.randint(1, 12)):
        containers = [_container(rng, i, most_cards) for i in range(rng.choice([1, 1, 1, 2]))]
        metadata: dict[str, Any] = {"name": f"p{number}", "namespace": NAMESPACE}
        annotations = _annotations(rng, used_models, card_ids)
        if annotations:
            metadata["annotations"] = annotations
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": containers}})
    rules = rules_for(hami_version or DEFAULT_VERSION)
    if refused := _refused_at_create(seed, rules, most_cards, node_names, len(pods)):
        pods.insert(*refused)
    return Scenario(seed, config, pods)


@dataclass
class Outcome:
    """What happened to one pod: placed (node, cards per container) or refused (reason names)."""

    placed: bool
    node: str | None = None
    cards: list[list[str]] = field(default_factory=list)
    reasons: frozenset[str] = frozenset()
    tied: frozenset[str] = frozenset()  # the checker's: nodes tied in HAMi's node score
    # Refused at create: the API server reports only the first validation that denies (k8s.io/apiserver v0.36.4
    # pkg/admission/plugin/policy/validating/dispatcher.go: `deniedDecisions[0]`), and HAMi's webhook only its first
    # refusal (hami/webhook.py), so one of the checker's reasons is agreement.
    first_only: bool = False
    detail: str = ""

    def __str__(self) -> str:
        if self.placed:
            tied = f" (tied {sorted(self.tied)})" if self.tied else ""
            return f"placed on {self.node}{tied} cards {self.cards}"
        return f"refused {sorted(self.reasons)}" + (f" ({self.detail[:300]})" if self.detail else "")


def predicted(document: dict[str, Any]) -> Outcome:
    """The checker's `--output json` answer about one pod."""
    errors = [f for f in document.get("findings", []) if f["severity"] == "error"]
    if document.get("error"):
        return Outcome(False, reasons=frozenset({"BadInput"}), detail=document["error"])
    if errors:
        # A finding's reason is one name or, across nodes, several joined by ", " (one event each in HAMi).
        names = frozenset(name for f in errors for name in f["reason"].split(", "))
        return Outcome(False, reasons=names, detail=errors[0]["message"])
    (entry,) = document["placements"]
    cards = [container["cards"] for container in entry["containers"]]
    return Outcome(True, entry["node"], cards, tied=frozenset(entry.get("tiedNodes", ())))


def running(node: str | None, annotation: str) -> Outcome:
    """A Running pod's outcome: its node and each container's card ids, from HAMi's allocation annotation as
    hami/annotations.py reads it (every container, even one without GPU, has its part; the `;` HAMi writes after
    the last leaves an empty part that is no container's). A value that reader refuses is no placement to compare:
    the run goes on and says so."""
    try:
        parts = parse_allocation(annotation)
    except AnnotationError as error:
        return Outcome(False, reasons=frozenset({UNREADABLE_ALLOCATION}), detail=str(error))
    if parts and not parts[-1]:
        parts = parts[:-1]
    return Outcome(True, node, [[share.card for share in part] for part in parts])


def denial(stderr: str) -> Outcome:
    """The API server's refusal of a create: gpulab's admission policy, the native ResourceQuota, or HAMi v2.10.0's
    webhook (hami/webhook.py `refusal_reason` names its words as the checker does: InvalidGpumemPercentage,
    PrivilegedContainer, PodHasNodeAssigned, ExceedingResourceQuota)."""
    reasons = set(DENIED.findall(stderr))
    if "exceeded quota" in stderr:
        reasons.add(EXCEEDED_QUOTA)
    if webhook := refusal_reason(stderr):
        reasons.add(webhook)
    return Outcome(False, reasons=frozenset(reasons or {"Denied"}), first_only=True, detail=stderr.strip())


def filtering_reasons(events: list[dict[str, Any]]) -> frozenset[str]:
    return frozenset(m.group(1) for e in events if (m := FILTER_REASON.match(e.get("message", ""))))


def observe(control_plane: ControlPlane, name: str, timeout: float = 30) -> Outcome:
    """After a successful create: Running with HAMi's allocation, or HAMi's FilteringFailed reasons
    (read again a moment later: HAMi posts one event per reason, asynchronously)."""
    deadline = time.monotonic() + timeout
    seen: frozenset[str] = frozenset()
    while time.monotonic() < deadline:
        pod = control_plane.get("pod", "-n", NAMESPACE, name)
        annotation = (pod["metadata"].get("annotations") or {}).get(ALLOCATED)
        if pod["status"].get("phase") == "Running" and annotation:
            return running(pod["spec"].get("nodeName"), annotation)
        # By uid: a pod of the same name from an earlier scenario on this control plane left its events.
        selector = f"involvedObject.uid={pod['metadata']['uid']},reason=FilteringFailed"
        events = control_plane.get("events", "-n", NAMESPACE, "--field-selector", selector)["items"]
        reasons = filtering_reasons(events)
        if reasons and reasons == seen:
            return Outcome(False, reasons=reasons)
        seen = reasons
        time.sleep(0.5 if reasons else 0.2)
    pod = control_plane.get("pod", "-n", NAMESPACE, name)
    return Outcome(False, reasons=frozenset({"NoOutcome"}), detail=json.dumps(pod.get("status"))[:300])


def compare(checker: Outcome, real: Outcome) -> str | None:
    """None when they agree; else what differs. Reasons: the same names (a denial's one name among the
    checker's). Placement: the same node (or
    one the checker calls tied) and, per container, the same cards."""
    if checker.placed != real.placed:
        return f"checker: {checker}; real: {real}"
    if not real.placed:
        same = real.reasons <= checker.reasons if real.first_only else real.reasons == checker.reasons
        return None if same else f"reasons differ: checker {checker}; real {real}"
    if real.node != checker.node and real.node not in checker.tied:
        return f"node differs: checker {checker}; real {real}"
    if real.node == checker.node and [sorted(c) for c in checker.cards] != [sorted(c) for c in real.cards]:
        return f"cards differ: checker {checker}; real {real}"
    return None
