#!/usr/bin/env bash
# On destroy: removes a real worker's Node object from its tenant (a container worker's tenant is
# deleted whole instead), waiting until it is gone.
# stdin: tenant kubeconfig. env: NODE_NAME, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${NODE_NAME:?}"
kubeconfig_from_stdin

kubectl delete node "$NODE_NAME" --ignore-not-found --wait=true --timeout="${TIMEOUT:-120}s" >&2
log "node $NODE_NAME removed from its tenant"
