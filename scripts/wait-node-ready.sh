#!/usr/bin/env bash
# Waits until a node reports Ready in its tenant: the kubelet runs, the CNI is up (Calico) and
# kube-proxy works. Only then can the konnectivity agent, and with it every webhook, run there.
# stdin: tenant kubeconfig. env: NODE_NAME, TENANT, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${NODE_NAME:?}"
kubeconfig_from_stdin

node_ready() {
  local status
  status=$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
  [ "$status" = "True" ] || {
    echo "node $NODE_NAME Ready=${status:-<not registered>}" >&2
    return 1
  }
}

wait_for "${TIMEOUT:-600}" "node $NODE_NAME to be Ready in tenant ${TENANT:-?}" node_ready
