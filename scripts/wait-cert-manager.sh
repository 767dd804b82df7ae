#!/usr/bin/env bash
# Waits until cert-manager's API really accepts objects: a server-side dry-run of an Issuer passes
# through cert-manager's webhook, which only works once the webhook serves with its CA injected
# (the same check `cmctl check api` makes). Kamaji's chart creates an Issuer and Certificates.
# stdin: management kubeconfig. env: NAMESPACE (cert-manager's), TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
kubeconfig_from_stdin

issuer_dry_run() {
  kc create --dry-run=server -o name -f - <<YAML
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: gpulab-readiness-probe, namespace: ${NAMESPACE:-cert-manager}}
spec: {selfSigned: {}}
YAML
}

wait_for "${TIMEOUT:-300}" "cert-manager's webhook to accept an Issuer (server-side dry run)" issuer_dry_run
