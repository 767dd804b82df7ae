#!/usr/bin/env bash
# Waits until Kamaji can take the tenants' TenantControlPlanes: its default DataStore reports ready, and a
# server-side dry run of each, with the very spec the program will create (PROBE_JSON), passes Kamaji's mutating
# and validating webhooks (failurePolicy: Fail, so a TCP created earlier would be rejected; Kamaji
# charts/kamaji/controller-gen/*-webhook.yaml, internal/webhook/handlers/) and the CRD's own rules.
# stdin: management kubeconfig. env: PROBE_JSON (a List of TenantControlPlanes: components/docker/tenant_control_plane.py
# webhook_probe), NAMESPACE (kamaji-system), DATASTORE (default), TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${PROBE_JSON:?PROBE_JSON (the TenantControlPlanes to dry-run) is not set}"
kubeconfig_from_stdin

datastore_ready() {
  [ "$(kc get datastore "${DATASTORE:-default}" -o jsonpath='{.status.ready}')" = "true" ]
}

tcp_dry_run() {
  kc create --dry-run=server -o name -f - <<<"$PROBE_JSON"
}

wait_for "${TIMEOUT:-600}" "Kamaji DataStore ${DATASTORE:-default} to report status.ready=true" datastore_ready
# A refusal of the probe is the refusal the tenants' TenantControlPlanes would get.
GPULAB_WAIT_FIX="Kamaji would refuse the tenants' TenantControlPlanes the same way: the spec gpulab sends \
(components/docker/tenant_control_plane.py, control_plane_spec) must fit the Kamaji installed (versions.kamaji), \
then run the same make command again"
wait_for "${TIMEOUT:-600}" "Kamaji's webhooks and CRD to admit the tenants' TenantControlPlanes (server-side dry run)" tcp_dry_run
