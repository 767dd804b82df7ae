#!/usr/bin/env bash
# On destroy: removes a real worker's Node object from its tenant (a container worker's tenant is
# deleted whole instead), waiting until it is gone. If the tenant API is gone (its control plane or
# the management cluster deleted by hand), there is no Node object left to remove: say so and let
# destroy go on.
# stdin: tenant kubeconfig. env: NODE_NAME, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAME:?}"
timeout=${TIMEOUT:-120}
kubeconfig_from_stdin

# The probe is bounded by this script's own TIMEOUT too (kc's default bound is 60 s).
if ! probe_errors=$(GPULAB_CALL_TIMEOUT=$timeout kc get --raw=/readyz 2>&1 >/dev/null); then
  log "skipped removing node $NODE_NAME: its tenant API does not answer (${probe_errors:0:200}); " \
    "if the tenant was deleted by hand, the Node object went with it"
  exit 0
fi
bounded $((timeout + 10)) kubectl --request-timeout="${timeout}s" delete node "$NODE_NAME" \
  --ignore-not-found --wait=true --timeout="${timeout}s" >&2
log "node $NODE_NAME removed from its tenant"
