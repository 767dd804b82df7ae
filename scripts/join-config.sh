#!/usr/bin/env bash
# A worker's join material (an SSH machine's or a node container's), made here on the Pulumi host: creates a
# bootstrap token in the tenant (retrying while Kamaji still sets up RBAC) and prints the kubeadm
# JoinConfiguration on stdout (the Command marks stdout secret). The worker receives only that (worker-join.sh),
# never the admin kubeconfig.
# stdin: tenant admin kubeconfig. env: NODE_NAME, TENANT, IGNORE_PREFLIGHT, TTL_MINUTES, TIMEOUT, PYTHON
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${NODE_NAME:?}"
kubeconfig_from_stdin

bounded 60 "${PYTHON:-python3}" -m scripts.join_config --kubeconfig "$KUBECONFIG_FILE" \
  --secret "$GPULAB_RUN_DIR/token.yaml" --join "$GPULAB_RUN_DIR/join.yaml" --node-name "$NODE_NAME" \
  --ignore-preflight "${IGNORE_PREFLIGHT:-}" --ttl-minutes "${TTL_MINUTES:-15}" ||
  die "cannot make the join material for $NODE_NAME (see above)"

# `create`, not `apply`: apply would copy the whole Secret, token included, into the object's
# kubectl.kubernetes.io/last-applied-configuration annotation, readable wherever the Secret's metadata is.
create_token() {
  local errors="$GPULAB_RUN_DIR/create-errors"
  kc create -f "$GPULAB_RUN_DIR/token.yaml" -o name >/dev/null 2>"$errors" && return 0
  # An earlier attempt may have created it and lost the answer; the token id is random, so it is this one.
  grep -q '(AlreadyExists)' "$errors" && return 0
  cat "$errors" >&2
  return 1
}
wait_for "${TIMEOUT:-300}" "tenant ${TENANT:-?} to accept a bootstrap token for $NODE_NAME" create_token
cat "$GPULAB_RUN_DIR/join.yaml"
