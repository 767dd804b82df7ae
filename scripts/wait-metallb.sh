#!/usr/bin/env bash
# Waits until MetalLB admits the lab's address pool: a server-side dry run of the very IPAddressPool the program
# will create (PROBE_JSON) passes MetalLB's validating webhook. Its Deployment is Ready before the webhook serves:
# the controller's readiness probe is its metrics endpoint, and it serves webhooks only once it has written their
# certificates (MetalLB v0.16.1 internal/k8s/webhook.go, cert-controller's rotator); until then the API server
# answers `connection refused` for the pool (seen on the first make up of the Docker lab).
# stdin: management kubeconfig. env: PROBE_JSON (the IPAddressPool), TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${PROBE_JSON:?PROBE_JSON (the IPAddressPool to dry-run) is not set}"
kubeconfig_from_stdin

# A pool that is there already (a later make up that changes it) is admitted the same: the API server runs the
# validating webhooks before storage answers AlreadyExists (apiserver v0.36.4 pkg/registry/generic/registry/
# store.go, create: createValidation, then Storage.Create), and MetalLB validates a create of an existing name as
# its replacement (v0.16.1 ipaddresspool_webhook.go, ipAddressListWithUpdate).
pool_dry_run() {
  local answer
  answer=$(kc create --dry-run=server -o name -f - <<<"$PROBE_JSON" 2>&1) && return 0
  grep -q '(AlreadyExists)' <<<"$answer" && return 0
  printf '%s\n' "$answer" >&2
  return 1
}

GPULAB_WAIT_FIX="MetalLB would refuse the lab's address pool the same way: check gpulab:management (the pool comes \
from the kind network's IPv4 subnet) and run the same make command again"
wait_for "${TIMEOUT:-300}" "MetalLB's webhook to admit the lab's address pool (server-side dry run)" pool_dry_run
