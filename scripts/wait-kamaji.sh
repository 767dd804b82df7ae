#!/usr/bin/env bash
# Waits until Kamaji can take a TenantControlPlane: its default DataStore reports ready, and a
# server-side dry run of a TenantControlPlane passes both Kamaji webhooks (failurePolicy: Fail,
# so a TCP created earlier would be rejected; Kamaji charts/kamaji/controller-gen/*-webhook.yaml,
# internal/webhook/handlers/tcp_datastore.go).
# stdin: management kubeconfig. env: NAMESPACE (kamaji-system), DATASTORE (default), TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
kubeconfig_from_stdin

datastore_ready() {
  [ "$(kc get datastore "${DATASTORE:-default}" -o jsonpath='{.status.ready}')" = "true" ]
}

tcp_dry_run() {
  kc create --dry-run=server -o name -f - <<YAML
apiVersion: kamaji.clastix.io/v1alpha1
kind: TenantControlPlane
metadata: {name: gpulab-webhook-probe, namespace: ${NAMESPACE:-kamaji-system}}
spec:
  dataStore: ${DATASTORE:-default}
  controlPlane: {service: {serviceType: ClusterIP}}
  kubernetes: {version: ${PROBE_VERSION:-v1.36.4}, kubelet: {}}
YAML
}

wait_for "${TIMEOUT:-600}" "Kamaji DataStore ${DATASTORE:-default} to report status.ready=true" datastore_ready
wait_for "${TIMEOUT:-600}" "Kamaji's webhooks to admit a TenantControlPlane (server-side dry run)" tcp_dry_run
