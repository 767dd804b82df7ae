"""Names the program writes and the policy pack, checker and report read: defined once, so a rename
cannot make a policy silently stop matching. Standard library only (the pack imports it)."""

import re

TENANT_LABEL = "gpulab.io/tenant"
WORKLOAD_LABEL = "gpulab.io/workload"
OWNER_LABEL = "gpulab.io/owner"  # process mode: the state folder a node container or lab network belongs to
NODE_IMAGE_LABEL = "gpulab.io/node-image"  # the pinned kindest/node reference a worker was created from
KAMAJI_MAX_ANNOTATION = "gpulab.io/kamaji-max-kubernetes"  # newest minor the pinned Kamaji accepts
INVENTORY_CONFIGMAP = "gpulab-gpu-inventory"
INVENTORY_NAMESPACE = "kube-public"  # readable by every tenant user
INVENTORY_LABEL = "gpulab.io/gpu-inventory"

# The lab's namespaces and object names, read by `make diagnose` without importing the components.
CERT_MANAGER_NAMESPACE = "cert-manager"
METALLB_NAMESPACE = "metallb-system"
KAMAJI_NAMESPACE = "kamaji-system"
KAMAJI_DATASTORE = "default"  # the Kamaji chart's kamaji-etcd DataStore (defaultDatastoreName)
POOL_NAME = "gpulab"  # MetalLB IPAddressPool and L2Advertisement
# The mock plugin mounts hami-scheduler-device from its own namespace (HAMi v2.8.3 daemonsetmock.yaml).
HAMI_NAMESPACE = "kube-system"
# The in-tenant ValidatingAdmissionPolicies (model/kube_objects/admission_policy.py).
DENY_POLICY = "gpulab-gpu-requests"
WARN_POLICY = "gpulab-gpu-requests-advice"


def control_plane_namespace(tenant: str) -> str:
    """The management cluster's namespace of a tenant's TenantControlPlane (labelled TENANT_LABEL)."""
    return f"gpulab-{tenant}"


def docker_name(text: str) -> str:
    """`text` as a Docker object name ([a-zA-Z0-9][a-zA-Z0-9_.-]*, moby daemon/names): other characters become
    '-', at most 63 long so that it also fits a bridge's label."""
    name = re.sub(r"[^a-zA-Z0-9_.-]", "-", text)[:63].strip("-_.")
    return name or "gpulab"
