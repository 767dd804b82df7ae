#!/usr/bin/env bash
# Waits until a mock GPU node is usable through HAMi: the node's allocatable shows exactly the
# declared totals (the mock plugin has read the annotation), and HAMi's webhook Service has a ready
# endpoint (otherwise the webhook fails open and pods silently go to default-scheduler).
# Where gpulab's device plugin registers the node (devicePlugin: gpulab): REGISTER_JSON, the cards its register
# annotation must hold; WEBHOOK=no before HAMi is installed (the plugin's registration alone); PLUGIN_SELECTOR, the
# label selector of the plugin's pods, whose state the wait names while the node is not there yet.
# The decision is made by scripts/gpu_readiness.py, which is unit-tested.
# stdin: tenant kubeconfig. env: NODE_NAME, EXPECT_JSON, PYTHON, HAMI_NAMESPACE, TIMEOUT (s),
#        REGISTER_JSON, WEBHOOK (yes), PLUGIN_SELECTOR (all three optional)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAME:?}" "${EXPECT_JSON:?}"
namespace=${HAMI_NAMESPACE:-kube-system}
kubeconfig_from_stdin
scratch=$GPULAB_RUN_DIR

checks=(--expect "$EXPECT_JSON" --node "$scratch/node.json")
[ "${WEBHOOK:-yes}" = no ] || checks+=(--endpoints "$scratch/endpoints.json")
[ -z "${REGISTER_JSON:-}" ] || checks+=(--register "$REGISTER_JSON")
[ -z "${PLUGIN_SELECTOR:-}" ] || checks+=(--pods "$scratch/pods.json")

gpu_node_ready() {
  kc get node "$NODE_NAME" -o json >"$scratch/node.json" &&
    { [ "${WEBHOOK:-yes}" = no ] ||
      kc -n "$namespace" get endpointslices -l kubernetes.io/service-name=hami-scheduler -o json \
        >"$scratch/endpoints.json"; } &&
    { [ -z "${PLUGIN_SELECTOR:-}" ] ||
      kc -n "$namespace" get pods -l "$PLUGIN_SELECTOR" -o json >"$scratch/pods.json"; } &&
    bounded 20 "${PYTHON:-python3}" -m scripts.gpu_readiness "${checks[@]}"
}

if [ "${WEBHOOK:-yes}" = no ]; then
  what="$NODE_NAME to carry the cards its device plugin registers"
else
  what="$NODE_NAME to advertise its declared GPUs and HAMi's webhook to serve"
fi
wait_for "${TIMEOUT:-600}" "$what" gpu_node_ready
