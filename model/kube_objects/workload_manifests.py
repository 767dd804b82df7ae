"""The Kubernetes objects of a tenant's declared GPU workloads, as plain dicts.

Pure data, shared by the GpuWorkloads component (which declares them) and the offline checker
(which counts them as already running on the tenant's cards).
"""

from __future__ import annotations

import hashlib
import json

from model import dra
from model.catalog import GPU_RESOURCE, GPUCORES_RESOURCE, GPUMEM_PERCENTAGE_RESOURCE, GPUMEM_RESOURCE
from model.config import Tenant, Workload
from model.names import TENANT_LABEL, WORKLOAD_LABEL

# Sleeps until stopped and stops at once on SIGTERM (the mock has no CUDA to run).
IDLE_COMMAND = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait $!; done"]


def gpu_limits(workload: Workload) -> dict[str, str]:
    limits = {GPU_RESOURCE: str(workload.gpus)}
    if workload.gpumem is not None:
        limits[GPUMEM_RESOURCE] = str(workload.gpumem)
    if workload.gpumem_percentage is not None:
        limits[GPUMEM_PERCENTAGE_RESOURCE] = str(workload.gpumem_percentage)
    if workload.gpucores is not None:
        limits[GPUCORES_RESOURCE] = str(workload.gpucores)
    return limits


def pod_template(
    tenant: Tenant,
    workload: Workload,
    image: str,
    scheduler_name: str = "hami-scheduler",
    pull_policy: str | None = None,
) -> dict:
    """The workload's pod template: metadata and spec (scheduled by HAMi unless the lab leaves HAMi out; with
    `pull_policy`, the container's imagePullPolicy: LabConfig.workload_pull_policy). A DRA tenant's pod asks its
    cards through a claim of its own, made from the workload's claim template, and kube-scheduler allocates it."""
    labels = {"app.kubernetes.io/name": workload.name, TENANT_LABEL: tenant.name, WORKLOAD_LABEL: workload.name}
    if tenant.gpu_sharing == "dra":
        resources: dict = {"claims": [{"name": CLAIM}]}
        claims = [{"name": CLAIM, "resourceClaimTemplateName": claim_template_name(workload)}]
        scheduler_name = "default-scheduler"
    else:
        resources, claims = {"limits": gpu_limits(workload)}, []
    spec: dict = {
        # Asked for directly: HAMi places these pods even if its webhook ever fails open.
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "gpu", "image": image, "command": IDLE_COMMAND, "resources": resources}],
    }
    if claims:
        spec["resourceClaims"] = claims
    if pull_policy:
        spec["containers"][0]["imagePullPolicy"] = pull_policy
    return {"metadata": {"labels": labels}, "spec": spec}


CLAIM = "gpu"  # a DRA pod's claim, as its container names it


def claim_template_name(workload: Workload) -> str:
    """`<workload>-gpu-<hash of what it asks>`: a template's spec cannot change once created (kubernetes v1.36.4
    pkg/apis/resource/validation, ValidateResourceClaimTemplateUpdate), so a workload that asks otherwise gets a new
    template, and its pod, which names it, is made anew with it."""
    asked = json.dumps([workload.gpus, workload.gpumem, workload.gpucores]).encode()
    return f"{workload.name}-gpu-{hashlib.sha256(asked).hexdigest()[:8]}"


def workload_claim_template(tenant: Tenant, workload: Workload) -> dict | None:
    """A DRA tenant's ResourceClaimTemplate for the workload (each of its pods gets a claim of its own from it): the
    cards, memory and cores a HAMi tenant's pod would ask through its limits. None for a HAMi tenant."""
    if tenant.gpu_sharing != "dra":
        return None
    return dra.claim_template(
        tenant.name,
        claim_template_name(workload),
        tenant.workload_namespace(workload),
        workload.gpumem,
        workload.gpucores,
        workload.gpus,
    )


def workload_manifest(
    tenant: Tenant,
    workload: Workload,
    image: str,
    scheduler_name: str = "hami-scheduler",
    pull_policy: str | None = None,
) -> dict:
    """The complete object (Pod or Deployment) for one declared workload."""
    template = pod_template(tenant, workload, image, scheduler_name, pull_policy)
    metadata = {
        "name": workload.name,
        "namespace": tenant.workload_namespace(workload),
        "labels": template["metadata"]["labels"],
    }
    if workload.kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": workload.replicas,
            "selector": {"matchLabels": {WORKLOAD_LABEL: workload.name}},
            "template": template,
        },
    }
