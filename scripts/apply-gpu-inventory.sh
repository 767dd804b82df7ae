#!/usr/bin/env bash
# Gives a worker its simulated GPUs: the HAMi register annotation, and status capacity
# nvidia.com/gpu (the mock device plugin reports nothing until it is > 0, and HAMi registers a node
# only once allocatable nvidia.com/gpu > 0: HAMi v2.8.3 pkg/device/nvidia/device.go CheckHealth,
# mock-device-plugin v1.0.1 internal/pkg/api/device/nvidia/device.go).
# Capacity is in the /status subresource, which no Pulumi Patch resource can write.
# stdin: tenant kubeconfig. env: NODE_NAME, REGISTER_JSON, GPU_CAPACITY, HAMI_NAMESPACE
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAME:?}" "${REGISTER_JSON:?}" "${GPU_CAPACITY:?}"
namespace=${HAMI_NAMESPACE:-kube-system}
kubeconfig_from_stdin

previous=$(kc get node "$NODE_NAME" -o jsonpath='{.metadata.annotations.hami\.io/node-nvidia-register}') ||
  die "cannot read node $NODE_NAME from its tenant's API (see above)"
kc annotate node "$NODE_NAME" --overwrite "hami.io/node-nvidia-register=$REGISTER_JSON" >&2
kc patch node "$NODE_NAME" --subresource=status --type=merge \
  -p "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"$GPU_CAPACITY\"}}}" >&2

if [ -n "$previous" ] && [ "$previous" != "$REGISTER_JSON" ]; then
  # HAMi 2.8.x reads a node's register annotation only when it first registers the node; a changed
  # inventory takes effect after the scheduler restarts (pkg/device/nvidia/device.go CheckHealth).
  log "GPU inventory of $NODE_NAME changed; restarting hami-scheduler so HAMi re-reads it"
  kc -n "$namespace" rollout restart deployment/hami-scheduler >&2
  rollout=${ROLLOUT_TIMEOUT:-300}
  bounded $((rollout + 10)) kubectl --request-timeout="${GPULAB_REQUEST_TIMEOUT:-20s}" -n "$namespace" \
    rollout status deployment/hami-scheduler --timeout="${rollout}s" >&2
fi
log "$NODE_NAME advertises nvidia.com/gpu=$GPU_CAPACITY"
