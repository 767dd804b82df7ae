"""Names the program writes and the policy pack, checker and report read: defined once, so a rename
cannot make a policy silently stop matching. Standard library only (the pack imports it)."""

TENANT_LABEL = "gpulab.io/tenant"
WORKLOAD_LABEL = "gpulab.io/workload"
NODE_IMAGE_LABEL = "gpulab.io/node-image"  # the pinned kindest/node reference a worker was created from
KAMAJI_MAX_ANNOTATION = "gpulab.io/kamaji-max-kubernetes"  # newest minor the pinned Kamaji accepts
INVENTORY_CONFIGMAP = "gpulab-gpu-inventory"
INVENTORY_NAMESPACE = "kube-public"  # readable by every tenant user
INVENTORY_LABEL = "gpulab.io/gpu-inventory"
