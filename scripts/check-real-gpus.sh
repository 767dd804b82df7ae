#!/usr/bin/env bash
# Real GPU mode: waits until HAMi's NVIDIA device plugin has registered the node's cards, then
# checks them against the declared ones (model/gpu_expectation.py) and stops with the
# difference on a mismatch; waiting longer would not change what the machine has.
# stdin: tenant kubeconfig. env: NODE_NAME, EXPECT_CARDS (JSON), PYTHON, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAME:?}" "${EXPECT_CARDS:?}"
kubeconfig_from_stdin
scratch=$GPULAB_RUN_DIR

registered() {
  kc get node "$NODE_NAME" -o json >"$scratch/node.json" &&
    [ -n "$(kc get node "$NODE_NAME" -o jsonpath='{.metadata.annotations.hami\.io/node-nvidia-register}')" ]
}

wait_for "${TIMEOUT:-600}" "HAMi's device plugin to register the GPUs of $NODE_NAME" registered
if ! bounded 60 "${PYTHON:-python3}" -m model.gpu_expectation --expect "$EXPECT_CARDS" --node "$scratch/node.json"; then
  die "the GPUs of $NODE_NAME do not match gpulab:tenants[].gpus (see above); fix the config or the machine"
fi
log "$NODE_NAME registers the declared GPUs"
