#!/usr/bin/env bash
# Waits until a mock GPU node is usable through HAMi: the node's allocatable shows exactly the
# declared totals (the mock plugin has read the annotation), and HAMi's webhook Service has a ready
# endpoint (otherwise the webhook fails open and pods silently go to default-scheduler).
# The decision is made by scripts/gpu_readiness.py, which is unit-tested.
# stdin: tenant kubeconfig. env: NODE_NAME, EXPECT_JSON, PYTHON, HAMI_NAMESPACE, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAME:?}" "${EXPECT_JSON:?}"
namespace=${HAMI_NAMESPACE:-kube-system}
kubeconfig_from_stdin
scratch=$GPULAB_RUN_DIR

gpu_node_ready() {
  kc get node "$NODE_NAME" -o json >"$scratch/node.json" &&
    kc -n "$namespace" get endpointslices -l kubernetes.io/service-name=hami-scheduler -o json \
      >"$scratch/endpoints.json" &&
    bounded 20 "${PYTHON:-python3}" -m scripts.gpu_readiness --expect "$EXPECT_JSON" \
      --node "$scratch/node.json" --endpoints "$scratch/endpoints.json"
}

wait_for "${TIMEOUT:-600}" "$NODE_NAME to advertise its declared GPUs and HAMi's webhook to serve" gpu_node_ready
