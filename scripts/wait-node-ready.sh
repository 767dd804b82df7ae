#!/usr/bin/env bash
# Waits until every given node reports Ready in its tenant: the kubelet runs, the CNI is up (Calico)
# and kube-proxy works. Only then can the konnectivity agent, and with it every webhook, run there.
# stdin: tenant kubeconfig. env: NODE_NAMES (space-separated), TENANT, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAMES:?}"
kubeconfig_from_stdin

node_ready() {
  local status
  status=$(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
  [ "$status" = "True" ] || {
    echo "node $1 Ready=${status:-<not registered>}" >&2
    return 1
  }
}

for node in $NODE_NAMES; do
  wait_for "${TIMEOUT:-600}" "node $node to be Ready in tenant ${TENANT:-?}" node_ready "$node"
done
